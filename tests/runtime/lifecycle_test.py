"""Tests of `runtime.lifecycle`: a third binary costs a config and a task.

`_toy_run` is such a binary: a config (a `JobConfig` and two settings of its
own), a task (`_ToyTask`: one weight moved towards 3 by gradient descent)
and the `check`/`start` pair every runner gives `lifecycle.run`. It gets
restarts, resume points, the NaN stop and the directory lock from the
runtime, on either engine, with no lifecycle code of its own.

The toy's loss is mean((w x - 3)^2) at rate 0.1. With x = 1 each step gives
w' = 0.8 w + 0.6, so from 0 w_n = 3 (1 - 0.8^n); with the batch x = (1, 2)
the gradient is 5 w - 9 and w' = 0.5 w + 0.9, so w_n = 1.8 (1 - 0.5^n).
"""

import dataclasses
import os
import sys
import tempfile
from typing import Any, Dict, NamedTuple, Optional, Sequence

from absl.testing import absltest
import pytest
import tensorflow as tf

from tunas_tf.runtime import engine as engine_lib
from tunas_tf.runtime import jobs
from tunas_tf.runtime import lifecycle
from tunas_tf.runtime import replicas
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.runtime import run_lock
from tests.testing import forked


@dataclasses.dataclass(frozen=True)
class _ToyConfig:
  job: jobs.JobConfig
  learning_rate: float
  max_steps: int


class _Plan(NamedTuple):
  stored: Optional[Dict[str, Any]]
  resume: resume_lib.ResumePoint


def _config(model_dir: str, learning_rate: float = 0.1, max_steps: int = 4,
            engine: str = 'estimator', per_loop: int = 2,
            save_every: int = 2) -> _ToyConfig:
  job = jobs.JobConfig(
      model_dir=model_dir, dataset='digits', data_dir=None, download=False,
      num_classes=10, image_size=8, num_channels=1, preprocessing='none',
      seed=0, use_tpu=False, tpu='', tpu_zone=None, gcp_project=None,
      tpu_iterations_per_loop=per_loop, save_checkpoints_steps=save_every,
      keep_checkpoint_max=5, log_every_steps=2, engine=engine)
  return _ToyConfig(job, learning_rate, max_steps)


def dataset_fn(features: Sequence[float], nan_from: Optional[int] = None,
               started=None, nan_in: Optional[Sequence[int]] = None):
  """The global batch `features` at every step (NaN from step `nan_from`,
  in its examples `nan_in`, default all), split over the replicas in order;
  keyed on the step, so a resumed run reads what an uninterrupted one would.
  `started(start)` is called when it is made."""

  def make(per_replica, start):
    if started is not None:
      started(start)
    batch = tf.constant(features, tf.float32)
    nan = tf.constant([float('nan') if nan_in is None or i in nan_in else 1.0
                       for i in range(len(features))])

    def at(step):
      bad = (step >= nan_from if nan_from is not None
             else tf.constant(False))
      return batch * tf.where(bad, nan, 1.0), tf.zeros_like(batch)

    return (tf.data.Dataset.range(start, 2**62).map(at).unbatch()
            .batch(per_replica, drop_remainder=True))

  return make


class ToyTask:
  """One weight moved towards 3 by gradient descent, the mean gradient over
  replicas; its batches `make_dataset(per-replica batch size, start step)`
  (by default `dataset_fn([1.0, 1.0])`)."""

  finite_scalars = {'model/loss': 'toy loss'}
  progress = {'model/loss': lambda v: f'toy loss {v:.4g}'}

  def __init__(self, learning_rate: float, make_dataset=None,
               train_batch_size: int = 2):
    self._learning_rate = learning_rate
    self._make_dataset = make_dataset or dataset_fn([1.0, 1.0])
    self.train_batch_size = train_batch_size

  def build(self):
    with replicas.identical_variables():
      return {'weight': tf.Variable(0.0, name='weight')}

  def initial_values(self, objects):
    del objects
    return []

  def write_summaries(self, scalars, step):
    del scalars, step
    return []

  def step(self, objects, inputs, global_step):
    del global_step
    features, _ = inputs
    weight = objects['weight']
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean((weight * features - 3.0) ** 2)
    gradient, = replicas.means([tape.gradient(loss, weight)])
    with tf.control_dependencies([
        weight.assign_sub(self._learning_rate * gradient)]):
      return {'model/loss': tf.identity(loss),
              'toy/weight': weight.read_value()}

  def dataset(self, batch_size, pipeline, start_step):
    del pipeline  # One input pipeline: the replicas take its batches in turn.
    return self._make_dataset(batch_size, start_step)


def toy_run(config: _ToyConfig, task: Optional[ToyTask] = None,
            engine: Optional[engine_lib.Engine] = None, on_start=None,
            **task_args):
  """The whole third binary below its entry point: (plan, trained);
  `on_start(stop)` is called when it starts."""
  path = os.path.join(config.job.model_dir, jobs.CONFIG_FILE)
  values = jobs.to_flat(config)
  run_only = jobs.JOB_RUN_ONLY_FIELDS | {'max_steps'}
  engine = engine or engine_lib.make(config.job)

  def check() -> _Plan:
    return _Plan(jobs.check_config(path, values, run_only),
                 resume_lib.resume_point(config.job.model_dir))

  def start(plan: _Plan, stop):
    jobs.write_config(path, values, plan.stored, run_only)
    if on_start:
      on_start(stop)
    return plan, engine.train(
        task or ToyTask(config.learning_rate, **task_args),
        max_steps=config.max_steps, stop=stop, run_name='the toy run',
        resume=plan.resume)

  return lifecycle.run(engine, 'toy', check, start)


def weight(model_dir: str) -> float:
  return float(resume_lib.reader(tf.train.latest_checkpoint(model_dir))
               .get_tensor('weight'))


class _ThirdBinary:
  """The toy binary's life on `ENGINE`."""

  ENGINE = None

  def _config(self, model_dir, **changes):
    return _config(model_dir, engine=self.ENGINE, **changes)

  def test_trains_resumes_and_refuses_other_settings(self):
    model_dir = tempfile.mkdtemp()
    plan, trained = toy_run(self._config(model_dir))
    self.assertIsNone(plan.resume.checkpoint)
    self.assertEqual((trained.start_step, trained.step), (0, 4))
    self.assertGreater(trained.images_per_sec, 0.0)
    self.assertEqual(resume_lib.resume_point(model_dir).global_step, 4)
    # Gradient descent on (w - 3)^2 from 0 at rate 0.1: w = 3 (1 - 0.8^4).
    self.assertAlmostEqual(weight(model_dir), 3 * (1 - 0.8**4), places=5)
    plan, trained = toy_run(self._config(model_dir, max_steps=6))
    self.assertEqual((plan.resume.global_step, trained.start_step), (4, 4))
    self.assertEqual(lifecycle.start_words('toy', model_dir, True,
                                           plan.resume),
                     f'Resuming toy in {model_dir} from step 4 '
                     '(model.ckpt-4)')
    self.assertAlmostEqual(weight(model_dir), 3 * (1 - 0.8**6), places=5)
    with self.assertRaisesRegex(ValueError, 'learning_rate is 0.1 there and '
                                '0.2 now'):
      toy_run(self._config(model_dir, learning_rate=0.2, max_steps=8))
    self.assertEqual(resume_lib.resume_point(model_dir).global_step, 6)
    self.assertFalse(os.path.exists(os.path.join(model_dir,
                                                 run_lock.LOCK_FILE)))

  def test_a_nan_stops_it_in_one_line_without_saving(self):
    # A loop of steps 2-4 (the distribute engine's), a NaN from step 3 on:
    # it stops there; the last checkpoint is the one before the loop.
    model_dir = tempfile.mkdtemp()
    toy_run(self._config(model_dir, max_steps=2, per_loop=3))
    with self.assertRaisesRegex(
        ValueError, r'^The toy loss is nan at step 3: the toy run stopped '
        'without saving it; the last good checkpoint is .*model.ckpt-2$'):
      toy_run(self._config(model_dir, max_steps=9, per_loop=3),
              make_dataset=dataset_fn([1.0, 1.0], nan_from=3))
    self.assertEqual(resume_lib.resume_point(model_dir).global_step, 2)

  def test_a_nan_on_one_replica_of_two_stops_it(self):
    # The second replica's half batch is NaN from step 1 on: the check reads
    # every replica's row (the first one's alone, which summaries show, is
    # finite), in a process of its own (two logical CPUs).
    model_dir = tempfile.mkdtemp()
    child = forked.Child([sys.executable, '-c', _TWO_REPLICAS, self.ENGINE,
                          model_dir],
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
    out, err = child.communicate(timeout=300)
    self.assertEqual((child.returncode, out), (0, (
        'The toy loss is nan at step 1: the toy run stopped without saving '
        f'it; the last good checkpoint is {model_dir}/model.ckpt-1\n')), err)
    self.assertAlmostEqual(weight(model_dir), 0.6, places=6)  # Step 0's.


# The toy on two replicas of `argv[1]`'s engine in `argv[2]`: prints the
# line its NaN stop raised.
_TWO_REPLICAS = """
import sys
from tunas_tf.runtime import engine as engine_lib
from tests.runtime import lifecycle_test as t

config = t._config(sys.argv[2], max_steps=4, engine=sys.argv[1], per_loop=1,
                   save_every=1)
try:
  t.toy_run(config, engine=engine_lib.make(config.job, replicas=2),
            make_dataset=t.dataset_fn([1.0, 1.0], nan_from=1, nan_in=[1]))
except ValueError as e:
  print(e)
"""


@pytest.mark.estimator
class EstimatorThirdBinaryTest(_ThirdBinary, absltest.TestCase):
  ENGINE = 'estimator'


class DistributeThirdBinaryTest(_ThirdBinary, absltest.TestCase):
  ENGINE = 'distribute'


if __name__ == '__main__':
  absltest.main()
