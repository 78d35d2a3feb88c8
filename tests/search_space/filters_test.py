"""Tests for filter rounding (hand-computed tables)."""

from absl.testing import absltest
from absl.testing import parameterized

from tunas_tf.search_space import filters


class FiltersTest(parameterized.TestCase):

  @parameterized.named_parameters(
      # max(base, base * floor(f * m / base + 0.5))
      ('half_of_16', 16, 0.5, 8, 8),
      ('rounds_down', 16, 0.625, 8, 8),     # 10 / 8 + .5 = 1.75 -> 8
      ('rounds_half_up', 16, 0.75, 8, 16),  # 12 / 8 + .5 = 2.0 -> 16
      ('rounds_up', 16, 1.25, 8, 24),       # 20 / 8 + .5 = 3.0 -> 24
      ('at_least_base', 4, 0.5, 8, 8),
      ('expansion', 40, 6.0, 8, 240),
      ('zero_multiplier', 32, 0.0, 8, 8),
  )
  def test_scale_filters(self, f, m, base, expected):
    self.assertEqual(filters.scale_filters(f, m, base), expected)

  @parameterized.named_parameters(
      # max(d, floor((v + d / 2) / d) * d), plus d if below 0.9 v.
      ('exact', 64, 8, 64),
      ('rounds_half_up', 60, 8, 64),   # (60 + 4) / 8 = 8 -> 64
      ('rounds_down', 59.9, 8, 56),    # 7.98 -> 56 >= 53.9
      ('min_divisor', 3, 8, 8),
      ('ten_percent_rule', 12, 16, 16),  # 20 / 16 -> 16 >= 10.8
      ('bump', 150, 128, 256),         # 128 < 135 -> +128
      ('quarter_of_72', 18, 8, 24),    # (18 + 4) / 8 -> 16 < 16.2 -> 24
  )
  def test_make_divisible(self, value, divisor, expected):
    self.assertEqual(filters.make_divisible(value, divisor), expected)

  def test_errors(self):
    with self.assertRaisesRegex(ValueError, 'base must be positive, got 0'):
      filters.scale_filters(16, 1.0, 0)
    with self.assertRaisesRegex(ValueError, 'multiplier must be >= 0, got -1'):
      filters.scale_filters(16, -1, 8)
    with self.assertRaisesRegex(ValueError, 'divisor must be positive, got -8'):
      filters.make_divisible(16, -8)


if __name__ == '__main__':
  absltest.main()
