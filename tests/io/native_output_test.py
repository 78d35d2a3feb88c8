"""Tests for tunas_tf/native_output: captured native stdout/stderr."""

import os
import subprocess
import sys
import textwrap

from absl.testing import absltest


def _run(body: str) -> subprocess.CompletedProcess:
  code = textwrap.dedent('''
      import os, sys
      from tunas_tf.io import native_output
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


if __name__ == '__main__':
  absltest.main()
