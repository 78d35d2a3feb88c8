"""Tests of `python -m tunas_tf.train_eval` (`__main__.py`) as a subprocess."""

import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

from absl.testing import absltest
import pytest
import tensorflow as tf

from tests.testing import searches
from tunas_tf.runtime import preemption
from tests.testing import forked

_ZEROS = ':'.join(['0'] * 18)
# A tiny deterministic run: 60 steps of 32 digits, dropout, path dropout (on
# blocks/2/layers/1 and blocks/3/layers/1, both kept) and an EMA of the
# weights (all resumed exactly), a checkpoint every 2 steps.
_EXACT = ('--ssd=digits_search', f'--indices={_ZEROS}', '--max_steps=60',
          '--deterministic', '--dropout_rate=0.2', '--path_dropout_rate=0.2',
          '--moving_average_decay=0.9', '--train_batch_size=32',
          '--eval_batch_size=360', '--save_checkpoints_steps=2',
          '--log_every_steps=100', '--base_learning_rate=1.0', '--noexport')
_ENV = {**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'}


def _start(model_dir: str, *extra: str) -> subprocess.Popen:
  """`python -m tunas_tf.train_eval` of `_EXACT` (then `extra`) into
  `model_dir` (its output in `model_dir`.log)."""
  open(model_dir + '.log', 'w').close()
  return forked.Child(
      [sys.executable, '-m', 'tunas_tf.train_eval',
       f'--model_dir={model_dir}', *_EXACT, *extra],
      log=model_dir + '.log', env=_ENV)


def _newest_saved(model_dir: str) -> int:
  """K of the checkpoint `model.ckpt-K` that `model_dir`'s `checkpoint`
  file names (-1: none), where a restart resumes. (A `model.ckpt-K.index`
  appears before that file names it: a kill in between resumes from the
  one before.)"""
  path = tf.train.latest_checkpoint(model_dir)
  return -1 if path is None else int(path.rsplit('-', 1)[1])


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

  def _preempt_at(self, step: int, model_dir: str, process) -> str:
    """SIGTERMs `process` once it has logged `step`; its log. It must exit
    75 within 30 s (a preemption's notice), having saved at that step or
    after."""
    log_path = model_dir + '.log'
    deadline = time.time() + 240
    while time.time() < deadline:
      with open(log_path) as f:
        logged = [int(n) for n in re.findall(r'step (\d+)/60 ', f.read())]
      if max(logged, default=0) >= step:
        break
      self.assertIsNone(process.poll(), f'it ended before step {step}')
      time.sleep(0.005)
    process.send_signal(signal.SIGTERM)
    signalled = time.time()
    self.assertEqual(process.wait(timeout=60), preemption.EXIT_CODE)
    self.assertLess(time.time() - signalled, 30)
    self.assertGreaterEqual(_newest_saved(model_dir), step)
    with open(log_path) as f:
      return f.read()

  def _refused_while_running(self, model_dir: str, process) -> None:
    """Pauses `process` once it holds `model_dir`; a second run of the same
    command there is refused in one line naming it; then resumes it."""
    deadline = time.time() + 240
    while _newest_saved(model_dir) < 0 and time.time() < deadline:
      self.assertIsNone(process.poll(), 'it ended before its first save')
      time.sleep(0.02)
    process.send_signal(signal.SIGSTOP)
    try:
      second = forked.run_one(
          [sys.executable, '-m', 'tunas_tf.train_eval',
           f'--model_dir={model_dir}', *_EXACT], env=_ENV, timeout=240)
    finally:
      process.send_signal(signal.SIGCONT)
    self.assertNotEqual(second.returncode, 0)
    self.assertRegex(second.stderr.strip().splitlines()[-1],
                     rf'^train_eval: {model_dir} is in use by train_eval on '
                     rf'host {socket.gethostname()}, pid {process.pid}, since')

  @pytest.mark.estimator
  def test_a_killed_then_preempted_deterministic_run_ends_as_an_uninterrupted_one(
      self):
    # A run SIGKILLed once it has saved a checkpoint at or after a random
    # early step, restarted (taking the directory over from the dead
    # process) with a checkpoint cadence longer than the run, stopped by a
    # SIGTERM after a random late step (it saves there and exits 75), and
    # restarted to the end, ends with the metrics of a run left alone (which
    # runs meanwhile, and refuses a second run in its directory), to the
    # bit.
    rng = random.Random()
    kills = (rng.randrange(4, 24), rng.randrange(36, 50))
    reference = os.path.join(self.root, 'uninterrupted')
    model_dir = os.path.join(self.root, 'killed')
    processes = [_start(reference)]
    try:
      self._refused_while_running(reference, processes[0])
      processes.append(_start(model_dir))
      self._kill_at(kills[0], model_dir, processes[-1])
      killed = _newest_saved(model_dir)
      processes.append(_start(model_dir, '--save_checkpoints_steps=1000',
                              '--log_every_steps=1'))
      log = self._preempt_at(kills[1], model_dir, processes[-1])
      stopped = _newest_saved(model_dir)
      processes.append(_start(model_dir))
      for process in processes[0], processes[-1]:
        process.wait(timeout=240)
    finally:
      for process in processes:
        if process.poll() is None:
          process.kill()
    self.assertRegex(log, r'Taking over .*killed from train_eval on host .*: '
                     r'pid \d+ on host .* is gone')
    self.assertIn(f'from step {killed} (model.ckpt-{killed})', log)
    self.assertEqual(log.strip().splitlines()[-1],
                     f'train_eval: stopped at step {stopped} by SIGTERM, '
                     'checkpoint saved: run the same command to resume')
    for directory, process in ((reference, processes[0]),
                               (model_dir, processes[-1])):
      with open(directory + '.log') as f:
        self.assertEqual(process.returncode, 0, f.read()[-2000:])
    expected, metrics = _metrics(reference), _metrics(model_dir)
    self.assertEqual(expected['global_step'], 60)
    # The last restart resumed from the preempted run's checkpoint.
    self.assertEqual(metrics['train_start_step'], stopped)
    for key in ('top1', 'top5', 'loss', 'global_step'):
      self.assertEqual(metrics[key], expected[key],
                       f'{key}, killed at step {kills[0]} (saved {killed}), '
                       f'stopped at {stopped}')

  @pytest.mark.estimator
  def test_a_bfloat16_run_finishes_with_finite_losses(self):
    # --use_bfloat16=true: the input pipeline emits bfloat16 images (the
    # original's `true`, which could hang there), the network computes in
    # bfloat16. Two steps, a checkpoint and one eval pass, in time.
    model_dir = os.path.join(self.root, 'bfloat16')
    done = forked.run_one(
        [sys.executable, '-m', 'tunas_tf.train_eval',
         f'--model_dir={model_dir}', '--ssd=digits_search',
         f'--indices={_ZEROS}', '--use_bfloat16=true', '--max_steps=2',
         '--train_batch_size=32', '--eval_batch_size=360',
         '--save_checkpoints_steps=2', '--log_every_steps=1',
         '--tpu_iterations_per_loop=1', '--noexport'],
        timeout=300, env=_ENV)
    self.assertEqual(done.returncode, 0, done.stderr[-2000:])
    with open(os.path.join(model_dir, 'config.json')) as f:
      self.assertEqual(json.load(f)['use_bfloat16'], 'true')
    metrics = _metrics(model_dir)
    self.assertEqual(metrics['global_step'], 2)
    self.assertTrue(math.isfinite(metrics['loss']), metrics)
    losses = searches.events(model_dir)['model/empirical_loss']
    self.assertEqual(sorted(losses), [0, 1])
    self.assertTrue(all(math.isfinite(v) for v in losses.values()), losses)

  def test_command_line_error_is_one_line(self):
    result = forked.run_one(
        [sys.executable, '-m', 'tunas_tf.train_eval',
         f'--model_dir={self.root}/cli', '--ssd=digits_search',
         '--indices=0:1'], timeout=120, env=_ENV)
    self.assertNotEqual(result.returncode, 0)
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    self.assertTrue(lines[-1].startswith('train_eval: --indices='), lines)
    self.assertIn('expected 18 indices', lines[-1])


if __name__ == '__main__':
  absltest.main()
