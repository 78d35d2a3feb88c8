"""Batch norm, written once: the supernet's and the graph's BATCH_NORM.

`batch_norm` is one fused op (`FusedBatchNormV3`) forward and one gradient
op backward. `x` is float32 or bfloat16; gamma, beta and the statistics are
float32 whatever `x` is (the fused op's U dtype).
"""

from __future__ import annotations

from typing import Optional, Tuple

import tensorflow as tf


def _channels(x: tf.Tensor):
  """The channel count of `x`: a Python int, else a scalar int32 Tensor."""
  channels = x.shape[-1]
  return int(channels) if channels is not None else tf.shape(x)[-1]


def _fused(x, gamma, beta, epsilon, mean, variance):
  """The fused op on `x` (reshaped to 4-D if need be).

  Returns:
    `(y, mean, variance, x4)`: y of the shape of `x`, the op's statistics
    (with batch statistics, the Bessel-corrected variance) and the 4-D input
    it normalised.
  """
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
  """`x` normalised over all axes but the last, by one fused op.

  y = gamma * (x - mean) / sqrt(variance + epsilon) + beta, per channel.

  Args:
    x: float32 or bfloat16 Tensor of rank >= 1, channels last (other ranks
      than 4 go through [-1, 1, 1, C]).
    gamma: float32 Tensor or variable [C], the scale, or None for ones.
    beta: float32 Tensor or variable [C], the offset, or None for zeros.
    epsilon: Python float added to the variance.
    mean: None to normalise with the batch statistics (training, or a
      stateless batch norm), or the float32 [C] mean to normalise with.
    variance: with `mean`, the float32 [C] variance to normalise with.

  Returns:
    Tensor of the shape and dtype of `x`.
  """
  return _fused(x, gamma, beta, epsilon, mean, variance)[0]


def batch_norm_with_statistics(
    x: tf.Tensor, gamma: Optional[tf.Tensor], beta: Optional[tf.Tensor],
    epsilon: float) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """`batch_norm` with the batch statistics, and those statistics.

  Returns:
    `(y, mean, variance)`: y of the shape and dtype of `x`, and the float32
    [C] batch mean and biased batch variance (the fused op's is
    Bessel-corrected; this undoes it).
  """
  y, mean, variance, x4 = _fused(x, gamma, beta, epsilon, None, None)
  count = tf.cast(tf.size(x4) // _channels(x4), tf.float32)
  variance = variance * ((count - 1.0) / tf.maximum(count, 1.0))
  return y, mean, variance
