"""Tests for tunas_tf/commands: suggested command lines name the running
interpreter."""

import os
import sys
import tempfile
from unittest import mock

from absl.testing import absltest

from tunas_tf.io import commands


class PythonTest(absltest.TestCase):

  def test_relative_under_the_working_directory_else_absolute(self):
    root = tempfile.mkdtemp()
    executable = os.path.join(root, '.venv', 'bin', 'python')
    os.makedirs(os.path.dirname(executable))
    with mock.patch.object(sys, 'executable', executable):
      cwd = os.getcwd()
      try:
        os.chdir(root)
        self.assertEqual(commands.python(), '.venv/bin/python')
        self.assertEqual(
            commands.module_command('tunas_tf.tools.report', '--model_dir=x'),
            '.venv/bin/python -m tunas_tf.tools.report --model_dir=x')
        os.chdir(os.path.join(root, '.venv', 'bin'))
        self.assertEqual(commands.python(), './python')
        os.chdir(tempfile.mkdtemp())
        self.assertEqual(commands.python(), executable)
      finally:
        os.chdir(cwd)
    with mock.patch.object(sys, 'executable', ''):
      self.assertEqual(commands.python(), 'python')


if __name__ == '__main__':
  absltest.main()
