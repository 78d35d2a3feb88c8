"""Tests for layers/initializers.py: He-normal draws and the seed rule."""

import zlib

import numpy as np
import tensorflow as tf

from tunas_tf.layers import initializers
from tunas_tf.search_space import naming


class InitTest(tf.test.TestCase):

  def test_he_normal_has_the_target_stddev_and_is_truncated(self):
    shape = [3, 3, 64, 256]
    fan_in = initializers.conv_fan_in(shape)
    self.assertEqual(fan_in, 576)
    self.assertEqual(initializers.depthwise_fan_in([5, 5, 96, 1]), 25)
    stddev = initializers.he_normal_stddev(fan_in)
    value = initializers.truncated_normal_init(shape, stddev, seed=1, name='k')
    self.assertAllClose(np.std(value), stddev, rtol=0.02)
    # Truncated at two standard deviations of the underlying normal.
    self.assertLessEqual(
        np.max(np.abs(value)),
        2 * stddev / naming.TRUNCATED_NORMAL_STDDEV + 1e-6)

  def test_seeded_draws_depend_on_seed_and_name(self):
    init = initializers.truncated_normal_init
    a = init([10], 1.0, seed=3, name='a')
    self.assertAllEqual(a, init([10], 1.0, 3, 'a'))
    self.assertNotAllClose(a, init([10], 1.0, 3, 'b'))
    self.assertNotAllClose(a, init([10], 1.0, 4, 'a'))
    self.assertAllClose(np.std(initializers.normal([20000], 0.01, 0, 'c')),
                        0.01, rtol=0.03)


  def test_stateless_seed_is_seed_and_crc32_of_the_name(self):
    name = 'blocks/0/layers/0/conv_k3/kernel'
    self.assertEqual(initializers.stateless_seed(5, name),
                     [5, zlib.crc32(name.encode()) & 0x7fffffff])

  def test_seeded_draws_equal_the_stateless_ops(self):
    seed = initializers.stateless_seed(2, 'v')
    self.assertAllEqual(initializers.normal([4], 0.5, 2, 'v', mean=1.0),
                        tf.random.stateless_normal([4], seed, 1.0, 0.5))
    self.assertAllEqual(
        initializers.truncated_normal([4], 0.5, 2, 'v'),
        tf.random.stateless_truncated_normal([4], seed, 0.0, 0.5))
    self.assertAllEqual(initializers.uniform([4], -1.0, 1.0, 2, 'v'),
                        tf.random.stateless_uniform([4], seed, -1.0, 1.0))

  def test_truncated_normal_init_divides_by_the_truncated_stddev(self):
    # 0.3 / c is the underlying normal's stddev.
    self.assertAllEqual(initializers.truncated_normal_init([6], 0.3, 1, 'k'),
                        initializers.truncated_normal(
                            [6], 0.3 / 0.87962566, 1, 'k'))

  def test_unseeded_draws_have_the_shape(self):
    self.assertEqual(initializers.normal([2, 3], 1.0).shape, (2, 3))
    self.assertEqual(initializers.truncated_normal([2], 1.0).shape, (2,))
    self.assertEqual(initializers.uniform([5], 0.0, 1.0).shape, (5,))
    self.assertEqual(initializers.he_normal_stddev(0),
                     initializers.he_normal_stddev(1))


if __name__ == '__main__':
  tf.test.main()
