"""A zero-debiased exponential moving average (the RL reward baseline).

The original's `update_exponential_moving_average`
(`tunas/custom_layers.py`). The average keeps a numerator and a denominator
that both start at 0 and decay with the same momentum, so their ratio is the
EMA divided by its bias (1 - m^k):

  after k updates: num / den = sum_i (1 - m) m^(k-i) x_i / (1 - m^k)

The first value therefore equals the first input, with no drift from a zero
initial value.
"""

from __future__ import annotations

from typing import Optional, Union

import tensorflow as tf


class MovingAverage(tf.Module):
  """Zero-debiased exponential moving average of a scalar.

  Owns two non-trainable scalar float32 variables, `numerator` and
  `denominator`, both initialised to 0.0. Create it outside any
  `tf.function`; `update` and `value` work eagerly, inside `tf.function` and
  in a TF1 graph (run `tf.compat.v1.global_variables_initializer()` there).

  Example:

    baseline = MovingAverage(momentum=0.95)
    baseline.update(0.5)  # 0.5
    baseline.update(1.0)  # (0.05 * 0.95 * 0.5 + 0.05 * 1.0) / (1 - 0.95**2)

  Args:
    momentum: m in [0, 1), the weight kept by the old average at each update;
      0 makes the average the latest value.
    name: module name (default: the class name in snake case).

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

  def update(self, value: Union[float, tf.Tensor]) -> tf.Tensor:
    """Folds in one value and returns the debiased average including it.

    num <- m * num + (1 - m) * x;  den <- m * den + (1 - m);  returns num / den
    (both read after the update).

    Args:
      value: x, a Python float or a scalar float Tensor (cast to float32).

    Returns:
      Scalar float32 Tensor, the average after this update. In a TF1 graph,
      evaluating it runs the update.
    """
    m = self._momentum
    x = tf.cast(value, tf.float32)
    numerator = self.numerator.assign(m * self.numerator + (1.0 - m) * x)
    denominator = self.denominator.assign(m * self.denominator + (1.0 - m))
    return tf.convert_to_tensor(numerator) / tf.convert_to_tensor(denominator)

  def value(self) -> tf.Tensor:
    """Returns the current debiased average without updating it.

    Returns:
      Scalar float32 Tensor: num / den, or 0.0 before the first update (when
      den is 0), without dividing by zero.
    """
    return tf.math.divide_no_nan(self.numerator.read_value(),
                                 self.denominator.read_value())
