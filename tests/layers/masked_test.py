"""Tests for layers/masked.py: width twins, masked vs sliced ops, batch norm."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from tunas_tf.layers import masked
from tunas_tf.search_space import filters

ActiveWidth = masked.ActiveWidth


class FilterTwinsTest(tf.test.TestCase):

  def test_tf_scale_filters_agrees_with_python_on_a_grid(self):
    multipliers = (0.1, 0.3, 1 / 3, 0.5, 0.625, 0.75, 1.0, 1.25, 1.5, 2.0,
                   3.0, 6.0)
    widths = list(range(1, 330))
    for multiplier, base in itertools.product(multipliers, (1, 8, 16)):
      expected = [filters.scale_filters(f, multiplier, base) for f in widths]
      got = masked.tf_scale_filters(tf.constant(widths), multiplier, base)
      self.assertEqual(got.dtype, tf.int32)
      self.assertAllEqual(got, expected, msg=f'{multiplier} {base}')

  def test_tf_make_divisible_agrees_with_python_on_a_grid(self):
    values = [v / 4 for v in range(1, 2000)]  # 0.25 .. 499.75, incl. x.5 ties.
    for divisor in (1, 3, 8, 16):
      expected = [filters.make_divisible(v, divisor) for v in values]
      got = masked.tf_make_divisible(tf.constant(values), divisor)
      self.assertEqual(got.dtype, tf.int32)
      self.assertAllEqual(got, expected, msg=str(divisor))

  def test_twins_work_in_graph_mode(self):
    scale = tf.function(lambda f: masked.tf_scale_filters(f, 0.625, 8))
    divisible = tf.function(lambda v: masked.tf_make_divisible(v * 0.25, 8))
    self.assertEqual(int(scale(tf.constant(20))), 16)  # 12.5 / 8 + .5 -> 2.
    self.assertEqual(int(divisible(tf.constant(120.0))), 32)  # 30 -> 32.

  def test_twins_reject_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, 'base must be positive, got 0'):
      masked.tf_scale_filters(8, 1.0, 0)
    with self.assertRaisesRegex(ValueError, 'multiplier must be >= 0'):
      masked.tf_scale_filters(8, -1.0, 8)
    with self.assertRaisesRegex(ValueError, 'divisor must be positive'):
      masked.tf_make_divisible(8.0, 0)


class ActiveWidthTest(tf.test.TestCase):

  def test_mask_keeps_the_first_n_channels(self):
    self.assertAllEqual(ActiveWidth(5, tf.constant(2)).mask(), [1, 1, 0, 0, 0])
    self.assertAllEqual(ActiveWidth(4, 3).mask(), [1, 1, 1, 0])
    self.assertIsNone(ActiveWidth(4, 4).mask())
    self.assertTrue(ActiveWidth(4, 4).is_full)
    # Not known statically:
    self.assertFalse(ActiveWidth(4, tf.constant(4)).is_full)

  def test_channels_by_mode(self):
    width = ActiveWidth(6, 2)
    self.assertEqual(width.channels(masked.MASKED), 6)
    self.assertEqual(width.channels(masked.SAMPLED), 2)

  def test_check_mode_names_the_allowed_modes(self):
    self.assertEqual(masked.check_mode('masked'), 'masked')
    with self.assertRaisesRegex(
        ValueError, r"Unknown supernet mode 'tpu'; expected one of "
        r"\('masked', 'sampled'\)"):
      masked.check_mode('tpu')


class OpsTest(tf.test.TestCase, parameterized.TestCase):

  def test_effective_kernel_masks_or_slices(self):
    kernel = tf.reshape(tf.range(1, 13, dtype=tf.float32), [1, 1, 3, 4])
    in_w, out_w = ActiveWidth(3, tf.constant(2)), ActiveWidth(4, tf.constant(1))
    sliced = masked.effective_kernel(kernel, in_w, out_w, 'sampled')
    # Rows are the input channels: [[1..4], [5..8], [9..12]].
    self.assertAllEqual(sliced, [[[[1.0], [5.0]]]])
    masked_kernel = masked.effective_kernel(kernel, in_w, out_w, 'masked')
    self.assertAllEqual(masked_kernel[0, 0],
                        [[1, 0, 0, 0], [5, 0, 0, 0], [0, 0, 0, 0]])
    # 1^2 + 5^2 in both modes.
    self.assertAllClose(masked.l2_sum(kernel, in_w, out_w, 'masked'), 26.0)
    self.assertAllClose(masked.l2_sum(kernel, in_w, out_w, 'sampled'), 26.0)

  def test_sampled_slices_in_a_graph_share_their_bounds(self):
    # Two kernels of one width pair, sliced in two cond branches and in the
    # outer graph: one set of bounds, built once in the outer graph; the
    # values and the gradient (zero beyond the slice) as python slicing's.
    with tf.Graph().as_default() as graph:
      n_in, n_out = tf.constant(2), tf.constant(3)
      in_w, out_w = ActiveWidth(3, n_in), ActiveWidth(4, n_out)
      kernels = [tf.reshape(tf.range(k, k + 36.0), [3, 1, 3, 4])
                 for k in (0.0, 100.0)]
      inner = tf.cond(tf.constant(True),
                      lambda: masked.effective_kernel(kernels[0], in_w, out_w,
                                                      'sampled'),
                      lambda: masked.effective_kernel(kernels[1], in_w, out_w,
                                                      'sampled'))
      outer = masked.effective_kernel(kernels[1], in_w, out_w, 'sampled')
      vector = masked.effective_vector(tf.range(4.0), out_w, 'sampled')
      grad, = tf.gradients(tf.reduce_sum(inner * 2.0), kernels[0])
      bounds = [op for op in graph.get_operations()
                if op.type == 'Pack' and 'slice_bounds' in op.name]
      self.assertLen(bounds, 2)  # [., ., n_in, n_out] and [n_out].
      self.assertEqual(inner.shape.as_list(), [3, 1, None, None])
      with tf.compat.v1.Session() as session:
        got = session.run([inner, outer, vector, grad] + kernels)
    inner, outer, vector, grad, k0, k1 = got
    self.assertAllEqual(inner, k0[:, :, :2, :3])
    self.assertAllEqual(outer, k1[:, :, :2, :3])
    self.assertAllEqual(vector, [0.0, 1.0, 2.0])
    expected = np.zeros([3, 1, 3, 4], np.float32)
    expected[:, :, :2, :3] = 2.0
    self.assertAllEqual(grad, expected)

  def test_a_static_width_beside_a_dynamic_one(self):
    with tf.Graph().as_default():
      kernel = tf.reshape(tf.range(12.0), [1, 1, 3, 4])
      sliced = masked.effective_kernel(kernel, ActiveWidth(3, 2),
                                       ActiveWidth(4, tf.constant(1)),
                                       'sampled')
      with tf.compat.v1.Session() as session:
        self.assertAllEqual(session.run(sliced), [[[[0.0], [4.0]]]])

  def test_effective_vector(self):
    vector = tf.constant([1.0, 2.0, 3.0])
    self.assertAllEqual(
        masked.effective_vector(vector, ActiveWidth(3, 2), 'sampled'), [1, 2])
    self.assertAllEqual(
        masked.effective_vector(vector, ActiveWidth(3, 2), 'masked'), [1, 2, 0])

  def test_stateless_batch_norm_by_hand(self):
    # One channel, values 1 and 3: mean 2, variance 1 -> -1, +1 (eps 0).
    x = tf.reshape(tf.constant([1.0, 3.0]), [2, 1, 1, 1])
    y = masked.stateless_batch_norm(x, tf.constant([2.0]), tf.constant([0.5]),
                                    ActiveWidth(1, 1), 'sampled', epsilon=0.0)
    self.assertAllClose(tf.reshape(y, [-1]), [-1.5, 2.5])

  @parameterized.parameters(1, 2)
  @pytest.mark.numerics  # Below: parameterized copies it to each case.
  def test_conv_depthwise_and_batch_norm_agree_across_modes(self, strides):
    rng = np.random.default_rng(0)
    in_w, out_w = ActiveWidth(5, tf.constant(3)), ActiveWidth(6, tf.constant(4))
    x_full = rng.normal(size=[2, 5, 5, 5]).astype(np.float32)
    x_full[..., 3:] = 0.0  # Masked channels are zero in masked mode.
    kernel = tf.constant(rng.normal(size=[3, 3, 5, 6]), tf.float32)
    dw_kernel = tf.constant(rng.normal(size=[3, 3, 5, 1]), tf.float32)
    gamma = tf.constant(rng.normal(size=[6]), tf.float32)
    beta = tf.constant(rng.normal(size=[6]), tf.float32)
    bias = tf.constant(rng.normal(size=[6]), tf.float32)
    outputs = {}
    for mode in masked.MODES:
      x = x_full if mode == 'masked' else x_full[..., :3]
      y = masked.conv2d(x, kernel, in_w, out_w, strides, mode, bias)
      z = masked.stateless_batch_norm(y, gamma, beta, out_w, mode)
      d = masked.depthwise_conv2d(x, dw_kernel, in_w, strides, mode)
      s = masked.activation(z, 'sigmoid', out_w, mode)
      outputs[mode] = (y, z, d, s)
    for got_masked, got_sampled, n in zip(outputs['masked'],
                                          outputs['sampled'], (4, 4, 3, 4)):
      # Normal inputs: sums of up to 45 products of ~1 and batch norm over
      # 18 or 50 numbers, with and without the zeroed channels; measured
      # 9.5e-7 at most under oneDNN's and Eigen's kernels.
      self.assertAllClose(got_masked[..., :n], got_sampled, atol=1e-5)
      self.assertAllEqual(got_masked[..., n:],
                          tf.zeros_like(got_masked[..., n:]))
      self.assertEqual(got_sampled.shape[-1], n)

  @parameterized.parameters('relu', 'relu6', 'swish6', 'sigmoid')
  def test_activation_values(self, name):
    x = tf.constant([-4.0, -1.0, 0.0, 1.0, 7.0])
    expected = {
        'relu': [0, 0, 0, 1, 7],
        'relu6': [0, 0, 0, 1, 6],
        # x * relu6(x + 3) / 6.
        'swish6': [0, -1 * 2 / 6, 0, 1 * 4 / 6, 7],
        'sigmoid': 1 / (1 + np.exp(-np.array([-4.0, -1.0, 0.0, 1.0, 7.0]))),
    }[name]
    self.assertAllClose(masked.activation(x, name), expected)

  def test_activation_rejects_unknown_name(self):
    with self.assertRaisesRegex(ValueError, "Unknown activation 'gelu'"):
      masked.activation(tf.zeros([1]), 'gelu')


if __name__ == '__main__':
  tf.test.main()
