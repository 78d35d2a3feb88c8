"""`TrainEvalConfig`: every value of a standalone run, checked on
construction; below the entry point code reads it, never flags. On restart
a `config.json` difference outside `RUN_ONLY_FIELDS` stops the run."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple, Optional, Tuple

from tunas_tf import architecture as architecture_lib
from tunas_tf.io import checks
from tunas_tf.data import datasets
from tunas_tf.runtime import jobs
from tunas_tf.runtime import precision
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema

# The binary that writes a train_eval directory (`jobs.written_by`).
BINARY = 'train_eval'
EXPORT_SUBDIR = 'export'
DEFAULT_SSD = 'digits_search'
DEFAULT_DATASET = datasets.DIGITS

# Fields that only say how long, where or how to report a run: they may change
# on restart. The warm-up length follows the run length, as in the search.
RUN_ONLY_FIELDS = jobs.JOB_RUN_ONLY_FIELDS | {
    'use_tpu', 'max_steps', 'max_global_step', 'warmup_steps', 'eval_only',
    'eval_split', 'eval_batch_size', 'export', 'export_dir',
}
# Computed from the fields (properties), stored for the reader's sake.
DERIVED_FIELDS = ('max_global_step', 'warmup_steps', 'learning_rate_scaled')
_UNIT_INTERVAL_FIELDS = ('warmup_steps_fraction', 'moving_average_decay',
                         'label_smoothing', 'momentum', 'dropout_rate',
                         'path_dropout_rate')


@dataclasses.dataclass(frozen=True)
class TrainEvalConfig(jobs.StoredConfig):
  """All settings of one standalone run, by flag name; `train_examples`
  excludes the first `validation_examples` (the search's hold-out).
  ValueError on construction naming the flag of a bad setting."""
  BINARY = BINARY
  RUN_ONLY_FIELDS = RUN_ONLY_FIELDS
  DERIVED_FIELDS = DERIVED_FIELDS
  job: jobs.JobConfig
  ssd: str
  indices: str
  filters_multiplier: float
  eval_split: str
  train_batch_size: int
  eval_batch_size: int
  epochs: float
  max_steps: Optional[int]
  base_learning_rate: float
  warmup_steps_fraction: float
  momentum: float
  weight_decay: float  # Resolved (None -> 4e-5, or 3e-5 with bfloat16).
  use_bfloat16: str  # Resolved: 'true', 'false' or 'ontpu'.
  dropout_rate: float  # Resolved (`default_dropout_rate`).
  path_dropout_rate: float
  label_smoothing: float
  moving_average_decay: float
  init_from_search: Optional[str]
  freeze_inherited: bool
  eval_only: bool
  export: bool
  export_dir: str
  train_examples: int
  validation_examples: int

  def __post_init__(self):
    space = _check_indices(self.ssd, self.indices)
    checks.number('filters_multiplier', self.filters_multiplier, 0,
                  low_open=True)
    for name in ('train_batch_size', 'eval_batch_size'):
      checks.number(name, getattr(self, name), 1, integer=True)
    checks.number('base_learning_rate', self.base_learning_rate, 0,
                  low_open=True)
    if self.max_steps is not None:
      checks.number('max_steps', self.max_steps, 1, integer=True)
    else:
      checks.number('epochs', self.epochs, 0, low_open=True)
    for name in _UNIT_INTERVAL_FIELDS:
      checks.fraction(name, getattr(self, name), high_open=True)
    checks.number('weight_decay', self.weight_decay, 0)
    precision.check_resolved(self.use_bfloat16)
    if self.path_dropout_rate > 0 and not mobile.skippable_layers(space):
      raise ValueError(f'--path_dropout_rate={self.path_dropout_rate}: --ssd='
                       f'{self.ssd} has no skippable layer (an op OneOf with '
                       'ZeroSpec) to drop')
    if self.freeze_inherited and not self.init_from_search:
      raise ValueError('--freeze_inherited needs --init_from_search')
    if self.job.dataset == datasets.DIGITS:
      if self.eval_split not in datasets.SPLITS:
        raise ValueError(f'--eval_split={self.eval_split!r}: digits has the '
                         f'splits {datasets.SPLITS}')
    checks.number('validation_examples', self.validation_examples, 0,
                  integer=True)
    if self.train_batch_size > self.train_examples:
      held_out = (f' (the train split less --validation_examples='
                  f'{self.validation_examples})'
                  if self.validation_examples else '')
      raise ValueError(f'--train_batch_size={self.train_batch_size} is more '
                       f'than the {self.train_examples} training examples of '
                       f'{self.job.dataset!r}{held_out}: use '
                       f'--train_batch_size={self.train_examples} or less')
    if self.max_global_step <= 0:
      fewest = checks.rounded_bound(self.train_batch_size,
                                    self.train_examples, up=True)
      raise ValueError(f'--epochs={self.epochs} gives no training step at '
                       f'batch {self.train_batch_size}: use --epochs='
                       f'{fewest} or more, or give --max_steps')

  @property
  def max_global_step(self) -> int:
    """`max_steps`, or floor(train_examples * epochs / train_batch_size)."""
    if self.max_steps is not None:
      return self.max_steps
    return int(math.floor(self.train_examples * self.epochs /
                          self.train_batch_size))

  @property
  def warmup_steps(self) -> int:
    return int(self.warmup_steps_fraction * self.max_global_step)

  @property
  def learning_rate_scaled(self) -> float:
    return float(self.base_learning_rate) * self.train_batch_size / 256.0


def _check_indices(ssd: str, indices: str) -> Any:
  """The space `ssd` (an unknown name raises), refusing `indices` that do
  not fit it in one line naming both flags."""
  space = mobile.get_search_space(ssd)
  try:
    schema.check_indices(space, indices)
  except ValueError as e:
    raise ValueError(f'--indices={indices!r} for --ssd={ssd}: {e}') from None
  return space


class SearchData(NamedTuple):
  """The data flags an architecture.json gives defaults for (None: unset)."""
  dataset: Optional[str]
  image_size: Optional[int]
  num_classes: Optional[int]
  preprocessing: Optional[str]


def resolve_architecture(path: Optional[str], ssd: Optional[str],
                         indices: Optional[str]
                         ) -> Tuple[str, str, Optional[SearchData]]:
  """(ssd, normalised indices, the search's data or None) from
  `--architecture`, `--ssd` and `--indices`; ValueError for an unreadable
  file or flags that disagree with it."""
  recorded = None
  if path:
    try:
      arch = architecture_lib.read(path)
    except ValueError as e:
      raise ValueError(f'--architecture: {e}') from None
    if arch.dataset is not None:
      recorded = SearchData(*(arch.data.get(name)
                              for name in SearchData._fields))
    if ssd is not None and ssd != arch.ssd:
      raise ValueError(f'--ssd={ssd} disagrees with --architecture '
                       f'({arch.ssd}); give one of them')
    if indices is not None and indices != arch.indices_string:
      raise ValueError('--indices disagrees with --architecture; give one '
                       'of them')
    ssd, indices = arch.ssd, arch.indices_string
  ssd = ssd or DEFAULT_SSD
  _check_indices(ssd, indices or '')
  return ssd, schema.format_indices(indices or ''), recorded


def use_search_data(given: SearchData, recorded: Optional[SearchData],
                    path: Optional[str], allow_other_data: bool
                    ) -> SearchData:
  """The data flags `given` (None: unset), unset ones filled from the
  search's `recorded` data (docs/train_eval.md, 'What to train'); else the
  defaults of `DEFAULT_DATASET` or the dataset.

  Raises:
    ValueError: one line naming the flag, both values and `path`, for a flag
      that differs without `allow_other_data`, or that without `path`.
  """
  if allow_other_data and not path:
    raise ValueError('--allow_other_data needs --architecture')
  if recorded is None:
    return given._replace(dataset=given.dataset or DEFAULT_DATASET)
  if not allow_other_data:
    for name, value, theirs in zip(SearchData._fields, given, recorded):
      if value is not None and theirs is not None and value != theirs:
        refused = (f"--{name}={value} contradicts the search's {name} "
                   f'{theirs!r} in {path}; leave --{name} unset, or ')
        if (name == 'image_size' and
            (given.dataset or recorded.dataset) == datasets.DIGITS):
          # digits has no other size: --allow_other_data alone would only
          # reach datasets.dataset_info's refusal.
          raise ValueError(refused + 'train on another dataset at that '
                           'size (--allow_other_data --dataset=NAME): '
                           'digits images are 8x8 only')
        raise ValueError(refused + 'pass --allow_other_data to train on '
                         'other data')
  if given.dataset not in (None, recorded.dataset):
    return given
  return SearchData(*(theirs if value is None else value
                      for value, theirs in zip(given, recorded)))


def default_dropout_rate(ssd: str, epochs: float) -> float:
  """0 below 150 epochs, else 0.25 (MobileNetV3-like spaces) or 0.15."""
  if epochs < 150:
    return 0.0
  return 0.25 if mobile.space_info(ssd).mobilenet_v3_like else 0.15

