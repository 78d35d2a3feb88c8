"""Tests of `run_lock`: one process per run directory, local and remote."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from unittest import mock
import uuid

from absl.testing import absltest
from absl.testing import parameterized
import tensorflow as tf

from tunas_tf.io import files
from tunas_tf.runtime import run_lock

# The worktree's root (its `tunas_tf`, whatever the venv has installed).
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_HOST = socket.gethostname()
_UTC = r'\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC'
# A process that acquires the directory in argv[1], says so, and waits.
_HOLDER = """
import sys, time
from tunas_tf.runtime import run_lock
run_lock.acquire(sys.argv[1], 'train_search')
print('held', flush=True)
time.sleep(60)
"""


def _start_time(pid):
  with open(f'/proc/{pid}/stat') as f:
    stat = f.read()
  return int(stat[stat.rindex(')') + 2:].split()[19])


def _lease(**overrides):
  now = time.time()
  lease = dict(host=_HOST, pid=os.getpid(), start_time=None, since=now - 100,
               heartbeat=now, token='f' * 32, binary='train_eval')
  lease.update(overrides)
  return json.dumps(lease)


def _eventually(condition, timeout=5.0):
  deadline = time.monotonic() + timeout
  while not condition():
    if time.monotonic() > deadline:
      raise AssertionError(f'not true within {timeout} s: {condition}')
    time.sleep(0.01)


class _Test(parameterized.TestCase):
  """Helpers: a model dir, its lock file, live processes to name."""

  def setUp(self):
    super().setUp()
    root = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, root)
    self.model_dir = os.path.join(root, 'runs', 'a')
    self.path = os.path.join(self.model_dir, run_lock.LOCK_FILE)

  def read(self):
    with open(self.path) as f:
      return json.load(f)

  def write(self, text):
    os.makedirs(self.model_dir, exist_ok=True)
    with open(self.path, 'w') as f:
      f.write(text)

  def acquire(self, binary='train_search', **kwargs):
    lock = run_lock.acquire(self.model_dir, binary, **kwargs)
    self.addCleanup(lock.release)
    return lock

  def sleeper(self):
    """A live process on this host: (pid, start time)."""
    process = subprocess.Popen(['sleep', '60'])
    self.addCleanup(process.wait)
    self.addCleanup(process.kill)
    return process.pid, _start_time(process.pid)

  def assert_held(self, pattern, **kwargs):
    with self.assertRaisesRegex(run_lock.Held, pattern) as refusal:
      run_lock.acquire(self.model_dir, 'train_eval', **kwargs)
    self.assertNotIn('\n', str(refusal.exception))
    return str(refusal.exception)

  def assert_taken_over(self, reason, **kwargs):
    """Acquires, checking the warning says `reason` (a regex)."""
    with self.assertLogs('absl', level='WARNING') as logs:
      lock = self.acquire('train_eval', **kwargs)
    self.assertRegex(lock.took_over, reason)
    self.assertEqual([r.getMessage() for r in logs.records], [lock.took_over])
    self.assertEqual(self.read()['pid'], os.getpid())
    return lock


class AcquireTest(_Test):

  def test_writes_the_lease_and_release_removes_it(self):
    before = time.time()
    lock = self.acquire(heartbeat_seconds=60)
    lease = self.read()
    self.assertEqual(set(lease), {'host', 'pid', 'start_time', 'since',
                                  'heartbeat', 'token', 'binary'})
    self.assertEqual(lease['host'], _HOST)
    self.assertEqual(lease['pid'], os.getpid())
    self.assertEqual(lease['start_time'], _start_time(os.getpid()))
    self.assertBetween(lease['since'], before, time.time())
    self.assertEqual(lease['heartbeat'], lease['since'])
    self.assertRegex(lease['token'], r'^[0-9a-f]{32}$')
    self.assertEqual(lease['binary'], 'train_search')
    self.assertIsNone(lock.lost())
    self.assertIsNone(lock.took_over)
    lock.release()
    self.assertFalse(os.path.exists(self.path))
    lock.release()  # Idempotent.
    with self.acquire('train_eval'):
      self.assertEqual(self.read()['binary'], 'train_eval')
    self.assertFalse(os.path.exists(self.path))
    self.assertEqual(os.listdir(self.model_dir), [])

  def test_refuses_another_live_process_on_this_host(self):
    self.acquire()
    before = self.read()
    pid, start_time = self.sleeper()
    self.assert_held(
        rf'^{re.escape(self.model_dir)} is in use by train_search on host '
        rf'{re.escape(_HOST)}, pid {os.getpid()}, since {_UTC} \(heartbeat \d+ '
        r's ago\); wait for it to end, or stop it: a holder that is gone is '
        r'taken over$', identity=run_lock.Holder(_HOST, pid, start_time))
    self.assertEqual(self.read(), before)

  def test_refuses_a_second_acquire_in_this_process(self):
    self.acquire()
    self.assert_held(rf'in use by train_search on host .*, pid {os.getpid()},')

  def test_takes_over_a_killed_process(self):
    holder = subprocess.Popen([sys.executable, '-c', _HOLDER, self.model_dir],
                              cwd=_REPO, stdout=subprocess.PIPE, text=True)
    self.addCleanup(holder.wait)
    self.addCleanup(holder.kill)
    self.assertEqual(holder.stdout.readline(), 'held\n')
    holder.stdout.close()
    self.assert_held(rf'in use by train_search on host {re.escape(_HOST)}, '
                     rf'pid {holder.pid}, since ')
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    lock = self.assert_taken_over(
        f'pid {holder.pid} on host {re.escape(_HOST)} is gone$')
    self.assertRegex(lock.took_over,
                     rf'^Taking over {re.escape(self.model_dir)} from '
                     rf'train_search on host .*, pid {holder.pid}, '
                     rf'since {_UTC}:')

  def test_takes_over_a_zombie(self):
    process = subprocess.Popen(['sleep', '60'])
    self.addCleanup(process.wait)
    self.write(_lease(pid=process.pid, start_time=_start_time(process.pid)))
    process.kill()
    # Waits until it has exited, leaving it unreaped (a zombie).
    os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
    self.assert_taken_over(
        f'pid {process.pid} on host {re.escape(_HOST)} has exited')

  def test_takes_over_a_reused_pid(self):
    pid, start_time = self.sleeper()
    self.write(_lease(pid=pid, start_time=start_time))
    self.assert_held(rf'in use by train_eval on host .*, pid {pid}, ')
    self.write(_lease(pid=pid, start_time=start_time - 1))
    self.assert_taken_over(
        f'pid {pid} on host {re.escape(_HOST)} is gone '
        r'\(the pid now names a process started later\)$')

  def test_takes_over_a_previous_incarnation_of_this_pid(self):
    self.write(_lease(start_time=_start_time(os.getpid())))
    self.assert_taken_over('is this process: the lease is a previous '
                           "incarnation's")

  def test_another_host_is_alive_while_its_heartbeat_is_fresh(self):
    self.write(_lease(host='elsewhere', pid=4242, heartbeat=time.time() - 10))
    self.assert_held(r'in use by train_eval on host elsewhere, pid 4242, since '
                     rf'{_UTC} \(heartbeat 1\d s ago\)', stale_seconds=300)
    self.write(_lease(host='elsewhere', pid=4242, heartbeat=time.time() - 412))
    self.assert_taken_over(r': no heartbeat for 41\d s \(stale after 300 s\)$',
                           stale_seconds=300)

  @parameterized.parameters('', '{"host": "h", "pid"', '[]', '{}',
                            _lease(pid=0), _lease(pid=True),
                            _lease(host=None), b'\xff\xfe')
  def test_an_unreadable_lock_file_is_refused_until_stale(self, text):
    os.makedirs(self.model_dir)
    with open(self.path, 'wb') as f:
      f.write(text.encode() if isinstance(text, str) else text)
    self.assert_held(
        rf'^{re.escape(self.model_dir)} may be in use: .*run\.lock is '
        r'unreadable \(.*\) and \d+ s old, as while a process creates it; '
        r'if no run uses .*, remove .*run\.lock, or wait: it is taken over '
        r'once 300 s old$')
    old = time.time() - 400
    os.utime(self.path, (old, old))
    self.assert_taken_over(r'run\.lock is unreadable \(.*\) and 4\d\d s old$')

  def test_a_takeover_that_moves_a_fresh_lease_puts_it_back(self):
    # Another process took over the dead holder between our read and move.
    self.write(_lease(token='a' * 32))
    self.assertFalse(files.replace_unchanged(self.path, _lease(token='0' * 32),
                                             'ours'))
    self.assertEqual(self.read()['token'], 'a' * 32)
    self.assertEqual(os.listdir(self.model_dir), [run_lock.LOCK_FILE])

  def test_a_forked_child_leaves_the_lease_alone(self):
    # A child inherits the atexit release; the lease is its parent's.
    lock = self.acquire()
    pid = os.fork()
    if pid == 0:
      code = 1
      try:
        lock.release()
        code = 0
      finally:
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    self.assertEqual(os.waitstatus_to_exitcode(status), 0)
    self.assertEqual(self.read()['pid'], os.getpid())

  @parameterized.parameters(
      (dict(heartbeat_seconds=0), r'heartbeat_seconds must be > 0, got 0'),
      (dict(heartbeat_seconds=10, stale_seconds=10),
       r'stale_seconds must be > heartbeat_seconds \(10\), got 10'),
      (dict(settle_seconds=-1), r'settle_seconds must be >= 0, got -1'))
  def test_bad_settings(self, kwargs, message):
    with self.assertRaisesRegex(ValueError, message):
      run_lock.acquire(self.model_dir, 'train_search', **kwargs)


class HeartbeatTest(_Test):

  def test_rewrites_the_heartbeat(self):
    lock = self.acquire(heartbeat_seconds=0.02, stale_seconds=1)
    first = self.read()
    _eventually(lambda: self.read()['heartbeat'] > first['heartbeat'])
    now = self.read()
    self.assertEqual({k: v for k, v in now.items() if k != 'heartbeat'},
                     {k: v for k, v in first.items() if k != 'heartbeat'})
    self.assertIsNone(lock.lost())

  def test_a_takeover_by_another_process_is_lost(self):
    lock = self.acquire(heartbeat_seconds=0.02, stale_seconds=1)
    theirs = _lease(host='elsewhere', pid=4242)
    files.write_text(theirs, self.path)
    _eventually(lambda: lock.lost() is not None)
    self.assertRegex(lock.lost(),
                     rf'^{re.escape(self.model_dir)} was taken over by '
                     rf'train_eval on host elsewhere, pid 4242, since {_UTC}; '
                     r'this process no longer holds it$')
    time.sleep(0.1)  # Five heartbeats: none of them writes.
    lock.release()
    with open(self.path) as f:
      self.assertEqual(f.read(), theirs)

  def test_a_removed_lock_file_is_written_again(self):
    lock = self.acquire(heartbeat_seconds=0.02, stale_seconds=1)
    token = self.read()['token']
    os.remove(self.path)
    # Created, then written: wait for the lease, not only the file.
    _eventually(lambda: os.path.exists(self.path) and
                os.path.getsize(self.path) > 0)
    self.assertEqual(self.read()['token'], token)
    self.assertIsNone(lock.lost())

  def test_an_io_error_is_logged_and_retried(self):
    lock = self.acquire(heartbeat_seconds=0.02, stale_seconds=1)
    with self.assertLogs('absl', level='WARNING') as logs:
      with mock.patch.object(files, 'write_text',
                             side_effect=OSError('disk full')):
        _eventually(lambda: logs.records)
    self.assertRegex(logs.records[0].getMessage(),
                     r'^Heartbeat of .*run\.lock failed \(retrying in 0.02 '
                     r's\): disk full$')
    written = self.read()['heartbeat']
    _eventually(lambda: self.read()['heartbeat'] > written)
    self.assertIsNone(lock.lost())


class RemoteTest(_Test):
  """The same through tf.io.gfile, on TensorFlow's in-process ram://."""

  def setUp(self):
    super().setUp()
    self.model_dir = f'ram://run_lock_test/{uuid.uuid4().hex}/runs/a'
    self.path = f'{self.model_dir}/{run_lock.LOCK_FILE}'

  def read(self):
    with tf.io.gfile.GFile(self.path) as f:
      return json.load(f)

  def write(self, text):
    # Not a plain GFile write: ram:// appends to an existing file.
    files.write_text(text, self.path)

  def acquire(self, binary='train_search', **kwargs):
    kwargs.setdefault('settle_seconds', 0)
    return super().acquire(binary, **kwargs)

  def assert_held(self, pattern, **kwargs):
    kwargs.setdefault('settle_seconds', 0)
    return super().assert_held(pattern, **kwargs)

  def test_acquire_refuse_release(self):
    lock = self.acquire()
    self.assertEqual(self.read()['pid'], os.getpid())
    pid, start_time = self.sleeper()
    self.assert_held(rf'in use by train_search on host .*, pid {os.getpid()},',
                     identity=run_lock.Holder(_HOST, pid, start_time))
    lock.release()
    self.assertFalse(tf.io.gfile.exists(self.path))

  def test_takes_over_a_gone_holder(self):
    self.write(_lease(host='elsewhere', pid=4242, heartbeat=time.time() - 10))
    self.assert_held(r'in use by train_eval on host elsewhere, pid 4242, ')
    self.write(_lease(host='elsewhere', pid=4242, heartbeat=time.time() - 999))
    self.assert_taken_over('no heartbeat for (999|1000) s')

  def test_an_unreadable_lease_of_unknown_age_is_taken_over(self):
    self.write('')  # ram:// keeps no mtime.
    self.assert_taken_over(r'run\.lock is unreadable \(Expecting value: line '
                           r'1 column 1 \(char 0\)\) and of unknown age$')

  def test_loses_to_a_lease_written_while_settling(self):
    theirs = _lease(host='elsewhere', pid=4242, token='b' * 32)
    with mock.patch.object(run_lock, '_settle',
                           side_effect=lambda _: self.write(theirs)):
      self.assert_held(r'in use by train_eval on host elsewhere, pid 4242, ')
    self.assertEqual(self.read()['token'], 'b' * 32)

  def test_of_two_writers_exactly_one_wins(self):
    # Both check (no lease yet) before either writes, and both write before
    # either reads back: the race the settle window is for.
    checked, written = threading.Barrier(2), threading.Barrier(2)
    rewrite = files.write_text
    results = {}

    def write_after_both_checked(text, path):
      checked.wait(timeout=10)
      rewrite(text, path)

    def run(name, identity):
      try:
        results[name] = run_lock.acquire(self.model_dir, name,
                                         identity=identity, settle_seconds=1)
      except run_lock.Held as e:
        results[name] = e

    processes = [self.sleeper() for _ in range(2)]
    with mock.patch.object(files, 'write_text',
                           side_effect=write_after_both_checked), \
         mock.patch.object(run_lock, '_settle',
                           side_effect=lambda _: written.wait(timeout=10)):
      threads = [threading.Thread(target=run, args=(name, run_lock.Holder(
          _HOST, pid, start))) for name, (pid, start) in zip(
              ('train_search', 'train_eval'), processes)]
      for thread in threads:
        thread.start()
      for thread in threads:
        thread.join()
    won = [r for r in results.values() if isinstance(r, run_lock.RunLock)]
    lost = [r for r in results.values() if isinstance(r, run_lock.Held)]
    self.assertLen(won, 1)
    self.assertLen(lost, 1)
    self.addCleanup(won[0].release)
    winner = self.read()
    self.assertIn(f'in use by {winner["binary"]} on host {_HOST}, pid '
                  f'{winner["pid"]}, ', str(lost[0]))
    self.assertEqual(winner['binary'], [n for n, r in results.items()
                                        if r is won[0]][0])

  def test_a_heartbeat_finding_another_token_is_lost(self):
    lock = self.acquire(heartbeat_seconds=0.02, stale_seconds=1)
    first = self.read()['heartbeat']
    _eventually(lambda: self.read()['heartbeat'] > first)
    self.write(_lease(host='elsewhere', pid=4242, token='c' * 32))
    _eventually(lambda: lock.lost() is not None)
    self.assertIn('was taken over by train_eval on host elsewhere, pid 4242',
                  lock.lost())
    lock.release()
    self.assertEqual(self.read()['token'], 'c' * 32)


if __name__ == '__main__':
  absltest.main()
