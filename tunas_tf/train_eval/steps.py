"""The steps of the standalone model_fn, each a small function.

`runner.make_model_fn` calls them in order: `forward` (logits; dropout keyed
on (seed, step)), `variables_to_train` (inherited values, the variables the
optimizer updates), `moving_average` (the optional EMA, restored for
evaluation), `losses` (smoothed cross-entropy plus L2), then `eval_spec` or
`train_spec` (RMSProp under cosine decay with warm-up, the EMA update, host
call, the checkpoint and progress hooks).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import tensorflow as tf

from tunas_tf.graph import from_spec
from tunas_tf.graph import inherit
from tunas_tf.graph import model as model_lib
from tunas_tf.layers import dropout as dropout_lib
from tunas_tf.layers import regularization
from tunas_tf.layers import schedules
from tunas_tf.runtime import estimator
from tunas_tf.runtime import guards
from tunas_tf.runtime import hooks
from tunas_tf.runtime import precision
from tunas_tf.runtime import summaries
from tunas_tf.train_eval.config import TrainEvalConfig

class Forward(NamedTuple):
  """The network applied to a batch.

  Fields:
    model: the `graph.model.Model` (its variables created).
    images: [N, H, W, C] Tensor, in the compute dtype.
    logits: float32 [N, num_classes] Tensor (cast back from bfloat16).
    training: whether the mode is TRAIN (dropout, batch-norm updates).
  """
  model: Any
  images: tf.Tensor
  logits: tf.Tensor
  training: bool


class TrainVariables(NamedTuple):
  """What the optimizer updates and what starts from a search.

  Fields:
    var_list: the variables the optimizer (and the EMA) update.
    inherited: (variable, value) pairs assigned at session creation.
  """
  var_list: List[tf.Variable]
  inherited: List[Tuple[tf.Variable, np.ndarray]]


class Losses(NamedTuple):
  """Scalar float32 Tensors: `total` = `empirical` + `regularization`."""
  total: tf.Tensor
  empirical: tf.Tensor
  regularization: tf.Tensor


class TrainStep(NamedTuple):
  """The training update.

  Fields:
    train_op: the RMSProp update (then the EMA's, when there is one); it
      increments the global step.
    global_step: the global step variable.
    learning_rate: scalar float32 Tensor.
  """
  train_op: tf.Operation
  global_step: tf.Variable
  learning_rate: tf.Tensor


def forward(graph, constants, features, mode: str, config: TrainEvalConfig,
            one_shot: bool) -> Forward:
  """Builds the network in this graph and applies it to the batch.

  With bfloat16 compute (`--use_bfloat16`) the network computes in bfloat16
  on float32 variables: `true`'s images come in bfloat16 from the input_fn,
  `ontpu`'s are cast here.
  Training, the dropout masks are a function of (seed, global step)
  (`layers.dropout.step_seed`), so a resumed run drops what an uninterrupted
  one dropped at the same step (on TPU every core draws the same masks, on
  its own images).
  """
  images = features['images'] if isinstance(features, dict) else features
  dtype = precision.compute_dtype(config.use_bfloat16, config.job.use_tpu)
  images = tf.cast(images, dtype)
  model = model_lib.Model(graph, constants, stateless_batch_norm=one_shot,
                          seed=config.job.seed, compute_dtype=dtype)
  training = mode == tf.estimator.ModeKeys.TRAIN
  dropout_seed = (dropout_lib.step_seed(
      config.job.seed, tf.compat.v1.train.get_or_create_global_step())
                  if training else None)
  logits = tf.cast(model(images, training=training,
                         dropout_seed=dropout_seed), tf.float32)
  return Forward(model, images, logits, training)


def variables_to_train(model, inheritance: Optional[inherit.Inheritance],
                       freeze_inherited: bool,
                       training: bool) -> TrainVariables:
  """The optimizer's variables, and the inherited values.

  Raises:
    ValueError: when training with `freeze_inherited` and every trainable
      variable is inherited.
  """
  inherited, fresh = ([], None)
  if inheritance is not None:
    inherited, fresh = inheritance.split(model)
  if freeze_inherited:
    if not fresh and training:
      raise ValueError('--freeze_inherited: every trainable variable is '
                       'inherited, nothing would train')
    return TrainVariables(fresh, inherited)
  trainable = [v for group in model.op_variables.values()
               for v in group.values() if v.trainable]
  return TrainVariables(trainable, inherited)


def moving_average(config: TrainEvalConfig, one_shot: bool
                   ) -> Optional[tf.compat.v1.train.ExponentialMovingAverage]:
  """The EMA of the weights (`moving_average_decay` > 0), or None."""
  if config.moving_average_decay <= 0 or one_shot:
    return None
  return tf.compat.v1.train.ExponentialMovingAverage(
      config.moving_average_decay,
      num_updates=tf.compat.v1.train.get_or_create_global_step())


def _init_fn(inherited, ema, training: bool) -> Callable[..., None]:
  """Assigns the inherited values (and their EMA shadows when training)."""
  assignments, feed = [], {}
  for variable, value in inherited:
    targets = [variable]
    if ema is not None and training and ema.average(variable) is not None:
      targets.append(ema.average(variable))
    placeholder = tf.compat.v1.placeholder(tf.float32, value.shape)
    feed[placeholder] = value
    assignments += [t.assign(placeholder) for t in targets]
  init_op = tf.group(*assignments)

  def init_fn(scaffold, session):
    del scaffold
    session.run(init_op, feed_dict=feed)
  return init_fn


def scaffold_fn(variables: TrainVariables, ema, training: bool,
                initialize: bool) -> Callable[[], Any]:
  """The TPUEstimator scaffold_fn: the EMA saver and the inherited values.

  Args:
    variables: from `variables_to_train`.
    ema: from `moving_average`.
    training: whether the mode is TRAIN.
    initialize: assign the inherited values at session creation (only
      happens when no checkpoint is restored).
  """
  def make_scaffold():
    saver = None
    if ema is not None and not training:
      saver = tf.compat.v1.train.Saver(
          ema.variables_to_restore(moving_avg_variables=variables.var_list))
    init_fn = None
    if initialize and variables.inherited:
      init_fn = _init_fn(variables.inherited, ema, training)
    return tf.compat.v1.train.Scaffold(saver=saver, init_fn=init_fn)
  return make_scaffold


def regularization_loss(model, weight_decay: float) -> tf.Tensor:
  """`regularization.weight_decay_loss` of every kernel but the classifier's.

  With `weight_decay` 0 no term is built (the loss is the constant 0).
  """
  kernels = [group['kernel'] for op, group in model.op_variables.items()
             if 'kernel' in group and op != from_spec.CLASSIFIER_NAME]
  if weight_decay == 0:
    kernels = []
  return regularization.weight_decay_loss(
      [tf.reduce_sum(tf.square(k)) for k in kernels], weight_decay)


def losses(model, labels, logits, config: TrainEvalConfig) -> Losses:
  """Softmax cross-entropy with label smoothing, plus L2 on the kernels."""
  empirical = tf.compat.v1.losses.softmax_cross_entropy(
      labels, logits, label_smoothing=config.label_smoothing)
  regularization = regularization_loss(model, config.weight_decay)
  return Losses(empirical + regularization, empirical, regularization)


def predict_spec(net: Forward, scaffold
                 ) -> tf.compat.v1.estimator.tpu.TPUEstimatorSpec:
  """Logits and argmax classes."""
  return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
      mode=tf.estimator.ModeKeys.PREDICT,
      predictions={'logits': net.logits,
                   'classes': tf.argmax(net.logits, axis=-1)},
      scaffold_fn=scaffold)


def eval_spec(net: Forward, labels, loss: tf.Tensor, scaffold,
              config: TrainEvalConfig,
              record: Dict[str, Any]
              ) -> tf.compat.v1.estimator.tpu.TPUEstimatorSpec:
  """top1, top5 (top-k, k <= 5) and cross_entropy; the eval images/s.

  Each example weighs its one-hot label's sum: 1, or 0 for the padding of
  a TPU's last batch, which so counts nowhere.

  The metrics' events file (model_dir/eval) holds no graph
  (`estimator.summaries_only_eval_events`).
  """
  estimator.summaries_only_eval_events(config.job)
  k = min(5, config.job.num_classes)

  def metric_fn(labels, logits):
    # An all-zero label is padding (`data.eval_dataset`): weight 0.
    weights = tf.reduce_sum(labels, axis=-1)
    target = tf.argmax(labels, axis=-1)
    in_top = tf.cast(tf.nn.in_top_k(targets=target, predictions=logits, k=k),
                     tf.float32)
    cross_entropy = tf.nn.softmax_cross_entropy_with_logits(
        labels=labels, logits=logits)
    return {
        'top1': tf.compat.v1.metrics.accuracy(
            target, tf.argmax(logits, axis=-1), weights=weights),
        'top5': tf.compat.v1.metrics.mean(in_top, weights=weights),
        'cross_entropy': tf.compat.v1.metrics.mean(cross_entropy,
                                                   weights=weights),
    }

  # On TPU the batch lives inside the TPU computation and cannot be fetched
  # by a hook: no eval rate there.
  eval_hooks = [] if config.job.use_tpu else [hooks.ProgressHook(
      {'batch': tf.shape(net.images)[0]}, record=record,
      record_key='eval_images_per_sec')]
  return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
      mode=tf.estimator.ModeKeys.EVAL, loss=loss,
      eval_metrics=(metric_fn, [labels, net.logits]), scaffold_fn=scaffold,
      evaluation_hooks=eval_hooks)


def train_step(loss: tf.Tensor, var_list: List[tf.Variable], ema,
               config: TrainEvalConfig) -> TrainStep:
  """RMSProp (decay 0.9, epsilon 1.0) under cosine decay, then the EMA.

  The loss is checked finite first (`runtime.guards.check_finite`, off TPU):
  a NaN or Inf stops the step before any update and before any save.
  """
  global_step = tf.compat.v1.train.get_or_create_global_step()
  learning_rate = schedules.cosine_decay_with_linear_warmup(
      config.learning_rate_scaled, global_step, config.max_global_step,
      config.warmup_steps)
  opt = tf.compat.v1.train.RMSPropOptimizer(
      learning_rate, decay=0.9, momentum=config.momentum, epsilon=1.0)
  if config.job.use_tpu:
    opt = tf.compat.v1.tpu.CrossShardOptimizer(opt)
  with tf.control_dependencies(guards.check_finite(
      'loss', [loss], global_step, config.job.use_tpu)):
    train_op = opt.minimize(loss, global_step=global_step, var_list=var_list)
  if ema is not None:
    with tf.control_dependencies([train_op]):
      train_op = ema.apply(var_list)
  return TrainStep(train_op, global_step, learning_rate)


def train_spec(step: TrainStep, loss: Losses, scaffold,
               config: TrainEvalConfig, record: Dict[str, Any],
               num_cores: int
               ) -> tf.compat.v1.estimator.tpu.TPUEstimatorSpec:
  """The TRAIN spec: summaries through host_call, checkpoints, progress.

  The checkpoint hooks are `estimator.checkpoint_hooks` (no graph in the events
  file).
  """
  scalars = {'model/loss': loss.total, 'model/empirical_loss': loss.empirical,
             'model/regularization_loss': loss.regularization,
             'model/learning_rate': step.learning_rate}
  # On TPU only the global step (a host variable) can be fetched.
  fetches = ({'step': step.global_step} if config.job.use_tpu else
             {'step': step.global_step, 'loss': loss.total,
              'lr': step.learning_rate})
  progress = hooks.ProgressHook(
      fetches, max_step=config.max_global_step,
      log_every=config.job.log_every_steps,
      images_per_step=config.train_batch_size, num_cores=num_cores,
      record=record, record_key='train_images_per_sec')
  return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
      mode=tf.estimator.ModeKeys.TRAIN, loss=loss.total,
      train_op=step.train_op,
      host_call=summaries.host_call(
          {k: tf.cast(tf.reshape(v, []), tf.float32)
           for k, v in scalars.items()}, step.global_step, config.job.model_dir,
          config.job.tpu_iterations_per_loop),
      scaffold_fn=scaffold,
      training_hooks=estimator.checkpoint_hooks(config.job) + [progress])
