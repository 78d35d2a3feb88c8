"""Tests for `layers.dropout`: masks keyed on (seed, layer name)."""

import numpy as np
import tensorflow as tf

from tunas_tf.layers import dropout


class DropoutTest(tf.test.TestCase):

  def test_step_seed(self):
    seed = dropout.step_seed(7, tf.constant(12, tf.int64))
    self.assertEqual(seed.dtype, tf.int64)
    self.assertAllEqual(seed, [7, 12])

  def test_keyed_masks_repeat_and_differ_by_seed_and_name(self):
    x = tf.ones([4, 100])
    seed = dropout.step_seed(3, tf.constant(5))
    y = dropout.dropout(x, 0.5, seed, 'head').numpy()
    # Kept entries are scaled by 1 / (1 - 0.5).
    self.assertTrue(set(np.unique(y)) <= {0.0, 2.0})
    self.assertBetween((y == 0).mean(), 0.3, 0.7)
    self.assertAllEqual(dropout.dropout(x, 0.5, seed, 'head'), y)
    for other_seed, name in ((dropout.step_seed(3, tf.constant(6)), 'head'),
                             (dropout.step_seed(4, tf.constant(5)), 'head'),
                             (seed, 'other')):
      self.assertNotAllEqual(dropout.dropout(x, 0.5, other_seed, name), y)

  def test_without_a_seed_dropout_is_stateful(self):
    y = dropout.dropout(tf.ones([4, 100]), 0.5, None, 'head').numpy()
    self.assertTrue(set(np.unique(y)) <= {0.0, 2.0})
    self.assertGreater((y == 0).sum(), 0)

  def test_whole_tensor_drops_or_keeps_all_of_it(self):
    x = tf.reshape(tf.range(1.0, 33.0), [2, 2, 2, 4])
    outcomes = set()
    for step in range(20):
      seed = dropout.step_seed(3, tf.constant(step))
      y = dropout.dropout(x, 0.5, seed, 'path', whole_tensor=True)
      self.assertAllEqual(y, dropout.dropout(x, 0.5, seed, 'path',
                                             whole_tensor=True))
      # All zeros, or all of x / (1 - 0.5).
      kept = bool(np.any(y.numpy()))
      self.assertAllEqual(y, 2.0 * x if kept else tf.zeros_like(x))
      outcomes.add(kept)
    # Both outcomes occur in 20 draws (each misses with odds 2 ** -20).
    self.assertEqual(outcomes, {False, True})
    y = dropout.dropout(x, 0.5, None, 'path', whole_tensor=True).numpy()
    self.assertIn(set(np.unique(y / x.numpy())), ({0.0}, {2.0}))

  def test_bfloat16(self):
    y = dropout.dropout(tf.ones([2, 8], tf.bfloat16), 0.5,
                        dropout.step_seed(0, tf.constant(0)), 'head')
    self.assertEqual(y.dtype, tf.bfloat16)


if __name__ == '__main__':
  tf.test.main()
