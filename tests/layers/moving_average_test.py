"""Tests for the zero-debiased moving average (arithmetic in comments)."""

from absl.testing import parameterized
import tensorflow as tf

from tunas_tf.layers import moving_average

# momentum 0.9, inputs 1, 2, 4:
#   step 1: num = 0.1*1             = 0.1     den = 0.1          -> 1.0
#   step 2: num = 0.9*0.1  + 0.1*2  = 0.29    den = 0.19         -> 0.29/0.19
#   step 3: num = 0.9*0.29 + 0.1*4  = 0.661   den = 0.271        -> 0.661/0.271
# (den after k steps is 1 - 0.9**k.)
_INPUTS = [1.0, 2.0, 4.0]
_EXPECTED = [1.0, 0.29 / 0.19, 0.661 / 0.271]
_NUMERATOR, _DENOMINATOR = 0.661, 0.271


class MovingAverageTest(parameterized.TestCase, tf.test.TestCase):

  def test_update_first_value_is_input(self):
    average = moving_average.MovingAverage(momentum=0.95)
    value = average.update(0.7)
    self.assertEqual(value.dtype, tf.float32)
    self.assertEqual(value.shape, [])
    # num/den = (0.05*0.7)/0.05; float32 rounding allows an ulp either way.
    self.assertAllClose(value, 0.7, rtol=1e-6, atol=0)

  def test_update_three_steps_eager(self):
    average = moving_average.MovingAverage(momentum=0.9)
    values = [average.update(x).numpy() for x in _INPUTS]
    self.assertAllClose(values, _EXPECTED)
    self.assertEqual(values[0], 1.0)  # 0.1*1 / 0.1, exact for this input.
    self.assertAllClose(average.numerator, _NUMERATOR)
    self.assertAllClose(average.denominator, _DENOMINATOR)
    self.assertAllClose(average.value(), _EXPECTED[-1])

  def test_update_three_steps_in_tf_function(self):
    average = moving_average.MovingAverage(momentum=0.9)
    update = tf.function(average.update)
    values = [update(tf.constant(x)).numpy() for x in _INPUTS]
    self.assertAllClose(values, _EXPECTED)
    self.assertEqual(update.experimental_get_tracing_count(), 1)
    self.assertAllClose(tf.function(average.value)(), _EXPECTED[-1])

  def test_update_three_steps_in_v1_graph(self):
    with tf.Graph().as_default():
      average = moving_average.MovingAverage(momentum=0.9)
      x = tf.compat.v1.placeholder(tf.float32, [])
      update = average.update(x)
      with self.session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        values = [sess.run(update, {x: v}) for v in _INPUTS]
        self.assertAllClose(values, _EXPECTED)
        self.assertAllClose(sess.run(average.value()), _EXPECTED[-1])

  def test_an_inactive_update_keeps_the_average(self):
    average = moving_average.MovingAverage(momentum=0.9)
    average.update(_INPUTS[0])
    kept = average.update(5.0, active=tf.constant(False))
    self.assertAllClose(kept, _EXPECTED[0])
    self.assertAllClose(average.denominator, 0.1)
    values = [average.update(x, active=tf.constant(True)).numpy()
              for x in _INPUTS[1:]]
    self.assertAllClose(values, _EXPECTED[1:])

  def test_value_before_update_is_zero(self):
    average = moving_average.MovingAverage(momentum=0.9)
    value = average.value()
    self.assertEqual(value.dtype, tf.float32)
    self.assertAllEqual(value, 0.0)

  def test_update_zero_momentum_tracks_latest(self):
    average = moving_average.MovingAverage(momentum=0.0)
    for x in _INPUTS:
      self.assertAllClose(average.update(x), x)

  def test_variables_are_owned_and_not_trainable(self):
    average = moving_average.MovingAverage(momentum=0.9, name='baseline')
    self.assertLen(average.variables, 2)
    self.assertEmpty(average.trainable_variables)
    self.assertEqual(average.numerator.dtype, tf.float32)
    self.assertStartsWith(average.numerator.name, 'baseline/numerator')
    self.assertAllEqual(average.denominator, 0.0)

  @parameterized.named_parameters(
      ('negative', -0.1), ('one', 1.0), ('above_one', 1.5))
  def test_moving_average_bad_momentum_raises(self, momentum):
    with self.assertRaisesRegex(ValueError,
                                rf'\[0, 1\).*momentum={momentum}'):
      moving_average.MovingAverage(momentum=momentum)


if __name__ == '__main__':
  tf.test.main()
