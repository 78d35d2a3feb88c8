"""The search: checked, then run on its engine.

`run_search(config)` checks everything before it writes, then trains the
search's task (`search.task.SearchTask`) on `config.job.engine`: the
TPUEstimator (`make_model_fn`, `make_input_fn`: the task through
`runtime.estimator`'s adapter) or the tf.distribute loop
(`runtime.distribute.train`).
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple

from absl import logging
import tensorflow as tf

from tunas_tf import commands
from tunas_tf.runtime import cluster
from tunas_tf.runtime import distribute
from tunas_tf.runtime import estimator as estimator_lib
from tunas_tf.runtime import lifecycle
from tunas_tf.runtime import preemption
from tunas_tf.runtime import replicas
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.search import config as config_lib
from tunas_tf.search import task as task_lib
from tunas_tf.search.config import SearchConfig
from tunas_tf.search_space import mobile
from tunas_tf.search_space import spec_io

# The Grappler passes the distribute engine's search loop runs without
# (`distribute.grappler_without`): a faster start, the same step
# (bench/DECISIONS.md, 'The distribute engine's search without four Grappler
# passes').
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


def make_model_fn(config: SearchConfig):
  """The TPUEstimator model_fn of the search (`task.SearchTask`)."""
  return estimator_lib.task_model_fn(lambda: task_lib.SearchTask(config),
                                     config.job, config.max_global_step)


def make_input_fn(config: SearchConfig, start_step: int = 0):
  """The input_fn of the search's zipped train/validation batches, from
  the global step `start_step` on (`data.streams.keyed_batches`), as if
  never interrupted."""
  return estimator_lib.task_input_fn(task_lib.SearchTask(config), config.job,
                                     config.replicas, start_step)


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
  """Checks everything, then writes config.json and trains to the end,
  through `lifecycle.run`: an earlier run of the same search resumes from
  its newest readable checkpoint, a different one is refused before anything
  is written, a finished one is left as it is; one process at a time (but
  the non-chief workers of a multi-worker search, which write nothing
  there); a signal stops it after the step (TPU loop) in flight, saved.

  Returns:
    False when the search had already finished (nothing was done).

  Raises:
    ValueError: as `check_search` and `lifecycle.run` (a malformed
      `TF_CONFIG`, an unresolvable TPU, a directory another live process
      holds); when a NaN or Inf loss or reward stops the search (naming the
      step and the last good checkpoint).
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
      distribute.train(
          strategy, task_lib.SearchTask(config), job=config.job,
          max_steps=config.max_global_step, stop=stop, run_name='the search',
          grappler_off=distribute_grappler_off())
      return True
    estimator = make_estimator(config)
    config_lib.write(config, plan.spec_json, plan.stored)
    _log_start(config, plan)
    estimator_lib.train(estimator,
                        make_input_fn(config, plan.resume.global_step),
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
