"""Tests of `runtime.distribute`: the toy third binary
(`lifecycle_test.toy_run`) on the tf.distribute engine, on any TF: its
loops, checkpoints, summaries, stops and strategies.
"""

import dataclasses
import glob
import os
import signal
import sys
import tempfile
import textwrap
import threading
from typing import Optional
from unittest import mock

from absl.testing import absltest
import tensorflow as tf

from tensorflow.core.protobuf import config_pb2  # pylint: disable=g-direct-tensorflow-import
from tensorflow.core.protobuf import rewriter_config_pb2  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.eager import context  # pylint: disable=g-direct-tensorflow-import
from tests.runtime import lifecycle_test
from tests.testing import forked
from tunas_tf.runtime import cloud_tpu
from tunas_tf.runtime import distribute
from tunas_tf.runtime import engine as engine_lib
from tunas_tf.runtime import estimator as estimator_lib
from tunas_tf.runtime import lifecycle
from tunas_tf.runtime import preemption
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.runtime import run_lock

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_Toy = lifecycle_test.ToyTask
_dataset_fn = lifecycle_test.dataset_fn
_weight = lifecycle_test.weight


def _rewrite_options() -> rewriter_config_pb2.RewriterConfig:
  """The Grappler config a `tf.function` first called now, in this thread,
  is optimised with."""
  return config_pb2.ConfigProto.FromString(
      context.context().function_call_options.config_proto_serialized
  ).graph_options.rewrite_options


class _TracingToy(_Toy):
  """The toy, keeping the Grappler options in force when its step was
  traced: the process's experimental ones and this thread's functions'
  RewriterConfig."""

  traced_under = rewrites_traced_under = None

  def step(self, objects, inputs, global_step):
    self.traced_under = tf.config.optimizer.get_experimental_options()
    self.rewrites_traced_under = _rewrite_options()
    return super().step(objects, inputs, global_step)


def _config(model_dir: str, max_steps: int, per_loop: int = 3,
            save_every: int = 3, learning_rate: float = 0.1):
  return lifecycle_test._config(  # pylint: disable=protected-access
      model_dir, learning_rate, max_steps, engine='distribute',
      per_loop=per_loop, save_every=save_every)


def _toy_run(config, features=(1.0, 1.0), nan_from=None, started=None,
             task=None, **engine_args):
  """The toy binary on tf.distribute: (plan, final step); `started(stop)`
  is called with its stop request when it reads its data."""
  stops = []
  if task is None:
    task = _Toy(config.learning_rate, _dataset_fn(
        features, nan_from,
        started and (lambda start: started(stops[0])(start))), len(features))
  plan, trained = lifecycle_test.toy_run(
      config, task, distribute.DistributeEngine(config.job, **engine_args),
      on_start=stops.append)
  return plan, trained.step


def _train(task, model_dir, max_steps, stop=None):
  """`task` trained outside `lifecycle.run`."""
  return distribute.DistributeEngine(_config(model_dir, max_steps).job).train(
      task, max_steps=max_steps, stop=stop or preemption.StopRequest(),
      run_name='the toy run')


def _steps(model_dir: str):
  return sorted(int(p.split('-')[-1][:-len('.index')]) for p in glob.glob(
      os.path.join(model_dir, 'model.ckpt-*.index')))


def _scalars(model_dir: str):
  """{tag: [(step, value)]} of the events files of `model_dir`."""
  found = {}
  for path in sorted(glob.glob(os.path.join(model_dir, 'events.out.*'))):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        number = float(tf.make_ndarray(value.tensor))
        found.setdefault(value.tag, []).append((event.step, number))
  return found


class ThirdBinaryTest(absltest.TestCase):

  def test_trains_to_max_steps_in_loops_of_three(self):
    model_dir = tempfile.mkdtemp()
    (plan, step) = _toy_run(_config(model_dir, max_steps=7))
    self.assertIsNone(plan.resume.checkpoint)
    self.assertEqual(step, 7)
    self.assertEqual(resume_lib.resume_point(model_dir).global_step, 7)
    self.assertAlmostEqual(_weight(model_dir), 3 * (1 - 0.8**7), places=5)
    # Loops end at 3, 6 and 7 (the last shortened); saves every 3 and at 7.
    self.assertEqual(_steps(model_dir), [0, 3, 6, 7])
    self.assertFalse(os.path.exists(os.path.join(model_dir,
                                                 run_lock.LOCK_FILE)))

  def test_a_resumed_run_ends_where_an_uninterrupted_one_does(self):
    first, whole = tempfile.mkdtemp(), tempfile.mkdtemp()
    _toy_run(_config(first, max_steps=4, per_loop=2))
    (plan, step) = _toy_run(_config(first, max_steps=9, per_loop=3))
    self.assertEqual(plan.resume.global_step, 4)
    self.assertEqual(lifecycle.start_words('toy', first, True, plan.resume),
                     f'Resuming toy in {first} from step 4 (model.ckpt-4)')
    self.assertEqual(step, 9)
    _toy_run(_config(whole, max_steps=9, per_loop=3))
    self.assertEqual(_weight(first), _weight(whole))  # Bit-equal.
    self.assertAlmostEqual(_weight(whole), 3 * (1 - 0.8**9), places=5)
    # Nothing left to do: the same step, nothing saved.
    self.assertEqual(_toy_run(_config(whole, max_steps=9))[1], 9)
    self.assertEqual(_steps(whole), [0, 3, 6, 9])

  def test_the_loop_runs_without_the_grappler_passes_asked_for(self):
    # The search asks for runner.distribute_grappler_off(); the experimental
    # options are process-wide (unset again when the run ends), the rest the
    # function call options of the loop's thread: both hold while the loop's
    # function is traced and first called.
    passes = ('constant_folding', 'remapping', 'tfg_optimizer',
              'memory_optimization', 'second_iteration')
    before = tf.config.optimizer.get_experimental_options()
    rewrites_before = _rewrite_options()
    trainer = _TracingToy(0.1)
    step = _toy_run(_config(tempfile.mkdtemp(), max_steps=4), task=trainer,
                    grappler_off=passes)[1]
    self.assertEqual(step, 4)
    self.assertEqual({p: trainer.traced_under.get(p) for p in passes[:2]},
                     {p: False for p in passes[:2]})
    rewrites = trainer.rewrites_traced_under
    config = rewriter_config_pb2.RewriterConfig
    self.assertEqual(
        (rewrites.constant_folding, rewrites.remapping,
         rewrites.disable_tfg_optimizer, rewrites.memory_optimization,
         rewrites.meta_optimizer_iterations),
        (config.OFF, config.OFF, True, config.NO_MEM_OPT, config.ONE))
    # Everything else as TF has it.
    for field in ('constant_folding', 'remapping', 'disable_tfg_optimizer',
                  'memory_optimization', 'meta_optimizer_iterations'):
      rewrites.ClearField(field)
    self.assertEqual(rewrites, rewrites_before)
    self.assertEqual(tf.config.optimizer.get_experimental_options(), before)
    # Without the argument the loop runs under TF's defaults.
    trainer = _TracingToy(0.1)
    _toy_run(_config(tempfile.mkdtemp(), max_steps=1), task=trainer)
    self.assertEqual(trainer.traced_under, before)
    self.assertEqual(trainer.rewrites_traced_under, rewrites_before)

  def test_keeps_keep_checkpoint_max_and_falls_back_past_a_broken_one(self):
    model_dir, whole = tempfile.mkdtemp(), tempfile.mkdtemp()
    config = _config(model_dir, max_steps=9)
    config = dataclasses.replace(config, job=dataclasses.replace(
        config.job, keep_checkpoint_max=2))
    _toy_run(config)
    self.assertEqual(_steps(model_dir), [6, 9])
    point = resume_lib.resume_point(model_dir)
    self.assertEqual((point.global_step, point.older),
                     (9, [os.path.join(model_dir, 'model.ckpt-6')]))
    data, = glob.glob(os.path.join(model_dir, 'model.ckpt-9.data-*'))
    with open(data, 'r+b') as f:
      f.truncate(2)
    (plan, step) = _toy_run(dataclasses.replace(config, max_steps=12))
    self.assertEqual((plan.resume.global_step, step), (6, 12))
    _toy_run(_config(whole, max_steps=12))
    self.assertEqual(_weight(model_dir), _weight(whole))

  def test_a_checkpoint_of_another_model_is_refused_in_one_line(self):
    model_dir = tempfile.mkdtemp()
    other = tf.train.Checkpoint(global_step=tf.Variable(1, dtype=tf.int64),
                                bias=tf.Variable(2.0))
    tf.train.CheckpointManager(other, model_dir, 1,
                               checkpoint_name='model.ckpt').save(1)
    with self.assertRaisesRegex(ValueError, r'^Cannot resume from '
                                '.*model.ckpt-1: .*; remove the broken '
                                'checkpoint or use a new --model_dir$'):
      _toy_run(_config(model_dir, max_steps=3))

  def test_summaries_are_written_at_the_estimators_steps(self):
    model_dir = tempfile.mkdtemp()
    _toy_run(_config(model_dir, max_steps=5, per_loop=2))
    found = _scalars(model_dir)
    self.assertEqual(sorted(found), ['model/loss', 'toy/weight'])
    # Steps 0, 2 and 4 (0-based; loops [0, 1], [2, 3], [4]), as host_call
    # writes every 2 steps.
    self.assertEqual([s for s, _ in found['model/loss']], [0, 2, 4])
    # The loss of step s is (w_s - 3)^2 = 9 * 0.64^s; the weight after it
    # 3 (1 - 0.8^(s + 1)).
    for step, loss in found['model/loss']:
      self.assertAlmostEqual(loss, 9 * 0.64**step, places=4)
    for step, weight in found['toy/weight']:
      self.assertAlmostEqual(weight, 3 * (1 - 0.8**(step + 1)), places=5)
    self.assertLen(glob.glob(os.path.join(model_dir, 'events.out.*')), 1)

  def test_a_nan_stops_the_loop_and_the_run_without_saving(self):
    model_dir = tempfile.mkdtemp()
    _toy_run(_config(model_dir, max_steps=3))
    # The loop of steps 3-5 ends after step 4, the first NaN.
    with self.assertRaisesRegex(
        ValueError, r'^The toy loss is nan at step 4: the toy run stopped '
        'without saving it; the last good checkpoint is .*model.ckpt-3$'):
      _toy_run(_config(model_dir, max_steps=9), nan_from=4)
    self.assertEqual(_steps(model_dir), [0, 3])
    self.assertEqual(resume_lib.resume_point(model_dir).global_step, 3)
    # Nothing of the loop: not even its finite step 3.
    self.assertEqual([s for s, _ in _scalars(model_dir)['model/loss']], [0])

  def test_a_lost_worker_stops_a_worker_of_a_cluster_in_one_line(self):
    model_dir = tempfile.mkdtemp()
    _toy_run(_config(model_dir, max_steps=3))
    reason = 'Collective ops is aborted by: Connection reset by peer'

    def peer_gone(per_replica, start):
      del per_replica, start
      raise tf.errors.UnavailableError(None, None, reason)

    engine = distribute.DistributeEngine(_config(model_dir, 9).job)
    self.assertIs(engine.strategy, tf.distribute.get_strategy())

    def train():
      engine.train(_Toy(0.1, peer_gone), max_steps=9,
                   stop=preemption.StopRequest(), run_name='the toy run')

    with self.assertRaises(tf.errors.UnavailableError):  # Not in a cluster.
      train()
    tf_config = ('{"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": '
                 '"worker", "index": 1}}')
    with mock.patch.dict(os.environ, TF_CONFIG=tf_config), \
        self.assertRaisesRegex(
            ValueError, f'^the toy run lost a worker of its cluster '
            f'\\({reason}\\) and stopped; the last checkpoint is '
            '.*model.ckpt-3: start every worker again to resume$'):
      train()

  def test_finite_scalars_must_be_scalars_of_the_step(self):
    trainer = _Toy(0.1, _dataset_fn([1.0]), 1)
    trainer.finite_scalars = {'toy/lost': 'toy loss'}
    with self.assertRaisesRegex(
        ValueError, r"^a task's finite_scalars \['toy/lost'\] are not "
        'among its scalars$'):
      _train(trainer, tempfile.mkdtemp(), 3)

  def test_a_stop_request_ends_after_the_loop_in_flight_and_saves(self):
    model_dir = tempfile.mkdtemp()

    def started(stop):
      def ask(start):  # From another thread, before the first loop.
        del start
        asker = threading.Thread(
            target=lambda: setattr(stop, 'signal_name', 'SIGTERM'))
        asker.start()
        asker.join()
      return ask

    with self.assertRaisesRegex(
        preemption.Stopped, '^stopped at step 3 by SIGTERM, checkpoint '
        'saved: run the same command to resume$'):
      _toy_run(_config(model_dir, max_steps=100, save_every=50),
               started=started)
    self.assertEqual(_steps(model_dir), [0, 3])
    self.assertAlmostEqual(_weight(model_dir), 3 * (1 - 0.8**3), places=5)

  def test_a_lost_directory_stops_it_without_saving(self):
    model_dir = tempfile.mkdtemp()
    stop = preemption.StopRequest(lambda: f'{model_dir} was taken over')
    with self.assertRaisesRegex(ValueError, '^.* was taken over$'):
      _train(_Toy(0.1, _dataset_fn([1.0]), 1), model_dir, 9, stop)
    self.assertEqual(_steps(model_dir), [0])  # The initial state only.


# Trains the toy with the batch (1, 2) to step 5 on STRATEGY_REPLICAS
# replicas (2: two CPU devices, which only a fresh process can make).
_MIRRORED = textwrap.dedent('''
    import sys
    from tests.runtime import distribute_test as t
    print(repr(t.batch_of_two(sys.argv[1], int(sys.argv[2]))))
''')


def batch_of_two(model_dir: str, replica_count: int) -> float:
  """The toy's weight after 5 steps on the batch (1, 2), and checks the
  replica count."""
  config = _config(model_dir, max_steps=5, per_loop=2)
  engine = distribute.DistributeEngine(config.job, replica_count)
  assert engine.strategy.num_replicas_in_sync == replica_count
  lifecycle_test.toy_run(config, _Toy(0.1, _dataset_fn((1.0, 2.0)), 2),
                         engine)
  return _weight(model_dir)


def _python(*args: str, log: Optional[str] = None) -> forked.Child:
  """`python -c` of `args` in a process of its own (a zygote's child);
  its stdout and stderr appended to `log` if given."""
  return forked.Child(
      [sys.executable, '-c', *args], cwd=_ROOT, log=log,
      env=dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL='3'))


class MirroredTest(absltest.TestCase):

  def test_two_cpu_replicas_average_the_gradient_of_half_batches(self):
    one = batch_of_two(tempfile.mkdtemp(), 1)
    process = _python(_MIRRORED, tempfile.mkdtemp(), '2')
    out, err = process.communicate(timeout=120)
    self.assertEqual(process.returncode, 0, err)
    two = float(out.strip().splitlines()[-1])
    self.assertAlmostEqual(one, 1.8 * (1 - 0.5**5), places=5)
    self.assertAlmostEqual(two, one, places=6)


# The toy binary to step 10^6 in a process of its own; says when it reads
# its data (its signal handlers are in place by then).
_LONG_RUN = textwrap.dedent('''
    import sys
    from tunas_tf.runtime import lifecycle
    from tests.runtime import distribute_test as t

    def started(stop):
      return lambda start: print('ready', flush=True)

    config = t._config(sys.argv[1], max_steps=10**6, save_every=10**5)
    sys.exit(lifecycle.main('toy', ['toy'],
                            lambda: t._toy_run(config, started=started)))
''')


class SignalTest(absltest.TestCase):

  def test_sigterm_saves_after_the_loop_in_flight_and_exits_75(self):
    model_dir = tempfile.mkdtemp()
    log = os.path.join(tempfile.mkdtemp(), 'log')
    process = _python(_LONG_RUN, model_dir, log=log)
    ready = 'ready\n' in forked.follow(process, log)  # Read up to it.
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=120)
    with open(log) as f:
      err = f.read()
    self.assertTrue(ready, err)
    self.assertEqual(process.returncode, preemption.EXIT_CODE, err)
    self.assertIn('toy: SIGTERM received', err)
    step = resume_lib.resume_point(model_dir).global_step
    self.assertIn(f'toy: stopped at step {step} by SIGTERM, checkpoint '
                  'saved: run the same command to resume', err)
    self.assertEqual(step % 3, 0)
    self.assertGreater(step, 0)
    self.assertEqual(_steps(model_dir), [0, step])


class StrategyTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.job = _config(tempfile.mkdtemp(), 1).job

  def test_one_device_by_default(self):
    self.assertIs(distribute.strategy_for(self.job),
                  tf.distribute.get_strategy())

  def test_tf_config_chooses_multi_worker(self):
    tf_config = '{"cluster": {"worker": ["localhost:1"]}, "task": ' \
                '{"type": "worker", "index": 0}}'
    with mock.patch.dict(os.environ, TF_CONFIG=tf_config), mock.patch.object(
        tf.distribute, 'MultiWorkerMirroredStrategy') as strategy:
      distribute.check_strategy(self.job)  # Makes nothing.
      strategy.assert_not_called()
      self.assertIs(distribute.strategy_for(self.job), strategy.return_value)
    strategy.assert_called_once_with()

  def test_tpu_chooses_tpu_strategy_over_the_resolved_tpu(self):
    job = dataclasses.replace(self.job, use_tpu=True, tpu='grpc://h:8470')
    resolver = object()
    with mock.patch.object(cloud_tpu, 'cluster_resolver',
                           return_value=resolver) as cluster, \
        mock.patch.object(tf.config, 'experimental_connect_to_cluster') as \
        connect, \
        mock.patch.object(tf.tpu.experimental, 'initialize_tpu_system'), \
        mock.patch.object(tf.distribute, 'TPUStrategy') as strategy:
      self.assertIs(distribute.strategy_for(job), strategy.return_value)
    cluster.assert_called_once_with(job)
    connect.assert_called_once_with(resolver)
    strategy.assert_called_once_with(resolver)

  def test_impossible_requests_are_refused_in_one_line(self):
    tpu = dataclasses.replace(self.job, use_tpu=True, tpu='local')
    for job, replica_count, env, message in [
        (tpu, 1, {'TF_CONFIG': '{}'}, 'TF_CONFIG is set and --use_tpu'),
        (self.job, 2, {'TF_CONFIG': '{}'}, 'drop --replicas'),
        (self.job, 1, {'TF_CONFIG': 'x'},
         r'TF_CONFIG is not a multi-worker cluster \(not JSON\)'),
    ]:
      for call in (distribute.check_strategy, distribute.strategy_for):
        with mock.patch.dict(os.environ, env), \
            self.assertRaisesRegex(ValueError, message) as raised:
          call(job, replica_count)
        self.assertNotIn('\n', str(raised.exception))


class LifecycleEngineTest(absltest.TestCase):

  def test_the_estimator_engine_alone_needs_tf_estimator(self):
    config = _config(tempfile.mkdtemp(), 1)
    on_estimator = dataclasses.replace(config.job, engine='estimator')
    with mock.patch.object(estimator_lib, 'has_estimator',
                           return_value=False):
      with self.assertRaisesRegex(
          ValueError, '^--engine=estimator needs tf.estimator, .* use '
          '--engine=distribute'):
        lifecycle.run(engine_lib.make(on_estimator), 'toy', lambda: None,
                      None)
      self.assertEqual(_toy_run(config)[1], 1)
    with self.assertRaisesRegex(ValueError,
                                "--engine must be one of .*, got 'keras'"):
      dataclasses.replace(config.job, engine='keras')

  def test_only_the_chief_of_a_cluster_takes_the_lock(self):
    model_dir = os.path.join(tempfile.mkdtemp(), 'run')
    job = _config(model_dir, 1).job
    lock = os.path.join(model_dir, run_lock.LOCK_FILE)
    check = lambda: lifecycle_test._Plan(  # pylint: disable=protected-access
        None, resume_lib.resume_point(model_dir))
    workers = '{"cluster": {"worker": ["h:1", "h:2"]}, "task": {"type": ' \
              '"worker", "index": %d}}'
    for index, locked in ((1, False), (0, True)):
      with mock.patch.dict(os.environ, TF_CONFIG=workers % index):
        self.assertEqual(lifecycle.run(
            engine_lib.make(job), 'toy', check,
            lambda plan, stop: os.path.exists(lock), multi_worker=True),
                         locked)
      self.assertEqual(os.path.exists(model_dir), locked)
    # Refused before the check: a malformed TF_CONFIG, or any cluster for a
    # binary that runs as one worker.
    for tf_config, message, multi_worker in (
        ('{"cluster": {}}', 'no "cluster" object', True),
        (workers % 0, '^toy runs as one worker: TF_CONFIG names a cluster; '
         'unset it$', False)):
      with mock.patch.dict(os.environ, TF_CONFIG=tf_config), \
          self.assertRaisesRegex(ValueError, message):
        lifecycle.run(engine_lib.make(job), 'toy',
                      mock.Mock(side_effect=AssertionError), None,
                      multi_worker=multi_worker)


if __name__ == '__main__':
  absltest.main()
