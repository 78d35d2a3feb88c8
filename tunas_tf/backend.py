"""What the search and train_eval share: the `JobConfig` and the Estimator.

Both run their model_fn on `TPUEstimator`: on Cloud TPU with `--tpu=local`
or `--tpu=NAME` (`cloud_tpu.resolve`), and with `use_tpu=False` on CPU/GPU.
The flags that fill a `JobConfig` live in `tunas_tf.flags` (entry points
only).
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from typing import Any, Callable, Dict, List, Mapping, Optional

from tunas_tf import checks

# `JobConfig` fields that only say where to run, on which copy of the data,
# how often to log and save, and whether kernels must be deterministic: a
# restarted run may change them.
JOB_RUN_ONLY_FIELDS = frozenset({
    'model_dir', 'tpu', 'tpu_zone', 'gcp_project', 'tpu_iterations_per_loop',
    'data_dir', 'download', 'log_every_steps', 'save_checkpoints_steps',
    'keep_checkpoint_max', 'deterministic',
})
_POSITIVE_FIELDS = ('num_classes', 'image_size', 'num_channels',
                    'tpu_iterations_per_loop', 'save_checkpoints_steps',
                    'keep_checkpoint_max', 'log_every_steps')


@dataclasses.dataclass(frozen=True)
class JobConfig:
  """Where a run writes, on what data, on which backend, how often it saves.

  The part of `search.config.SearchConfig` and `train_eval.config.
  TrainEvalConfig` that both have (their `job` field); flag names. In
  `config.json` its fields sit flat beside the run's own (`to_json`).

  Attributes:
    model_dir: output directory (checkpoints, events, config.json).
    dataset: 'digits' or a TFDS image-classification dataset name.
    data_dir: TFDS data directory, or None.
    download: whether TFDS may download and prepare a missing dataset.
    num_classes: classifier width (at least the dataset's label count).
    image_size: input side in pixels.
    num_channels: image channels of the dataset.
    preprocessing: how stored images become the network's input
      (`datasets.PREPROCESSINGS`); part of the run (checked on restart).
    seed: seed of the data order and the initialisation, in [0, 2^31 - 1].
    use_tpu: run on TPU (`tpu` names it).
    tpu: 'local' (a TPU VM's own TPU), a Cloud TPU name or grpc://HOST:PORT
      ('' off TPU); see `cloud_tpu`.
    tpu_zone: TPU zone, or None.
    gcp_project: GCP project, or None.
    tpu_iterations_per_loop: steps per TPU loop; also the summary cadence.
    save_checkpoints_steps: checkpoint cadence.
    keep_checkpoint_max: checkpoints kept.
    log_every_steps: progress log cadence (CPU/GPU).
    deterministic: TF op determinism (`use_determinism`): the same run gives
      the same bits, at some cost in speed. Added later: a config.json
      without it reads as False.

  Raises (on construction):
    ValueError: for an empty `model_dir` or `dataset`, `use_tpu` without
      `tpu`, a size or cadence that is not a positive int, or a seed outside
      [0, 2^31 - 1] (naming the flag).
  """
  model_dir: str
  dataset: str
  data_dir: Optional[str]
  download: bool
  num_classes: int
  image_size: int
  num_channels: int
  preprocessing: str
  seed: int
  use_tpu: bool
  tpu: str
  tpu_zone: Optional[str]
  gcp_project: Optional[str]
  tpu_iterations_per_loop: int
  save_checkpoints_steps: int
  keep_checkpoint_max: int
  log_every_steps: int
  deterministic: bool = False

  def __post_init__(self):
    if not self.model_dir:
      raise ValueError('--model_dir is required')
    if self.use_tpu and not self.tpu:
      raise ValueError('--use_tpu needs --tpu=NAME')
    if not self.dataset:
      raise ValueError('--dataset must name a dataset')
    from tunas_tf.data import datasets  # pylint: disable=g-import-not-at-top
    datasets.check_preprocessing(self.dataset, self.preprocessing)
    for name in _POSITIVE_FIELDS:
      value = getattr(self, name)
      if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
          or value <= 0):
        raise ValueError(f'--{name} must be positive, got {value!r}')
    checks.seed('seed', self.seed)

  def to_json(self) -> Dict[str, Any]:
    """The fields, flat (they sit beside the run's own in config.json)."""
    return dataclasses.asdict(self)

  @classmethod
  def field_names(cls) -> frozenset:
    return frozenset(f.name for f in dataclasses.fields(cls))

  @classmethod
  def defaults(cls) -> Dict[str, Any]:
    """The fields added later, with the value a file without them means."""
    return field_defaults(cls)

  @classmethod
  def from_flat(cls, values: Mapping[str, Any]) -> 'JobConfig':
    """The `JobConfig` among a flat mapping's keys (others are ignored); a
    field added later (`defaults`) may be missing.

    Raises:
      KeyError: naming a missing field.
    """
    values = {**cls.defaults(), **values}
    return cls(**{name: values[name] for name in sorted(cls.field_names())})


# A run's config (`SearchConfig`, `TrainEvalConfig`) is a frozen dataclass with
# a `job: JobConfig` field; in config.json the job's fields sit flat beside
# the run's own. These functions are that layout, for both.


def field_defaults(config_type: type) -> Dict[str, Any]:
  """A config dataclass's fields that have a default (those added later: a
  config.json without them means that value), with it."""
  return {f.name: f.default for f in dataclasses.fields(config_type)
          if f.default is not dataclasses.MISSING}


def flat_defaults(config_type: type) -> Dict[str, Any]:
  """`field_defaults` of `config_type` and of the job, flat (config.json)."""
  return {**JobConfig.defaults(), **field_defaults(config_type)}


def flat_keys(config_type: type) -> List[str]:
  """The config.json keys of `config_type`'s fields: its own, then the job's.

  Its own come in field order (fields computed after construction included),
  the job's sorted.
  """
  own = [f.name for f in dataclasses.fields(config_type) if f.name != 'job']
  return own + sorted(JobConfig.field_names())


def to_flat(config: Any) -> Dict[str, Any]:
  """`config`'s fields, the job's flat beside its own (config.json)."""
  values = config.job.to_json()
  values.update((f.name, getattr(config, f.name))
                for f in dataclasses.fields(config) if f.name != 'job')
  return values


def from_flat(config_type: type, values: Mapping[str, Any]) -> Any:
  """Builds `config_type` from flat values: the job's fields and its own.

  Raises:
    KeyError: for a missing job field.
    TypeError: for a missing or unexpected field of its own.
  """
  own = {k: v for k, v in values.items() if k not in JobConfig.field_names()}
  return config_type(job=JobConfig.from_flat(values), **own)


def resolve_use_tpu(tpu: str, use_tpu: Optional[bool]) -> bool:
  """--use_tpu defaults to whether --tpu is set; --use_tpu needs --tpu."""
  resolved = bool(tpu) if use_tpu is None else use_tpu
  if resolved and not tpu:
    raise ValueError('--use_tpu needs --tpu=NAME')
  return resolved


def use_determinism(job: JobConfig) -> None:
  """Turns on TF op determinism for `job.deterministic` (before any graph).

  `tf.config.experimental.enable_op_determinism`: every op runs a
  deterministic kernel (or fails saying it has none) and tf.data keeps its
  order, so a run and its resumption give the same bits on the same machine.
  It is process-wide and cannot be turned off again; without
  `job.deterministic` nothing changes.
  """
  if job.deterministic:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    tf.config.experimental.enable_op_determinism()


def checkpoint_hooks(job: JobConfig) -> List[Any]:
  """Training hooks that keep the graph out of the events file.

  Call in the model_fn when it trains and pass the result among the
  TPUEstimatorSpec's `training_hooks`. The model directory's events file then
  holds summaries and session logs only, no graph def and no meta graph def
  (TF writes both at every session start; see `tunas_tf.hooks`).

  It registers `hooks.summaries_only_writer(job.model_dir)`, then returns:

  - off TPU, `[hooks.CheckpointSaverHook]`: it replaces the Estimator's own
    saver hook and saves the same checkpoints (`model.ckpt-N` with the
    Estimator's `Saver`, which keeps `keep_checkpoint_max`; at session start,
    every `save_checkpoints_steps` steps and at the end) without serialising
    the graph;
  - on TPU, `[]`: TPUEstimator keeps its own saver hook (given one of ours it
    would turn off its save on graceful shutdown); the summaries-only writer
    drops the graph that hook still serialises.
  """
  from tunas_tf import hooks  # pylint: disable=g-import-not-at-top
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
  from tunas_tf import hooks  # pylint: disable=g-import-not-at-top
  hooks.summaries_only_writer(os.path.join(job.model_dir, 'eval'))


def tpu_cluster(job: JobConfig):
  """The `TPUClusterResolver` of `job.tpu` (None off TPU), resolved once per
  process: every lookup the Estimator makes later has succeeded
  (`cloud_tpu.resolve`).

  Raises:
    ValueError: one line naming the TPU, what failed and what to check.
  """
  if not job.use_tpu:
    return None
  from tunas_tf import cloud_tpu  # pylint: disable=g-import-not-at-top
  return cloud_tpu.cached_resolve(job.tpu, job.tpu_zone, job.gcp_project)


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
      on the session's graphs. It runs once for every new set of fetches;
      on the search's graph (~19,000 ops and ~100 branch functions) it cost
      ~20 s before the first step on `cifar_search` and made the steps no
      faster (bench/README.md), so the search turns it off. On TPU, XLA
      compiles the step and this has no effect.
    replicas: replicas off TPU (1 on TPU).

  Raises:
    ValueError: when the TPU name cannot be resolved, or for more replicas
      than GPUs (one line).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tunas_tf import replicas as replicas_lib  # pylint: disable=g-import-not-at-top
  tpu = tf.compat.v1.estimator.tpu
  if replicas > 1 and job.use_tpu:
    raise ValueError('--replicas is for CPU/GPU: on TPU the replica count '
                     'comes from the topology')
  devices, cpu_devices = (replicas_lib.replica_devices(replicas)
                          if replicas > 1 else (None, 1))
  cluster = tpu_cluster(job)
  session_config = None
  if not optimize_graph and not job.use_tpu:
    session_config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    session_config.graph_options.rewrite_options.disable_meta_optimizer = True
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
      # No SummarySaverHook: every scalar goes through host_call. The hook's
      # `loss` summary (a duplicate of model/loss, in an events file of its
      # own) was fetched on its steps only, so the first two steps had
      # different fetch sets and TF built the step's executor twice
      # (~3.5 s of the search's start on cifar_search, bench/README.md).
      save_summary_steps=None,
      # The search graph is large (~5 MB serialised for digits_search):
      # no graph.pbtxt, no model.ckpt-N.meta. This alone still leaves the graph
      # in the events file; `checkpoint_hooks` keeps it out.
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
  from tunas_tf.data import streams  # pylint: disable=g-import-not-at-top
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
  (`replicas.saver`: checkpoint names as with one replica), which the
  Estimator and `hooks.CheckpointSaverHook` find in the SAVERS collection.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tunas_tf import hooks  # pylint: disable=g-import-not-at-top
  from tunas_tf import replicas  # pylint: disable=g-import-not-at-top

  def replica_model_fn(features, labels, mode, params):
    spec = model_fn(features, labels, mode, params)
    if spec.scaffold_fn is not None or spec.eval_metrics is not None:
      raise ValueError('distributed_model_fn: a model_fn that trains, '
                       'without scaffold_fn or eval_metrics')
    training_hooks = list(spec.training_hooks)
    first = replicas.is_first_replica()
    if spec.host_call is not None:
      host_fn, tensors = spec.host_call
      training_hooks.append(hooks.HostCallHook(host_fn(*tensors)) if first
                            else tf.compat.v1.train.SessionRunHook())
    if first:
      tf.compat.v1.add_to_collection(
          tf.compat.v1.GraphKeys.SAVERS,
          replicas.saver(sharded=True, max_to_keep=keep_checkpoint_max,
                         save_relative_paths=True))
    return tf.estimator.EstimatorSpec(
        mode=mode, loss=spec.loss, train_op=spec.train_op,
        training_hooks=training_hooks)

  return replica_model_fn
