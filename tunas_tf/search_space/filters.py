"""Filter-count rounding, exactly as the original search spaces use it.

Plain Python integers in and out.
"""

import math


def scale_filters(filters: int, multiplier: float, base: int) -> int:
  """Scales a filter count and rounds it to a multiple of `base`.

  `max(base, base * floor(filters * multiplier / base + 0.5))`.

  Raises:
    ValueError: for a non-positive `base` or a negative `multiplier`.
  """
  if base <= 0:
    raise ValueError(f'scale_filters: base must be positive, got {base}')
  if multiplier < 0:
    raise ValueError(
        f'scale_filters: multiplier must be >= 0, got {multiplier}')
  return max(base, base * int(math.floor(filters * multiplier / base + 0.5)))


def make_divisible(value: float, divisor: int) -> int:
  """Rounds `value` to the nearest multiple of `divisor` (MobileNet rule).

  `max(divisor, floor((value + divisor / 2) / divisor) * divisor)`, plus
  `divisor` when that would lose more than 10% of `value`.

  Raises:
    ValueError: for a non-positive `divisor`.
  """
  if divisor <= 0:
    raise ValueError(f'make_divisible: divisor must be positive, got {divisor}')
  rounded = max(divisor, int(math.floor((value + divisor / 2) / divisor)) * divisor)
  if rounded < 0.9 * value:
    rounded += divisor
  return rounded
