"""Tests of `runtime.lifecycle`: a third binary costs a config and a step.

`_toy_run` is such a binary: a config (a `JobConfig` and two settings of its
own), a model_fn (one weight moved towards 3 by gradient descent) and the
`check`/`start` pair every runner gives `lifecycle.run`. It gets restarts,
resume points, the NaN stop and the directory lock from the runtime, with no
lifecycle code of its own.
"""

import dataclasses
import os
import tempfile
from typing import Any, Dict, NamedTuple, Optional

from absl.testing import absltest
import pytest
import tensorflow as tf

from tunas_tf import files
from tunas_tf.runtime import estimator as estimator_lib
from tunas_tf.runtime import guards
from tunas_tf.runtime import jobs
from tunas_tf.runtime import lifecycle
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.runtime import run_lock


@dataclasses.dataclass(frozen=True)
class _ToyConfig:
  job: jobs.JobConfig
  learning_rate: float
  max_steps: int


class _Plan(NamedTuple):
  stored: Optional[Dict[str, Any]]
  resume: resume_lib.ResumePoint


def _config(model_dir: str, learning_rate: float = 0.1,
            max_steps: int = 4) -> _ToyConfig:
  job = jobs.JobConfig(
      model_dir=model_dir, dataset='digits', data_dir=None, download=False,
      num_classes=10, image_size=8, num_channels=1, preprocessing='none',
      seed=0, use_tpu=False, tpu='', tpu_zone=None, gcp_project=None,
      tpu_iterations_per_loop=2, save_checkpoints_steps=2,
      keep_checkpoint_max=5, log_every_steps=2, engine='estimator')
  return _ToyConfig(job, learning_rate, max_steps)


def _model_fn(config: _ToyConfig):
  def model_fn(features, labels, mode, params):
    del labels, params  # Unused.
    weight = tf.compat.v1.get_variable('weight', [],
                                       initializer=tf.zeros_initializer())
    step = tf.compat.v1.train.get_or_create_global_step()
    loss = tf.reduce_mean((weight * features - 3.0) ** 2)
    checks = guards.check_finite('toy loss', [loss], step, use_tpu=False)
    with tf.control_dependencies(checks):
      train_op = tf.compat.v1.train.GradientDescentOptimizer(
          config.learning_rate).minimize(loss, global_step=step)
    return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(mode, loss=loss,
                                                       train_op=train_op)
  return model_fn


def _input_fn(feature: float):
  def input_fn(params):
    del params  # Unused.
    return tf.data.Dataset.from_tensors(
        (tf.fill([2], feature), tf.zeros([2]))).repeat()
  return input_fn


def _toy_run(config: _ToyConfig, feature: float = 1.0) -> _Plan:
  """The whole third binary below its entry point."""
  path = os.path.join(config.job.model_dir, files.CONFIG_FILE)
  values = jobs.to_flat(config)

  def check() -> _Plan:
    stored = files.check_config(path, values, jobs.JOB_RUN_ONLY_FIELDS |
                                {'max_steps'})
    return _Plan(stored, resume_lib.resume_point(config.job.model_dir))

  def start(plan: _Plan, stop) -> _Plan:
    files.write_config(path, values, plan.stored,
                       jobs.JOB_RUN_ONLY_FIELDS | {'max_steps'})
    estimator = estimator_lib.make_estimator(_model_fn(config), config.job,
                                             train_batch_size=2)
    estimator_lib.train(estimator, _input_fn(feature),
                    max_steps=config.max_steps, stop=stop,
                    model_dir=config.job.model_dir, run_name='the toy run',
                    resume_checkpoint=plan.resume.checkpoint)
    return plan

  return lifecycle.run(config.job, 'toy', check, start)


def _weight(model_dir: str) -> float:
  return float(tf.train.load_checkpoint(model_dir).get_tensor('weight'))


@pytest.mark.estimator
class ThirdBinaryTest(absltest.TestCase):

  def test_trains_resumes_and_refuses_other_settings(self):
    model_dir = tempfile.mkdtemp()
    plan = _toy_run(_config(model_dir))
    self.assertIsNone(plan.resume.checkpoint)
    self.assertEqual(resume_lib.resume_point(model_dir).global_step, 4)
    four = _weight(model_dir)
    # Gradient descent on (w - 3)^2 from 0 at rate 0.1: w = 3 (1 - 0.8^4).
    self.assertAlmostEqual(four, 3 * (1 - 0.8**4), places=5)
    plan = _toy_run(_config(model_dir, max_steps=6))
    self.assertEqual(plan.resume.global_step, 4)
    self.assertEqual(lifecycle.start_words('toy', model_dir, True,
                                           plan.resume),
                     f'Resuming toy in {model_dir} from step 4 '
                     '(model.ckpt-4)')
    self.assertAlmostEqual(_weight(model_dir), 3 * (1 - 0.8**6), places=5)
    with self.assertRaisesRegex(ValueError, 'learning_rate is 0.1 there and '
                                '0.2 now'):
      _toy_run(_config(model_dir, learning_rate=0.2, max_steps=8))
    self.assertEqual(resume_lib.resume_point(model_dir).global_step, 6)
    self.assertFalse(os.path.exists(os.path.join(model_dir,
                                                 run_lock.LOCK_FILE)))

  def test_a_nan_stops_it_in_one_line_without_saving(self):
    model_dir = tempfile.mkdtemp()
    _toy_run(_config(model_dir, max_steps=2))
    with self.assertRaisesRegex(
        ValueError, r'^The toy loss is nan at step 2: the toy run stopped '
        'without saving it; the last good checkpoint is .*model.ckpt-2$'):
      _toy_run(_config(model_dir, max_steps=4), feature=float('nan'))
    self.assertEqual(resume_lib.resume_point(model_dir).global_step, 2)


if __name__ == '__main__':
  absltest.main()
