"""A NaN or Inf loss or reward stops `train_search` on either engine: one
line, exit 1, and the newest checkpoint holds no non-finite value.

The check is the host's, from the step's scalars (`runtime.guards`): the
distribute engine's loop, the Estimator's host_call as on TPU, where XLA
would drop an assertion in the step. The NaN reward: a cost target so small
that the cost ratio overflows to inf, times the exponent 0 (`abs`: Q + 0 *
|inf - 1|), at step 0. The NaN (or inf) loss: a huge learning rate, finite
weights after step 0 and an overflowing loss at step 1 (NaN under Eigen's
kernels, inf under oneDNN's: the same overflow summed in another order).
A NaN on one replica of two: `lifecycle_test`'s toy, on each engine.
"""

import os
import re
import tempfile

from absl.testing import absltest
import numpy as np
import pytest
import tensorflow as tf

from tests.testing import forked
from tests.testing import searches

_FLAGS = ('--max_steps=4', '--train_batch_size=16',
          '--tpu_iterations_per_loop=1', '--save_checkpoints_steps=1')
# (what, its flags, the line's value and step).
_CASES = (('reward', ('--rl_cost_model_target=1e-38',
                      '--rl_cost_model_exponent=0'), 'nan', 0),
          ('model loss', ('--model_learning_rate=1e30',),
           '-?(nan|inf)', 1))


class _NonFinite:
  """The two cases on `ENGINE`."""

  ENGINE = None

  def test_a_non_finite_reward_or_loss_stops_in_one_line(self):
    for what, flags, value, step in _CASES:
      model_dir = tempfile.mkdtemp()
      done = forked.run_one(searches.search_command(
          model_dir, f'--engine={self.ENGINE}', *_FLAGS, *flags),
                            env=searches.QUIET, timeout=600)
      last = done.stderr.strip().splitlines()[-1]
      self.assertEqual(done.returncode, 1, done.stderr[-3000:])
      self.assertRegex(
          last, f'^train_search: The {what} is {value} at step {step}: the '
          'search stopped without saving it; the last good checkpoint is '
          f'{re.escape(model_dir)}/model.ckpt-{step}$')
      self.assertNotIn('Traceback', done.stderr)
      latest = tf.train.latest_checkpoint(model_dir)
      self.assertEqual(latest, os.path.join(model_dir, f'model.ckpt-{step}'))
      reader = searches.reader(latest)
      dtypes = reader.get_variable_to_dtype_map()
      for name in reader.get_variable_to_shape_map():
        if dtypes[name].is_floating:
          self.assertTrue(np.all(np.isfinite(reader.get_tensor(name))),
                          (what, name))


@pytest.mark.estimator
class EstimatorTest(_NonFinite, absltest.TestCase):
  ENGINE = 'estimator'


class DistributeTest(_NonFinite, absltest.TestCase):
  ENGINE = 'distribute'


if __name__ == '__main__':
  absltest.main()
