"""train_eval's evaluation, one for both engines: the values evaluated, each
example's weighted figures, and their means over a pass."""

from __future__ import annotations

from typing import Dict, Mapping, Optional

import tensorflow as tf

from tunas_tf.graph import inherit
from tunas_tf.graph import model as model_lib
from tunas_tf.runtime import precision
from tunas_tf.runtime import task as task_lib
from tunas_tf.train_eval import steps
from tunas_tf.train_eval.config import TrainEvalConfig

# The evaluation's metrics, as the eval summaries name them.
METRICS = ('cross_entropy', 'loss', 'top1', 'top5')


def restored_values(model: model_lib.Model, checkpoint: Optional[str],
                    inheritance: Optional[inherit.Inheritance]
                    ) -> task_lib.Values:
  """(variable, value) of `model` in `checkpoint` (EMA shadows preferred)
  or, without one, from `inheritance` (one-shot); ValueError for another
  architecture's checkpoint, or neither."""
  if checkpoint is None:
    if inheritance is None:
      raise ValueError('evaluate: no checkpoint and no search to inherit from')
    return list(inheritance.split(model).pairs)
  return [(model.op_variables[op][name], value) for op, group in
          inherit.model_values(model, checkpoint).items()
          for name, value in group.items()]


def example_values(model: model_lib.Model, images: tf.Tensor,
                   labels: tf.Tensor, config: TrainEvalConfig
                   ) -> Dict[str, tf.Tensor]:
  """A batch's per-example float32 [N] values, each times the example's
  weight (`steps.example_metrics`): 'weight', 'correct', 'in_top_k',
  'cross_entropy' and 'loss' (the training loss: smoothed cross-entropy
  plus L2). The logits in the run's compute dtype, cast to float32."""
  dtype = precision.compute_dtype(config.use_bfloat16, config.job.use_tpu)
  logits = tf.cast(model(tf.cast(images, dtype), training=False), tf.float32)
  m = steps.example_metrics(labels, logits, config.job.num_classes)
  loss = tf.compat.v1.losses.softmax_cross_entropy(
      labels, logits, label_smoothing=config.label_smoothing,
      reduction=tf.compat.v1.losses.Reduction.NONE)
  loss += steps.regularization_loss(model, config.weight_decay)
  return {'weight': m.weight, 'correct': m.weight * m.correct,
          'in_top_k': m.weight * m.in_top_k,
          'cross_entropy': m.weight * m.cross_entropy, 'loss': m.weight * loss}


def aggregate(sums: Mapping[str, float]) -> Dict[str, float]:
  """`METRICS` from a pass's sums of `example_values`: weighted means
  (top1, top5 and cross_entropy as TF's weighted mean metrics)."""
  weight = sums['weight']
  mean = lambda name: float(sums[name] / weight) if weight else 0.0
  return {'cross_entropy': mean('cross_entropy'), 'loss': mean('loss'),
          'top1': mean('correct'), 'top5': mean('in_top_k')}
