"""Tests for layers/normalization.py: the one batch norm."""

import tensorflow as tf
from absl.testing import parameterized

from tunas_tf.layers import normalization


class BatchNormTest(tf.test.TestCase, parameterized.TestCase):

  def test_batch_statistics_by_hand(self):
    # One channel, values 1 and 3: mean 2, biased variance 1 -> -1, +1
    # (eps 0), then * 2 + 0.5.
    x = tf.reshape(tf.constant([1.0, 3.0]), [2, 1, 1, 1])
    y, mean, variance = normalization.batch_norm_with_statistics(
        x, tf.constant([2.0]), tf.constant([0.5]), 0.0)
    self.assertAllClose(tf.reshape(y, [-1]), [-1.5, 2.5])
    self.assertAllEqual(
        normalization.batch_norm(x, tf.constant([2.0]), tf.constant([0.5]),
                                 0.0), y)
    self.assertAllClose(mean, [2.0])
    self.assertAllClose(variance, [1.0])  # Biased: not 2, the fused op's.

  def test_given_statistics(self):
    # (x - 1) / sqrt(4) for x = 1, 3, 5 (eps 0), no scale or offset.
    x = tf.reshape(tf.constant([1.0, 3.0, 5.0]), [3, 1, 1, 1])
    y = normalization.batch_norm(x, None, None, 0.0, tf.constant([1.0]),
                                 tf.constant([4.0]))
    self.assertAllClose(tf.reshape(y, [-1]), [0.0, 1.0, 2.0])

  @parameterized.parameters([[4, 3]], [[2, 2, 3]], [[2, 1, 2, 3]])
  def test_any_rank_keeps_the_shape_and_normalises_per_channel(self, shape):
    x = tf.random.stateless_normal(shape, [1, 2])
    y, mean, variance = normalization.batch_norm_with_statistics(
        x, None, None, 0.0)
    self.assertEqual(y.shape, shape)
    axes = list(range(len(shape) - 1))
    self.assertAllClose(tf.reduce_mean(y, axes), [0.0] * 3, atol=1e-5)
    self.assertAllClose(mean, tf.reduce_mean(x, axes), atol=1e-6)
    self.assertAllClose(variance, tf.math.reduce_variance(x, axes),
                        atol=1e-6)

  def test_channels_known_only_at_run_time(self):
    @tf.function(input_signature=[tf.TensorSpec([2, 1, 1, None])])
    def run(x):
      channels = tf.shape(x)[-1]
      return normalization.batch_norm_with_statistics(
          x, tf.ones([channels]), tf.zeros([channels]), 0.0)

    y, _, variance = run(tf.constant([[[[1.0, 0.0]]], [[[3.0, 4.0]]]]))
    self.assertAllClose(tf.reshape(y, [2, 2]), [[-1, -1], [1, 1]])
    self.assertAllClose(variance, [1.0, 4.0])

  def test_bfloat16_input_keeps_float32_statistics(self):
    x = tf.cast(tf.reshape(tf.constant([1.0, 3.0]), [2, 1, 1, 1]),
                tf.bfloat16)
    y, mean, variance = normalization.batch_norm_with_statistics(
        x, tf.constant([1.0]), tf.constant([0.0]), 0.0)
    self.assertEqual(y.dtype, tf.bfloat16)
    self.assertEqual(mean.dtype, tf.float32)
    self.assertEqual(variance.dtype, tf.float32)
    self.assertAllClose(tf.cast(tf.reshape(y, [-1]), tf.float32), [-1, 1])


if __name__ == '__main__':
  tf.test.main()
