"""train_eval's evaluation, on either engine.

Both evaluate each batch with `batch` (the run's network in inference mode,
or one-shot with batch norm on the batch's statistics: logits and the
training loss) and weigh `steps.example_metrics` by each example's weight.
The distribute engine's `evaluate(config, arch, strategy, stop, ...)` runs
one pass of `eval_split` on a checkpoint's weights (the EMA's shadows in
place of the weights they average) or, one-shot, on the search's, and
returns what `Estimator.evaluate` returns (`top1`, `top5`, `cross_entropy`,
`loss`, `global_step`); `write_summaries` writes them to `model_dir/eval`
under the Estimator's tags (`SUMMARY_NAMES`). The TPUEstimator's (on TPU
too) is `estimator_spec`: its means are TF's streaming metrics, and the
Estimator restores the weights (`_ema_scaffold`).
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import numpy as np
import tensorflow as tf

from tunas_tf.data import unreadable
from tunas_tf.graph import inherit
from tunas_tf.graph import model as model_lib
from tunas_tf.runtime import estimator
from tunas_tf.runtime import hooks
from tunas_tf.runtime import precision
from tunas_tf.runtime import preemption
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.search_space import ops as spec_ops
from tunas_tf.train_eval import data
from tunas_tf.train_eval import steps
from tunas_tf.train_eval import task as task_lib
from tunas_tf.train_eval.config import TrainEvalConfig

EVAL_SUBDIR = 'eval'
# The per-replica sums of a batch, in order.
_SUMS = ('correct', 'in_top_k', 'cross_entropy', 'weight', 'loss_rows',
         'rows')


def restored_model(config: TrainEvalConfig, arch: spec_ops.ConvTowerSpec,
                   checkpoint: Optional[str],
                   inheritance: Optional[inherit.Inheritance]
                   ) -> model_lib.Model:
  """The network with the checkpoint's weights (EMA shadows preferred,
  `inherit.model_values`) or, without one, one-shot with the inherited
  values (the others keep their seeded initial values)."""
  model = task_lib.build_model(config, arch, one_shot=checkpoint is None)
  if checkpoint is not None:
    model_lib.set_params(model, inherit.model_values(model, checkpoint))
  else:
    for variable, value in inheritance.split(model).pairs:
      variable.assign(value)
  return model


def batch(model: model_lib.Model, images: tf.Tensor, labels: tf.Tensor,
          config: TrainEvalConfig) -> Tuple[tf.Tensor, tf.Tensor]:
  """A batch's float32 logits, computed in the run's compute dtype, and its
  training loss (`steps.losses`, a batch mean): what both engines'
  evaluations compute of each batch."""
  dtype = precision.compute_dtype(config.use_bfloat16, config.job.use_tpu)
  logits = tf.cast(model(tf.cast(images, dtype), training=False), tf.float32)
  return logits, steps.losses(model, labels, logits, config).total


def _batch_sums(model: model_lib.Model, images: tf.Tensor, labels: tf.Tensor,
                config: TrainEvalConfig) -> tf.Tensor:
  """One replica's `_SUMS` of its batch: `steps.example_metrics` weighted
  by each example's weight (0 for padding), as `estimator_spec`'s means;
  the training loss (a batch mean) times the rows."""
  logits, loss = batch(model, images, labels, config)
  m = steps.example_metrics(labels, logits, config.job.num_classes)
  rows = tf.cast(tf.shape(labels)[0], tf.float32)
  return tf.stack([tf.reduce_sum(m.weight * m.correct),
                   tf.reduce_sum(m.weight * m.in_top_k),
                   tf.reduce_sum(m.weight * m.cross_entropy),
                   tf.reduce_sum(m.weight), loss * rows, rows])


def _one_pass(config: TrainEvalConfig, model: model_lib.Model,
              strategy: tf.distribute.Strategy, stop: preemption.StopRequest,
              global_step: int) -> Dict[str, Any]:
  """The metrics of one pass, and `images_per_sec` (per replica, from the
  end of the first batch, as the Estimator's hook measures it)."""
  dataset = strategy.experimental_distribute_dataset(
      data.eval_input_fn(config)({}))

  @tf.function(input_signature=[dataset.element_spec], autograph=False)
  def batch(inputs):
    sums = strategy.run(lambda i: _batch_sums(model, i[0], i[1], config),
                        args=(inputs,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, sums, axis=None)

  totals, losses, batches = np.zeros(len(_SUMS)), 0.0, 0
  start, first, images = time.time(), None, 0.0
  for inputs in dataset:
    sums = batch(inputs).numpy().astype(np.float64)
    totals += sums
    if sums[5] > 0:
      losses += sums[4] / sums[5]
      batches += 1
    if first is None:
      first, first_images = time.time(), sums[5]
    else:
      images += sums[5]
    if stop.signal_name:
      raise preemption.Stopped(preemption.stopped_line(
          stop, global_step, 'before its evaluation ended (nothing to save)'))
  values = dict(zip(_SUMS, totals))
  weight = values['weight']
  mean = lambda name: float(values[name] / weight) if weight else 0.0
  cores = strategy.num_replicas_in_sync
  last = time.time()
  rate = (images / (last - first) if images and last > first else
          first_images / max(first - start, 1e-9) if first else None)
  return {'top1': mean('correct'), 'top5': mean('in_top_k'),
          'cross_entropy': mean('cross_entropy'),
          'loss': float(losses / batches) if batches else 0.0,
          'global_step': global_step,
          'images_per_sec': float(rate / cores) if rate is not None else None}


def evaluate(config: TrainEvalConfig, arch: spec_ops.ConvTowerSpec,
             strategy: tf.distribute.Strategy, stop: preemption.StopRequest,
             checkpoint: Optional[str] = None,
             inheritance: Optional[inherit.Inheritance] = None
             ) -> Dict[str, Any]:
  """One pass of `eval_split` under `strategy`; `Estimator.evaluate`'s
  results plus `images_per_sec` (eval images/s per replica).

  Args:
    config: the run's config.
    arch: the pruned, scaled architecture.
    strategy: the run's strategy (the eval batches are split over its
      replicas; on TPU the last one is padded, `data.eval_dataset`).
    stop: checked after every batch.
    checkpoint: the checkpoint to evaluate (either engine's), or None for
      the one-shot accuracy of `inheritance`'s weights.
    inheritance: the search's weights, for a one-shot evaluation.

  Raises:
    ValueError: one line, for an undecodable image or a checkpoint not of
      this architecture.
    preemption.Stopped: when a signal cut it short (nothing is saved then).
  """
  if checkpoint is None and inheritance is None:
    raise ValueError('evaluate: no checkpoint and no search to inherit from')

  def guarded() -> Dict[str, Any]:
    with unreadable.stops_in_one_line("train_eval's evaluation"):
      with strategy.scope():
        model = restored_model(config, arch, checkpoint, inheritance)
      step = (resume_lib.checkpoint_step(checkpoint) if checkpoint else 0)
      return _one_pass(config, model, strategy, stop, step)

  return preemption.run_in_thread(guarded)


# The eval scalars the Estimator's evaluation writes, as it orders them.
SUMMARY_NAMES = ('cross_entropy', 'loss', 'top1', 'top5')


def write_summaries(model_dir: str, step: int,
                    values: Mapping[str, Optional[float]]) -> None:
  """`values` (None ones left out) as scalars at `step` in `model_dir/eval`,
  where `Estimator.evaluate` writes (every summary of a TF2 events file
  here is a scalar, as `search.report.read_scalars` reads them)."""
  writer = tf.summary.create_file_writer(os.path.join(model_dir, EVAL_SUBDIR))
  with writer.as_default():
    for name, value in values.items():
      if value is not None:
        tf.summary.scalar(name, float(value), step=step)
  writer.close()


def _ema_scaffold(model: model_lib.Model, config: TrainEvalConfig,
                  one_shot: bool,
                  inheritance: Optional[inherit.Inheritance]
                  ) -> Optional[Callable[[], Any]]:
  """The evaluation's TPUEstimator scaffold_fn: with an EMA
  (`moving_average_decay` > 0, not one-shot) a `Saver` that restores each
  trained variable from its shadow (`{name}/ExponentialMovingAverage`, as
  `ExponentialMovingAverage.variables_to_restore` maps them); one-shot,
  the inherited values assigned (no checkpoint is restored then)."""
  variables = steps.variables_to_train(
      model, inheritance, config.freeze_inherited, training=False)
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


def estimator_spec(config: TrainEvalConfig, arch: spec_ops.ConvTowerSpec,
                   images: tf.Tensor, labels: tf.Tensor,
                   record: Dict[str, Any], one_shot: bool,
                   inheritance: Optional[inherit.Inheritance]
                   ) -> tf.compat.v1.estimator.tpu.TPUEstimatorSpec:
  """The TPUEstimator's evaluation of a batch (its model_fn in EVAL mode):
  `batch`, then top1, top5 and cross_entropy (`steps.example_metrics`,
  means weighted by each example's weight); the eval images/s into
  `record` (as `eval_images_per_sec`; off TPU).

  The metrics' events file (model_dir/eval) holds no graph
  (`estimator.summaries_only_eval_events`).
  """
  estimator.summaries_only_eval_events(config.job)
  model = task_lib.build_model(config, arch, one_shot)
  logits, loss = batch(model, images, labels, config)

  def metric_fn(labels, logits):
    m = steps.example_metrics(labels, logits, config.job.num_classes)
    mean = tf.compat.v1.metrics.mean
    return {'top1': mean(m.correct, weights=m.weight),
            'top5': mean(m.in_top_k, weights=m.weight),
            'cross_entropy': mean(m.cross_entropy, weights=m.weight)}

  # On TPU the batch lives inside the TPU computation and cannot be fetched
  # by a hook: no eval rate there.
  eval_hooks = [] if config.job.use_tpu else [hooks.ProgressHook(
      {'batch': tf.shape(logits)[0]}, record=record,
      record_key='eval_images_per_sec')]
  return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
      mode=tf.estimator.ModeKeys.EVAL, loss=loss,
      eval_metrics=(metric_fn, [labels, logits]),
      scaffold_fn=_ema_scaffold(model, config, one_shot, inheritance),
      evaluation_hooks=eval_hooks)
