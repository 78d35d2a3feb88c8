"""Initial values of weights, and the rule that seeds them by name.

With a seed a value is fixed by (seed, variable name) through stateless ops,
so it does not depend on how many variables came before; without one the
global generator draws. Kernels are He-normal: truncated at two standard
deviations, scaled so the values have stddev sqrt(2 / fan_in).
"""

from __future__ import annotations

import math
import zlib
from typing import List, Optional, Sequence

import tensorflow as tf

from tunas_tf.search_space import naming


def name_key(name: str) -> int:
  """A name's 31-bit key in a stateless seed: crc32(name) & 0x7fffffff.

  The one rule for keying draws by name (initial values, dropout masks, the
  controller's draws).
  """
  return zlib.crc32(name.encode()) & 0x7fffffff


def stateless_seed(seed: int, name: str) -> List[int]:
  """The stateless seed of variable `name`: [seed, `name_key(name)`]."""
  return [int(seed), name_key(name)]


def normal(shape: Sequence[int], stddev: float, seed: Optional[int] = None,
           name: str = '', mean: float = 0.0) -> tf.Tensor:
  """A normal draw N(mean, stddev^2) of `shape`, float32.

  Args:
    seed: None for the global generator, or an int: the value is then fixed
      by (`seed`, `name`).
    name: the variable's name (only read with a seed).
  """
  if seed is None:
    return tf.random.normal(shape, mean, stddev)
  return tf.random.stateless_normal(shape, stateless_seed(seed, name), mean,
                                    stddev)


def truncated_normal(shape: Sequence[int], stddev: float,
                     seed: Optional[int] = None,
                     name: str = '') -> tf.Tensor:
  """A draw of N(0, stddev^2) truncated to [-2 stddev, 2 stddev], float32.

  `stddev` is the underlying normal's; the truncated values have
  `stddev * TRUNCATED_NORMAL_STDDEV`. `seed` and `name` as for `normal`.
  """
  if seed is None:
    return tf.random.truncated_normal(shape, 0.0, stddev)
  return tf.random.stateless_truncated_normal(
      shape, stateless_seed(seed, name), 0.0, stddev)


def uniform(shape: Sequence[int], minval: float, maxval: float,
            seed: Optional[int] = None, name: str = '') -> tf.Tensor:
  """A uniform draw in [minval, maxval), float32; `seed`, `name` as `normal`."""
  if seed is None:
    return tf.random.uniform(shape, minval, maxval)
  return tf.random.stateless_uniform(shape, stateless_seed(seed, name),
                                     minval, maxval)


def truncated_normal_init(shape: Sequence[int], stddev: float,
                          seed: Optional[int] = None,
                          name: str = '') -> tf.Tensor:
  """A truncated normal float32 draw whose values have stddev `stddev`.

  The underlying normal's stddev is `stddev / naming.TRUNCATED_NORMAL_STDDEV`;
  `seed` and `name` as for `normal`.
  """
  return truncated_normal(shape, stddev / naming.TRUNCATED_NORMAL_STDDEV, seed,
                          name)


def he_normal_stddev(fan_in: float) -> float:
  """sqrt(2 / fan_in): the He-normal target standard deviation."""
  return math.sqrt(2.0 / max(1, fan_in))


def conv_fan_in(shape: Sequence[int]) -> int:
  """Fan-in of a conv kernel [kh, kw, in, out]: kh * kw * in."""
  return int(shape[0]) * int(shape[1]) * int(shape[2])


def depthwise_fan_in(shape: Sequence[int]) -> int:
  """Fan-in of a depthwise kernel [kh, kw, C, 1]: kh * kw (per channel)."""
  return int(shape[0]) * int(shape[1])
