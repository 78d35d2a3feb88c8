"""Range checks of settings, each failing with one line naming the flag; the
typed configs call these in `__post_init__`, so a setting is checked once
whether it comes from a flag, a stored config.json or `dataclasses.replace`."""

from __future__ import annotations

import fractions
import math
import numbers
from typing import Any, Optional, Sequence

# The largest seed: TF graph seeds and NumPy's RandomState both take it.
MAX_SEED = 2**31 - 1


def is_number(value: Any) -> bool:
  """Whether `value` is a finite int or float (a bool is not): a JSON
  file's number."""
  return (isinstance(value, (int, float)) and not isinstance(value, bool) and
          math.isfinite(value))


def number(name: str, value: Any, low: Optional[float] = None,
           high: Optional[float] = None, *, low_open: bool = False,
           high_open: bool = False, integer: bool = False,
           prefix: str = '--') -> None:
  """Checks that `value` is a finite number inside the given bounds.

  Args:
    name: the flag's name (without dashes), for the message.
    low, high: the bounds (None: unbounded on that side).
    low_open, high_open: whether the bound itself is excluded.
    integer: whether `value` must be an int (bools are refused).
    prefix: what the message puts before `name` ('' for a field's name).

  Raises:
    ValueError: '{prefix}{name} must be {an integer }{bound}, got
      {value!r}', or '{prefix}{name} must be a finite number, got nan'.
  """
  kind = 'an integer ' if integer else ''
  show = lambda b: str(b) if isinstance(b, int) else f'{b:g}'
  if low is not None and high is not None:
    bound = (f"in {'(' if low_open else '['}{show(low)}, {show(high)}"
             f"{')' if high_open else ']'}")
  elif low is not None:
    bound = f"{'>' if low_open else '>='} {show(low)}"
  elif high is not None:
    bound = f"{'<' if high_open else '<='} {show(high)}"
  else:
    kind, bound = '', kind.strip() or 'a number'
  if isinstance(value, bool) or not isinstance(
      value, numbers.Integral if integer else numbers.Real):
    raise ValueError(f'{prefix}{name} must be {kind}{bound}, got {value!r}')
  if not math.isfinite(value):
    raise ValueError(f'{prefix}{name} must be a finite number, got {value!r}')
  too_low = low is not None and (value <= low if low_open else value < low)
  too_high = high is not None and (value >= high if high_open
                                   else value > high)
  if too_low or too_high:
    raise ValueError(f'{prefix}{name} must be {kind}{bound}, got {value!r}')


def fraction(name: str, value: Any, *, high_open: bool = False) -> None:
  """`number(name, value, 0, 1)`: a fraction, a decay or a momentum."""
  number(name, value, 0, 1, high_open=high_open)


def seed(name: str, value: Any) -> None:
  """An integer seed in [0, MAX_SEED]."""
  number(name, value, 0, MAX_SEED, integer=True)


def positive_int(what: str, value: Any) -> int:
  """Returns `value` if it is a positive int (a bool is not), else raises
  ValueError('{what} must be a positive int, got {value!r}')."""
  if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
    raise ValueError(f'{what} must be a positive int, got {value!r}')
  return value


def one_of(what: str, value: Any, allowed: Sequence[Any]) -> None:
  """Raises ValueError('Unknown {what} {value!r}; expected one of
  {allowed}') unless `value` is in `allowed`."""
  if value not in allowed:
    raise ValueError(f'Unknown {what} {value!r}; expected one of {allowed}')


def rounded_bound(numerator: int, denominator: int, *, up: bool) -> float:
  """numerator / denominator (> 0) rounded up or down to 3 significant
  digits (6/54 down: 0.111): a value to advise for a flag bounded by that
  ratio, on the bound's right side (`up`: a least value, else a greatest)."""
  value = fractions.Fraction(numerator, denominator)
  exponent = math.floor(math.log10(value)) - 2  # 3 significant digits.
  scale = fractions.Fraction(10) ** exponent
  steps = value / scale
  rounded = (math.ceil(steps) if up else math.floor(steps)) * scale
  return round(float(rounded), max(0, -exponent))
