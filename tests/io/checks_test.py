"""Tests of `checks`: the one-line range checks of settings."""

import re

from absl.testing import absltest
from absl.testing import parameterized

from tunas_tf.io import checks


class ChecksTest(parameterized.TestCase):

  @parameterized.parameters(
      (dict(value=0.5, low=0, high=1),),
      (dict(value=0, low=0, high=1),),
      (dict(value=1, low=0, high=1),),
      (dict(value=1e-9, low=0, low_open=True),),
      (dict(value=-3, high=0),),
      (dict(value=7, low=1, integer=True),),
  )
  def test_accepts(self, kwargs):
    value = kwargs.pop('value')
    checks.number('x', value, **kwargs)

  @parameterized.parameters(
      (1.5, dict(low=0, high=1, high_open=True),
       r'^--x must be in \[0, 1\), got 1.5$'),
      (1.0, dict(low=0, high=1, high_open=True),
       r'^--x must be in \[0, 1\), got 1.0$'),
      (0.0, dict(low=0, low_open=True), r'^--x must be > 0, got 0.0$'),
      (-1.0, dict(low=0), r'^--x must be >= 0, got -1.0$'),
      (0.5, dict(high=0), r'^--x must be <= 0, got 0.5$'),
      (float('nan'), dict(low=0), r'^--x must be a finite number, got nan$'),
      (float('inf'), dict(), r'^--x must be a finite number, got inf$'),
      (2.5, dict(low=1, integer=True),
       r'^--x must be an integer >= 1, got 2.5$'),
      (True, dict(low=0, integer=True), r'^--x must be an integer >= 0'),
      ('3', dict(low=0), r"^--x must be >= 0, got '3'$"),
  )
  def test_refuses_naming_the_flag_value_and_range(self, value, kwargs,
                                                   message):
    with self.assertRaisesRegex(ValueError, message):
      checks.number('x', value, **kwargs)

  def test_fraction_and_seed(self):
    checks.fraction('f', 1.0)
    with self.assertRaisesRegex(ValueError, r'--f must be in \[0, 1\), got'):
      checks.fraction('f', 1.0, high_open=True)
    checks.seed('seed', 0)
    checks.seed('seed', checks.MAX_SEED)
    for bad in (-1, checks.MAX_SEED + 1, 1.0):
      with self.assertRaisesRegex(ValueError,
                                  r'--seed must be an integer in \[0, '
                                  r'2147483647\]'):
        checks.seed('seed', bad)

  @parameterized.parameters(
      # 6 / 54 = 0.1111...; down: 54 x 0.111 = 5.994 <= 6.
      (6, 54, False, 0.111),
      # 1 / 64 = 0.015625; up: 64 x 0.0157 = 1.0048 >= 1.
      (1, 64, True, 0.0157),
      # 100 / 64 = 1.5625 and 64 / 54 = 1.185...
      (100, 64, False, 1.56), (100, 64, True, 1.57), (64, 54, True, 1.19),
      # Exact ratios stay as they are, in either direction.
      (128, 64, False, 2.0), (128, 64, True, 2.0), (1, 1000, True, 0.001),
      (12345, 1, True, 12400.0), (12345, 1, False, 12300.0),
  )
  def test_rounded_bound_stays_on_the_bounds_side(self, numerator,
                                                  denominator, up, expected):
    value = checks.rounded_bound(numerator, denominator, up=up)
    self.assertEqual(value, expected)
    if up:
      self.assertGreaterEqual(value * denominator, numerator)
    else:
      self.assertLessEqual(value * denominator, numerator)

  def test_is_number_is_a_finite_int_or_float(self):
    for value in (0, -3, 2.5, 1e300):
      self.assertTrue(checks.is_number(value), value)
    for value in (True, False, float('nan'), float('inf'), '1', None, [1]):
      self.assertFalse(checks.is_number(value), value)

  def test_one_of_names_the_value_and_the_allowed_ones(self):
    checks.one_of('--mode', 'b', ('a', 'b'))
    with self.assertRaisesRegex(ValueError, re.escape(
        "Unknown --mode 'c'; expected one of ('a', 'b')")):
      checks.one_of('--mode', 'c', ('a', 'b'))

  def test_positive_int_returns_it_or_names_the_setting_and_value(self):
    self.assertEqual(checks.positive_int('num_classes', 3), 3)
    for value in (0, -2, True, 2.0, '3', None):
      with self.subTest(value=value):
        with self.assertRaisesRegex(ValueError, '^' + re.escape(
            f'num_classes must be a positive int, got {value!r}') + '$'):
          checks.positive_int('num_classes', value)


if __name__ == '__main__':
  absltest.main()
