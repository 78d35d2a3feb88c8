"""Tests of `python -m tunas_tf.train_eval` (`__main__.py`) as a subprocess."""

import os
import subprocess
import sys
import time

from absl.testing import absltest
import tensorflow as tf

from tests.testing import train_eval_runs as runs
from tunas_tf.train_eval import runner


class MainTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    search = runs.search()
    cls.root, cls.architecture = search.root, search.architecture

  def test_a_killed_run_resumes_and_finishes_with_the_same_step_count(self):
    model_dir = os.path.join(self.root, 'killed')
    args = [f'--architecture={self.architecture}', f'--model_dir={model_dir}',
            '--max_steps=400', '--noexport'] + runs.TINY
    process = subprocess.Popen(
        [sys.executable, '-m', 'tunas_tf.train_eval'] + args,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'})
    try:
      deadline = time.time() + 120
      step = 0
      while time.time() < deadline and process.poll() is None:
        latest = tf.train.latest_checkpoint(model_dir) if os.path.isdir(
            model_dir) else None
        step = int(latest.rsplit('-', 1)[1]) if latest else 0
        if step > 0:
          break
        time.sleep(0.2)
    finally:
      process.kill()
      process.wait()
    self.assertBetween(step, 10, 390)
    metrics = runner.run(runs.config(*args))
    self.assertEqual(metrics['global_step'], 400)
    self.assertGreaterEqual(metrics['train_start_step'], step)

  def test_command_line_error_is_one_line(self):
    result = subprocess.run(
        [sys.executable, '-m', 'tunas_tf.train_eval',
         f'--model_dir={self.root}/cli', '--ssd=digits_search',
         '--indices=0:1'],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'})
    self.assertNotEqual(result.returncode, 0)
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    self.assertTrue(lines[-1].startswith('train_eval: --indices='), lines)
    self.assertIn('expected 18 indices', lines[-1])


if __name__ == '__main__':
  absltest.main()
