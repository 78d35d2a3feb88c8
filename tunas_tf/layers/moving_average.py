"""A zero-debiased exponential moving average (the RL reward baseline), as
the original's `update_exponential_moving_average`: after k updates
num / den = sum_i (1 - m) m^(k-i) x_i / (1 - m^k); the first value is the
first input."""

from __future__ import annotations

from typing import Optional, Union

import tensorflow as tf


class MovingAverage(tf.Module):
  """Zero-debiased exponential moving average of a scalar.

  Owns float32 `numerator` and `denominator` variables (0.0 at first); create
  it outside any `tf.function`. `momentum`: m in [0, 1), the old average's
  weight per update. Raises ValueError outside [0, 1).
  """

  def __init__(self, momentum: float, name: Optional[str] = None):
    super().__init__(name=name)
    if not 0.0 <= momentum < 1.0:
      raise ValueError(f'`momentum` must be in [0, 1), got momentum={momentum}')
    self._momentum = float(momentum)
    with self.name_scope:
      self.numerator = tf.Variable(
          0.0, trainable=False, dtype=tf.float32, name='numerator')
      self.denominator = tf.Variable(
          0.0, trainable=False, dtype=tf.float32, name='denominator')

  @property
  def momentum(self) -> float:
    """The momentum m, a Python float."""
    return self._momentum

  def update(self, value: Union[float, tf.Tensor],
             active: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Folds `value` in (num <- m num + (1 - m) x; den <- m den + (1 - m)) and
    returns num / den, a scalar float32 Tensor (in a TF1 graph evaluating it
    runs the update). With `active` (a scalar bool Tensor) False the
    variables keep their values (`assign_if`) and the old average returns."""
    m = self._momentum
    x = tf.cast(value, tf.float32)
    numerator = assign_if(self.numerator, m * self.numerator + (1.0 - m) * x,
                          active)
    denominator = assign_if(self.denominator,
                            m * self.denominator + (1.0 - m), active)
    return tf.convert_to_tensor(numerator) / tf.convert_to_tensor(denominator)

  def value(self) -> tf.Tensor:
    """The debiased average, a scalar float32 Tensor (0.0 before any update)."""
    return tf.math.divide_no_nan(self.numerator.read_value(),
                                 self.denominator.read_value())


def assign_if(variable: tf.Variable, value: tf.Tensor,
              active: Optional[tf.Tensor] = None) -> tf.Tensor:
  """`variable.assign(value)`, or with a scalar bool `active` the value kept
  where it is False (one policy of several updating on its turn only)."""
  if active is not None:
    value = tf.where(active, value, variable)
  return variable.assign(value)
