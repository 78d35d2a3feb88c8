"""The Estimator engine: a `runtime.task.Task` as a TPUEstimator model_fn.

`task_model_fn` and `task_input_fn` turn any task into the model_fn and
input_fn of `make_estimator`'s `TPUEstimator` on Cloud TPU (`--tpu=local`
or `--tpu=NAME`, `cloud_tpu.resolve`), with `use_tpu=False` on CPU/GPU, or
of a plain `Estimator` over a `MirroredStrategy` for `--replicas` off TPU.
TF 2.15 and tensorflow-estimator only: TF 2.16+ has no `tf.estimator`
(`require_estimator`).
"""

from __future__ import annotations

import contextlib
import os
from typing import (Any, Callable, ContextManager, Dict, List, Mapping,
                    Optional, Sequence, Tuple)

import tensorflow as tf

from tunas_tf.data import streams
from tunas_tf.data import unreadable
from tunas_tf.runtime import cloud_tpu
from tunas_tf.runtime import guards as guards_lib
from tunas_tf.runtime import hooks
from tunas_tf.runtime import preemption
from tunas_tf.runtime import replicas as replicas_lib
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.runtime import summaries
from tunas_tf.runtime import task as task_lib
from tunas_tf.runtime.jobs import JobConfig

# The scalar every task's step returns that TPUEstimator takes as the loss.
LOSS = 'model/loss'


def task_model_fn(make_task: Callable[[], task_lib.Task], job: JobConfig,
                  max_steps: int,
                  record: Optional[Dict[str, Any]] = None
                  ) -> Callable[..., Any]:
  """The TPUEstimator model_fn (training only) of the task `make_task`
  makes, one per call (per replica).

  It builds the task's variables in the graph, reads the global step once,
  takes the task's step on the features and labels (NHWC again on TPU:
  `task.from_infeed`) and then increments the global step; a session that
  restores no checkpoint first assigns the task's `initial_values`
  (`initial_values_scaffold`). The step's scalars go to TensorBoard through
  `host_call` every `job.tpu_iterations_per_loop` steps (with the
  probabilities of the task's decisions), the checkpoints through
  `checkpoint_hooks`, the progress line (its scalars off TPU, where a hook
  can fetch them) and the training images/s per core (into `record`, as
  'train_images_per_sec', with the step it started at) through
  `hooks.ProgressHook`.
  """

  def model_fn(features, labels, mode, params):
    if mode != tf.estimator.ModeKeys.TRAIN:
      raise ValueError(f'task_model_fn only trains, got mode {mode!r}')
    task = make_task()
    global_step = tf.compat.v1.train.get_or_create_global_step()
    task.build()
    step = global_step.read_value()
    scalars = task.step(task_lib.from_infeed((features, labels), job.use_tpu),
                        step)
    # After every update of the step (which the scalars follow).
    with tf.control_dependencies(list(scalars.values())):
      train_op = global_step.assign_add(1).op
    fetches = {'step': global_step}
    if not job.use_tpu:  # On TPU the scalars cannot be fetched by a hook.
      fetches.update((k, scalars[k]) for k in task.progress if k in scalars)
    cores = (params['context'].num_replicas
             if job.use_tpu and params and 'context' in params else 1)
    progress = hooks.ProgressHook(
        fetches, max_step=max_steps, log_every=job.log_every_steps,
        formats=task.progress, images_per_step=task.train_batch_size,
        num_cores=cores, record=record, record_key='train_images_per_sec')
    return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
        mode=mode, loss=scalars[LOSS], train_op=train_op,
        host_call=summaries.host_call(
            scalars, step, job.model_dir, job.tpu_iterations_per_loop,
            decisions=task.decisions),
        scaffold_fn=initial_values_scaffold(task.initial_values()),
        training_hooks=checkpoint_hooks(job) + [progress])

  return model_fn


def initial_values_scaffold(
    pairs: Sequence[Tuple[tf.Variable, Any]],
    saver: Optional[tf.compat.v1.train.Saver] = None
) -> Optional[Callable[[], tf.compat.v1.train.Scaffold]]:
  """The TPUEstimator scaffold_fn that assigns the (variable, value) `pairs`
  in a session that restores no checkpoint (fed, not held as constants in
  the graph), and restores with `saver`; None when there is neither."""
  if not pairs and saver is None:
    return None

  def make_scaffold():
    if not pairs:
      return tf.compat.v1.train.Scaffold(saver=saver)
    feed, assignments = {}, []
    for variable, value in pairs:
      placeholder = tf.compat.v1.placeholder(variable.dtype.base_dtype,
                                             value.shape)
      feed[placeholder] = value
      assignments.append(variable.assign(placeholder))
    init_op = tf.group(*assignments)

    def init_fn(scaffold, session):
      del scaffold
      session.run(init_op, feed_dict=feed)
    return tf.compat.v1.train.Scaffold(saver=saver, init_fn=init_fn)

  return make_scaffold


def task_input_fn(task: task_lib.Task, job: JobConfig, replicas: int = 1,
                  start_step: int = 0) -> Callable[..., Any]:
  """The input_fn of `task`'s batches from `start_step` on.

  On TPU, TPUEstimator passes the per-replica batch size; with
  `replicas` > 1 off TPU the Estimator passes none and gives each replica
  the next element, so the batch is `task.train_batch_size / replicas`
  (`input_pipeline`). On TPU the images go HWCN (`task.infeed`).
  """

  def input_fn(params):
    batch = params.get('batch_size', task.train_batch_size // replicas)
    return task_lib.infeed(
        task.dataset(batch, input_pipeline(params, job, replicas), start_step),
        job.use_tpu)

  return input_fn


def has_estimator() -> bool:
  """Whether this TF has `tf.estimator` (TF 2.15 with tensorflow-estimator;
  TF 2.16+ has none)."""
  return hasattr(tf.compat.v1, 'estimator')


def default_engine() -> str:
  """'estimator' where this TF has it (TF 2.15), else 'distribute'."""
  return 'estimator' if has_estimator() else 'distribute'


def require_estimator() -> None:
  """Refuses, in one line, to train or evaluate on a TF without Estimator.

  Raises:
    ValueError: on TF 2.16+ (`has_estimator` False).
  """
  if not has_estimator():
    raise ValueError(
        f'--engine=estimator needs tf.estimator, which TF {tf.__version__} '
        f'does not have (TF 2.16+): use --engine=distribute, or TF 2.15 on '
        f'Python 3.10-3.11')


def checkpoint_hooks(job: JobConfig) -> List[Any]:
  """Training hooks that keep the graph out of the events file.

  Call in the model_fn when it trains and pass the result among the
  TPUEstimatorSpec's `training_hooks`. The model directory's events file then
  holds summaries and session logs only, no graph def and no meta graph def
  (TF writes both at every session start; see `tunas_tf.runtime.hooks`).

  It registers `hooks.summaries_only_writer(job.model_dir)`, then returns:

  - off TPU, `[hooks.CheckpointSaverHook]`, which replaces the Estimator's
    own saver hook (same checkpoints, no graph serialised);
  - on TPU, `[]`: TPUEstimator keeps its own saver hook (given one of ours it
    would turn off its save on graceful shutdown); the summaries-only writer
    drops the graph that hook still serialises.
  """
  if job.use_tpu:
    hooks.summaries_only_writer(job.model_dir)
    return []
  # The hook registers the summaries-only writer itself.
  return [hooks.CheckpointSaverHook(job.model_dir,
                                    save_steps=job.save_checkpoints_steps)]


def summaries_only_eval_events(job: JobConfig) -> None:
  """Keeps the eval graph out of `model_dir/eval`'s events file.

  Call in the model_fn when it evaluates. `Estimator.evaluate` (name None)
  writes its metrics through the cached v1 writer of `model_dir/eval`, which
  TF creates with the eval graph and so writes that graph and a meta graph
  first (`_write_dict_to_summary`,
  tensorflow_estimator/python/estimator/estimator.py:2087); this registers a
  writer that writes no graph there (`hooks.summaries_only_writer`).
  """
  hooks.summaries_only_writer(os.path.join(job.model_dir, 'eval'))


def no_grappler_config() -> tf.compat.v1.ConfigProto:
  """The session config of the search's Estimator sessions off TPU:
  Grappler off (`make_estimator(optimize_graph=False)`)."""
  config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
  config.graph_options.rewrite_options.disable_meta_optimizer = True
  return config


def make_estimator(model_fn: Callable[..., Any], job: JobConfig,
                   train_batch_size: int, *,
                   eval_batch_size: Optional[int] = None,
                   optimize_graph: bool = True, replicas: int = 1):
  """TPUEstimator on TPU (`job.use_tpu`) or on CPU/GPU; N replicas off TPU.

  With `replicas` > 1 (off TPU, training only): a plain `Estimator` whose
  `train_distribute` is a `MirroredStrategy` over N GPUs, or without GPUs
  over the CPU split into N devices (the session's `device_count`). It calls
  `model_fn` once per replica (`distributed_model_fn`) and `input_fn` once,
  with no `batch_size` in its params; each replica takes the next element of
  the dataset, so `input_fn` batches per replica.

  Args:
    model_fn: the TPUEstimator model_fn.
    job: where and how to run.
    train_batch_size: the global training batch.
    eval_batch_size: the eval and predict batch, when the run evaluates.
    optimize_graph: off TPU, whether Grappler (TF's graph optimiser) runs
      on the session's graphs (the search's: no, bench/DECISIONS.md, 'No
      Grappler in the search's Estimator sessions'); no effect on TPU.
    replicas: replicas off TPU (1 on TPU).

  Raises:
    ValueError: when the TPU name cannot be resolved, for more replicas
      than GPUs, or on TF 2.16+ (`require_estimator`) (one line).
  """
  require_estimator()
  tpu = tf.compat.v1.estimator.tpu
  devices, cpu_devices = (replicas_lib.replica_devices(replicas)
                          if replicas > 1 else (None, 1))
  cluster = cloud_tpu.cluster_resolver(job)
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
      keep_checkpoint_max=job.keep_checkpoint_max,
      log_step_count_steps=None,
      # No SummarySaverHook: every scalar goes through host_call, and the
      # hook's fetches on its own steps make TF build the step's executor
      # twice (bench/DECISIONS.md, 'No SummarySaverHook').
      save_summary_steps=None,
      # The search graph is large (bench/DECISIONS.md, 'No graph in the
      # events files'): no graph.pbtxt, no model.ckpt-N.meta. This alone
      # still leaves the graph in the events file; `checkpoint_hooks` keeps
      # it out.
      checkpoint_save_graph_def=False)
  if devices:
    return tf.estimator.Estimator(
        model_fn=distributed_model_fn(model_fn, job.keep_checkpoint_max),
        config=tf.estimator.RunConfig(
            train_distribute=replicas_lib.mirrored_strategy(devices),
            **common))
  run_config = tpu.RunConfig(
      cluster=cluster, **common,
      tpu_config=tpu.TPUConfig(
          iterations_per_loop=job.tpu_iterations_per_loop,
          per_host_input_for_training=(
              tpu.InputPipelineConfig.PER_HOST_V2),
          # Evaluation on TPU: one input pipeline of global batches, each
          # split over the cores (the original's BROADCAST eval), so a pod
          # reads every example once. (TPUEstimator refuses SLICED off TPU.)
          eval_training_input_configuration=(
              tpu.InputPipelineConfig.SLICED if job.use_tpu else
              tpu.InputPipelineConfig.PER_HOST_V1)))
  return tpu.TPUEstimator(
      model_fn=model_fn, config=run_config, use_tpu=job.use_tpu,
      train_batch_size=train_batch_size,
      eval_batch_size=eval_batch_size, predict_batch_size=eval_batch_size)


def input_pipeline(params: Mapping[str, Any], job: JobConfig,
                   replicas: int = 1):
  """The `streams.Pipeline` of an input_fn call: which per-replica batches
  of each step its dataset yields.

  Off TPU, the input_fn is called once and its elements are the replicas'
  batches in turn (`replicas` of them per step; `make_estimator`). On TPU,
  TPUEstimator (per-host input) calls it once per host, passing a
  `TPUContext` as `params['context']`; the host's cores take its elements
  in turn.

  Args:
    params: the input_fn's params.
    job: the run's job config.
    replicas: replicas off TPU (`--replicas`).
  """
  if job.use_tpu and 'context' in params:
    _, index, count, batches = params['context'].current_input_fn_deployment()
    return streams.Pipeline(index, count, batches)
  return streams.Pipeline(0, 1, replicas)


def distributed_model_fn(model_fn: Callable[..., Any],
                         keep_checkpoint_max: int) -> Callable[..., Any]:
  """A TPUEstimator model_fn made a per-replica `Estimator` model_fn.

  Under `train_distribute` the Estimator calls the result once per replica
  and keeps the first replica's hooks (the count must match across
  replicas). Each call returns the model_fn's `TPUEstimatorSpec` as the
  training `EstimatorSpec` that TPUEstimator makes of it off TPU, except for
  the host_call: its ops run on the first replica only
  (`hooks.HostCallHook`; the first replica's row is also what TPU's
  host_call writes), the other replicas get a hook that does nothing in its
  place and no second summary writer. (`TPUEstimatorSpec.as_estimator_spec`
  would not do: it reads the host_call of the last spec made in the process,
  a class attribute.) The first replica also registers the graph's `Saver`
  (`replicas_lib.saver`: checkpoint names as with one replica), which the
  Estimator and `hooks.CheckpointSaverHook` find in the SAVERS collection.

  Built unconverted by autograph (only the two-line wrapper that keeps the
  signature is converted): MirroredStrategy converts what it calls per
  replica (as `tf.function` does), which would transpile every function of
  the task that the step calls (a 6-step masked two-replica search took
  23.9 s with it, 20.2 s without) and turn Python control flow on tensors
  into graph control flow here only; the task is written for TF1 graphs,
  as the single-replica Estimator calls it.
  """

  def replica_model_fn(features, labels, mode, params):
    # The Estimator reads the arguments' names: the signature stays here.
    return _replica_spec(features, labels, mode, params)

  @tf.autograph.experimental.do_not_convert
  def _replica_spec(features, labels, mode, params):
    spec = model_fn(features, labels, mode, params)
    if spec.scaffold_fn is not None or spec.eval_metrics is not None:
      raise ValueError('distributed_model_fn: a model_fn that trains, '
                       'without scaffold_fn or eval_metrics')
    training_hooks = list(spec.training_hooks)
    first = replicas_lib.is_first_replica()
    if spec.host_call is not None:
      host_fn, tensors = spec.host_call
      training_hooks.append(hooks.HostCallHook(host_fn(*tensors)) if first
                            else tf.compat.v1.train.SessionRunHook())
    if first:
      tf.compat.v1.add_to_collection(
          tf.compat.v1.GraphKeys.SAVERS,
          replicas_lib.saver(sharded=True, max_to_keep=keep_checkpoint_max,
                         save_relative_paths=True))
    return tf.estimator.EstimatorSpec(
        mode=mode, loss=spec.loss, train_op=spec.train_op,
        training_hooks=training_hooks)

  return replica_model_fn


def _run(call: Callable[[list], Any], stop: preemption.StopRequest,
         guards: Sequence[ContextManager[Any]] = ()) -> Any:
  """`call(hooks)` (an Estimator's train or evaluate given `hooks`) with
  `stop.hook()`, inside `guards` (context managers that turn errors into one
  line), in a worker thread (`preemption.run_in_thread`), TPUEstimator kept
  from resetting SIGINT; its result."""
  preemption.keep_handlers_under_tpu_estimator()

  def guarded():
    with contextlib.ExitStack() as stack:
      for guard in guards:
        stack.enter_context(guard)
      return call([stop.hook()])

  return preemption.run_in_thread(guarded)


def train(estimator: Any, input_fn: Callable[..., Any], *, max_steps: int,
          stop: preemption.StopRequest, model_dir: str, run_name: str,
          resume_checkpoint: Optional[str] = None) -> None:
  """`estimator.train` to `max_steps`, stopping when `stop` asks, under the
  guards every run has (`run_name` names the run in their lines, e.g. 'the
  search': a NaN, an undecodable image or an unreadable checkpoint stops it
  in one line; the checkpoint it resumes from, if any, is named when it
  cannot be restored), as `_run` says.

  Raises:
    preemption.Stopped: when a signal stopped it, naming the step of the
      checkpoint saved in `model_dir`.
  """
  _run(lambda hooks: estimator.train(input_fn, hooks=hooks,
                                     max_steps=max_steps), stop,
       [guards_lib.stops_in_one_line(model_dir, run_name),
        unreadable.stops_in_one_line(run_name, model_dir),
        resume_lib.refuse_unreadable(resume_checkpoint)])
  if stop.signal_name:
    raise preemption.Stopped(preemption.stopped_line(
        stop, resume_lib.resume_point(model_dir).global_step))


def evaluate(estimator: Any, input_fn: Callable[..., Any],
             stop: preemption.StopRequest, steps: Optional[int] = None,
             guards: Sequence[ContextManager[Any]] = ()) -> Dict[str, Any]:
  """`estimator.evaluate` of one pass of `input_fn` (`steps` batches, or
  until it ends), cut short when `stop` asks (as `_run` says, inside
  `guards`); its results.

  Raises:
    preemption.Stopped: when a signal cut it short (nothing is saved then).
  """
  results = _run(
      lambda hooks: estimator.evaluate(input_fn, steps=steps, name=None,
                                       hooks=hooks), stop, guards)
  if stop.signal_name:
    raise preemption.Stopped(preemption.stopped_line(
        stop, int(results.get('global_step', 0)),
        'before its evaluation ended (nothing to save)'))
  return results
