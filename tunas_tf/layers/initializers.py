"""Initial values of weights. With a seed a value is fixed by (seed, variable
name) through stateless ops, whatever came before; without one the global
generator draws."""

from __future__ import annotations

import math
import zlib
from typing import List, Optional, Sequence

import tensorflow as tf

from tunas_tf.search_space import naming


def name_key(name: str) -> int:
  """crc32(name) & 0x7fffffff: the one key of draws by name (initial values,
  dropout masks, the controller's draws)."""
  return zlib.crc32(name.encode()) & 0x7fffffff


def stateless_seed(seed: int, name: str) -> List[int]:
  """The stateless seed of variable `name`: [seed, `name_key(name)`]."""
  return [int(seed), name_key(name)]


def normal(shape: Sequence[int], stddev: float, seed: Optional[int] = None,
           name: str = '', mean: float = 0.0) -> tf.Tensor:
  """A float32 N(mean, stddev^2) draw; with an int `seed`, fixed by (`seed`,
  `name`), else the global generator's."""
  if seed is None:
    return tf.random.normal(shape, mean, stddev)
  return tf.random.stateless_normal(shape, stateless_seed(seed, name), mean,
                                    stddev)


def truncated_normal(shape: Sequence[int], stddev: float,
                     seed: Optional[int] = None,
                     name: str = '') -> tf.Tensor:
  """A float32 N(0, stddev^2) draw truncated to +-2 stddev (values of stddev
  `stddev * TRUNCATED_NORMAL_STDDEV`); `seed`, `name` as `normal`."""
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
  """A truncated normal float32 draw whose values have stddev `stddev`."""
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
