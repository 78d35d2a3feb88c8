"""Tests of `runtime/guards.py`: `check_finite` stops a graph on a NaN and
`non_finite_failure` reads its error back; under XLA the assertion is
dropped (why `distribute.train` checks the step's values on the host)."""

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from tunas_tf.runtime import guards


class XlaDropsAssertionsTest(absltest.TestCase):

  def test_check_finite_fails_in_a_graph_and_not_under_xla(self):

    def step(loss, global_step):
      checks = guards.check_finite('model loss', [loss], global_step,
                                   use_tpu=False)
      with tf.control_dependencies(checks):
        return loss + 1.0

    args = (tf.constant(float('nan')), tf.constant(3, tf.int64))
    with self.assertRaises(tf.errors.InvalidArgumentError) as raised:
      tf.function(step)(*args)
    self.assertEqual(guards.non_finite_failure(raised.exception),
                     ('model loss', 3, 'nan'))
    self.assertTrue(np.isnan(tf.function(step, jit_compile=True)(*args)))

if __name__ == '__main__':
  absltest.main()
