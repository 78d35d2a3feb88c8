"""Tests for the step schedules, on hand-computed tables with edge steps."""

import math

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tunas_tf.layers import schedules

_HUGE = 1 << 32  # Needs int64.


class LinearScheduleTest(parameterized.TestCase, tf.test.TestCase):

  @parameterized.named_parameters(
      ('negative', -500, 1.0),
      ('zero', 0, 1.0),
      ('middle', 5, 0.5),
      ('before_end', 9, 0.1),  # 1 - 9/10
      ('boundary', 10, 0.0),
      ('after', 50, 0.0),
      ('huge', _HUGE, 0.0),
  )
  def test_linear_decay(self, step, expected):
    value = schedules.linear_decay(step, 10)
    self.assertEqual(value.dtype, tf.float32)
    self.assertAllClose(value, expected)

  @parameterized.named_parameters(
      ('negative', -5), ('zero', 0), ('huge', _HUGE))
  def test_linear_decay_zero_steps_is_done(self, step):
    self.assertAllEqual(schedules.linear_decay(step, 0), 0.0)

  @parameterized.named_parameters(
      ('int32', tf.int32, 7), ('int64', tf.int64, 7),
      ('int64_huge', tf.int64, _HUGE))
  def test_linear_decay_tensor_step(self, dtype, step):
    value = schedules.linear_decay(tf.constant(step, dtype), 10)
    self.assertEqual(value.dtype, tf.float32)
    self.assertAllClose(value, 1.0 - min(step, 10) / 10)

  def test_linear_decay_in_tf_function_follows_variable(self):
    step = tf.Variable(0, dtype=tf.int64)
    decay = tf.function(lambda: schedules.linear_decay(step, 4))
    values = []
    for t in [-2, 0, 1, 3, 4, 9]:
      step.assign(t)
      values.append(decay().numpy())
    self.assertAllClose(values, [1.0, 1.0, 0.75, 0.25, 0.0, 0.0])
    self.assertEqual(decay.experimental_get_tracing_count(), 1)

  def test_linear_decay_negative_steps_raises(self):
    with self.assertRaisesRegex(ValueError, r'decay_steps=-3'):
      schedules.linear_decay(0, -3)

  def test_linear_decay_float_step_raises(self):
    with self.assertRaisesRegex(TypeError, r'integer.*float32'):
      schedules.linear_decay(tf.constant(1.5), 10)

  def test_linear_decay_non_scalar_step_raises(self):
    with self.assertRaisesRegex(ValueError, r'scalar.*\(2,\)'):
      schedules.linear_decay(tf.constant([1, 2]), 10)


class CosineDecayTest(parameterized.TestCase, tf.test.TestCase):

  # peak = 2, T = 110, W = 10, so the cosine runs over 100 steps.
  @parameterized.named_parameters(
      ('negative', -5, 0.0),
      ('zero', 0, 0.0),
      ('mid_warmup', 5, 1.0),  # 2 * 5/10
      ('end_warmup', 9, 1.8),  # 2 * 9/10
      ('boundary', 10, 2.0),  # 2 * 0.5 * (1 + cos(0))
      ('quarter', 35, 1.0 + math.sqrt(0.5)),  # 2 * 0.5 * (1 + cos(pi/4))
      ('half', 60, 1.0),  # 2 * 0.5 * (1 + cos(pi/2))
      ('end', 110, 0.0),  # 2 * 0.5 * (1 + cos(pi))
      ('after', 500, 0.0),
      ('huge', _HUGE, 0.0),
  )
  def test_cosine_decay_with_linear_warmup(self, step, expected):
    value = schedules.cosine_decay_with_linear_warmup(2.0, step, 110, 10)
    self.assertEqual(value.dtype, tf.float32)
    self.assertEqual(value.shape, [])
    self.assertAllClose(value, expected, atol=1e-6)

  # peak = 2, T = 100, W = 0: no warm-up, negative steps count as step 0.
  @parameterized.named_parameters(
      ('negative', -5, 2.0),
      ('zero', 0, 2.0),
      ('half', 50, 1.0),
      ('end', 100, 0.0),
      ('huge', _HUGE, 0.0),
  )
  def test_cosine_decay_with_linear_warmup_no_warmup(self, step, expected):
    value = schedules.cosine_decay_with_linear_warmup(2.0, step, 100, 0)
    self.assertAllClose(value, expected, atol=1e-6)

  def test_cosine_decay_with_linear_warmup_tensor_inputs(self):
    value = schedules.cosine_decay_with_linear_warmup(
        tf.constant(2.0), tf.constant(_HUGE, tf.int64), 110, 10)
    self.assertAllClose(value, 0.0, atol=1e-6)
    value = schedules.cosine_decay_with_linear_warmup(
        2.0, tf.constant(5, tf.int32), 110, 10)
    self.assertAllClose(value, 1.0)

  @parameterized.named_parameters(
      ('total_equals_warmup', 10, 10, r'total_steps=10, warmup_steps=10'),
      ('total_below_warmup', 5, 10, r'total_steps=5, warmup_steps=10'),
      ('negative_warmup', 10, -1, r'warmup_steps=-1'),
  )
  def test_cosine_decay_with_linear_warmup_bad_steps_raises(
      self, total_steps, warmup_steps, regex):
    with self.assertRaisesRegex(ValueError, regex):
      schedules.cosine_decay_with_linear_warmup(1.0, 0, total_steps,
                                                warmup_steps)


class RlLearningRateTest(parameterized.TestCase, tf.test.TestCase):

  # base = 0.5, D = 25, T = 125, so progress = (t - 25) / 100.
  @parameterized.named_parameters(
      ('negative', -5, 0.0),
      ('zero', 0, 0.0),
      ('before_delay', 24, 0.0),
      ('boundary', 25, 0.5),  # 0.5 * 10**0
      ('half', 75, 0.5 * math.sqrt(10.0)),  # 0.5 * 10**0.5
      ('end', 125, 5.0),  # 0.5 * 10**1
      ('past_end', 225, 50.0),  # Not clipped: 0.5 * 10**2.
      ('huge', _HUGE, np.inf),  # 0.5 * 10**(~4.3e7) overflows.
  )
  def test_rl_learning_rate(self, step, expected):
    value = schedules.rl_learning_rate(0.5, step, 25, 125)
    self.assertEqual(value.dtype, tf.float32)
    self.assertEqual(value.shape, [])
    self.assertAllClose(value, expected, rtol=1e-5)

  @parameterized.named_parameters(
      ('before_delay', 24, 0.0),
      ('boundary', 25, 0.5),
      ('end', 125, 0.5),
      ('huge', _HUGE, 0.5),
  )
  def test_rl_learning_rate_constant(self, step, expected):
    value = schedules.rl_learning_rate(
        0.5, step, 25, 125, use_exponential_schedule=False)
    self.assertAllClose(value, expected)

  @parameterized.named_parameters(
      ('zero', 0, 1.0),  # No delay: base * 10**0.
      ('one', 1, 10.0),  # T - D = 1, so progress = t.
      ('two', 2, 100.0),
  )
  def test_rl_learning_rate_no_delay_one_step(self, step, expected):
    value = schedules.rl_learning_rate(1.0, step, 0, 1)
    self.assertAllClose(value, expected, rtol=1e-5)

  def test_rl_learning_rate_total_before_delay_uses_denominator_one(self):
    # max(1, 5 - 10) = 1, so progress = t - 10.
    self.assertAllClose(schedules.rl_learning_rate(1.0, 9, 10, 5), 0.0)
    self.assertAllClose(schedules.rl_learning_rate(1.0, 11, 10, 5), 10.0)

  def test_rl_learning_rate_tensor_step_in_graph(self):
    with tf.Graph().as_default():
      step = tf.compat.v1.placeholder(tf.int64, [])
      lr = schedules.rl_learning_rate(tf.constant(0.5), step, 25, 125)
      with self.session() as sess:
        self.assertAllClose(sess.run(lr, {step: 24}), 0.0)
        self.assertAllClose(sess.run(lr, {step: 125}), 5.0, rtol=1e-5)

  @parameterized.named_parameters(
      ('negative_delay', -1, 10, r'delay_steps=-1'),
      ('negative_total', 0, -10, r'total_steps=-10'),
  )
  def test_rl_learning_rate_negative_steps_raises(self, delay_steps,
                                                  total_steps, regex):
    with self.assertRaisesRegex(ValueError, regex):
      schedules.rl_learning_rate(1.0, 0, delay_steps, total_steps)

  @parameterized.named_parameters(
      ('before_delay', 10, 2.0),
      ('delay_end', 25, 2.0),
      ('quarter', 50, 1.5),
      ('end', 125, 0.0),
      ('past_end', 500, 0.0),
  )
  def test_rl_entropy_weight_linear(self, step, expected):
    value = schedules.rl_entropy_weight(2.0, step, 25, 125, 'linear')
    self.assertEqual(value.dtype, tf.float32)
    self.assertEqual(value.shape, [])
    self.assertAllClose(value, expected)

  @parameterized.parameters(0, 25, 125, 500)
  def test_rl_entropy_weight_constant(self, step):
    self.assertAllClose(schedules.rl_entropy_weight(2.0, step, 25, 125), 2.0)

  def test_rl_entropy_weight_total_before_delay_is_off_after_delay(self):
    # max(1, 5 - 10) = 1: full weight up to step 10, nothing from step 11.
    self.assertAllClose(
        schedules.rl_entropy_weight(1.0, 10, 10, 5, 'linear'), 1.0)
    self.assertAllClose(
        schedules.rl_entropy_weight(1.0, 11, 10, 5, 'linear'), 0.0)

  def test_rl_entropy_weight_follows_a_step_variable(self):
    step = tf.Variable(25, dtype=tf.int64)
    weight = tf.function(lambda: schedules.rl_entropy_weight(
        4.0, step, 25, 125, 'linear'))
    self.assertAllClose(weight(), 4.0)
    step.assign(100)
    self.assertAllClose(weight(), 1.0)

  def test_rl_entropy_weight_unknown_schedule_raises(self):
    with self.assertRaisesRegex(ValueError,
                                "Unknown entropy schedule 'cosine'"):
      schedules.rl_entropy_weight(1.0, 0, 25, 125, 'cosine')


if __name__ == '__main__':
  tf.test.main()
