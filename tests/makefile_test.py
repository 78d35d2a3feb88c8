"""The Makefile's choice of Python: a name (PYTHON=python3.12) is found as
the auto-detection finds one, on PATH or as a pyenv version; and how it
fills a virtualenv (INSTALLER: uv, pip, or a one-line refusal)."""

import os
import shutil
import subprocess
import tempfile
import textwrap

from absl.testing import absltest

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _script(path: str, body: str) -> None:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as f:
    f.write('#!/bin/sh\n' + textwrap.dedent(body))
  os.chmod(path, 0o755)


class PythonChoiceTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    # A PATH of its own: the tools the Makefile's shell calls, pyenv, and a
    # pyenv shim of python3.12 that does not run (no such local version),
    # with the interpreter itself only under the pyenv root.
    self.tmp = tempfile.mkdtemp()
    self.bin = os.path.join(self.tmp, 'bin')
    os.makedirs(self.bin)
    for tool in ('ls', 'sed'):
      os.symlink(shutil.which(tool), os.path.join(self.bin, tool))
    root = os.path.join(self.tmp, 'pyenv')
    _script(os.path.join(self.bin, 'pyenv'), f'echo {root}\n')
    _script(os.path.join(self.bin, 'python3.12'), 'exit 127\n')
    self.python = os.path.join(root, 'versions', '3.12.4', 'bin',
                               'python3.12')
    _script(self.python, 'exit 0\n')

  def _make(self, *args: str, dry_run: bool = True):
    return subprocess.run(
        [shutil.which('make'), '--no-print-directory', '-C', _REPO,
         *(['-n'] if dry_run else []), 'search',
         f'VENV={self.tmp}/venv', *args],
        env={'PATH': self.bin, 'HOME': self.tmp}, capture_output=True,
        text=True, timeout=60)

  def test_a_name_resolves_to_the_pyenv_version_as_auto_detection_does(self):
    for args in (['PYTHON=python3.12'], ['PYTHON_VERSIONS=3.12'], []):
      done = self._make(*args)
      self.assertEqual(done.returncode, 0, done.stderr)
      self.assertIn(f'{self.python} -m venv {self.tmp}/venv\n', done.stdout,
                    args)

  def test_a_path_is_kept_and_a_name_found_nowhere_stops_in_one_line(self):
    done = self._make('PYTHON=/opt/py/bin/python3')
    self.assertIn('/opt/py/bin/python3 -m venv', done.stdout)
    done = self._make('PYTHON=python3.9', dry_run=False)
    self.assertNotEqual(done.returncode, 0)
    self.assertIn('PYTHON=python3.9 does not run (not on PATH, nor a pyenv '
                  'version: `pyenv versions`)\n', done.stdout)
    self.assertFalse(os.path.exists(os.path.join(self.tmp, 'venv')))


class InstallerTest(absltest.TestCase):
  """The install step on a virtualenv whose python and uv only log their
  arguments."""

  def setUp(self):
    super().setUp()
    self.tmp = tempfile.mkdtemp()
    self.log = os.path.join(self.tmp, 'log')
    self.python = os.path.join(self.tmp, 'venv', 'bin', 'python')
    for tool in ('python', 'uv'):
      _script(os.path.join(self.tmp, 'venv', 'bin', tool),
              f'echo "{tool} $*" >> {self.log}\n')
    self.stamp = os.path.join(self.tmp, 'venv', '.installed')

  def _install(self, *args: str):
    done = subprocess.run(
        [shutil.which('make'), '--no-print-directory', '-C', _REPO,
         f'VENV={self.tmp}/venv', self.stamp, *args],
        env=dict(os.environ, HOME=self.tmp), capture_output=True, text=True,
        timeout=60)
    calls = []
    if os.path.exists(self.log):
      with open(self.log) as f:
        calls = f.read().splitlines()
    return done, calls

  def test_uv_by_default_pip_when_asked(self):
    done, calls = self._install()
    self.assertEqual(done.returncode, 0, done.stderr)
    self.assertEqual(calls, [
        'python -m pip install --quiet uv',
        f'uv pip install --quiet --compile-bytecode --python {self.python} '
        '-e .[test]'])
    self.assertTrue(os.path.exists(self.stamp))
    os.remove(self.stamp)
    os.remove(self.log)
    done, calls = self._install('INSTALLER=pip')
    self.assertEqual(done.returncode, 0, done.stderr)
    self.assertEqual(calls, ['python -m pip install --quiet --upgrade pip',
                             'python -m pip install --quiet -e .[test]'])
    self.assertTrue(os.path.exists(self.stamp))

  def test_an_unknown_installer_stops_in_one_line(self):
    done, calls = self._install('INSTALLER=conda')
    self.assertNotEqual(done.returncode, 0)
    self.assertEqual(done.stdout,
                     'INSTALLER=conda: not an installer here (uv or pip)\n')
    self.assertEqual(calls, [])
    self.assertFalse(os.path.exists(self.stamp))


if __name__ == '__main__':
  absltest.main()
