"""Step-indexed schedules: pure functions of the step (a Python int or a
scalar integer tensor; TypeError / ValueError otherwise) returning a scalar
float32 Tensor. Step arithmetic stays in int64, so `1 << 32` loses nothing."""

from __future__ import annotations

import math
import operator
from typing import Union

import tensorflow as tf

Step = Union[int, tf.Tensor, tf.Variable]
Scalar = Union[float, tf.Tensor]


def _non_negative_int(value: int, name: str) -> int:
  """`value` as an int; TypeError if not one, ValueError if negative."""
  try:
    value = operator.index(value)
  except TypeError as e:
    raise TypeError(f'`{name}` must be a Python int, got {value!r}') from e
  if value < 0:
    raise ValueError(f'`{name}` must be >= 0, got {name}={value}')
  return value


def _int64_step(step: Step) -> tf.Tensor:
  """Converts a Python int or scalar integer tensor to a scalar int64 Tensor."""
  step = tf.convert_to_tensor(step)
  if not step.dtype.is_integer:
    raise TypeError(f'`step` must be an integer (int32 or int64), got dtype '
                    f'{step.dtype.name}')
  if step.shape.rank not in (None, 0):
    raise ValueError(f'`step` must be a scalar, got shape {step.shape}')
  return tf.cast(step, tf.int64)


def linear_decay(step: Step, decay_steps: int) -> tf.Tensor:
  """1 - clip(t / N, 0, 1) for N = `decay_steps` > 0, 0 for N == 0.
  Raises ValueError for a negative N."""
  decay_steps = _non_negative_int(decay_steps, 'decay_steps')
  step = _int64_step(step)
  if decay_steps == 0:
    return tf.constant(0.0, tf.float32)
  # Clip in int64 first: t <= 0 gives exactly 1 and t >= N exactly 0.
  clipped = tf.clip_by_value(step, tf.constant(0, tf.int64),
                             tf.constant(decay_steps, tf.int64))
  return 1.0 - tf.cast(clipped, tf.float32) / float(decay_steps)


def cosine_decay_with_linear_warmup(peak_learning_rate: Scalar, step: Step,
                                    total_steps: int,
                                    warmup_steps: int) -> tf.Tensor:
  """Linear warm-up to the peak, then cosine decay to 0 at `total_steps`.

  With t = max(step, 0), T = `total_steps`, W = `warmup_steps`:
  lr = peak * t / W for t < W, else
  lr = peak * 0.5 * (1 + cos(pi * min(t - W, T - W) / (T - W))).
  Raises ValueError unless T > W >= 0.
  """
  warmup_steps = _non_negative_int(warmup_steps, 'warmup_steps')
  total_steps = operator.index(total_steps)
  if total_steps <= warmup_steps:
    raise ValueError(f'Need total_steps > warmup_steps >= 0, got '
                     f'total_steps={total_steps}, warmup_steps={warmup_steps}')
  step = tf.maximum(_int64_step(step), tf.constant(0, tf.int64))
  peak = tf.cast(peak_learning_rate, tf.float32)

  decay_steps = total_steps - warmup_steps
  decay_step = tf.minimum(step - warmup_steps, decay_steps)
  cosine = 0.5 * (1.0 + tf.cos(
      math.pi * tf.cast(decay_step, tf.float32) / float(decay_steps)))
  if warmup_steps == 0:
    return peak * cosine
  warmup = tf.cast(tf.minimum(step, warmup_steps), tf.float32) / float(
      warmup_steps)
  return peak * tf.where(step < warmup_steps, warmup, cosine)


def rl_learning_rate(base_learning_rate: Scalar, step: Step, delay_steps: int,
                     total_steps: int,
                     use_exponential_schedule: bool = True) -> tf.Tensor:
  """The controller's rate: base * 1[t >= D] * 10 ** progress, with
  progress = relu((t - D) / max(1, T - D)) unclipped as in the original (the
  delay: FBNet, Appendix A); without the exponential schedule base * 1[t >= D].
  Raises ValueError for a negative `delay_steps` (D) or `total_steps` (T)."""
  delay_steps = _non_negative_int(delay_steps, 'delay_steps')
  total_steps = _non_negative_int(total_steps, 'total_steps')
  step = _int64_step(step)
  base = tf.cast(base_learning_rate, tf.float32)

  enable = tf.cast(step >= delay_steps, tf.float32)
  learning_rate = base * enable
  if not use_exponential_schedule:
    return learning_rate
  progress = tf.nn.relu(
      tf.cast(step - delay_steps, tf.float32) /
      float(max(1, total_steps - delay_steps)))
  return learning_rate * tf.pow(10.0, progress)


# `--rl_entropy_schedule` values, the default (the original's) first.
ENTROPY_SCHEDULES = ('constant', 'linear')


def rl_entropy_weight(weight: float, step: Step, delay_steps: int,
                      total_steps: int, schedule: str = 'constant'
                      ) -> tf.Tensor:
  """The entropy bonus's weight at step t: `weight` ('constant', the
  original's), or 'linear' weight * (1 - clip((t - D) / max(1, T - D), 0, 1)):
  exploring while the first rewards are mostly cost.

  Raises:
    ValueError: for a `schedule` not in `ENTROPY_SCHEDULES`, a negative
      `delay_steps` (D) or `total_steps` (T).
  """
  if schedule not in ENTROPY_SCHEDULES:
    raise ValueError(f'Unknown entropy schedule {schedule!r}; expected one '
                     f'of {ENTROPY_SCHEDULES}')
  delay_steps = _non_negative_int(delay_steps, 'delay_steps')
  total_steps = _non_negative_int(total_steps, 'total_steps')
  step = _int64_step(step)
  weight = tf.constant(weight, tf.float32)
  if schedule == 'constant':
    return weight
  return weight * linear_decay(step - delay_steps,
                               max(1, total_steps - delay_steps))
