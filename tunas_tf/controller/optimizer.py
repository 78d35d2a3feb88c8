"""The controller's Adam step, as the original's `apply_adam`: v is the mean
of squared per-replica gradients; the bias-correction powers are variables
starting at beta1, beta2; the entropy bonus is a separate SGD step at the
uncorrected rate; moments and powers update even at learning rate 0."""

from __future__ import annotations

import functools
from typing import Callable, List, Optional, Sequence

import tensorflow as tf

from tunas_tf.layers import moving_average
from tunas_tf.runtime import replicas

_assign = moving_average.assign_if


class ControllerAdam(tf.Module):
  """Adam slots (m, v per variable, two bias-correction powers) and the step;
  `epsilon` is added outside sqrt(v); ValueError for betas outside [0, 1) or
  epsilon <= 0."""

  def __init__(self, variables: Sequence[tf.Variable], beta1: float = 0.0,
               beta2: float = 0.999, epsilon: float = 1e-8,
               name: str = 'controller_adam'):
    super().__init__(name=name)
    if not 0.0 <= beta1 < 1.0 or not 0.0 <= beta2 < 1.0:
      raise ValueError(f'Adam betas must be in [0, 1), got beta1={beta1}, '
                       f'beta2={beta2}')
    if epsilon <= 0:
      raise ValueError(f'Adam epsilon must be > 0, got {epsilon}')
    self._variables = list(variables)
    self._beta1, self._beta2, self._epsilon = beta1, beta2, epsilon
    # Slots are named after their variables (`<name>/m/<variable name>`), so
    # checkpoints do not depend on the order the variables come in.
    with self.name_scope:
      # Callable initial values, as `reinforce.Controller`'s.
      self.m, self.v = ([
          tf.Variable(functools.partial(tf.zeros, v.shape, v.dtype),
                      trainable=False, name=f"{slot}/{v.name.split(':')[0]}")
          for v in self._variables] for slot in 'mv')
      self.beta1_power, self.beta2_power = (
          tf.Variable(beta, trainable=False, dtype=tf.float32,
                      name=f'beta{k}_power')
          for k, beta in ((1, beta1), (2, beta2)))

  def apply(self, grads: Sequence[tf.Tensor], learning_rate,
            regularization_grads: Optional[Sequence[tf.Tensor]] = None,
            active: Optional[tf.Tensor] = None) -> tf.Operation:
    """One step, in the per-replica step (moments average over replicas);
    the engine counts the global step.

    Args:
      grads: per-replica gradients, one per variable (None counts as zero).
      learning_rate: scalar float32 (0 during the RL delay).
      regularization_grads: per-replica entropy-term gradients, or None.
      active: None, or a scalar bool; False keeps every variable and slot
        (one policy of several, on another's turn).
    """
    lr = tf.cast(learning_rate, tf.float32)
    # lr_t = lr * sqrt(1 - beta2^k) / (1 - beta1^k), with beta^k the powers.
    lr_t = lr * tf.sqrt(1.0 - self.beta2_power) / (1.0 - self.beta1_power)
    grads = [g if g is not None else tf.zeros_like(var)
             for g, var in zip(grads, self._variables)]
    regs = [i for i, r in enumerate(regularization_grads or [])
            if r is not None]
    n = len(grads)
    # mean g, mean g^2 (square, then average) and mean r, in one reduction.
    averaged = replicas.means(grads + [tf.square(g) for g in grads] +
                              [regularization_grads[i] for i in regs])
    mean_reg = dict(zip(regs, averaged[2 * n:]))
    updates = []
    for i, var in enumerate(self._variables):
      mean_g, mean_g2 = averaged[i], averaged[n + i]
      m = _assign(self.m[i], self._beta1 * self.m[i] +
                  (1 - self._beta1) * mean_g, active)
      v = _assign(self.v[i], self._beta2 * self.v[i] +
                  (1 - self._beta2) * mean_g2, active)
      step = _subtract(var, lr_t * m / (tf.sqrt(v) + self._epsilon), active)
      if i in mean_reg:
        with tf.control_dependencies([step]):
          step = _subtract(var, lr * mean_reg[i], active)
      updates.append(step)
    with tf.control_dependencies(updates):
      powers = [_assign(power, power * beta, active) for power, beta in (
          (self.beta1_power, self._beta1), (self.beta2_power, self._beta2))]
    return tf.group(*powers)


def _subtract(variable: tf.Variable, delta: tf.Tensor,
              active: Optional[tf.Tensor]) -> tf.Tensor:
  """variable -= delta (`assign_if`'s rule when `active` is given)."""
  if active is None:
    return variable.assign_sub(delta)
  return _assign(variable, variable - delta, active)


def gradients(loss: tf.Tensor, variables: Sequence[tf.Variable],
              transform: Optional[Callable[[List[tf.Tensor]], List[tf.Tensor]]]
              = None) -> List[Optional[tf.Tensor]]:
  """Gradients of `loss` (graph mode), optionally transformed (the barrier)."""
  grads = tf.compat.v1.gradients(loss, list(variables))
  if transform is not None:
    transformed = iter(transform([g for g in grads if g is not None]))
    grads = [next(transformed) if g is not None else None for g in grads]
  return grads
