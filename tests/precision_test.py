"""Tests of `precision`: the --use_bfloat16 modes and what they resolve to."""

from absl.testing import absltest
from absl.testing import parameterized
import tensorflow as tf

from tunas_tf import precision


class PrecisionTest(parameterized.TestCase):

  @parameterized.parameters(
      # mode, MobileNetV3-like, resolved (reference §3: auto -> ontpu for
      # MobileNetV3-like spaces, else false).
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


if __name__ == '__main__':
  absltest.main()
