"""`SearchConfig`: every value a search uses, derived once from the flags.

`train_search.py` turns its flags into a `SearchConfig` with `derive`; below
the entry point, code reads this frozen dataclass (attribute access), never
flags. `config.json` in the model directory holds it: flag-backed values under
their flag names and derived ones under names saying what they hold (e.g.
`rl_delay_steps`). On restart the stored file is compared with the new config
and any difference in a field that changes the search stops the run (see
`RUN_ONLY_FIELDS` for what may change).

Derivation (reference/tunas.md §2.0, §3):
  max_global_step = floor(search_train_examples * epochs / train_batch_size),
      or `max_steps` when given;
  rl_delay_steps = int(rl_delay_steps_fraction * max_global_step), and the
      same for the two warm-ups and the model LR warm-up;
  model_learning_rate_scaled = model_learning_rate * train_batch_size / 256,
      and the same for the RL learning rate;
  validation_batch_size = round(train_batch_size * rl_batch_size_multiplier).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, Optional

from tunas_tf import files

SUPERNET_MODES = ('masked', 'sampled')
BFLOAT16_MODES = ('auto', 'true', 'false', 'ontpu')
CONFIG_FILE = 'config.json'
MODEL_SPEC_FILE = 'model_spec.json'

# Fields that only say how long or where to run: they may change on restart.
# The step counts derived from the run length follow `max_steps` (a longer
# run stretches its schedules; the fractions themselves may not change).
RUN_ONLY_FIELDS = frozenset({
    'model_dir', 'tpu', 'tpu_zone', 'gcp_project', 'max_steps',
    'max_global_step', 'rl_delay_steps', 'increase_ops_warmup_steps',
    'increase_filters_warmup_steps', 'model_warmup_steps',
    'tpu_iterations_per_loop', 'data_dir', 'download',
    'log_every_steps', 'save_checkpoints_steps', 'keep_checkpoint_max',
})


# Fields computed by `derive` rather than set by a flag.
DERIVED_FIELDS = frozenset({
    'search_train_examples', 'max_global_step', 'rl_delay_steps',
    'increase_ops_warmup_steps', 'increase_filters_warmup_steps',
    'model_warmup_steps', 'model_learning_rate_scaled',
    'rl_learning_rate_scaled', 'validation_batch_size',
})


@dataclasses.dataclass(frozen=True)
class SearchConfig:
  """All settings of one search, flag-backed and derived.

  Flag-backed fields carry the flag's name; see `train_search.py` for their
  help. Derived fields are documented inline.
  """
  # Where and what.
  model_dir: str
  ssd: str
  dataset: str
  data_dir: Optional[str]
  download: bool
  num_classes: int
  image_size: int
  num_channels: int
  validation_examples: int
  seed: int
  # Backend.
  use_tpu: bool
  tpu: str
  tpu_zone: Optional[str]
  gcp_project: Optional[str]
  supernet_mode: str
  use_bfloat16: str  # Resolved: 'true', 'false' or 'ontpu'.
  tpu_iterations_per_loop: int
  # Shared weights.
  model_learning_rate: float
  model_momentum: float
  model_weight_decay: float  # Resolved (None -> 4e-5 or 3e-5 with bf16).
  model_warmup_steps_fraction: float
  train_batch_size: int
  epochs: float
  max_steps: Optional[int]
  # Controller.
  rl_learning_rate: float
  use_exponential_rl_learning_rate_schedule: bool
  rl_entropy_regularization: float
  rl_baseline_momentum: float
  rl_batch_size_multiplier: float
  rl_delay_steps_fraction: float
  increase_ops_warmup_steps_fraction: float
  increase_filters_warmup_steps_fraction: float
  rl_reward_function: str
  enable_cost_model: bool
  cost_model: str
  rl_cost_model_target: float  # Resolved (see train_search's help).
  rl_cost_model_exponent: float
  use_gradient_sync_barrier: bool
  # Logging and checkpoints.
  log_every_steps: int
  save_checkpoints_steps: int
  keep_checkpoint_max: int
  # Derived.
  search_train_examples: int
  max_global_step: int
  rl_delay_steps: int
  increase_ops_warmup_steps: int
  increase_filters_warmup_steps: int
  model_warmup_steps: int
  model_learning_rate_scaled: float
  rl_learning_rate_scaled: float
  validation_batch_size: int

  def to_json(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)


def _fraction_steps(fraction: float, total: int, name: str) -> int:
  if not 0.0 <= fraction <= 1.0:
    raise ValueError(f'--{name} must be in [0, 1], got {fraction}')
  return int(fraction * total)


def derive(*, search_train_examples: int, **flag_values) -> SearchConfig:
  """Builds a `SearchConfig` from flag values and the dataset size.

  Args:
    search_train_examples: images that train the shared weights (the
      dataset's train split minus the controller's hold-out).
    **flag_values: one keyword per flag-backed field of `SearchConfig`, with
      `model_weight_decay` and `rl_cost_model_target` already resolved and
      `use_bfloat16` resolved from 'auto'.

  Returns:
    The frozen config.

  Raises:
    ValueError: for a non-positive size, a fraction outside [0, 1], a
      warm-up longer than the RL delay (reference §2, guards of
      `run_model`), an unknown supernet mode, or an empty search.
  """
  v = flag_values
  if v['train_batch_size'] <= 0:
    raise ValueError(f'--train_batch_size must be > 0, got '
                     f"{v['train_batch_size']}")
  if v['supernet_mode'] not in SUPERNET_MODES:
    raise ValueError(f"Unknown --supernet_mode {v['supernet_mode']!r}; "
                     f'expected one of {SUPERNET_MODES}')
  if v['max_steps'] is not None:
    if v['max_steps'] <= 0:
      raise ValueError(f"--max_steps must be > 0, got {v['max_steps']}")
    max_global_step = v['max_steps']
  else:
    max_global_step = int(search_train_examples * v['epochs']
                          // v['train_batch_size'])
  if max_global_step <= 0:
    raise ValueError(
        f'The search has no steps: {search_train_examples} examples x '
        f"{v['epochs']} epochs / batch {v['train_batch_size']}")
  rl_delay = _fraction_steps(v['rl_delay_steps_fraction'], max_global_step,
                             'rl_delay_steps_fraction')
  ops_warmup = _fraction_steps(v['increase_ops_warmup_steps_fraction'],
                               max_global_step,
                               'increase_ops_warmup_steps_fraction')
  filters_warmup = _fraction_steps(v['increase_filters_warmup_steps_fraction'],
                                   max_global_step,
                                   'increase_filters_warmup_steps_fraction')
  model_warmup = _fraction_steps(v['model_warmup_steps_fraction'],
                                 max_global_step, 'model_warmup_steps_fraction')
  if ops_warmup > rl_delay:
    raise ValueError(f'Op warm-up ({ops_warmup} steps) is longer than the RL '
                     f'delay ({rl_delay} steps): the controller would learn '
                     'from warm-up samples')
  if filters_warmup > rl_delay:
    raise ValueError(f'Filter warm-up ({filters_warmup} steps) is longer than '
                     f'the RL delay ({rl_delay} steps); this is not supported')
  if model_warmup >= max_global_step:
    raise ValueError(f'Model LR warm-up ({model_warmup} steps) must be shorter '
                     f'than the search ({max_global_step} steps)')
  scale = v['train_batch_size'] / 256.0
  return SearchConfig(
      search_train_examples=search_train_examples,
      max_global_step=max_global_step,
      rl_delay_steps=rl_delay,
      increase_ops_warmup_steps=ops_warmup,
      increase_filters_warmup_steps=filters_warmup,
      model_warmup_steps=model_warmup,
      model_learning_rate_scaled=v['model_learning_rate'] * scale,
      rl_learning_rate_scaled=v['rl_learning_rate'] * scale,
      validation_batch_size=int(round(v['train_batch_size'] *
                                      v['rl_batch_size_multiplier'])),
      **v)


def write_or_check(config: SearchConfig, model_spec_json: str) -> bool:
  """Writes `config.json` and `model_spec.json`, or checks them on resume.

  Args:
    config: the new run's config.
    model_spec_json: the search space, serialised with `spec_io.dumps`.

  Returns:
    True when the model directory already held a search (a resume).

  Raises:
    ValueError: naming the first field that differs from the stored config
      (outside `RUN_ONLY_FIELDS`), or when the stored search space differs.
  """
  config_path = os.path.join(config.model_dir, CONFIG_FILE)
  spec_path = os.path.join(config.model_dir, MODEL_SPEC_FILE)
  # The search space first: a different space makes every other check moot.
  if files.exists(spec_path):
    if json.loads(files.read_text(spec_path)) != json.loads(model_spec_json):
      raise ValueError(f'{spec_path} holds a different search space than '
                       f'--ssd={config.ssd}; use a new --model_dir')
  resumed = files.write_or_check_config(config_path, config.to_json(),
                                        RUN_ONLY_FIELDS, DERIVED_FIELDS)
  if not files.exists(spec_path):
    files.write_text(model_spec_json, spec_path)
  return resumed


def read(model_dir: str) -> Dict[str, Any]:
  """Returns the stored `config.json` of a search as a dict.

  Raises:
    ValueError: if there is none or it is not valid JSON.
  """
  path = os.path.join(model_dir, CONFIG_FILE)
  if not files.exists(path):
    raise ValueError(f'No {CONFIG_FILE} in {model_dir!r}: not a search '
                     'directory')
  return files.read_json(path)
