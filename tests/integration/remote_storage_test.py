"""Remote run directories: search, extract, report and train on `ram://`.

On a Cloud TPU the model directories are `gs://` paths, so every read and
write of a run goes through `tf.io.gfile`. TensorFlow's in-memory `ram://`
filesystem stands in for Cloud Storage: `tests/testing/remote_run.py` runs
the four binaries on it in one process (the filesystem is that process's
memory) and checks their files there. This test runs it in an empty working
directory, with an empty temporary directory, and checks that both stay
empty (but for the bytecode of autograph's generated modules, which
TensorFlow leaves where Python writes bytecode): a write that bypassed
`tf.io.gfile` (`open`, `os.makedirs`, matplotlib's `savefig` of a path)
would have landed there, as `./ram:/<name>/...` or as a temporary file.
"""

import os
import sys
import tempfile
import time
import uuid

from absl.testing import absltest
import pytest

from tests.testing import forked
from tests.testing import searches

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


@pytest.mark.estimator
class RemoteStorageTest(absltest.TestCase):

  def test_search_extract_report_train_write_only_to_ram(self):
    name = f'tunas-remote-{uuid.uuid4().hex[:12]}'
    cwd, tmp = tempfile.mkdtemp(), tempfile.mkdtemp()
    # The worktree's `tunas_tf` and `tests`, whatever the venv has installed.
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', TMPDIR=tmp,
               PYTHONPATH=os.pathsep.join(
                   [_REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
    start = time.monotonic()
    done = forked.run_one(
        [sys.executable, '-m', 'tests.testing.remote_run', f'ram://{name}'],
        cwd=cwd, env=env)
    seconds = time.monotonic() - start
    self.assertEqual(done.returncode, 0,
                     f'remote_run failed after {seconds:.0f} s:\n'
                     f'{done.stderr[-4000:]}')
    self.assertIn(f'ram://{name}/report/report.png', done.stdout)
    self.assertEqual(searches.written(cwd), [],
                     'written to the working directory')
    self.assertEqual(searches.written(tmp), [],
                     'written to the temporary directory')
    # Nor where else a `ram://` path taken for a local one could have gone
    # (`os.path.abspath('ram://x')` is `<cwd>/ram:/x`).
    for where in (_REPO, tempfile.gettempdir(), os.path.expanduser('~')):
      for local in (os.path.join(where, 'ram:', name),
                    os.path.join(where, name)):
        self.assertFalse(os.path.lexists(local), local)


if __name__ == '__main__':
  absltest.main()
