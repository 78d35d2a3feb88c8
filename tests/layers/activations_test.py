"""Tests for layers/activations.py: values, names, zero-preservation."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from tunas_tf.layers import activations
from tunas_tf.search_space import ops

_X = [-4.0, -1.0, 0.0, 1.0, 7.0]


class ActivationsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters('relu', 'relu6', 'swish6', 'sigmoid')
  def test_by_name_values(self, name):
    expected = {
        'relu': [0, 0, 0, 1, 7],
        'relu6': [0, 0, 0, 1, 6],
        # x * relu6(x + 3) / 6.
        'swish6': [0, -1 * 2 / 6, 0, 1 * 4 / 6, 7],
        'sigmoid': 1 / (1 + np.exp(-np.array(_X))),
    }[name]
    self.assertAllClose(activations.by_name(name)(tf.constant(_X)), expected)

  def test_hard_swish_multiplies_by_one_sixth(self):
    # Bit-exact: multiplying by float32(1/6) is not dividing by 6.
    x = tf.constant(np.linspace(-5, 5, 101), tf.float32)
    self.assertAllEqual(activations.hard_swish(x),
                        x * tf.nn.relu6(x + 3.0) * (1.0 / 6.0))

  def test_graph_only_activations(self):
    x = tf.constant(_X)
    self.assertAllClose(activations.hard_sigmoid(x), [0, 2 / 6, 0.5, 4 / 6, 1])
    self.assertAllClose(activations.swish(x),
                        np.array(_X) / (1 + np.exp(-np.array(_X))))

  def test_maps_zero_to_zero(self):
    for name in ops.ACTIVATIONS:
      value = float(activations.by_name(name)(tf.constant(0.0)))
      self.assertEqual(activations.maps_zero_to_zero(name), value == 0.0)

  def test_by_name_rejects_unknown_name(self):
    with self.assertRaisesRegex(ValueError, "Unknown activation 'gelu'; "
                                'expected one of'):
      activations.by_name('gelu')


if __name__ == '__main__':
  tf.test.main()
