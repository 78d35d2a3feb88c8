"""Tests for tunas_tf/native_output: captured native stdout/stderr."""

import os
import subprocess
import sys
import textwrap

from absl.testing import absltest


def _run(body: str) -> subprocess.CompletedProcess:
  code = textwrap.dedent('''
      import os, sys
      from tunas_tf import native_output
      print('before', flush=True)
  ''') + textwrap.dedent(body)
  return subprocess.run([sys.executable, '-c', code], capture_output=True,
                        text=True, cwd=os.getcwd())


class CapturedTest(absltest.TestCase):

  def test_native_writes_are_hidden_and_streams_restored(self):
    done = _run('''
        with native_output.captured():
          os.write(1, b'native out\\n')
          os.write(2, b'native err\\n')
        print('after', flush=True)
        sys.stderr.write('err after\\n')
    ''')
    self.assertEqual(done.returncode, 0, done.stderr)
    self.assertEqual(done.stdout, 'before\nafter\n')
    self.assertEqual(done.stderr, 'err after\n')

  def test_a_failure_replays_what_was_printed(self):
    done = _run('''
        with native_output.captured():
          os.write(2, b'the converter said why\\n')
          raise RuntimeError('conversion failed')
    ''')
    self.assertNotEqual(done.returncode, 0)
    self.assertIn('the converter said why', done.stderr)
    self.assertIn('RuntimeError: conversion failed', done.stderr)



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
with native_output.log_below_dropped({level}):
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


if __name__ == '__main__':
  absltest.main()
