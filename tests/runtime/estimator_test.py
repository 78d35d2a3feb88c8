"""Tests for `estimator`: which batches an input_fn call yields, determinism,
the refusal on a TF without Estimator, the per-replica model_fn's build."""

import dataclasses
import inspect
import os
import shutil
import tempfile
from unittest import mock

from absl.testing import absltest
import numpy as np
import pytest
import tensorflow as tf

from tunas_tf.data import streams
from tunas_tf.runtime import engine as engine_lib
from tunas_tf.runtime import estimator
from tunas_tf.runtime import hooks
from tunas_tf.runtime import jobs
from tunas_tf.runtime import lifecycle
from tunas_tf.runtime import replicas
from tests.runtime import lifecycle_test
from tests.testing import ancestry
from tests.testing import replicated


def _job(use_tpu=False):
  return jobs.JobConfig(
      model_dir='/tmp/unused', dataset='digits', data_dir=None,
      download=False, num_classes=10, image_size=8, num_channels=1,
      preprocessing='none', seed=0,
      use_tpu=use_tpu, tpu='my-tpu' if use_tpu else '', tpu_zone=None,
      gcp_project=None, tpu_iterations_per_loop=1, save_checkpoints_steps=1,
      keep_checkpoint_max=1, log_every_steps=1, engine='estimator')


class _FakeTPUContext:
  """What TPUEstimator passes a per-host input_fn (host 1 of 4, 8 cores)."""

  def current_input_fn_deployment(self):
    return '/job:worker/task:1/device:CPU:0', 1, 4, 8


class InputPipelineTest(absltest.TestCase):

  def test_one_replica_and_replicas_off_tpu(self):
    self.assertEqual(estimator.input_pipeline({}, _job()), streams.Pipeline())
    self.assertEqual(estimator.input_pipeline({}, _job(), replicas=3),
                     streams.Pipeline(0, 1, 3))
    self.assertEqual(estimator.input_pipeline({}, _job(), replicas=3).replicas,
                     3)

  def test_a_tpu_host_feeds_its_cores(self):
    pipeline = estimator.input_pipeline(
        {'batch_size': 16, 'context': _FakeTPUContext()}, _job(use_tpu=True))
    self.assertEqual(pipeline, streams.Pipeline(1, 4, 8))
    self.assertEqual(pipeline.replicas, 32)


class DeterminismTest(absltest.TestCase):

  def test_use_determinism_only_when_asked(self):
    # Process-wide and one-way: checked through a mock, not turned on here.
    with mock.patch.object(tf.config.experimental,
                           'enable_op_determinism') as enable:
      lifecycle.use_determinism(_job())
      enable.assert_not_called()
      lifecycle.use_determinism(dataclasses.replace(_job(), deterministic=True))
      enable.assert_called_once_with()

  def test_deterministic_may_change_on_restart(self):
    self.assertIn('deterministic', jobs.JOB_RUN_ONLY_FIELDS)


class RequireEstimatorTest(absltest.TestCase):

  def test_this_tf_has_the_estimator_exactly_when_it_is_tf_2_15(self):
    version = tuple(int(n) for n in tf.__version__.split('.')[:2])
    self.assertEqual(estimator.has_estimator(), version < (2, 16))

  def test_a_tf_without_it_is_refused_in_one_line(self):
    with mock.patch.object(estimator, 'has_estimator', return_value=False):
      with self.assertRaisesRegex(
          ValueError, r'^--engine=estimator needs [^\n]*use '
          '--engine=distribute'):
        estimator.make_estimator(lambda *args: None, _job(), 8)

  def test_a_run_is_refused_before_it_writes_anything(self):
    root = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, root)
    model_dir = os.path.join(root, 'run')
    job = dataclasses.replace(_job(), model_dir=model_dir)
    start = mock.Mock()
    with mock.patch.object(estimator, 'has_estimator', return_value=False):
      with self.assertRaisesRegex(ValueError, 'use --engine=distribute'):
        lifecycle.run(engine_lib.make(job), 'train_search', lambda: None,
                      start)
    start.assert_not_called()
    self.assertFalse(os.path.exists(model_dir))


@pytest.mark.estimator  # TPUEstimatorSpec.
class TaskModelFnTest(absltest.TestCase):

  def test_the_step_is_read_before_its_increment(self):
    # The toy's step does not use the global step: the step the host_call
    # writes and checks (`guards.FiniteHook`) must still be the one taken.
    task = lifecycle_test.ToyTask(0.1)
    model_fn = estimator.task_model_fn(task, _job(), max_steps=4)
    with tf.Graph().as_default():
      spec = model_fn(tf.ones([2]), tf.zeros([2]), 'train', {})
      step = spec.host_call[1][0]
      read = [op for op in ancestry.ancestors(step.op)
              if op.type == 'ReadVariableOp']
      self.assertLen(read, 1)
      self.assertIn(read[0], ancestry.ancestors(spec.train_op))


class DistributedModelFnTest(absltest.TestCase):

  def test_each_replica_builds_the_model_fn_unconverted(self):
    # As the Estimator calls it under `--replicas` (MirroredStrategy, which
    # converts what it calls with autograph): a Python `if` on a tensor is
    # refused as in the single-replica TF1 graph, not made a `tf.cond`.
    def model_fn(features, labels, mode, params):
      del labels, mode, params
      if tf.reduce_sum(features) > 0:
        raise AssertionError('a Python branch on a graph tensor was taken')

    replica_fn = estimator.distributed_model_fn(model_fn, 1)
    # The Estimator reads the model_fn's argument names.
    self.assertEqual(list(inspect.signature(replica_fn).parameters),
                     ['features', 'labels', 'mode', 'params'])
    with replicated.graph(2) as strategy:
      with self.assertRaises(tf.errors.OperatorNotAllowedInGraphError):
        strategy.extended.call_for_each_replica(
            replica_fn, args=(tf.ones([2]), tf.ones([2]), 'train', {}))


  @pytest.mark.estimator  # TPUEstimatorSpec.
  def test_the_first_replicas_host_call_reads_every_replicas_row(self):
    # Its row is written, every row is checked (`guards.queue_finite`).
    received = []

    def model_fn(features, labels, mode, params):
      del features, labels, params
      weight = tf.compat.v1.get_variable(
          'w', [], initializer=tf.compat.v1.zeros_initializer())
      row = tf.reshape(tf.cast(replicas.replica_id(), tf.float32) + weight,
                       [1, 1])
      return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
          mode, loss=weight, train_op=tf.no_op(), host_call=(
              lambda step, rows: received.append(rows) or tf.no_op(),
              [tf.constant([0], tf.int64), row]))

    replica_fn, specs = estimator.distributed_model_fn(model_fn, 1), {}
    with replicated.graph(2) as strategy:
      replicated.run(strategy, lambda i: specs.setdefault(
          i, replica_fn(None, None, 'train', {})))
      hook = specs[0].training_hooks[-1]
      self.assertIsInstance(hook, hooks.HostCallHook)
      self.assertNotIsInstance(specs[1].training_hooks[-1],
                               hooks.HostCallHook)
      hook.begin()
      with replicated.session(2) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(received[0]), [[0.0], [1.0]])


if __name__ == '__main__':
  absltest.main()
