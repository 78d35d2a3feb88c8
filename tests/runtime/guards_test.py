"""Tests of `runtime/guards.py`: the host's check of a step's scalars, and
the Estimator's `FiniteHook` reading what host_call queued, on CPU as on TPU
(where the host_call runs behind the session run, in the outfeed thread)."""

import tempfile
import threading
import time

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from tunas_tf.runtime import guards

_FINITE = {'model/loss': 'model loss', 'rlcontroller/reward': 'reward'}


class LineTest(absltest.TestCase):

  def _line(self, values, finite=None):
    """check_finite's error for `values` at step 7, or None for none."""
    try:
      guards.check_finite(values, finite or _FINITE, 7, tempfile.mkdtemp(),
                          'the search')
    except ValueError as e:
      return str(e)
    return None

  def test_the_first_non_finite_scalar_in_the_tasks_order(self):
    values = {'model/loss': 1.0, 'rlcontroller/reward': float('inf'),
              'other': float('nan')}
    self.assertRegex(self._line(values), '^The reward is inf at step 7')
    values['model/loss'] = float('nan')
    self.assertRegex(self._line(values), '^The model loss is nan')
    self.assertIsNone(self._line({'model/loss': 1.0}, {'model/loss': 'loss'}))

  def test_the_line_names_the_value_the_step_and_the_last_checkpoint(self):
    self.assertEqual(
        self._line({'model/loss': 1.0, 'rlcontroller/reward': float('nan')}),
        'The reward is nan at step 7: the search stopped without saving it; '
        'the last good checkpoint is none (none was saved)')


class FiniteHookTest(absltest.TestCase):

  def _run(self, rows, steps_per_run, lag):
    """Session runs of `steps_per_run` steps each, over `rows` (each step's
    [replicas, 2] scalars); every run's steps are queued by another thread
    `lag` seconds after the run started, as a TPU's outfeed thread does."""
    with tf.Graph().as_default():
      global_step = tf.compat.v1.train.get_or_create_global_step()
      step = tf.compat.v1.placeholder(tf.int64, [])
      row = tf.compat.v1.placeholder(tf.float32, [None, 2])
      hook = guards.FiniteHook(_FINITE, tempfile.mkdtemp(), 'the toy')
      queue = hook.enqueue(step, row)
      train_op = global_step.assign_add(steps_per_run)
      with tf.compat.v1.train.SingularMonitoredSession(
          hooks=[hook]) as session:
        raw = session.raw_session()

        def outfeed(first):
          time.sleep(lag)
          for s in range(first, first + steps_per_run):
            raw.run(queue, {step: s, row: rows[s]})

        for first in range(0, len(rows), steps_per_run):
          thread = threading.Thread(target=outfeed, args=(first,))
          thread.start()
          try:
            session.run(train_op)  # Its hook waits for the queued steps.
          finally:
            thread.join()

  def test_a_lagging_host_call_is_waited_for_and_read_to_the_step(self):
    rows = [np.ones([2, 2], np.float32) for _ in range(6)]
    self._run(rows, steps_per_run=3, lag=0.3)  # All finite.
    # A NaN reward on one replica at step 5, in the last run: its mean over
    # replicas is NaN, queued 0.3 s after the run began.
    rows[5] = np.array([[1.0, 0.5], [1.0, np.nan]], np.float32)
    with self.assertRaisesRegex(
        ValueError, r'^The reward is nan at step 5: the toy stopped without '
        'saving it; the last good checkpoint is none'):
      self._run(rows, steps_per_run=3, lag=0.3)

  def test_every_step_of_a_run_is_checked_not_only_its_last(self):
    rows = [np.ones([1, 2], np.float32) for _ in range(3)]
    rows[1] = np.array([[np.inf, 1.0]], np.float32)
    with self.assertRaisesRegex(ValueError, '^The model loss is inf at step '
                                '1: '):
      self._run(rows, steps_per_run=3, lag=0.0)


if __name__ == '__main__':
  absltest.main()
