"""`train_search --engine=distribute` as two workers on this machine.

Two processes of the real binary, each with its own TF_CONFIG (a cluster of
two workers on free localhost ports), run one 4-step digits search, two
steps per loop, a checkpoint every 2 (MultiWorkerMirroredStrategy, a batch
of 16: 8 per worker). Worker 0, the chief, alone writes the run's files;
worker 1 saves into a temporary directory (its own TMPDIR here) that it
removes. Then extract_architecture reads the directory. On any TF; about
2.5 min on 2 busy cores (two search graphs traced side by side).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from typing import List
from unittest import mock

from absl.testing import absltest

from tunas_tf.runtime import resume as resume_lib
from tunas_tf.search import extract
from tests.testing import searches
from tests.testing import forked

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_FLAGS = ('--engine=distribute', '--train_batch_size=16', '--max_steps=4',
          '--tpu_iterations_per_loop=2', '--save_checkpoints_steps=2',
          '--log_every_steps=2', '--deterministic')
# Enough for two search graphs traced on 2 busy cores; a worker left waiting
# for a peer that died would otherwise wait for good.
_TIMEOUT = 600


def _free_ports(count: int) -> List[int]:
  """`count` distinct ports free on localhost (held open until all found)."""
  sockets = []
  try:
    for _ in range(count):
      s = socket.socket()
      s.bind(('localhost', 0))
      sockets.append(s)
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def _env(**extra: str):
  return dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL='3',
              **extra)


def _start_workers(model_dir: str, tmp_dirs: List[str]
                   ) -> List[subprocess.Popen]:
  ports = _free_ports(len(tmp_dirs))
  workers = {'worker': [f'localhost:{port}' for port in ports]}
  processes = []
  for index, tmp_dir in enumerate(tmp_dirs):
    tf_config = json.dumps({'cluster': workers,
                            'task': {'type': 'worker', 'index': index}})
    processes.append(forked.Child(
        searches.search_command(model_dir, *_FLAGS), cwd=_ROOT,
        env=_env(TF_CONFIG=tf_config, TMPDIR=tmp_dir), new_session=True))
  return processes


def _finish(processes: List[subprocess.Popen]) -> List[str]:
  """Each process's stderr once all have ended (killed after `_TIMEOUT`)."""
  errs = []
  try:
    for process in processes:
      errs.append(process.communicate(timeout=_TIMEOUT)[1])
  finally:
    for process in processes:
      if process.poll() is None:  # Ours, by its own process group.
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
  return errs


class TwoWorkersTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    root = tempfile.mkdtemp()
    cls.model_dir = os.path.join(root, 'search')
    cls.tmp_dirs = [os.path.join(root, f'tmp{i}') for i in range(2)]
    for tmp_dir in cls.tmp_dirs:
      os.makedirs(tmp_dir)
    cls.processes = _start_workers(cls.model_dir, cls.tmp_dirs)
    cls.errs = _finish(cls.processes)
    cls.names = sorted(os.listdir(cls.model_dir))  # Before extraction.

  def test_both_workers_finish(self):
    for process, err in zip(self.processes, self.errs):
      self.assertEqual(process.returncode, 0, err[-3000:])
      # The strategy came first: TF had not started when it was made.
      self.assertNotIn('after program startup', err)
    self.assertIn(f'Joining the search in {self.model_dir} as worker 1 of '
                  'a cluster of 2: the chief writes its files', self.errs[1])
    self.assertNotIn('Joining', self.errs[0])
    self.assertIn('step 4/4', self.errs[0])
    self.assertNotIn('step 4/4', self.errs[1])

  def test_the_chief_alone_wrote_the_runs_files(self):
    names = self.names
    events = [n for n in names if n.startswith('events.out.tfevents.')]
    self.assertLen(events, 1)
    # TF names an events file after the process that writes it.
    self.assertEqual(events[0].split('.')[-3], str(self.processes[0].pid))
    self.assertEqual(
        sorted(set(names) - set(events)),
        ['checkpoint', 'config.json', 'model.ckpt-0.data-00000-of-00001',
         'model.ckpt-0.index', 'model.ckpt-2.data-00000-of-00001',
         'model.ckpt-2.index', 'model.ckpt-4.data-00000-of-00001',
         'model.ckpt-4.index', 'model_spec.json'])
    self.assertEqual(resume_lib.resume_point(self.model_dir).global_step, 4)
    with open(os.path.join(self.model_dir, 'config.json')) as f:
      self.assertEqual(json.load(f)['engine'], 'distribute')
    scalars = searches.events(self.model_dir)
    self.assertEqual(sorted(scalars['rlcontroller/reward']), [0, 2])
    # Worker 1 saved at the same steps, into a directory it removed.
    self.assertEqual(searches.written(self.tmp_dirs[1]), [])

  def test_extract_architecture_reads_it(self):
    done = forked.run_one(
        [sys.executable, '-m', 'tunas_tf.tools.extract_architecture',
         f'--model_dir={self.model_dir}', '--oneshot=0'], cwd=_ROOT,
        env=_env(), timeout=300)
    self.assertEqual(done.returncode, 0, done.stderr[-3000:])
    with open(os.path.join(self.model_dir, 'architecture.json')) as f:
      self.assertEqual(json.load(f)['global_step'], 4)
    self.assertEqual(extract.pick(self.model_dir)[0].global_step, 4)


class MalformedTfConfigTest(absltest.TestCase):

  def test_the_binary_refuses_in_one_line_and_writes_nothing(self):
    model_dir = os.path.join(tempfile.mkdtemp(), 'search')
    tf_config = json.dumps({'cluster': {'worker': ['localhost']},
                            'task': {'type': 'worker', 'index': 0}})
    done = forked.run_one(
        searches.search_command(model_dir, *_FLAGS), cwd=_ROOT,
        env=_env(TF_CONFIG=tf_config), timeout=300)
    self.assertEqual(done.returncode, 1)
    self.assertEqual(
        done.stderr.strip().splitlines()[-1],
        'train_search: TF_CONFIG is not a multi-worker cluster ("worker" '
        f'must be a list of "host:port"): {tf_config!r}')
    self.assertFalse(os.path.exists(model_dir))

  def test_every_refusal_writes_nothing(self):
    for tf_config, message in [
        ('{"cluster": {"worker": ["h:1"]}', 'not JSON'),
        ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", '
         '"index": 1}}', 'task index 1 is not one of the 1 "worker" tasks'),
        ('{"cluster": {"ps": ["h:1"]}, "task": {"type": "ps"}}',
         'jobs [\'ps\']: only "chief" and "worker" train'),
    ]:
      model_dir = os.path.join(tempfile.mkdtemp(), 'search')
      with mock.patch.dict(os.environ, TF_CONFIG=tf_config):
        line = searches.refusal_line(f'--model_dir={model_dir}', *_FLAGS)
      self.assertStartsWith(line, 'train_search: TF_CONFIG is not a '
                            f'multi-worker cluster ({message}')
      self.assertNotIn('\n', line)
      self.assertFalse(os.path.exists(model_dir))
    # Nor does --replicas beside TF_CONFIG.
    model_dir = os.path.join(tempfile.mkdtemp(), 'search')
    with mock.patch.dict(
        os.environ, TF_CONFIG='{"cluster": {"worker": ["h:1"]}, "task": '
        '{"type": "worker", "index": 0}}'):
      line = searches.refusal_line(f'--model_dir={model_dir}', *_FLAGS,
                                   '--replicas=2')
    self.assertIn('--replicas=2 with TF_CONFIG', line)
    self.assertFalse(os.path.exists(model_dir))


if __name__ == '__main__':
  absltest.main()
