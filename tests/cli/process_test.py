"""Tests for tunas_tf/cli/process: the native log dropped below a level, the
quiet Python log, the end without the interpreter's teardown."""

import logging
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from unittest import mock

from absl.testing import absltest

from tunas_tf.cli import process

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def _run(body: str) -> subprocess.CompletedProcess:
  code = textwrap.dedent('''
      import os, sys
      from tunas_tf.cli import process
      print('before', flush=True)
  ''') + textwrap.dedent(body)
  return subprocess.run([sys.executable, '-c', code], capture_output=True,
                        text=True, cwd=_ROOT)


class AtStartTest(absltest.TestCase):

  def _level(self, argv, environ):
    with mock.patch.dict(os.environ, environ, clear=True):
      process.quiet_cpp_log(argv)
      return os.environ.get('TF_CPP_MIN_LOG_LEVEL')

  def test_the_cpp_log_is_off_unless_set_or_verbosity_asked_for(self):
    self.assertEqual(self._level(['x', '--flag'], {}), '3')
    self.assertEqual(self._level(['x'], {'TF_CPP_MIN_LOG_LEVEL': '1'}), '1')
    for verbose in ('--verbosity=1', '-v', '-v=1', '--v=1'):
      self.assertIsNone(self._level(['x', verbose], {}), verbose)

  def test_a_binary_imports_tf_silently_with_the_gc_thresholds_raised(self):
    # As a binary starts: TF 2.21's import writes six native lines that
    # TF_CPP_MIN_LOG_LEVEL does not stop.
    code = ("import gc, sys; from tunas_tf.cli import process; "
            "process.at_start(); "
            "print(*gc.get_threshold(), 'tensorflow' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
    done = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, cwd=_ROOT, env=env, check=False)
    self.assertEqual((done.returncode, done.stderr), (0, ''))
    self.assertEqual(done.stdout.split(),
                     [str(t) for t in process.GC_THRESHOLDS] + ['True'])
    self.assertNotEqual(process.GC_THRESHOLDS, (700, 10, 10))

  def test_importing_the_package_changes_nothing(self):
    code = ("import gc, os, sys; before = gc.get_threshold(); import tunas_tf; "
            "from tunas_tf.cli import flags; "
            "print(gc.get_threshold() == before, 'tensorflow' in sys.modules, "
            "'TF_CPP_MIN_LOG_LEVEL' in os.environ)")
    env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
    done = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, cwd=_ROOT, env=env, check=False)
    self.assertEqual((done.returncode, done.stdout.split()),
                     (0, ['True', 'False', 'False']), done.stderr)


# Lines as TF 2.21's import writes them before absl::InitializeLog().
_ABSL_NOTICE = ('WARNING: All log messages before absl::InitializeLog() is '
                'called are written to STDERR')
_INFO = ('I0000 00:00:1795791205.569714    6308 cudart_stub.cc:31] Could not '
         'find cuda drivers on your machine, GPU will not be used.')
_ERROR = 'E0000 00:00:1795791205.569714    6308 x.cc:9] a real error'
_TF_WARNING = ('2024-01-01 12:00:00.000000: W tensorflow/core/x.cc:7] a '
               'warning')


class LogBelowDroppedTest(absltest.TestCase):

  def _block(self, level: int, ending: str = '') -> subprocess.CompletedProcess:
    lines = [_ABSL_NOTICE, _INFO, _ERROR, _TF_WARNING, 'a Python warning']
    writes = ''.join(f'  os.write(2, {(line + chr(10)).encode()!r})\n'
                     for line in lines)
    return _run(f'''
with process.log_below_dropped({level}):
{writes}{ending}
sys.stderr.write('after\\n')
''')

  def test_drops_the_native_log_lines_below_the_level_only(self):
    for level, kept in ((3, []), (2, [_ERROR]),
                        (1, [_ERROR, _TF_WARNING, _ABSL_NOTICE]),
                        (0, [_ABSL_NOTICE, _INFO, _ERROR, _TF_WARNING])):
      done = self._block(level)
      self.assertEqual(done.returncode, 0, done.stderr)
      self.assertEqual(done.stdout, 'before\n')
      self.assertCountEqual(done.stderr.splitlines(),
                            kept + ['a Python warning', 'after'], level)

  def test_a_crash_inside_the_block_loses_no_line(self):
    # A C++ abort ends the process at once; the filter still forwards what
    # the block wrote before it.
    done = self._block(3, '  os.write(2, b"F0000 00:00:1.2 1 cpu.cc:1] no '
                          'AVX\\n"); os.abort()')
    self.assertNotEqual(done.returncode, 0)
    self.assertEqual(done.stderr.splitlines(),
                     ['a Python warning', 'F0000 00:00:1.2 1 cpu.cc:1] no AVX'])


class QuietLogTest(absltest.TestCase):

  def test_library_info_lines_are_dropped_and_their_warnings_kept(self):
    tfds_file = os.path.join(os.sep, 'venv', 'site-packages',
                             'tensorflow_datasets', 'core', 'reader.py')
    tf_file = os.path.join(os.sep, 'venv', 'site-packages', 'tensorflow',
                           'python', 'checkpoint', 'functional_saver.py')
    ours = os.path.join(os.sep, 'repo', 'tunas_tf', 'search', 'runner.py')

    def record(level, path):
      return logging.LogRecord('absl', level, path, 1, 'msg', None, None)

    keep = process.LibraryInfoFilter().filter
    self.assertFalse(keep(record(logging.INFO, tfds_file)))
    self.assertTrue(keep(record(logging.WARNING, tfds_file)))
    self.assertFalse(keep(record(logging.INFO, tf_file)))
    self.assertTrue(keep(record(logging.WARNING, tf_file)))
    self.assertTrue(keep(record(logging.INFO, ours)))

  def test_matplotlibs_font_cache_line_is_dropped_and_ours_kept(self):
    from matplotlib import font_manager  # pylint: disable=g-import-not-at-top
    # The record matplotlib's first import logs while it builds its cache.
    font_cache = logging.LogRecord(
        'matplotlib.font_manager', logging.INFO, font_manager.__file__, 1584,
        'generated new fontManager', None, None)
    ours = logging.LogRecord(
        'absl', logging.INFO, process.__file__, 1,
        'top1 %.4f', (0.5,), None)
    keep = process.LibraryInfoFilter().filter
    self.assertFalse(keep(font_cache))
    self.assertTrue(keep(ours))
    font_cache.levelno = logging.WARNING  # A warning of matplotlib's stays.
    self.assertTrue(keep(font_cache))


# A binary run through `flags.run`: a non-daemon thread writes a file after
# main returned, an exit handler prints, stdout holds an unflushed line, and
# a module global's finaliser would print when the interpreter tears down.
_EXITING = """
import atexit, sys, threading, time
from tunas_tf.cli import flags as common_flags

class Finalised:
  def __del__(self):
    print('torn down', file=sys.stderr, flush=True)

KEPT = Finalised()

def late_write(path):
  time.sleep(0.3)
  with open(path, 'w') as f:
    f.write('written')

def main(argv):
  path, end = argv[1], argv[2]
  threading.Thread(target=late_write, args=(path,)).start()
  atexit.register(lambda: print('exit handler ran', file=sys.stderr))
  sys.stdout.write('unflushed')
  if end == 'message':
    sys.exit('binary: one line')
  return int(end)

common_flags.run(main, lambda: None)
"""


_STOPPED = """
import sys, time
from tunas_tf.cli import flags as common_flags

def main(argv):
  if argv[1] == 'kept':
    common_flags.when_stopped('the rows so far are in out.csv; again resumes')
  print('started', flush=True)
  time.sleep(60)

common_flags.run(main, lambda: None)
"""


class StoppedTest(absltest.TestCase):

  def test_sigint_or_sigterm_ends_a_binary_in_one_line_saying_what_it_kept(
      self):
    for signum, kept, line in (
        (signal.SIGINT, 'kept', 'the rows so far are in out.csv; again '
         'resumes'),
        (signal.SIGTERM, '-', 'its files are written whole or not at all; '
         'the same command runs it again')):
      process = subprocess.Popen(
          [sys.executable, '-c', _STOPPED, kept], stdout=subprocess.PIPE,
          stderr=subprocess.PIPE, text=True, cwd=_ROOT)
      self.assertEqual(process.stdout.readline(), 'started\n')
      process.send_signal(signum)
      _, stderr = process.communicate(timeout=60)
      self.assertEqual(stderr.splitlines(), [
          f'-c: stopped by {signal.Signals(signum).name}: {line}'])
      self.assertEqual(process.returncode, 128 + signum)


class ExitNowTest(absltest.TestCase):

  def _run(self, end):
    path = os.path.join(tempfile.mkdtemp(), 'late')
    done = subprocess.run(
        [sys.executable, '-c', _EXITING, path, end], capture_output=True,
        text=True, cwd=_ROOT, timeout=120, check=False)
    with open(path) as f:
      self.assertEqual(f.read(), 'written')  # The thread was waited for.
    self.assertEqual(done.stdout, 'unflushed')
    # The exit handlers ran, the interpreter's teardown did not.
    self.assertIn('exit handler ran', done.stderr)
    self.assertNotIn('torn down', done.stderr)
    return done

  def test_a_returned_code_ends_the_process_after_the_exit_handlers(self):
    done = self._run('3')
    self.assertEqual(done.returncode, 3)

  def test_a_message_is_printed_and_the_exit_code_is_one(self):
    done = self._run('message')
    self.assertEqual(done.returncode, 1)
    # Printed as Python prints it, before the exit handlers run.
    self.assertEqual(done.stderr.splitlines(),
                     ['binary: one line', 'exit handler ran'])


if __name__ == '__main__':
  absltest.main()
