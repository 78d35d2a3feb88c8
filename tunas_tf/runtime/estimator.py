"""The Estimator engine: a `runtime.task.Task` trained and evaluated by
TPUEstimator (on TPU or CPU/GPU), or for `--replicas` by an `Estimator` over
a `MirroredStrategy`. TF 2.15 with tensorflow-estimator only."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from typing import Any, Callable, Dict, Mapping, Optional

import numpy as np
import tensorflow as tf

from tunas_tf.data import streams
from tunas_tf.runtime import cloud_tpu
from tunas_tf.runtime import guards
from tunas_tf.runtime import hooks
from tunas_tf.runtime import preemption
from tunas_tf.runtime import replicas as replicas_lib
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.runtime import summaries
from tunas_tf.runtime import task as task_lib
from tunas_tf.runtime.jobs import JobConfig

# The scalar every task's step returns that TPUEstimator takes as the loss.
LOSS = 'model/loss'


def task_model_fn(task: task_lib.Task, job: JobConfig, max_steps: int,
                  record: Optional[Dict[str, Any]] = None, replicas: int = 1,
                  check: Optional[guards.FiniteHook] = None
                  ) -> Callable[..., Any]:
  """The TPUEstimator model_fn (training) of `task`, called once per
  replica: the task's step, then the global step's increment; the
  `initial_values` where no checkpoint is restored; scalars through
  `summaries.host_call`, the progress line and images/s per core (into
  `record`) through `hooks.ProgressHook`."""

  def model_fn(features, labels, mode, params):
    if mode != tf.estimator.ModeKeys.TRAIN:
      raise ValueError(f'task_model_fn only trains, got mode {mode!r}')
    global_step = tf.compat.v1.train.get_or_create_global_step()
    objects = task.build()
    step = global_step.read_value()
    scalars = task.step(objects, task_lib.from_infeed((features, labels),
                                                      job.use_tpu), step)
    # After every update of the step (which the scalars follow) and the
    # read of `step` (a task's step need not use it; graphs have no order).
    with tf.control_dependencies([step, *scalars.values()]):
      train_op = global_step.assign_add(1).op
    fetches = {'step': global_step}
    if not job.use_tpu:  # On TPU the scalars cannot be fetched by a hook.
      fetches.update((k, scalars[k]) for k in task.progress if k in scalars)
    cores = (params['context'].num_replicas
             if job.use_tpu and params and 'context' in params else replicas)
    progress = hooks.ProgressHook(
        fetches, max_step=max_steps, log_every=job.log_every_steps,
        formats=task.progress, images_per_step=task.train_batch_size,
        num_cores=cores, record=record, record_key='train_images_per_sec')
    # On TPU too: the saver runs after `guards.FiniteHook` (TPUEstimator's
    # own would run first; it then saves nothing at a graceful shutdown).
    saver = hooks.CheckpointSaverHook(
        job.model_dir, job.save_checkpoints_steps,
        job.tpu_iterations_per_loop if job.use_tpu else 1)
    return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
        mode=mode, loss=scalars[LOSS], train_op=train_op,
        host_call=summaries.host_call(
            scalars, step, job.model_dir, job.tpu_iterations_per_loop,
            task.write_summaries, check),
        scaffold_fn=initial_values_scaffold(task.initial_values(objects)),
        training_hooks=[progress, saver])

  return model_fn


def initial_values_scaffold(pairs: task_lib.Values
                            ) -> Optional[Callable[[], Any]]:
  """The TPUEstimator scaffold_fn that assigns the (variable, value) `pairs`
  in a session that restores no checkpoint (fed, not held as constants in
  the graph); None for no pairs."""
  if not pairs:
    return None

  def make_scaffold():
    feed, assignments = {}, []
    for variable, value in pairs:
      value = np.asarray(value)
      placeholder = tf.compat.v1.placeholder(variable.dtype.base_dtype,
                                             value.shape)
      feed[placeholder] = value
      assignments.append(variable.assign(placeholder))
    init_op = tf.group(*assignments)
    return tf.compat.v1.train.Scaffold(
        init_fn=lambda scaffold, session: session.run(init_op, feed))

  return make_scaffold


def task_input_fn(task: task_lib.Task, job: JobConfig, replicas: int = 1,
                  start_step: int = 0) -> Callable[..., Any]:
  """The input_fn of `task`'s batches from `start_step` on: of the batch
  size TPUEstimator passes, or off TPU `task.train_batch_size / replicas`
  (`input_pipeline`); HWCN on TPU (`task.infeed`)."""

  def input_fn(params):
    batch = params.get('batch_size', task.train_batch_size // replicas)
    return task_lib.infeed(
        task.dataset(batch, input_pipeline(params, job, replicas), start_step),
        job.use_tpu)

  return input_fn


def _sum_metric(values: tf.Tensor):
  """A streaming float64 sum of `values` (an eval metric: value, update)."""
  total = tf.compat.v1.Variable(
      tf.zeros([], tf.float64), trainable=False, name='sum',
      collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES,
                   tf.compat.v1.GraphKeys.METRIC_VARIABLES])
  update = total.assign_add(tf.reduce_sum(tf.cast(values, tf.float64)))
  return tf.identity(total), update


def _eval_model_fn(task: task_lib.EvaluatedTask, job: JobConfig,
                   checkpoint: Optional[str], step: int,
                   record: Dict[str, Any]) -> Callable[..., Any]:
  """The TPUEstimator model_fn (evaluation) of `task` on `checkpoint`:
  every value of `task.build_evaluation` (and the global step, `step`)
  assigned at session start, `task.evaluation_step`'s values summed in
  float64 on the host (on TPU every core's), the images/s (off TPU) into
  `record['images_per_sec']`."""

  def model_fn(features, labels, mode, params):
    del params
    global_step = tf.compat.v1.train.get_or_create_global_step()
    evaluated, pairs = task.build_evaluation(checkpoint)
    pairs = pairs + [(global_step, np.int64(step))]
    values = task.evaluation_step(evaluated, (features, labels))
    names = sorted(values)

    def metric_fn(*columns):  # (Estimator's own metrics: loss, global_step.)
      return {f'sum/{name}': _sum_metric(c) for name, c in zip(names, columns)}

    # On TPU the batch lives inside the TPU computation: no rate there.
    eval_hooks = [] if job.use_tpu else [hooks.ProgressHook(
        {'batch': tf.shape(labels)[0]}, record=record,
        record_key='images_per_sec')]
    return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
        mode=mode, loss=tf.constant(0.0),
        eval_metrics=(metric_fn, [values[name] for name in names]),
        scaffold_fn=initial_values_scaffold(pairs),
        evaluation_hooks=eval_hooks)

  return model_fn


def has_estimator() -> bool:
  """Whether this TF has `tf.estimator` (TF 2.15 with tensorflow-estimator;
  TF 2.16+ has none)."""
  return hasattr(tf.compat.v1, 'estimator')


def default_engine() -> str:
  """'estimator' where this TF has it (TF 2.15), else 'distribute'."""
  return 'estimator' if has_estimator() else 'distribute'


def require_estimator() -> None:
  """ValueError (one line) on a TF without Estimator (2.16+)."""
  if not has_estimator():
    raise ValueError(
        f'--engine=estimator needs tf.estimator, which TF {tf.__version__} '
        f'does not have (TF 2.16+): use --engine=distribute, or TF 2.15 on '
        f'Python 3.10-3.11')


def no_grappler_config() -> tf.compat.v1.ConfigProto:
  """A session config with Grappler off (`make_estimator`'s
  `optimize_graph=False`)."""
  config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
  config.graph_options.rewrite_options.disable_meta_optimizer = True
  return config


def make_estimator(model_fn: Callable[..., Any], job: JobConfig,
                   train_batch_size: int, *,
                   eval_batch_size: Optional[int] = None,
                   optimize_graph: bool = True, replicas: int = 1):
  """TPUEstimator on TPU (`job.use_tpu`) or CPU/GPU; with `replicas` > 1
  (off TPU, training only) an `Estimator` over a `MirroredStrategy`, each
  replica taking the next element of one `input_fn`. `optimize_graph`: off
  TPU, whether Grappler runs (bench/DECISIONS.md, 'No Grappler in the
  search's Estimator sessions').

  Raises:
    ValueError: one line, for an unresolved TPU name, more replicas than
      GPUs, or TF 2.16+.
  """
  require_estimator()
  tpu = tf.compat.v1.estimator.tpu
  devices, cpu_devices = (replicas_lib.replica_devices(replicas)
                          if replicas > 1 else (None, 1))
  session_config = None
  if not optimize_graph and not job.use_tpu:
    session_config = no_grappler_config()
  if cpu_devices > 1:
    session_config = session_config or tf.compat.v1.ConfigProto(
        allow_soft_placement=True)
    session_config.device_count['CPU'] = cpu_devices
  common = dict(
      model_dir=job.model_dir, session_config=session_config,
      tf_random_seed=job.seed,
      save_checkpoints_steps=job.save_checkpoints_steps,
      keep_checkpoint_max=job.keep_checkpoint_max, log_step_count_steps=None,
      # No SummarySaverHook: every scalar goes through host_call
      # (bench/DECISIONS.md, 'No SummarySaverHook').
      save_summary_steps=None,
      # No graph.pbtxt, no model.ckpt-N.meta (bench/DECISIONS.md, 'No graph
      # in the events files'); the saver hook keeps it out of the events.
      checkpoint_save_graph_def=False)
  if devices:
    return tf.estimator.Estimator(
        model_fn=distributed_model_fn(model_fn, job.keep_checkpoint_max),
        config=tf.estimator.RunConfig(
            train_distribute=replicas_lib.mirrored_strategy(devices),
            **common))
  run_config = tpu.RunConfig(
      cluster=cloud_tpu.cluster_resolver(job), **common,
      tpu_config=tpu.TPUConfig(
          iterations_per_loop=job.tpu_iterations_per_loop,
          per_host_input_for_training=tpu.InputPipelineConfig.PER_HOST_V2,
          # Evaluation on TPU: one pipeline of global batches, each split
          # over the cores, so a pod reads every example once.
          # (TPUEstimator refuses SLICED off TPU.)
          eval_training_input_configuration=(
              tpu.InputPipelineConfig.SLICED if job.use_tpu else
              tpu.InputPipelineConfig.PER_HOST_V1)))
  return tpu.TPUEstimator(
      model_fn=model_fn, config=run_config, use_tpu=job.use_tpu,
      train_batch_size=train_batch_size,
      eval_batch_size=eval_batch_size, predict_batch_size=eval_batch_size)


def input_pipeline(params: Mapping[str, Any], job: JobConfig,
                   replicas: int = 1) -> streams.Pipeline:
  """Which per-replica batches of each step an input_fn call yields: off
  TPU, one call whose elements are the `replicas` batches in turn; on TPU,
  one call per host (`params['context']`, a `TPUContext`) for its cores."""
  if job.use_tpu and 'context' in params:
    _, index, count, batches = params['context'].current_input_fn_deployment()
    return streams.Pipeline(index, count, batches)
  return streams.Pipeline(0, 1, replicas)


def distributed_model_fn(model_fn: Callable[..., Any],
                         keep_checkpoint_max: int) -> Callable[..., Any]:
  """A TPUEstimator model_fn made a per-replica `Estimator` model_fn: the
  first replica's `hooks.HostCallHook` runs the host_call on every
  replica's row (as on TPU) and registers `replicas_lib.saver`. Unconverted
  by autograph (bench/DECISIONS.md, 'The replicated Estimator's model_fn
  unconverted by autograph')."""
  shared = {}  # Graph -> the HostCallHook every replica gives its row.

  def replica_model_fn(features, labels, mode, params):
    # The Estimator reads the arguments' names: the signature stays here.
    return _replica_spec(features, labels, mode, params)

  @tf.autograph.experimental.do_not_convert
  def _replica_spec(features, labels, mode, params):
    spec = model_fn(features, labels, mode, params)
    if spec.scaffold_fn is not None or spec.eval_metrics is not None:
      raise ValueError('distributed_model_fn: a model_fn that trains, '
                       'without scaffold_fn or eval_metrics')
    host_fn, (step, row) = spec.host_call
    hook = shared.setdefault(tf.compat.v1.get_default_graph(),
                             hooks.HostCallHook(host_fn, step))
    first = replicas_lib.is_first_replica()
    hook.add_row(row, first)
    if first:
      tf.compat.v1.add_to_collection(
          tf.compat.v1.GraphKeys.SAVERS,
          replicas_lib.saver(sharded=True, max_to_keep=keep_checkpoint_max,
                             save_relative_paths=True))
    # The hook counts must match across replicas.
    return tf.estimator.EstimatorSpec(
        mode=mode, loss=spec.loss, train_op=spec.train_op,
        training_hooks=list(spec.training_hooks) + [
            hook if first else tf.compat.v1.train.SessionRunHook()])

  return replica_model_fn


class EstimatorEngine:
  """The Estimator engine (`runtime.engine.Engine`); `replicas` and
  `optimize_graph` as `make_estimator`."""

  chief = True  # One process writes everything.

  def __init__(self, job: JobConfig, replicas: int = 1,
               optimize_graph: bool = True):
    self.job, self._replicas = job, replicas
    self._optimize_graph = optimize_graph

  def worker(self) -> None:
    """No cluster: the Estimator engine runs as one process."""
    return None

  def check(self) -> None:
    """Refuses, making nothing, a TF without Estimator, an unresolvable TPU
    or fewer GPUs than `replicas` > 1 (one line)."""
    require_estimator()
    cloud_tpu.cluster_resolver(self.job)
    if self._replicas > 1:
      replicas_lib.replica_devices(self._replicas)

  def train(self, task: task_lib.Task, *, max_steps: int,
            stop: preemption.StopRequest, run_name: str,
            resume: resume_lib.ResumePoint) -> task_lib.Trained:
    """`engine.Engine.train`, by `Estimator.train` (`guards.FiniteHook`
    before TF's NaN-loss hook and the saver)."""
    job, record = self.job, {}
    check = guards.FiniteHook(task.finite_scalars, job.model_dir, run_name)
    estimator = make_estimator(
        task_model_fn(task, job, max_steps, record, self._replicas, check),
        job, task.train_batch_size, optimize_graph=self._optimize_graph,
        replicas=self._replicas)
    input_fn = task_input_fn(task, job, self._replicas, resume.global_step)
    preemption.keep_handlers_under_tpu_estimator()
    guards.run(lambda: estimator.train(input_fn, hooks=[check, stop.hook()],
                                       max_steps=max_steps),
               run_name, job.model_dir,
               resume_lib.refuse_unreadable(resume.checkpoint))
    if stop.signal_name:
      stop.raise_if_stopped(resume_lib.resume_point(job.model_dir).global_step)
    return task_lib.Trained(
        record.get('train_start_step', resume.global_step), max_steps,
        record.get('train_images_per_sec'))

  def evaluate(self, task: task_lib.EvaluatedTask, *,
               checkpoint: Optional[str], stop: preemption.StopRequest,
               run_name: str) -> Dict[str, Any]:
    """`engine.Engine.evaluate`, by `Estimator.evaluate` in a directory of
    its own (its summaries are not the run's); every value fed at session
    start, none restored by a `Saver`."""
    step = resume_lib.checkpoint_step(checkpoint) if checkpoint else 0
    record, directory = {}, tempfile.mkdtemp(prefix='tunas_tf-eval-')
    batch = task.eval_batch_size
    try:
      estimator = make_estimator(
          _eval_model_fn(task, self.job, checkpoint, step, record),
          dataclasses.replace(self.job, model_dir=directory),
          task.train_batch_size, eval_batch_size=batch)
      input_fn = lambda params: task.eval_dataset(
          params.get('batch_size', batch), pad=self.job.use_tpu)
      # TPU needs the batches of the pass; its last one is padded.
      steps = -(-task.eval_examples // batch) if self.job.use_tpu else None
      preemption.keep_handlers_under_tpu_estimator()
      results = guards.run(lambda: estimator.evaluate(
          input_fn, steps=steps, hooks=[stop.hook()]),
                           f"{run_name}'s evaluation", None)
    finally:
      shutil.rmtree(directory, ignore_errors=True)
    stop.raise_if_stopped(step, preemption.NOTHING_SAVED)
    metrics = task.aggregate({name[len('sum/'):]: float(value) for name, value
                              in results.items() if name.startswith('sum/')})
    return dict(metrics, global_step=step,
                images_per_sec=record.get('images_per_sec'))
