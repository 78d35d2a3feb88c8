"""`SearchConfig`: every value a search uses, derived once from the flags.

`train_search.py` turns its flags into a `SearchConfig`; below the entry
point, code reads this frozen dataclass (attribute access), never flags.
`config.json` in the model directory holds it: flag-backed values under
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
import functools
import json
import os
from typing import TYPE_CHECKING, Any, Dict, Optional

from tunas_tf import backend
from tunas_tf import files
from tunas_tf import precision
from tunas_tf.search_space import naming

if TYPE_CHECKING:
  from tunas_tf.cost_model import linear

BFLOAT16_MODES = precision.BFLOAT16_MODES
CONFIG_FILE = files.CONFIG_FILE
MODEL_SPEC_FILE = 'model_spec.json'

# Fields that only say how long or where to run: they may change on restart.
# The step counts derived from the run length follow `max_steps` (a longer
# run stretches its schedules; the fractions themselves may not change).
RUN_ONLY_FIELDS = backend.JOB_RUN_ONLY_FIELDS | {
    'max_steps', 'max_global_step', 'rl_delay_steps',
    'increase_ops_warmup_steps', 'increase_filters_warmup_steps',
    'model_warmup_steps',
}


# Values computed from the fields (properties of `SearchConfig`, stored in
# config.json beside the fields they come from).
DERIVED_FIELDS = (
    'max_global_step', 'rl_delay_steps', 'increase_ops_warmup_steps',
    'increase_filters_warmup_steps', 'model_warmup_steps',
    'model_learning_rate_scaled', 'rl_learning_rate_scaled',
    'validation_batch_size',
)


def _fraction_steps(fraction: float, total: int, name: str) -> int:
  if not 0.0 <= fraction <= 1.0:
    raise ValueError(f'--{name} must be in [0, 1], got {fraction}')
  return int(fraction * total)


@dataclasses.dataclass(frozen=True)
class SearchConfig:
  """All settings of one search; the derived values are properties.

  Fields carry the flag's name (see `train_search.py` for their help), with
  the defaults that depend on other flags already resolved. Construction
  validates every value (also through `dataclasses.replace`).

  Raises (on construction):
    ValueError: for a non-positive size, a fraction outside [0, 1], a
      warm-up longer than the RL delay (reference §2, guards of
      `run_model`), an unknown supernet mode, an empty search, or a cost
      model that cannot be resolved for the space.
  """
  # Where, on what data and backend, how often to log and save.
  job: backend.JobConfig
  ssd: str
  validation_examples: int
  supernet_mode: str
  use_bfloat16: str  # Resolved: 'true', 'false' or 'ontpu'.
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
  cost_model: str  # 'released', 'macs' or a coefficients JSON path.
  rl_cost_model_target: float  # Resolved (see train_search's help).
  rl_cost_model_exponent: float
  use_gradient_sync_barrier: bool
  # Images that train the shared weights (the dataset's train split minus
  # the controller's hold-out).
  search_train_examples: int

  def __post_init__(self):
    if self.train_batch_size <= 0:
      raise ValueError(f'--train_batch_size must be > 0, got '
                       f'{self.train_batch_size}')
    precision.check_resolved(self.use_bfloat16)
    if self.supernet_mode not in naming.MODES:
      raise ValueError(f'Unknown --supernet_mode {self.supernet_mode!r}; '
                       f'expected one of {naming.MODES}')
    if self.max_steps is not None and self.max_steps <= 0:
      raise ValueError(f'--max_steps must be > 0, got {self.max_steps}')
    if self.max_global_step <= 0:
      raise ValueError(
          f'The search has no steps: {self.search_train_examples} examples x '
          f'{self.epochs} epochs / batch {self.train_batch_size}')
    rl_delay, ops_warmup, filters_warmup, model_warmup = (
        self.rl_delay_steps, self.increase_ops_warmup_steps,
        self.increase_filters_warmup_steps, self.model_warmup_steps)
    if ops_warmup > rl_delay:
      raise ValueError(f'Op warm-up ({ops_warmup} steps) is longer than the '
                       f'RL delay ({rl_delay} steps): the controller would '
                       'learn from warm-up samples')
    if filters_warmup > rl_delay:
      raise ValueError(f'Filter warm-up ({filters_warmup} steps) is longer '
                       f'than the RL delay ({rl_delay} steps); this is not '
                       'supported')
    if model_warmup >= self.max_global_step:
      raise ValueError(f'Model LR warm-up ({model_warmup} steps) must be '
                       f'shorter than the search ({self.max_global_step} '
                       'steps)')
    self.resolved_cost_model  # pylint: disable=pointless-statement

  @functools.cached_property
  def resolved_cost_model(self) -> 'linear.LinearCostModel':
    """`--cost_model` resolved once for this space and input."""
    from tunas_tf.cost_model import linear  # pylint: disable=g-import-not-at-top
    return linear.get_cost_model(self.ssd, self.cost_model,
                                 image_size=self.job.image_size,
                                 num_classes=self.job.num_classes,
                                 input_channels=self.job.num_channels)

  @property
  def max_global_step(self) -> int:
    """`max_steps`, or floor(search_train_examples * epochs / batch)."""
    if self.max_steps is not None:
      return self.max_steps
    return int(self.search_train_examples * self.epochs //
               self.train_batch_size)

  @property
  def rl_delay_steps(self) -> int:
    return _fraction_steps(self.rl_delay_steps_fraction, self.max_global_step,
                           'rl_delay_steps_fraction')

  @property
  def increase_ops_warmup_steps(self) -> int:
    return _fraction_steps(self.increase_ops_warmup_steps_fraction,
                           self.max_global_step,
                           'increase_ops_warmup_steps_fraction')

  @property
  def increase_filters_warmup_steps(self) -> int:
    return _fraction_steps(self.increase_filters_warmup_steps_fraction,
                           self.max_global_step,
                           'increase_filters_warmup_steps_fraction')

  @property
  def model_warmup_steps(self) -> int:
    return _fraction_steps(self.model_warmup_steps_fraction,
                           self.max_global_step, 'model_warmup_steps_fraction')

  @property
  def model_learning_rate_scaled(self) -> float:
    return self.model_learning_rate * self.train_batch_size / 256.0

  @property
  def rl_learning_rate_scaled(self) -> float:
    return self.rl_learning_rate * self.train_batch_size / 256.0

  @property
  def validation_batch_size(self) -> int:
    return int(round(self.train_batch_size * self.rl_batch_size_multiplier))

  def to_json(self) -> Dict[str, Any]:
    """The fields, the job's and the derived values, flat (config.json)."""
    values = backend.to_flat(self)
    values.update((name, getattr(self, name)) for name in DERIVED_FIELDS)
    return values

  @classmethod
  def from_json(cls, values: Dict[str, Any], where: str) -> 'SearchConfig':
    """The config stored as `to_json` wrote it (derived values recomputed).

    Raises:
      ValueError: naming `where` and the field, for a missing field.
    """
    names = backend.flat_keys(cls)
    missing = [name for name in names if name not in values]
    if missing:
      raise ValueError(f'{where} has no field {missing[0]!r}: not written by '
                       'this version of train_search')
    return backend.from_flat(cls, {name: values[name] for name in names})


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
  config_path = os.path.join(config.job.model_dir, CONFIG_FILE)
  spec_path = os.path.join(config.job.model_dir, MODEL_SPEC_FILE)
  # The search space first: a different space makes every other check moot.
  if files.exists(spec_path):
    if json.loads(files.read_text(spec_path)) != json.loads(model_spec_json):
      raise ValueError(f'{spec_path} holds a different search space than '
                       f'--ssd={config.ssd}; use a new --model_dir')
  # Derived values (and the dataset size they come from) are compared last,
  # so an error names what the user changed.
  resumed = files.write_or_check_config(
      config_path, config.to_json(), RUN_ONLY_FIELDS,
      DERIVED_FIELDS + ('search_train_examples',))
  if not files.exists(spec_path):
    files.write_text(model_spec_json, spec_path)
  return resumed


def read(model_dir: str) -> SearchConfig:
  """Returns the stored `SearchConfig` of a search directory.

  Raises:
    ValueError: if there is no config.json, it is not valid JSON or not an
      object, or a stored value is missing or invalid.
  """
  path = os.path.join(model_dir, CONFIG_FILE)
  values = files.read_config(model_dir, 'search')
  try:
    return SearchConfig.from_json(values, path)
  except TypeError as e:
    raise ValueError(f'{path}: {e}') from None
