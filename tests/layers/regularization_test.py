"""Tests for layers/regularization.py: the L2 rule."""

import tensorflow as tf

from tunas_tf.layers import regularization


class WeightDecayLossTest(tf.test.TestCase):

  def test_half_the_strength_times_the_sum(self):
    # (0.1 / 2) * (3 + 5) = 0.4.
    loss = regularization.weight_decay_loss(
        [tf.constant(3.0), tf.constant(5.0)], 0.1)
    self.assertEqual(loss.dtype, tf.float32)
    self.assertAllClose(loss, 0.4)

  def test_gradient_is_weight_decay_times_the_weight(self):
    w = tf.Variable([1.0, -2.0])
    with tf.GradientTape() as tape:
      loss = regularization.weight_decay_loss([tf.reduce_sum(tf.square(w))],
                                              0.1)
    self.assertAllClose(tape.gradient(loss, w), [0.1, -0.2])

  def test_no_terms_is_zero(self):
    self.assertAllEqual(regularization.weight_decay_loss([], 0.1), 0.0)

  def test_negative_weight_decay_is_refused(self):
    with self.assertRaisesRegex(ValueError, 'weight_decay must be >= 0, got '
                                '-1.0'):
      regularization.weight_decay_loss([tf.constant(1.0)], -1.0)


if __name__ == '__main__':
  tf.test.main()
