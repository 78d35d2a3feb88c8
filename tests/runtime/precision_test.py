"""Tests of `precision`: the --use_bfloat16 modes and what they resolve to."""

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tunas_tf.runtime import precision


class PrecisionTest(parameterized.TestCase):

  @parameterized.parameters(
      # mode, MobileNetV3-like, resolved (as the original's search binary:
      # auto -> ontpu for MobileNetV3-like spaces, else false).
      ('auto', True, 'ontpu'), ('auto', False, 'false'),
      ('true', False, 'true'), ('false', True, 'false'),
      ('ontpu', False, 'ontpu'))
  def test_resolve(self, mode, v3_like, expected):
    self.assertEqual(precision.resolve(mode, v3_like), expected)

  def test_resolve_unknown_mode(self):
    with self.assertRaisesRegex(ValueError, r"Unknown --use_bfloat16='yes'; "
                                r"expected one of \('auto'"):
      precision.resolve('yes', False)

  @parameterized.parameters(('true', 3e-5), ('ontpu', 3e-5), ('false', 4e-5))
  def test_default_weight_decay(self, mode, expected):
    self.assertEqual(precision.default_weight_decay(mode), expected)

  @parameterized.parameters(
      ('true', False, tf.bfloat16), ('true', True, tf.bfloat16),
      ('ontpu', True, tf.bfloat16), ('ontpu', False, tf.float32),
      ('false', True, tf.float32), ('false', False, tf.float32))
  def test_compute_dtype(self, mode, use_tpu, expected):
    self.assertEqual(precision.compute_dtype(mode, use_tpu), expected)

  def test_unresolved_mode_is_refused(self):
    for mode in ('auto', 'TRUE', None):
      with self.assertRaisesRegex(ValueError, 'use_bfloat16 must be one of'):
        precision.compute_dtype(mode, False)

  @parameterized.parameters(('true', tf.bfloat16), ('ontpu', tf.float32),
                            ('false', tf.float32))
  def test_input_dtype(self, mode, expected):
    self.assertEqual(precision.input_dtype(mode), expected)

  def test_input_dtype_refuses_an_unresolved_mode(self):
    with self.assertRaisesRegex(ValueError, "once resolved, got 'auto'"):
      precision.input_dtype('auto')

  def test_cast_input_casts_every_image_and_keeps_the_labels(self):
    # 1 + 2^-9 is a float32; bfloat16 (7 explicit mantissa bits) rounds it
    # to 1, and 2 + 2^-8 to 2.
    images = tf.fill([2, 4, 4, 1], 1.0 + 2.0**-9)
    labels = tf.one_hot([0, 1], 10)
    for features, expected in (
        (images, 1.0),
        ({'train': images, 'validation': 2.0 * images},
         {'train': 1.0, 'validation': 2.0})):
      dataset = tf.data.Dataset.from_tensors((features, labels))
      got_features, got_labels = next(iter(precision.cast_input(dataset,
                                                                'true')))
      for got, value in zip(tf.nest.flatten(got_features),
                            tf.nest.flatten(expected)):
        self.assertEqual((got.dtype, got.shape), (tf.bfloat16, [2, 4, 4, 1]))
        np.testing.assert_array_equal(tf.cast(got, tf.float32), value)
      self.assertEqual(got_labels.dtype, tf.float32)
      np.testing.assert_array_equal(got_labels, labels)

  @parameterized.parameters('ontpu', 'false')
  def test_cast_input_leaves_float32_modes_alone(self, mode):
    dataset = tf.data.Dataset.from_tensors((tf.ones([2, 4, 4, 1]),
                                            tf.ones([2, 10])))
    self.assertIs(precision.cast_input(dataset, mode), dataset)


if __name__ == '__main__':
  absltest.main()
