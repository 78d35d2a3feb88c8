"""Tests for tunas_tf/preemption: signals become a clean stop; a second one
ends the process at once. (The binaries' stops: tests/integration/search_test.py
and tests/integration/train_eval_test.py.)"""

import os
import signal
import subprocess
import sys
import textwrap
import time

from absl.testing import absltest
import pytest
import tensorflow as tf

from tunas_tf.runtime import preemption

# A process that waits in a worker thread inside `stop_on_signal`, as the
# binaries' training does, and says when its stop was asked for.
_WAITER = textwrap.dedent('''
    import sys, time
    from tunas_tf.runtime import preemption
    with preemption.stop_on_signal('waiter') as stop:
      print('ready', flush=True)
      def wait():
        end = time.time() + 60
        while not stop.signal_name and time.time() < end:
          time.sleep(0.05)
        print('stop asked: ' + str(stop.signal_name), flush=True)
        time.sleep(float(sys.argv[1]))  # The step in flight.
      preemption.run_in_thread(wait)
    print('stopped cleanly', flush=True)
    sys.exit(preemption.EXIT_CODE)
''')


def _waiter(step_seconds: float) -> subprocess.Popen:
  process = subprocess.Popen(
      [sys.executable, '-c', _WAITER, str(step_seconds)],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
  assert process.stdout.readline() == 'ready\n'
  return process


class _RunContext:
  stop_requested = False

  def request_stop(self):
    self.stop_requested = True


class StopOnSignalTest(absltest.TestCase):

  def test_first_signal_asks_for_a_stop_and_restores_default_actions(self):
    before = signal.getsignal(signal.SIGTERM)
    with preemption.stop_on_signal('test') as stop:
      self.assertIsNone(stop.signal_name)
      with self.assertLogs('absl', 'WARNING') as logs:
        os.kill(os.getpid(), signal.SIGINT)
      self.assertEqual(stop.signal_name, 'SIGINT')
      self.assertIn('test: SIGINT received: finishing the step in flight',
                    logs.output[0])
      # A second signal would take its default action: end the process.
      for s in preemption.SIGNALS:
        self.assertEqual(signal.getsignal(s), signal.SIG_DFL)
    self.assertEqual(signal.getsignal(signal.SIGTERM), before)

  def test_hook_stops_after_the_run_or_raises_when_the_directory_is_lost(self):
    lost = []
    stop = preemption.StopRequest(lambda: lost[0] if lost else None)
    hook, context = stop.hook(), _RunContext()
    hook.after_run(context, None)
    self.assertFalse(context.stop_requested)
    stop.signal_name = 'SIGTERM'
    hook.after_run(context, None)
    self.assertTrue(context.stop_requested)
    lost.append('runs/a was taken over by pid 7 on host h')
    with self.assertRaisesRegex(ValueError, 'taken over by pid 7'):
      hook.after_run(_RunContext(), None)
    self.assertIsInstance(hook, tf.compat.v1.train.SessionRunHook)

  @pytest.mark.estimator
  def test_tpu_estimators_sigint_hook_leaves_our_handler_from_a_thread(self):
    # On TPU, TPUEstimator adds this hook; unpatched, its before_run fails
    # in a worker thread ("signal only works in main thread") and, in the
    # main thread, would reset SIGINT to its default action.
    from tensorflow_estimator.python.estimator.tpu import tpu_estimator  # pylint: disable=g-import-not-at-top
    preemption.keep_handlers_under_tpu_estimator()
    with preemption.stop_on_signal('test'):
      ours = signal.getsignal(signal.SIGINT)

      def run_hook():
        hook = tpu_estimator.InstallSignalHandlerHook()
        hook.before_run(None)
        hook.end(None)

      preemption.run_in_thread(run_hook)
      self.assertIs(signal.getsignal(signal.SIGINT), ours)

  def test_run_in_thread_returns_or_raises(self):
    self.assertEqual(preemption.run_in_thread(lambda: 3), 3)

    def fail():
      raise KeyError('x')

    with self.assertRaises(KeyError):
      preemption.run_in_thread(fail)

  def test_line(self):
    stop = preemption.StopRequest()
    stop.raise_if_stopped(12)  # No signal: nothing.
    stop.signal_name = 'SIGTERM'
    with self.assertRaisesRegex(
        preemption.Stopped, '^stopped at step 12 by SIGTERM, checkpoint saved: '
        'run the same command to resume$'):
      stop.raise_if_stopped(12)


class RealProcessTest(absltest.TestCase):

  def test_one_signal_lets_the_step_end(self):
    process = _waiter(step_seconds=1.0)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    self.assertEqual(process.returncode, preemption.EXIT_CODE, err)
    self.assertEqual(out, 'stop asked: SIGTERM\nstopped cleanly\n')
    self.assertIn('waiter: SIGTERM received', err)

  def test_a_second_signal_ends_the_process_at_once(self):
    process = _waiter(step_seconds=60.0)
    process.send_signal(signal.SIGTERM)
    self.assertEqual(process.stdout.readline(), 'stop asked: SIGTERM\n')
    start = time.time()
    process.send_signal(signal.SIGINT)
    process.wait(timeout=30)
    self.assertLess(time.time() - start, 10)
    self.assertEqual(process.returncode, -signal.SIGINT)


if __name__ == '__main__':
  absltest.main()
