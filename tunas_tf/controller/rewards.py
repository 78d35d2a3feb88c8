"""Reward functions that trade quality Q against an estimated cost c.

As the original's, with target T and exponent beta (negative): `abs` adds
beta * |c / T - 1| to Q (penalises missing the target either side); `mnas`
multiplies Q by (c / T) ** beta (also rewards being under it); `mnas_hard`
by min((c / T) ** beta, 1) (only penalises being over it).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Union

import numpy as np
import tensorflow as tf

from tunas_tf.io import checks

REWARD_ABS = 'abs'
REWARD_MNAS = 'mnas'
REWARD_MNAS_HARD = 'mnas_hard'
REWARDS = (REWARD_ABS, REWARD_MNAS, REWARD_MNAS_HARD)
# beta of a memory limit's `mnas_hard` factor on Q: MnasNet's own for a hard
# constraint (alpha 0, beta -1), so a sample x% over it loses about x% of Q,
# whatever the cost term's exponent (which may be 0).
LIMIT_EXPONENT = -1.0

NumberOrTensor = Union[float, np.ndarray, tf.Tensor]


@dataclasses.dataclass(frozen=True)
class RewardStats:
  """The reward for REINFORCE, c / T, and the factor (`mnas`, `mnas_hard`)
  or additive penalty (`abs`) applied to Q."""
  reward: Any
  cost_ratio: Any
  cost_adjustment: Any


def _formula(math, quality, cost, target, exponent, kind: str) -> RewardStats:
  """The module docstring's formulas, in `math` (NumPy or `tf.math`)."""
  ratio = cost / target
  if kind == REWARD_ABS:
    adjustment = exponent * abs(ratio - 1.0)
    return RewardStats(quality + adjustment, ratio, adjustment)
  adjustment = ratio**exponent
  if kind == REWARD_MNAS_HARD:
    adjustment = math.minimum(adjustment, 1.0)
  return RewardStats(quality * adjustment, ratio, adjustment)


def compute_reward(quality: NumberOrTensor, cost: NumberOrTensor,
                   target: NumberOrTensor, exponent: NumberOrTensor,
                   kind: str) -> RewardStats:
  """The module docstring's reward of Q `quality`, c `cost`, T `target` (> 0)
  and beta `exponent`: `RewardStats` of Python floats, float64 arrays, or
  (if any input is a tensor) float32 tensors; ValueError for an unknown
  `kind` or a statically known target <= 0."""
  checks.one_of('reward', kind, REWARDS)
  static = tf.get_static_value(target) if tf.is_tensor(target) else target
  if static is not None and np.any(np.asarray(static) <= 0):
    raise ValueError(f'The cost target must be > 0, got target={static}')
  inputs = (quality, cost, target, exponent)
  if any(tf.is_tensor(x) for x in inputs):
    return _formula(tf.math, *(tf.cast(x, tf.float32) for x in inputs), kind)
  stats = _formula(np, *(np.asarray(x, np.float64) for x in inputs), kind)
  return RewardStats(*(float(v) if np.ndim(v) == 0 else v
                       for v in dataclasses.astuple(stats)))
