"""Tests of `python -m tunas_tf.train_eval` (`__main__.py`) as a subprocess."""

import glob
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

from absl.testing import absltest

_ZEROS = ':'.join(['0'] * 18)
# A tiny deterministic run: 60 steps of 32 digits, dropout and an EMA of the
# weights (both resumed exactly), a checkpoint every 2 steps.
_EXACT = ('--ssd=digits_search', f'--indices={_ZEROS}', '--max_steps=60',
          '--deterministic', '--dropout_rate=0.2',
          '--moving_average_decay=0.9', '--train_batch_size=32',
          '--eval_batch_size=360', '--save_checkpoints_steps=2',
          '--log_every_steps=100', '--base_learning_rate=1.0', '--noexport')
_ENV = {**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'}


def _start(model_dir: str) -> subprocess.Popen:
  """`python -m tunas_tf.train_eval` of `_EXACT` into `model_dir` (its
  output in `model_dir`.log)."""
  with open(model_dir + '.log', 'w') as log:
    return subprocess.Popen(
        [sys.executable, '-m', 'tunas_tf.train_eval',
         f'--model_dir={model_dir}', *_EXACT],
        stdout=log, stderr=subprocess.STDOUT, env=_ENV)


def _newest_saved(model_dir: str) -> int:
  """The largest K of a `model.ckpt-K.index` in `model_dir` (-1: none)."""
  steps = [int(re.search(r'-(\d+)\.index$', path).group(1))
           for path in glob.glob(os.path.join(model_dir, 'model.ckpt-*.index'))]
  return max(steps, default=-1)


def _metrics(model_dir: str):
  with open(os.path.join(model_dir, 'metrics.json')) as f:
    return json.load(f)


class MainTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.root = tempfile.mkdtemp()

  def _kill_at(self, step: int, model_dir: str, process) -> None:
    """SIGKILLs `process` once it has saved a checkpoint at or after `step`."""
    deadline = time.time() + 240
    while _newest_saved(model_dir) < step and time.time() < deadline:
      self.assertIsNone(process.poll(), f'it ended before step {step}')
      time.sleep(0.02)
    process.kill()
    self.assertEqual(process.wait(), -9, f'it ended before step {step}')
    self.assertGreaterEqual(_newest_saved(model_dir), step)

  def test_a_killed_deterministic_run_ends_as_an_uninterrupted_one(self):
    # A run SIGKILLed once it has saved a checkpoint at or after a random
    # early step, restarted, killed again after a random late step and
    # restarted to the end, ends with the metrics of a run left alone (which
    # runs meanwhile), to the bit.
    rng = random.Random()
    kills = (rng.randrange(4, 24), rng.randrange(36, 50))
    reference = os.path.join(self.root, 'uninterrupted')
    model_dir = os.path.join(self.root, 'killed')
    processes = [_start(reference)]
    try:
      starts = []
      for step in kills:
        processes.append(_start(model_dir))
        self._kill_at(step, model_dir, processes[-1])
        starts.append(_newest_saved(model_dir))
      processes.append(_start(model_dir))
      for process in processes[0], processes[-1]:
        process.wait(timeout=240)
    finally:
      for process in processes:
        if process.poll() is None:
          process.kill()
    for directory, process in ((reference, processes[0]),
                               (model_dir, processes[-1])):
      with open(directory + '.log') as f:
        self.assertEqual(process.returncode, 0, f.read()[-2000:])
    expected, metrics = _metrics(reference), _metrics(model_dir)
    self.assertEqual(expected['global_step'], 60)
    # The last restart resumed from a checkpoint of the second killed run
    # (the newest the `checkpoint` file names: at most one save before).
    self.assertBetween(metrics['train_start_step'], kills[1] - 2, 58)
    for key in ('top1', 'top5', 'loss', 'global_step'):
      self.assertEqual(metrics[key], expected[key],
                       f'{key}, killed at steps {kills} (saved {starts})')

  def test_command_line_error_is_one_line(self):
    result = subprocess.run(
        [sys.executable, '-m', 'tunas_tf.train_eval',
         f'--model_dir={self.root}/cli', '--ssd=digits_search',
         '--indices=0:1'],
        capture_output=True, text=True, timeout=120, env=_ENV)
    self.assertNotEqual(result.returncode, 0)
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    self.assertTrue(lines[-1].startswith('train_eval: --indices='), lines)
    self.assertIn('expected 18 indices', lines[-1])


if __name__ == '__main__':
  absltest.main()
