"""The pieces of the standalone network's steps, each a small function.

`variables_to_train` (inherited values, the variables the optimizer
updates) and `losses` (smoothed cross-entropy plus L2) serve the training
task (`task.TrainEvalTask`); `runner.make_model_fn`'s evaluation and
prediction call `forward` (logits), `variables_to_train`, `scaffold_fn`
(the EMA's shadows restored in place of the weights, or the inherited
values one-shot), `losses`, then `eval_spec` or `predict_spec`.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import tensorflow as tf

from tunas_tf.graph import from_spec
from tunas_tf.graph import inherit
from tunas_tf.graph import model as model_lib
from tunas_tf.layers import regularization
from tunas_tf.runtime import estimator
from tunas_tf.runtime import hooks
from tunas_tf.runtime import precision
from tunas_tf.train_eval.config import TrainEvalConfig

class Forward(NamedTuple):
  """The network applied to a batch.

  Fields:
    model: the `graph.model.Model` (its variables created).
    images: [N, H, W, C] Tensor, in the compute dtype.
    logits: float32 [N, num_classes] Tensor (cast back from bfloat16).
  """
  model: Any
  images: tf.Tensor
  logits: tf.Tensor


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


def forward(graph, constants, features, config: TrainEvalConfig,
            one_shot: bool) -> Forward:
  """Builds the network in this graph and applies it to the batch, for
  evaluation or prediction (training: `task.TrainEvalTask`).

  With bfloat16 compute (`--use_bfloat16`) the network computes in bfloat16
  on float32 variables: `true`'s images come in bfloat16 from the input_fn,
  `ontpu`'s are cast here.
  """
  images = features['images'] if isinstance(features, dict) else features
  dtype = precision.compute_dtype(config.use_bfloat16, config.job.use_tpu)
  images = tf.cast(images, dtype)
  model = model_lib.Model(graph, constants, stateless_batch_norm=one_shot,
                          seed=config.job.seed, compute_dtype=dtype)
  logits = tf.cast(model(images, training=False), tf.float32)
  return Forward(model, images, logits)


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


def scaffold_fn(variables: TrainVariables, config: TrainEvalConfig,
                one_shot: bool) -> Optional[Callable[[], Any]]:
  """The evaluation's TPUEstimator scaffold_fn: with an EMA
  (`moving_average_decay` > 0, not one-shot) a `Saver` that restores each
  trained variable from its shadow (`{name}/ExponentialMovingAverage`, as
  `ExponentialMovingAverage.variables_to_restore` maps them); one-shot,
  the inherited values assigned (no checkpoint is restored then)."""
  saver = None
  if config.moving_average_decay > 0 and not one_shot:
    averaged = {v.ref() for v in variables.var_list}
    names = {}
    for v in tf.compat.v1.global_variables():
      name = v.op.name
      if v.ref() in averaged:
        name = f'{name}/{inherit.EMA_SUFFIX}'
      names[name] = v
    saver = tf.compat.v1.train.Saver(names)
  return estimator.initial_values_scaffold(
      variables.inherited if one_shot else [], saver)


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


class ExampleMetrics(NamedTuple):
  """The evaluation's per-example figures, float32 [N] Tensors.

  Fields:
    weight: the one-hot label's sum: 1, or 0 for the padding of a TPU's
      last batch (`data.eval_dataset`), which so counts nowhere.
    correct: 1 where the argmax is the label (top-1).
    in_top_k: 1 where the label is among the k largest logits (k =
      min(5, classes): top-5).
    cross_entropy: softmax cross-entropy against the label.
  """
  weight: tf.Tensor
  correct: tf.Tensor
  in_top_k: tf.Tensor
  cross_entropy: tf.Tensor


def example_metrics(labels: tf.Tensor, logits: tf.Tensor,
                    num_classes: int) -> ExampleMetrics:
  """The one definition of top1, top5 and cross_entropy, per example, that
  both engines' evaluations weigh and average (`eval_spec`,
  `evaluate.py`)."""
  target = tf.argmax(labels, axis=-1)
  return ExampleMetrics(
      weight=tf.reduce_sum(labels, axis=-1),
      correct=tf.cast(tf.equal(tf.argmax(logits, axis=-1), target),
                      tf.float32),
      in_top_k=tf.cast(tf.nn.in_top_k(targets=target, predictions=logits,
                                      k=min(5, num_classes)), tf.float32),
      cross_entropy=tf.nn.softmax_cross_entropy_with_logits(
          labels=labels, logits=logits))


def eval_spec(net: Forward, labels, loss: tf.Tensor, scaffold,
              config: TrainEvalConfig,
              record: Dict[str, Any]
              ) -> tf.compat.v1.estimator.tpu.TPUEstimatorSpec:
  """top1, top5 and cross_entropy (`example_metrics`, means weighted by
  each example's weight); the eval images/s.

  The metrics' events file (model_dir/eval) holds no graph
  (`estimator.summaries_only_eval_events`).
  """
  estimator.summaries_only_eval_events(config.job)

  def metric_fn(labels, logits):
    m = example_metrics(labels, logits, config.job.num_classes)
    mean = tf.compat.v1.metrics.mean
    return {'top1': mean(m.correct, weights=m.weight),
            'top5': mean(m.in_top_k, weights=m.weight),
            'cross_entropy': mean(m.cross_entropy, weights=m.weight)}

  # On TPU the batch lives inside the TPU computation and cannot be fetched
  # by a hook: no eval rate there.
  eval_hooks = [] if config.job.use_tpu else [hooks.ProgressHook(
      {'batch': tf.shape(net.images)[0]}, record=record,
      record_key='eval_images_per_sec')]
  return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
      mode=tf.estimator.ModeKeys.EVAL, loss=loss,
      eval_metrics=(metric_fn, [labels, net.logits]), scaffold_fn=scaffold,
      evaluation_hooks=eval_hooks)
