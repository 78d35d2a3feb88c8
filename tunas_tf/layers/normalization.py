"""Batch norm, written once for the supernet and the graph's BATCH_NORM: one
`FusedBatchNormV3` forward and one gradient op backward. `x` is float32 or
bfloat16; gamma, beta and the statistics are float32."""

from __future__ import annotations

from typing import Optional, Tuple

import tensorflow as tf


def _channels(x: tf.Tensor):
  """The channel count of `x`: a Python int, else a scalar int32 Tensor."""
  channels = x.shape[-1]
  return int(channels) if channels is not None else tf.shape(x)[-1]


def _fused(x, gamma, beta, epsilon, mean, variance):
  """(y, mean, variance, x4): the fused op on `x` reshaped to 4-D if need
  be; with batch statistics the variance is Bessel-corrected."""
  x4 = x
  if gamma is None or beta is None or x.shape.rank != 4:
    channels = _channels(x)
    gamma = gamma if gamma is not None else tf.ones([channels], tf.float32)
    beta = beta if beta is not None else tf.zeros([channels], tf.float32)
    if x.shape.rank != 4:
      x4 = tf.reshape(x, [-1, 1, 1, channels])
  training = mean is None
  y, mean, variance = tf.compat.v1.nn.fused_batch_norm(
      x4, gamma, beta, mean, variance, epsilon=epsilon, data_format='NHWC',
      is_training=training)
  if x4 is not x:
    y = tf.reshape(y, tf.shape(x))
    y.set_shape(x.shape)
  return y, mean, variance, x4


def batch_norm(x: tf.Tensor, gamma: Optional[tf.Tensor],
               beta: Optional[tf.Tensor], epsilon: float,
               mean: Optional[tf.Tensor] = None,
               variance: Optional[tf.Tensor] = None) -> tf.Tensor:
  """gamma * (x - mean) / sqrt(variance + epsilon) + beta per channel (last
  axis) by one fused op, any rank through [-1, 1, 1, C], in `x`'s shape and
  dtype; `gamma`, `beta` float32 [C] or None (ones / zeros); `mean`,
  `variance` float32 [C], or None for the batch's."""
  return _fused(x, gamma, beta, epsilon, mean, variance)[0]


def batch_norm_with_statistics(
    x: tf.Tensor, gamma: Optional[tf.Tensor], beta: Optional[tf.Tensor],
    epsilon: float) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """(y, mean, variance): `batch_norm` with the batch's statistics, and
  those (float32 [C]; the variance biased, the fused op's Bessel-corrected
  one undone)."""
  y, mean, variance, x4 = _fused(x, gamma, beta, epsilon, None, None)
  count = tf.cast(tf.size(x4) // _channels(x4), tf.float32)
  variance = variance * ((count - 1.0) / tf.maximum(count, 1.0))
  return y, mean, variance
