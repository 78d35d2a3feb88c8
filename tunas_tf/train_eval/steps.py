"""The pieces of the standalone network's steps: the variables to train,
the losses (smoothed cross-entropy plus L2) and the evaluation's
per-example metrics."""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Tuple

import numpy as np
import tensorflow as tf

from tunas_tf.graph import from_spec
from tunas_tf.graph import inherit
from tunas_tf.layers import regularization
from tunas_tf.train_eval.config import TrainEvalConfig


class TrainVariables(NamedTuple):
  """`var_list` the optimizer and EMA update; `inherited` (variable, value)
  pairs assigned at session creation."""
  var_list: List[tf.Variable]
  inherited: List[Tuple[tf.Variable, np.ndarray]]


class Losses(NamedTuple):
  """Scalar float32 Tensors: `total` = `empirical` + `regularization`."""
  total: tf.Tensor
  empirical: tf.Tensor
  regularization: tf.Tensor


def variables_to_train(model, inheritance: Optional[inherit.Inheritance],
                       freeze_inherited: bool) -> TrainVariables:
  """The optimizer's variables and the inherited values; ValueError when
  `freeze_inherited` would leave nothing to train."""
  inherited, fresh = ([], None)
  if inheritance is not None:
    inherited, fresh = inheritance.split(model)
  if freeze_inherited:
    if not fresh:
      raise ValueError('--freeze_inherited: every trainable variable is '
                       'inherited, nothing would train')
    return TrainVariables(fresh, inherited)
  trainable = [v for group in model.op_variables.values()
               for v in group.values() if v.trainable]
  return TrainVariables(trainable, inherited)


def regularization_loss(model, weight_decay: float) -> tf.Tensor:
  """`regularization.weight_decay_loss` of every kernel but the classifier's
  (the constant 0, no term built, for `weight_decay` 0)."""
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


class ExampleMetrics(NamedTuple):
  """The evaluation's per-example float32 [N] figures: `weight` (the label's
  sum, 0 for padding), `correct` (top-1), `in_top_k` (k = min(5, classes))
  and `cross_entropy`."""
  weight: tf.Tensor
  correct: tf.Tensor
  in_top_k: tf.Tensor
  cross_entropy: tf.Tensor


def example_metrics(labels: tf.Tensor, logits: tf.Tensor,
                    num_classes: int) -> ExampleMetrics:
  """The one definition of top1, top5 and cross_entropy, per example
  (`evaluate.example_values` weighs them)."""
  target = tf.argmax(labels, axis=-1)
  return ExampleMetrics(
      weight=tf.reduce_sum(labels, axis=-1),
      correct=tf.cast(tf.equal(tf.argmax(logits, axis=-1), target),
                      tf.float32),
      in_top_k=tf.cast(tf.nn.in_top_k(targets=target, predictions=logits,
                                      k=min(5, num_classes)), tf.float32),
      cross_entropy=tf.nn.softmax_cross_entropy_with_logits(
          labels=labels, logits=logits))
