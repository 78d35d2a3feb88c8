"""What tests/conftest.py gives pytest's workers: a share of the cores for
TensorFlow's, OpenBLAS's and OpenMP's thread pools, and a temporary
directory in memory that the run removes, no garbage collections of their
own at their end (docs/testing.md)."""

import glob
import json
import os
import subprocess
import sys
import tempfile

from absl.testing import absltest

from tests import conftest

_TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_THREADS = ('TF_NUM_INTEROP_THREADS', 'TF_NUM_INTRAOP_THREADS',
            'OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS')


def _room_in_memory() -> bool:
  stat = os.statvfs(conftest._SHM)  # pylint: disable=protected-access
  return stat.f_bavail * stat.f_frsize >= conftest._SHM_SPARE  # pylint: disable=protected-access


class WorkersTest(absltest.TestCase):

  def _probe(self, **settings):
    """Runs the probe with two workers in a fresh pytest whose environment
    is this one's without pytest's and the settings' variables, plus
    `settings`; returns the two workers' records."""
    out = tempfile.mkdtemp()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith('PYTEST_') and k != 'TMPDIR' and
           k not in _THREADS}
    env.update(settings, PROBE_OUT=out)
    done = subprocess.run(
        [sys.executable, '-m', 'pytest', '-q', '-n', '2',
         'tests/testing/workers_probe.py'],
        cwd=_TOP, env=env, capture_output=True, text=True, timeout=300)
    self.assertEqual(done.returncode, 0, done.stdout[-3000:])
    paths = sorted(glob.glob(os.path.join(out, 'gw*.json')))
    self.assertLen(paths, 1, done.stdout)  # One test: one worker ran it.
    with open(paths[0]) as f:
      return json.load(f)

  def test_each_worker_takes_its_share_and_a_temporary_dir_in_memory(self):
    seen = self._probe()
    share = str(max(1, len(os.sched_getaffinity(0)) // 2))
    self.assertEqual({seen[name] for name in _THREADS}, {share})
    # pytest >= 8.4 would collect 5 times (None: its default); older ones
    # have no such setting and do not.
    self.assertIn(seen['collections_at_end'], (0, 'no such setting'))
    if _room_in_memory():
      self.assertRegex(seen['tempdir'], r'^/dev/shm/tunas_tf_tests_\w+$')
      self.assertFalse(os.path.exists(seen['tempdir']))  # Removed at exit.
    else:
      self.assertFalse(seen['tempdir'].startswith('/dev/shm/'))

  def test_settings_given_are_kept(self):
    kept = tempfile.mkdtemp()
    seen = self._probe(TMPDIR=kept, OPENBLAS_NUM_THREADS='3')
    self.assertEqual(seen['tempdir'], kept)
    self.assertEqual(seen['OPENBLAS_NUM_THREADS'], '3')
    self.assertTrue(os.path.isdir(kept))


if __name__ == '__main__':
  absltest.main()
