"""Filter-count rounding, exactly as the original search spaces use it."""

import math


def scale_filters(filters: int, multiplier: float, base: int) -> int:
  """max(base, base * floor(filters * multiplier / base + 0.5)); ValueError
  for a non-positive `base` or a negative `multiplier`."""
  if base <= 0:
    raise ValueError(f'scale_filters: base must be positive, got {base}')
  if multiplier < 0:
    raise ValueError(
        f'scale_filters: multiplier must be >= 0, got {multiplier}')
  return max(base, base * int(math.floor(filters * multiplier / base + 0.5)))


def make_divisible(value: float, divisor: int) -> int:
  """The MobileNet rounding: max(divisor, floor((value + divisor / 2) /
  divisor) * divisor), plus `divisor` when that loses over 10% of `value`.
  ValueError for a non-positive `divisor`."""
  if divisor <= 0:
    raise ValueError(f'make_divisible: divisor must be positive, got {divisor}')
  rounded = max(divisor, int(math.floor((value + divisor / 2) / divisor)) * divisor)
  if rounded < 0.9 * value:
    rounded += divisor
  return rounded
