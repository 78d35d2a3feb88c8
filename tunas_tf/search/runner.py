"""The search: checked, then its task (`search.task.SearchTask`) trained
on its engine (`runtime.engine`)."""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple

from absl import logging
import tensorflow as tf

from tunas_tf.io import commands
from tunas_tf.runtime import engine as engine_lib
from tunas_tf.runtime import lifecycle
from tunas_tf.runtime import preemption
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.search import config as config_lib
from tunas_tf.search import task as task_lib
from tunas_tf.search.config import SearchConfig
from tunas_tf.search_space import mobile
from tunas_tf.search_space import spec_io

# Grappler passes the distribute engine's search runs without: a faster
# start, the same step (bench/DECISIONS.md, 'The distribute engine's search
# without four Grappler passes').
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


def make_engine(config: SearchConfig) -> engine_lib.Engine:
  """The search's engine: `config.replicas` replicas, Grappler without
  `distribute_grappler_off()` (the Estimator's sessions without it)."""
  return engine_lib.make(config.job, config.replicas,
                         grappler_off=distribute_grappler_off())


class Plan(NamedTuple):
  """What `check_search` found: the serialised space (model_spec.json), the
  stored config.json values (None for a new search), the resume point."""
  spec_json: str
  stored: Optional[Dict[str, Any]]
  resume: resume_lib.ResumePoint

  def finished(self, max_global_step: int) -> bool:
    """Whether the newest readable checkpoint is at the last step."""
    return (self.resume.checkpoint is not None and
            self.resume.global_step >= max_global_step)


def check_search(config: SearchConfig) -> Plan:
  """Everything a search checks before it writes anything; ValueError for a
  directory of another search (naming the field) or unreadable checkpoints."""
  spec_json = spec_io.dumps(mobile.get_search_space(config.ssd))
  stored = config_lib.check_stored(config, spec_json)
  return Plan(spec_json, stored,
              resume_lib.resume_point(config.job.model_dir))


def run_search(config: SearchConfig) -> bool:
  """Checks everything, then writes config.json and trains to the end through
  `lifecycle.run` (resuming, refusing another search, one process at a
  time; docs/restarting.md); False when it had already finished.

  Raises:
    ValueError: as `check_search` and `lifecycle.run`; a NaN or Inf loss or
      reward (naming the step and the last good checkpoint).
    preemption.Stopped: a signal stopped it, its checkpoint saved.
  """
  model_dir = config.job.model_dir

  def finished(plan: Plan) -> bool:
    if plan.finished(config.max_global_step):
      _log_finished(config, plan)
      return True
    return False

  def start(plan: Plan, stop: preemption.StopRequest) -> bool:
    if engine.chief:
      config_lib.write(config, plan.spec_json, plan.stored)
      _log_start(config, plan)
    else:
      logging.info('Joining the search in %s as %s: the chief writes its '
                   'files', model_dir, engine.worker().text())
    engine.train(task_lib.SearchTask(config), max_steps=config.max_global_step,
                 stop=stop, run_name='the search', resume=plan.resume)
    return True

  engine = make_engine(config)
  if not lifecycle.run(engine, 'train_search', lambda: check_search(config),
                       start, finished, multi_worker=True):
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
