"""The search: checked, then run on its engine.

`run_search(config)` checks everything before it writes, then trains on
`config.job.engine`: the TPUEstimator's model_fn and input_fn (here) or the
tf.distribute loop over `search.trainer`'s step.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from absl import logging
import tensorflow as tf

from tunas_tf import commands
from tunas_tf.data import datasets
from tunas_tf.models import supernet as supernet_lib
from tunas_tf.runtime import cluster
from tunas_tf.runtime import distribute
from tunas_tf.runtime import estimator as estimator_lib
from tunas_tf.runtime import hooks
from tunas_tf.runtime import lifecycle
from tunas_tf.runtime import precision
from tunas_tf.runtime import preemption
from tunas_tf.runtime import replicas
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.runtime import summaries
from tunas_tf.search import config as config_lib
from tunas_tf.search import report_text
from tunas_tf.search import steps
from tunas_tf.search import trainer as trainer_lib
from tunas_tf.search.config import SearchConfig
from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema
from tunas_tf.search_space import spec_io

# The Grappler passes the distribute engine's search loop runs without
# (`distribute.grappler_without`). On its first call (cifar_search, TF 2.15)
# constant folding, layout, arithmetic and remapper took ~5.4 of Grappler's
# 13.2 s and removed ~120 of ~25,800 nodes (pruning and dependency
# optimisation, which remove ~7,000 of the digits loop's 16,600 and keep
# the memory down, stay on): start 44.7 against 46.4 s, 1.056 against
# 1.180 s a step, peak RSS 2,047 against 1,970 MB (bench/README.md). tfg's
# passes (its control-flow sink), the memory optimiser and the meta
# optimiser's second round then took ~2.7 of the digits loop's 3.6 s and
# removed no node; without them too (cifar_search, two rounds) the start is
# 19.5 against 26.4 s (the Estimator's 19.2), the peak RSS 2,079 against
# 2,251 MB, the step the same.
DISTRIBUTE_GRAPPLER_OFF = ('constant_folding', 'layout_optimizer',
                           'arithmetic_optimization', 'remapping',
                           'tfg_optimizer', 'memory_optimization',
                           'second_iteration')


def distribute_grappler_off() -> Tuple[str, ...]:
  """`DISTRIBUTE_GRAPPLER_OFF`, less the memory optimiser where TF sees a
  GPU (its swapping heuristics are for GPU memory; untested here)."""
  if tf.config.list_physical_devices('GPU'):
    return tuple(p for p in DISTRIBUTE_GRAPPLER_OFF
                 if p != 'memory_optimization')
  return DISTRIBUTE_GRAPPLER_OFF


def _decisions(spec: Any) -> List[Tuple[str, List[str]]]:
  """(path, choice labels) of each decision, for the probability
  summaries."""
  return [(path, ops.choice_labels(oneof.choices))
          for path, oneof in schema.flatten_with_paths(spec)]


def make_model_fn(config: SearchConfig):
  """Returns the TPUEstimator model_fn of the search (`steps.py`'s nine)."""
  spec = mobile.get_search_space(config.ssd)
  decisions = _decisions(spec)

  def model_fn(features, labels, mode, params):
    del params
    if mode != tf.estimator.ModeKeys.TRAIN:
      raise ValueError(f'The search model_fn only trains, got mode {mode!r}')
    train_images, valid_images = features['train'], features['validation']
    if config.job.use_tpu:  # The host sent HWCN (a layout hint for XLA).
      train_images = trainer_lib.from_hwcn(train_images)
      valid_images = trainer_lib.from_hwcn(valid_images)
    # bfloat16 compute: `true`'s images come in bfloat16 (the cast is a
    # no-op), `ontpu`'s are cast here (as in the original); variables,
    # loss and gradients stay float32.
    dtype = precision.compute_dtype(config.use_bfloat16, config.job.use_tpu)
    train_images = tf.cast(train_images, dtype)
    valid_images = tf.cast(valid_images, dtype)
    global_step = tf.compat.v1.train.get_or_create_global_step()
    # 1-2. Warm-up probabilities and this replica's sampled architecture.
    # The sample is a pure function of (seed, step, replica): a resumed
    # search draws what an uninterrupted one would.
    p_ops, p_filters = steps.warmup_probabilities(global_step, config)
    sampled, dist_info = steps.sample_architecture(
        spec, p_ops, p_filters,
        seed=steps.sample_seed(config.job.seed, global_step))
    # 3. Cost of the sample (a mixture during warm-up).
    cost = (steps.estimate_cost(sampled, config)
            if config.enable_cost_model else None)
    # 4-5. Shared-weight step; the barrier makes all gradients exist first.
    supernet = supernet_lib.Supernet(spec, config.job.num_classes,
                                     mode=config.supernet_mode,
                                     input_channels=config.job.num_channels,
                                     seed=config.job.seed,
                                     compute_dtype=dtype)
    # (With --supernet_sampling=uniform the weights train on a uniform
    # sample; the controller's sample is still the one validated.)
    trained = steps.training_architecture(spec, sampled, p_ops, p_filters,
                                          global_step, config)
    model = steps.supernet_train_op(supernet, trained, train_images,
                                    labels['train'], global_step, config)
    # 6. Validation accuracy of the controller's sample, after the update.
    accuracy = steps.validation_accuracy(
        supernet, sampled, valid_images, labels['validation'],
        model.train_op, model.grads, config.use_gradient_sync_barrier)
    # 7. Reward, baseline, advantage.
    rl = steps.reward_and_advantage(accuracy, cost, config)
    # 8. Controller step: the only increment of the global step.
    controller = steps.controller_train_op(dist_info, rl.advantage,
                                           global_step, config)
    train_op = tf.group(model.train_op, controller.train_op)
    # 9. Every scalar to TensorBoard.
    scalars = steps.summary_scalars(model, accuracy, rl, controller,
                                    dist_info, cost, p_ops, p_filters,
                                    tag_logits=config.summarize_tag_logits)
    # Checkpoints without the graph in the events file; the progress log.
    training_hooks = estimator_lib.checkpoint_hooks(config.job)
    if not config.job.use_tpu:
      training_hooks.append(_progress_hook(scalars, config))
    return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
        mode=mode, loss=model.loss, train_op=train_op,
        host_call=summaries.host_call(
            scalars, global_step, config.job.model_dir,
            config.job.tpu_iterations_per_loop, decisions=decisions),
        training_hooks=training_hooks)

  return model_fn


def make_input_fn(config: SearchConfig, start_step: int = 0):
  """Returns the input_fn: zipped train/validation batches.

  The images are float32, or bfloat16 with `--use_bfloat16=true`
  (`precision.cast_input`); the labels float32.

  Args:
    config: the search's config.
    start_step: the global step the search resumes at: the data stream goes
      on from there (`data.streams.keyed_batches`), as if never interrupted.
  """

  def input_fn(params):
    # On TPU, TPUEstimator passes the per-replica batch size. With
    # --replicas=N the Estimator passes none and gives each replica the next
    # element: N consecutive batches of train_batch_size / N are the images
    # of one global batch (`estimator_lib.input_pipeline`).
    batch = params.get('batch_size', config.replica_batch_size)
    validation_batch = int(round(batch * config.rl_batch_size_multiplier))
    job = config.job
    dataset = datasets.search_dataset(
        job.dataset, job.num_classes, batch, validation_batch, seed=job.seed,
        data_dir=job.data_dir, download=job.download,
        validation_examples=config.validation_examples,
        image_size=job.image_size, start_step=start_step,
        pipeline=estimator_lib.input_pipeline(params, job, config.replicas),
        preprocessing=job.preprocessing)
    dataset = precision.cast_input(dataset, config.use_bfloat16)
    if config.job.use_tpu:
      dataset = dataset.map(
          lambda f, l: ({k: trainer_lib.to_hwcn(v) for k, v in f.items()}, l))
    return dataset

  return input_fn


def _progress_formats(config: SearchConfig
                      ) -> Dict[str, Callable[[float], str]]:
  """The scalars of the progress line, either engine's, and their text."""
  return {'rlcontroller/reward': lambda v: f'reward {v:.3f}',
          'rlcontroller/estimated_cost': lambda v: _cost_text(v, config),
          'rlcontroller/validation_accuracy': lambda v: f'accuracy {v:.3f}'}


def _progress_hook(scalars: Dict[str, tf.Tensor],
                   config: SearchConfig) -> hooks.ProgressHook:
  """Logs step, steps/s, ETA, reward and cost every `log_every_steps`."""
  formats = _progress_formats(config)
  fetches = {'step': tf.compat.v1.train.get_global_step()}
  fetches.update((key, scalars[key]) for key in formats if key in scalars)
  return hooks.ProgressHook(fetches, max_step=config.max_global_step,
                            log_every=max(1, config.job.log_every_steps),
                            formats=formats)


def _cost_text(cost: float, config: SearchConfig) -> str:
  """'cost 213,168 MACs (target 220,131, -3%)' (ms for latency models)."""
  units = report_text.cost_units(config.cost_model)
  units = '' if units == report_text.UNKNOWN_UNITS else ' ' + units
  return (f'cost {report_text.cost_text(cost)}{units} (target '
          f'{report_text.cost_text(config.rl_cost_model_target)}, '
          f'{100.0 * (cost / config.rl_cost_model_target - 1):+.0f}%)')


def make_estimator(config: SearchConfig):
  """TPUEstimator on TPU (`--tpu`) or on CPU/GPU (`use_tpu=False`); with
  `--replicas=N`, an Estimator running N replicas
  (`estimator_lib.make_estimator`)."""
  return estimator_lib.make_estimator(
      make_model_fn(config), config.job, config.train_batch_size,
      optimize_graph=False, replicas=config.replicas)


class Plan(NamedTuple):
  """What `check_search` found, for `run_search` to act on.

  Fields:
    spec_json: the search space, serialised (model_spec.json).
    stored: the stored config.json values, or None for a new search.
    resume: where the search resumes (`resume_lib.ResumePoint`).
  """
  spec_json: str
  stored: Optional[Dict[str, Any]]
  resume: resume_lib.ResumePoint

  def finished(self, max_global_step: int) -> bool:
    """Whether the newest readable checkpoint is at the last step."""
    return (self.resume.checkpoint is not None and
            self.resume.global_step >= max_global_step)


def check_search(config: SearchConfig) -> Plan:
  """Everything a search checks before it writes anything; writes nothing.

  Raises:
    ValueError: for bfloat16 compute, a model directory holding another
      search (naming the field, its stored and its new value), or one whose
      checkpoints cannot be read; for a strategy `distribute.strategy_for`
      would refuse (`--engine=distribute`: a malformed `TF_CONFIG`, too few
      GPUs).
  """
  if config.job.engine == 'distribute':  # What strategy_for would refuse.
    distribute.check_strategy(config.job, config.replicas)
  elif config.replicas > 1:  # Enough GPUs, before anything is written.
    replicas.replica_devices(config.replicas)
  spec_json = spec_io.dumps(mobile.get_search_space(config.ssd))
  stored = config_lib.check_stored(config, spec_json)
  return Plan(spec_json, stored,
              resume_lib.resume_point(config.job.model_dir))


def run_search(config: SearchConfig) -> bool:
  """Checks everything, then writes config.json and trains to the end.

  A model directory holding an earlier run of the same search resumes from
  its newest readable checkpoint (`resume_lib.resume_point`); a different
  search is refused before anything is written; a finished one is left as
  it is. One process at a time runs in a model directory
  (`runtime.run_lock`: a second is refused naming the holder; a holder that
  is gone is taken over), but for the non-chief workers of a multi-worker
  search (`--engine=distribute` under `TF_CONFIG`), which write nothing
  there (`runtime.cluster`). A SIGTERM or SIGINT stops it after the step in
  flight (the TPU loop in flight on TPU) with a checkpoint at that step
  (`preemption`).

  Returns:
    False when the search had already finished (nothing was done).

  Raises:
    ValueError: as `check_search`; for a malformed `TF_CONFIG`
      (`--engine=distribute`); for a TPU that cannot be resolved; for a
      directory another live process holds (`runtime.run_lock.Held`); when
      a NaN or Inf loss or reward stops the search (naming the step and the
      last good checkpoint).
    preemption.Stopped: when a signal stopped it (its checkpoint saved).
  """
  model_dir = config.job.model_dir

  def finished(plan: Plan) -> bool:
    if plan.finished(config.max_global_step):
      _log_finished(config, plan)
      return True
    return False

  def start(plan: Plan, stop: preemption.StopRequest) -> bool:
    if config.job.engine == 'distribute':
      # First: a MultiWorkerMirroredStrategy before TF runs anything.
      strategy = distribute.strategy_for(config.job, config.replicas)
      worker = cluster.worker()
      if worker is None or worker.chief:
        config_lib.write(config, plan.spec_json, plan.stored)
        _log_start(config, plan)
      else:
        logging.info('Joining the search in %s as %s: the chief writes its '
                     'files', model_dir, worker.text())
      decisions = _decisions(mobile.get_search_space(config.ssd))
      distribute.train(
          strategy, trainer_lib.SearchTrainer(config),
          trainer_lib.make_dataset_fn(config), job=config.job,
          max_steps=config.max_global_step, stop=stop, run_name='the search',
          progress=_progress_formats(config),
          summaries=lambda values, step: summaries.write_probabilities(
              decisions, values.__getitem__, step),
          grappler_off=distribute_grappler_off())
      return True
    estimator = make_estimator(config)
    config_lib.write(config, plan.spec_json, plan.stored)
    _log_start(config, plan)
    lifecycle.train(estimator, make_input_fn(config, plan.resume.global_step),
                    max_steps=config.max_global_step, stop=stop,
                    model_dir=model_dir, run_name='the search',
                    resume_checkpoint=plan.resume.checkpoint)
    return True

  if not lifecycle.run(config.job, 'train_search',
                       lambda: check_search(config), start, finished,
                       multi_worker=True):
    return False
  logging.info('Search finished (%d steps). Next: %s, then %s',
               config.max_global_step, commands.module_command(
                   'tunas_tf.tools.extract_architecture',
                   f'--model_dir={model_dir}'),
               commands.module_command('tunas_tf.tools.report',
                                       f'--model_dir={model_dir}'))
  return True


def _data_text(config: SearchConfig) -> str:
  """'digits 8x8, preprocessing none, 1078 + 359 held-out images'."""
  return (f'{config.job.data_text}, {config.search_train_examples} + '
          f'{config.validation_examples} held-out images')


def _log_finished(config: SearchConfig, plan: Plan) -> None:
  logging.info('The search in %s has finished (step %d of %d); nothing to '
               'do (%s)', config.job.model_dir, plan.resume.global_step,
               config.max_global_step, _data_text(config))


def _log_start(config: SearchConfig, plan: Plan) -> None:
  """The first line, naming the data: 'Starting ...' or 'Resuming ... from
  step N (model.ckpt-N)'."""
  what = lifecycle.start_words(f'search {config.ssd}', config.job.model_dir,
                               bool(plan.stored), plan.resume)
  logging.info('%s: %d steps on %s (RL delay %d, warm-up %d/%d); building '
               'the search graph ...', what, config.max_global_step,
               _data_text(config), config.rl_delay_steps,
               config.increase_ops_warmup_steps,
               config.increase_filters_warmup_steps)
