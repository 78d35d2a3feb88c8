"""The tf.distribute engine: a `runtime.task.Task` trained by a custom loop
of `job.tpu_iterations_per_loop` steps per `tf.function` call under the
strategy `strategy_for` picks, and evaluated in one pass; any TF."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import (Any, Callable, Dict, Iterable, Iterator, Mapping,
                    Optional, Sequence, Tuple)

import numpy as np
import tensorflow as tf

# pylint: disable=g-direct-tensorflow-import
from tensorflow.core.protobuf import config_pb2
from tensorflow.core.protobuf import rewriter_config_pb2
from tensorflow.python.eager import context
# pylint: enable=g-direct-tensorflow-import

from tunas_tf.data import streams
from tunas_tf.io import errors
from tunas_tf.runtime import cloud_tpu
from tunas_tf.runtime import cluster
from tunas_tf.runtime import guards
from tunas_tf.runtime import hooks
from tunas_tf.runtime import preemption
from tunas_tf.runtime import replicas as replicas_lib
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.runtime import summaries as summaries_lib
from tunas_tf.runtime import task as task_lib
from tunas_tf.runtime.jobs import JobConfig

# Checkpoints are `model.ckpt-N`, as the Estimator names them.
CHECKPOINT_NAME = 'model.ckpt'
# (input context, global step the run starts at) -> per-replica batches.
DatasetFn = Callable[[tf.distribute.InputContext, int], tf.data.Dataset]


def dataset_fn(task: task_lib.Task, use_tpu: bool) -> DatasetFn:
  """`task`'s batches for `distribute_datasets_from_function`: each input
  pipeline yields its replicas' batches in turn (`streams.Pipeline`), HWCN
  on TPU."""

  def make(context: tf.distribute.InputContext, start_step: int
           ) -> tf.data.Dataset:
    batch = context.get_per_replica_batch_size(task.train_batch_size)
    count = context.num_input_pipelines
    pipeline = streams.Pipeline(context.input_pipeline_id, count,
                                context.num_replicas_in_sync // count)
    return task_lib.infeed(task.dataset(batch, pipeline, start_step), use_tpu)

  return make


def flat_scalars(scalars: Mapping[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
  """A step's scalars as scalars only: a vector `name` of k values as
  `name/0` ... (`summaries.vector_tags`, as the Estimator's host_call
  writes it)."""
  flat = {}
  for name, value in scalars.items():
    if value.shape.rank == 0:
      flat[name] = value
      continue
    for j, tag in enumerate(summaries_lib.vector_tags(name, value.shape[0])):
      flat[tag] = value[j]
  return flat


def _split_cpu(count: int) -> None:
  """Makes the CPU `count` logical devices; ValueError once TF's runtime
  started with fewer."""
  cpu = tf.config.list_physical_devices('CPU')[0]
  try:
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * count)
  except RuntimeError:
    have = len(tf.config.list_logical_devices('CPU'))
    if have < count:
      raise ValueError(
          f'--replicas={count} on CPU needs {count} CPU devices, and '
          f'TensorFlow already started with {have}: choose the strategy '
          f'before TensorFlow runs anything') from None


def check_strategy(job: JobConfig, replicas: int = 1) -> None:
  """ValueError (one line) for what `strategy_for` would refuse, making
  nothing: `replicas` > 1 with `TF_CONFIG`, `TF_CONFIG` on TPU or malformed,
  or fewer GPUs than `replicas` > 1."""
  tf_config = os.environ.get(cluster.ENV, '').strip()
  if job.use_tpu:
    if tf_config:
      raise ValueError('TF_CONFIG is set and --use_tpu: a TPU finds its '
                       'hosts through --tpu; unset TF_CONFIG')
  elif tf_config:
    if replicas > 1:
      raise ValueError(f'--replicas={replicas} with TF_CONFIG: each worker '
                       'trains on its own GPUs; drop --replicas')
    cluster.worker()
  elif replicas > 1:
    replicas_lib.replica_devices(replicas)


def strategy_for(job: JobConfig, replicas: int = 1) -> tf.distribute.Strategy:
  """`TPUStrategy` on TPU, `MultiWorkerMirroredStrategy` under `TF_CONFIG`,
  `MirroredStrategy` over `replicas` > 1 GPUs (or CPU devices), else the
  default. Call it before TF runs anything (the CPU split and collectives
  are set up as TF starts); ValueError (one line) as `check_strategy`, or
  for a CPU that can no longer be split."""
  check_strategy(job, replicas)
  if job.use_tpu:
    resolver = cloud_tpu.cluster_resolver(job)
    if job.tpu != cloud_tpu.LOCAL:
      tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  if cluster.worker() is not None:
    return tf.distribute.MultiWorkerMirroredStrategy()
  if replicas == 1:
    return tf.distribute.get_strategy()
  devices, cpu_devices = replicas_lib.replica_devices(replicas)
  if cpu_devices == 1:
    return tf.distribute.MirroredStrategy(devices)
  _split_cpu(cpu_devices)
  return tf.distribute.MirroredStrategy(
      devices, cross_device_ops=tf.distribute.ReductionToOneDevice())


class _Run:
  """A task's variables, checkpoint and step loop under a strategy. `chief`:
  whether this process writes the run's files; the other workers save at
  the same steps too (a save may read collectively), into a directory of
  their own that `close` removes."""

  def __init__(self, strategy: tf.distribute.Strategy, task: task_lib.Task,
               job: JobConfig):
    self.strategy, self._job, self.task = strategy, job, task
    with strategy.scope():
      self.global_step = tf.Variable(
          0, dtype=tf.int64, trainable=False, name='global_step',
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
      self.objects = task.build()
    if 'global_step' in self.objects:
      raise ValueError("a task's checkpointed objects cannot be named "
                       "'global_step' (the loop's)")
    self._checkpoint = tf.train.Checkpoint(global_step=self.global_step,
                                           **self.objects)
    self.chief = strategy.extended.should_checkpoint
    self._save_dir = (job.model_dir if self.chief
                      else tempfile.mkdtemp(prefix='tunas_tf-worker-'))
    self.manager = tf.train.CheckpointManager(
        self._checkpoint, self._save_dir,
        max_to_keep=job.keep_checkpoint_max if self.chief else 1,
        checkpoint_name=CHECKPOINT_NAME, step_counter=self.global_step)
    self.resumed = False  # Whether `restore` found a checkpoint.
    self.loop = tf.function(self._loop, autograph=False)

  def close(self) -> None:
    """Removes a non-chief worker's own checkpoints."""
    if not self.chief:
      shutil.rmtree(self._save_dir, ignore_errors=True)

  def restore(self) -> int:
    """Restores the checkpoint the `checkpoint` file names and returns its
    step; ValueError naming it when the task's objects cannot take it."""
    latest = tf.train.latest_checkpoint(self._job.model_dir)
    self.resumed = latest is not None
    if latest is not None:
      try:
        self._checkpoint.restore(latest).assert_existing_objects_matched()
      except (tf.errors.OpError, AssertionError, ValueError) as e:
        raise ValueError(
            f'Cannot resume from {latest}: {errors.first_line(e)}; '
            'remove the broken checkpoint or use a new --model_dir') from None
    return int(self.global_step.numpy())

  def _loop(self, iterator, steps: tf.Tensor) -> Tuple[Any, ...]:
    """`steps` steps, stopping after the first with a non-finite
    `finite_scalars` (any replica); the last step's scalars (first replica's
    and mean), and the first replica's of the step that is a multiple of
    `tpu_iterations_per_loop` with that step (-1: none)."""
    every, names = self._job.tpu_iterations_per_loop, []
    checked = list(self.task.finite_scalars)

    def replica_step(inputs, step):  # The scalars as one vector.
      scalars = flat_scalars(self.task.step(
          self.objects, task_lib.from_infeed(inputs, self._job.use_tpu), step))
      names[:] = scalars
      return tf.stack([tf.cast(v, tf.float32) for v in scalars.values()])

    def all_finite(values):
      guards.check_names(checked, names)
      indices = tf.constant([names.index(name) for name in checked],
                            tf.int32)  # (Possibly none: all finite.)
      return tf.reduce_all(tf.math.is_finite(tf.gather(values, indices)))

    def body(i, last, last_mean, kept, kept_at, finite):
      del last, last_mean, finite
      step = self.global_step.read_value()
      per_replica = self.strategy.run(replica_step,
                                      args=(next(iterator), step))
      values = self.strategy.experimental_local_results(per_replica)[0]
      mean = self.strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica,
                                  axis=None)
      keep = tf.equal(step % every, 0)
      kept = tf.cond(keep, lambda: values, lambda: kept)
      kept_at = tf.where(keep, step, kept_at)
      with tf.control_dependencies([values, mean, kept]):
        self.global_step.assign_add(1)
        return (i + 1, tf.identity(values), tf.identity(mean),
                tf.identity(kept), kept_at, all_finite(mean))

    vector, scalar = tf.TensorShape([None]), tf.TensorShape([])
    _, last, last_mean, kept, kept_at, _ = tf.while_loop(
        lambda i, *rest: tf.logical_and(i < steps, rest[-1]), body,
        (tf.constant(0, tf.int64), tf.zeros([0]), tf.zeros([0]),
         tf.zeros([0]), tf.constant(-1, tf.int64), tf.constant(True)),
        shape_invariants=(scalar, vector, vector, vector, scalar, scalar))
    kept = tf.pad(kept, [[0, len(names) - tf.size(kept)]])  # (None kept.)
    return (*(dict(zip(names, tf.unstack(v, len(names))))
              for v in (last, last_mean, kept)), kept_at)


def _floats(values: Mapping[str, tf.Tensor], names: Iterable[str]
            ) -> Dict[str, float]:
  """The scalars of `values` among `names`, read to the host."""
  return {name: float(values[name]) for name in names if name in values}


def _train(run: _Run, job: JobConfig, max_steps: int,
           stop: preemption.StopRequest, run_name: str) -> task_lib.Trained:
  """`DistributeEngine.train`'s loop, once the run's objects exist."""
  step = start = run.restore()
  if step >= max_steps:
    return task_lib.Trained(start, step, None)
  if not run.resumed:
    for variable, value in run.task.initial_values(run.objects):
      variable.assign(value)
    # The initial state, as the Estimator saves it (on every worker).
    run.manager.save(checkpoint_number=step)
  make_dataset = dataset_fn(run.task, job.use_tpu)
  iterator = iter(run.strategy.distribute_datasets_from_function(
      lambda context: make_dataset(context, start)))
  writer = (tf.summary.create_file_writer(job.model_dir) if run.chief
            else tf.summary.create_noop_writer())
  progress = hooks.ProgressLine(max_steps, job.log_every_steps,
                                run.task.progress)
  throughput = hooks.Throughput(run.strategy.num_replicas_in_sync)
  saved = step
  try:
    while step < max_steps:
      steps = min(job.tpu_iterations_per_loop, max_steps - step)
      throughput.begin()
      last, last_mean, kept, kept_at = run.loop(
          iterator, tf.constant(steps, tf.int64))
      before, step = step, int(run.global_step.numpy())
      throughput.add((step - before) * run.task.train_batch_size)
      # At the loop's last step, before anything is written.
      guards.check_finite(last_mean, run.task.finite_scalars, step - 1,
                          job.model_dir, run_name)
      if int(kept_at) >= 0:  # The scalars of the loop's summary step.
        kept = _floats(kept, kept)
        with writer.as_default():
          for name, value in kept.items():
            tf.summary.scalar(name, value, step=int(kept_at))
          run.task.write_summaries(kept, int(kept_at))
      if run.chief:
        progress.update(step, _floats(last, run.task.progress),
                        throughput.text)
      lost = stop.lost()
      if lost:
        raise ValueError(lost)
      every = job.save_checkpoints_steps
      if (stop.signal_name or step >= max_steps or
          step // every > saved // every):
        run.manager.save(checkpoint_number=step)
        saved = step
      stop.raise_if_stopped(step)
  finally:
    writer.close()
  return task_lib.Trained(start, step, throughput.rate())


@contextlib.contextmanager
def _lost_worker_in_one_line(model_dir: str, run: str) -> Iterator[None]:
  """In a worker of a cluster (`cluster.worker()`): a peer that stopped
  (killed, preempted, failed), which fails this worker's collectives,
  becomes one line naming the last checkpoint; elsewhere nothing."""
  try:
    yield
  except (tf.errors.UnavailableError, tf.errors.AbortedError) as e:
    if cluster.worker() is None:
      raise
    latest = tf.train.latest_checkpoint(model_dir)
    raise ValueError(
        f'{run} lost a worker of its cluster '
        f'({errors.first_line(e)}) and stopped; the last checkpoint '
        f'is {latest or "none (none was saved)"}: start every worker again '
        'to resume') from None


# Grappler settings `tf.config.optimizer.set_experimental_options` has no
# name for, by the name `grappler_without` takes: (RewriterConfig field,
# value) set in the function call options of the calling thread (the config
# a `tf.function` is optimised with when it is first called there).
_REWRITER = rewriter_config_pb2.RewriterConfig
_REWRITES_OFF = {
    # tfg's MLIR passes (the control-flow sink among them).
    'tfg_optimizer': ('disable_tfg_optimizer', True),
    # The memory optimiser (scheduling and, on GPUs, swapping heuristics).
    'memory_optimization': ('memory_optimization', _REWRITER.NO_MEM_OPT),
    # The meta optimiser's second round over every pass.
    'second_iteration': ('meta_optimizer_iterations', _REWRITER.ONE),
}


@contextlib.contextmanager
def grappler_without(passes: Sequence[str]) -> Iterator[None]:
  """Grappler without `passes` for the `tf.function`s first called inside:
  options of `tf.config.optimizer.set_experimental_options` (process-wide)
  or of `_REWRITES_OFF` (this thread only), TF's defaults again on exit."""
  experimental = [p for p in passes if p not in _REWRITES_OFF]
  tf.config.optimizer.set_experimental_options(
      {p: False for p in experimental})
  ctx = context.context()
  rewrites = [_REWRITES_OFF[p] for p in passes if p in _REWRITES_OFF]
  if rewrites:
    # This thread's options, rebuilt with the experimental options just set.
    options = ctx.function_call_options
    config = config_pb2.ConfigProto.FromString(
        options.config_proto_serialized)
    for field, value in rewrites:
      setattr(config.graph_options.rewrite_options, field, value)
    ctx.function_call_options = context.FunctionCallOptions(
        executor_type=options.executor_type, config_proto=config)
  try:
    yield
  finally:
    # This thread's function call options go too: TF rebuilds them from
    # the context's config when next asked for.
    tf.config.optimizer.set_experimental_options(
        {p: None for p in experimental})
    ctx.function_call_options = None


class DistributeEngine:
  """The tf.distribute engine (`runtime.engine.Engine`); `grappler_off`: the
  passes the training loop runs without (`grappler_without`)."""

  def __init__(self, job: JobConfig, replicas: int = 1,
               grappler_off: Sequence[str] = ()):
    self.job, self._replicas, self._grappler_off = job, replicas, grappler_off
    self._strategy = None

  def worker(self) -> Optional[cluster.Worker]:
    """The worker of a cluster `TF_CONFIG` names, or None (one line for a
    malformed one)."""
    return cluster.worker()

  @property
  def chief(self) -> bool:
    """Whether this process writes the run's files (not a non-chief
    worker)."""
    return cluster.is_chief()

  def check(self) -> None:
    """Refuses, making nothing, what `strategy_for` would (one line)."""
    check_strategy(self.job, self._replicas)
    cloud_tpu.cluster_resolver(self.job)

  @property
  def strategy(self) -> tf.distribute.Strategy:
    """The run's strategy, made on first use (before TF runs anything)."""
    if self._strategy is None:
      self._strategy = strategy_for(self.job, self._replicas)
    return self._strategy

  def train(self, task: task_lib.Task, *, max_steps: int,
            stop: preemption.StopRequest, run_name: str,
            resume: Optional[resume_lib.ResumePoint] = None
            ) -> task_lib.Trained:
    """`engine.Engine.train` in loops of `job.tpu_iterations_per_loop` steps,
    writing the scalars the Estimator's host_call writes and saving between
    loops; in a cluster, a lost worker stops it in one line."""
    del resume  # Restored from the `checkpoint` file.
    job, strategy = self.job, self.strategy

    def train() -> task_lib.Trained:
      run = _Run(strategy, task, job)
      try:
        return _train(run, job, max_steps, stop, run_name)
      finally:
        run.close()

    return guards.run(train, run_name, job.model_dir,
                      _lost_worker_in_one_line(job.model_dir, run_name),
                      grappler_without(self._grappler_off))

  def evaluate(self, task: task_lib.EvaluatedTask, *,
               checkpoint: Optional[str], stop: preemption.StopRequest,
               run_name: str) -> Dict[str, Any]:
    """`engine.Engine.evaluate`: each batch split over the replicas (on TPU
    the last one padded), the per-example values gathered on the host."""
    strategy = self.strategy

    def evaluate() -> Dict[str, Any]:
      with strategy.scope():
        evaluated, pairs = task.build_evaluation(checkpoint)
        for variable, value in pairs:
          variable.assign(value)
      step = resume_lib.checkpoint_step(checkpoint) if checkpoint else 0
      dataset = strategy.experimental_distribute_dataset(
          task.eval_dataset(task.eval_batch_size, self.job.use_tpu))

      @tf.function(input_signature=[dataset.element_spec], autograph=False)
      def batch(inputs):
        values = strategy.run(lambda x: task.evaluation_step(evaluated, x),
                              args=(inputs,))
        return {name: strategy.gather(value, axis=0)
                for name, value in values.items()}

      sums, throughput = {}, hooks.Throughput(strategy.num_replicas_in_sync)
      for inputs in dataset:
        throughput.begin()
        values = {name: v.numpy() for name, v in batch(inputs).items()}
        for name, value in values.items():  # In float64, as the Estimator's.
          sums[name] = sums.get(name, 0.0) + np.sum(value, dtype=np.float64)
        throughput.add(len(next(iter(values.values()))))
        stop.raise_if_stopped(step, preemption.NOTHING_SAVED)
      return dict(task.aggregate({k: float(v) for k, v in sums.items()}),
                  global_step=step, images_per_sec=throughput.rate())

    return guards.run(evaluate, f"{run_name}'s evaluation", None)
