"""A zero-debiased exponential moving average (the RL reward baseline).

The original's `update_exponential_moving_average`: a numerator and a
denominator start at 0 and decay with the same momentum, so after k updates
num / den = sum_i (1 - m) m^(k-i) x_i / (1 - m^k); the first value is the
first input.
"""

from __future__ import annotations

from typing import Optional, Union

import tensorflow as tf


class MovingAverage(tf.Module):
  """Zero-debiased exponential moving average of a scalar.

  Owns two non-trainable scalar float32 variables, `numerator` and
  `denominator`, both 0.0 at first. Create it outside any `tf.function`.

  Args:
    momentum: m in [0, 1), the weight kept by the old average at each update;
      0 makes the average the latest value.

  Raises:
    ValueError: if `momentum` is not in [0, 1).
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
    """Folds in one value and returns the debiased average including it.

    num <- m * num + (1 - m) * x;  den <- m * den + (1 - m);  returns num / den.

    Args:
      value: x, a Python float or a scalar float Tensor (cast to float32).
      active: None, or a scalar bool Tensor: when False the variables keep
        their values (`assign_if`) and the average returned is the old one.

    Returns:
      Scalar float32 Tensor, the average after this update. In a TF1 graph,
      evaluating it runs the update.
    """
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
