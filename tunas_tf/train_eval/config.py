"""`TrainEvalConfig`: every value of a standalone run, checked once.

`train_eval/__main__.py` turns its flags into keyword arguments of `derive`,
which resolves what needs a file or the dataset (`--architecture` and the
search's data it records, the dataset's sizes, `--init_from_search`) and
builds the frozen config. The config checks its own values in
`__post_init__`, so a `dataclasses.replace` is checked as well, and computes
the derived fields:

  max_global_step = max_steps, or
      floor(train_examples * epochs / train_batch_size);
  warmup_steps = int(warmup_steps_fraction * max_global_step);
  learning_rate_scaled = base_learning_rate * train_batch_size / 256.

`config.json` in the model directory holds every field under its name (flat
keys); on restart the stored file is compared with the new config and any
difference outside `RUN_ONLY_FIELDS` stops the run naming the field.
"""

from __future__ import annotations

import dataclasses
import math
import os
import types
from typing import Any, Dict, Optional, Tuple

from tunas_tf import architecture as architecture_lib
from tunas_tf import checks
from tunas_tf import files
from tunas_tf.data import datasets
from tunas_tf.data import preprocessing
from tunas_tf.data import tfds_builders
from tunas_tf.graph import inherit
from tunas_tf.runtime import jobs
from tunas_tf.runtime import precision
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema

CONFIG_FILE = files.CONFIG_FILE
EXPORT_SUBDIR = 'export'
DEFAULT_SSD = 'digits_search'
DEFAULT_DATASET = datasets.DIGITS
# The flags an architecture.json with the search's data gives defaults for.
SEARCH_DATA_FLAGS = ('dataset', 'image_size', 'num_classes', 'preprocessing')

# Fields that only say how long, where or how to report a run: they may change
# on restart. The warm-up length follows the run length, as in the search.
RUN_ONLY_FIELDS = jobs.JOB_RUN_ONLY_FIELDS | {
    'use_tpu', 'max_steps', 'max_global_step', 'warmup_steps', 'eval_only',
    'eval_split', 'eval_batch_size', 'export', 'export_dir',
}
DERIVED_FIELDS = frozenset({'train_examples', 'max_global_step',
                            'warmup_steps', 'learning_rate_scaled',
                            'num_channels'})
# Derived fields computed by `__post_init__` (not constructor arguments).
_COMPUTED_FIELDS = ('max_global_step', 'warmup_steps', 'learning_rate_scaled')
_POSITIVE_FIELDS = ('train_batch_size', 'eval_batch_size')


@dataclasses.dataclass(frozen=True)
class TrainEvalConfig:
  """All settings of one standalone run (flag names; see `__main__.py`).

  Dataset facts: `num_channels` and `train_examples` (the size of the
  training data: all of it, or with `validation_examples` > 0 the train
  split less its first `validation_examples`, which the search held out
  for its controller and `eval_split=search_validation` evaluates).
  Computed in `__post_init__`: `max_global_step`, `warmup_steps`,
  `learning_rate_scaled` (see the module docstring).

  Raises:
    ValueError: on construction, for a missing, malformed or inconsistent
      setting (the message names the flag).
  """
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
  dropout_rate: float
  path_dropout_rate: float
  label_smoothing: float
  moving_average_decay: float
  init_from_search: Optional[str]
  freeze_inherited: bool
  eval_only: bool
  export: bool
  export_dir: str
  train_examples: int
  validation_examples: int = 0
  max_global_step: int = dataclasses.field(init=False)
  warmup_steps: int = dataclasses.field(init=False)
  learning_rate_scaled: float = dataclasses.field(init=False)

  def __post_init__(self):
    check_settings(self, self.job.dataset)
    if self.train_batch_size > self.train_examples:
      raise ValueError(f'--train_batch_size is {self.train_batch_size}, more '
                       f'than the {self.train_examples} training examples of '
                       f'{self.job.dataset!r}')
    max_global_step = (self.max_steps if self.max_steps is not None else
                       int(math.floor(self.train_examples * self.epochs /
                                      self.train_batch_size)))
    if max_global_step <= 0:
      raise ValueError(f'--epochs={self.epochs} gives no training step at '
                       f'batch {self.train_batch_size}')
    set_field = lambda name, value: object.__setattr__(self, name, value)
    set_field('max_global_step', max_global_step)
    set_field('warmup_steps',
              int(self.warmup_steps_fraction * max_global_step))
    set_field('learning_rate_scaled',
              float(self.base_learning_rate) * self.train_batch_size / 256.0)

  def to_json(self) -> Dict[str, Any]:
    """The job's fields and the run's own, flat (the config.json layout)."""
    return jobs.to_flat(self)


def _positive(value, name):
  if value is None or not value > 0:  # NaN is not positive either.
    raise ValueError(f'--{name} must be positive, got {value!r}')
  checks.number(name, value, 0, low_open=True)  # Finite.
  return value


def _in_unit_interval(value, name):
  if not 0.0 <= value < 1.0:
    raise ValueError(f'--{name} must be in [0, 1), got {value}')


def _check_indices(ssd: str, indices: str) -> None:
  space = mobile.get_search_space(ssd)  # Unknown names raise.
  try:
    schema.check_indices(space, indices)
  except ValueError as e:
    raise ValueError(f'--indices={indices!r} for --ssd={ssd}: {e}') from None


def check_settings(c: Any, dataset: str) -> None:
  """Checks the run's own settings that need no file and no dataset.

  (The job's settings are checked by `jobs.JobConfig`.)

  Args:
    c: a `TrainEvalConfig`, or any object with its own flag-backed fields
      (with `dropout_rate` resolved).
    dataset: the dataset's name (`--dataset`).

  Raises:
    ValueError: naming the first bad setting's flag.
  """
  _check_indices(c.ssd, c.indices)
  if not c.filters_multiplier > 0:
    raise ValueError('--filters_multiplier must be positive, got '
                     f'{c.filters_multiplier}')
  checks.number('filters_multiplier', c.filters_multiplier, 0, low_open=True)
  for name in _POSITIVE_FIELDS:
    _positive(getattr(c, name), name)
  if c.max_steps is not None:
    _positive(c.max_steps, 'max_steps')
  else:
    _positive(c.epochs, 'epochs')
  _positive(c.base_learning_rate, 'base_learning_rate')
  for name in ('warmup_steps_fraction', 'moving_average_decay',
               'label_smoothing', 'momentum'):
    _in_unit_interval(getattr(c, name), name)
  if not c.weight_decay >= 0:
    raise ValueError(f'--weight_decay must be >= 0, got {c.weight_decay}')
  checks.number('weight_decay', c.weight_decay, 0)
  precision.check_resolved(c.use_bfloat16)
  _in_unit_interval(c.dropout_rate, 'dropout_rate')
  _in_unit_interval(c.path_dropout_rate, 'path_dropout_rate')
  if c.path_dropout_rate > 0 and not mobile.skippable_layers(
      mobile.get_search_space(c.ssd)):
    raise ValueError(f'--path_dropout_rate={c.path_dropout_rate}: --ssd='
                     f'{c.ssd} has no skippable layer (an op OneOf with '
                     'ZeroSpec) to drop')
  if c.freeze_inherited and not c.init_from_search:
    raise ValueError('--freeze_inherited needs --init_from_search')
  if dataset == datasets.DIGITS and c.eval_split not in datasets.SPLITS:
    raise ValueError(f'--eval_split={c.eval_split!r}: digits has the splits '
                     f'{datasets.SPLITS}')


def _resolve_architecture(architecture: Optional[str], ssd: Optional[str],
                          indices: Optional[str]
                          ) -> Tuple[str, str, Dict[str, Any]]:
  """(ssd, normalised indices, the search's data) from `--architecture`,
  `--ssd`, `--indices`; the data are {} without a file that records them."""
  data = {}
  if architecture:
    try:
      arch = architecture_lib.read(architecture)
    except ValueError as e:
      raise ValueError(f'--architecture: {e}') from None
    data = arch.data if arch.dataset is not None else {}
    file_ssd, file_indices = arch.ssd, arch.indices_string
    if ssd is not None and ssd != file_ssd:
      raise ValueError(f'--ssd={ssd} disagrees with --architecture '
                       f'({file_ssd}); give one of them')
    if indices is not None and indices != file_indices:
      raise ValueError('--indices disagrees with --architecture; give one '
                       'of them')
    ssd, indices = file_ssd, file_indices
  ssd = ssd or DEFAULT_SSD
  _check_indices(ssd, indices or '')
  return ssd, schema.format_indices(indices or ''), data


def use_search_data(v: Dict[str, Any], data: Dict[str, Any],
                    architecture: Optional[str],
                    allow_other_data: bool) -> None:
  """Fills the unset `SEARCH_DATA_FLAGS` of `v` from the search's data.

  A flag set to another value than the search's is refused unless
  `allow_other_data`; then the search's values fill the unset flags only
  while the dataset is the search's. Without recorded data (no
  `--architecture`, or a file written before it held them) the dataset
  defaults to `DEFAULT_DATASET` and the others to the dataset's own.

  Args:
    v: the flag values by name (`dataset` None when unset); changed in place.
    data: `Architecture.data` of the file, or {}.
    architecture: the file's path (named in errors), or None.
    allow_other_data: `--allow_other_data`.

  Raises:
    ValueError: one line naming the flag, both values and the file; or
      `--allow_other_data` without `--architecture`.
  """
  if allow_other_data and not architecture:
    raise ValueError('--allow_other_data needs --architecture')
  if not allow_other_data:
    for name in SEARCH_DATA_FLAGS:
      if v[name] is not None and name in data and v[name] != data[name]:
        raise ValueError(
            f"--{name}={v[name]} contradicts the search's {name} "
            f'{data[name]!r} in {architecture}; leave --{name} unset, or '
            'pass --allow_other_data to train on other data')
  if data and v['dataset'] in (None, data['dataset']):
    for name in SEARCH_DATA_FLAGS:
      if v[name] is None:
        v[name] = data.get(name)
  v['dataset'] = v['dataset'] or DEFAULT_DATASET


def _dataset_facts(name: str, data_dir: Optional[str], download: bool,
                   eval_split: str
                   ) -> Tuple[Tuple[Optional[int], Optional[int]], int, int,
                              int]:
  """(stored (height, width), num_channels, num_classes, train_examples) of
  a dataset (None where the stored images' sizes vary).

  Raises:
    ValueError: for an unknown, unreachable or unfit dataset, or an
      `eval_split` it does not have.
  """
  if name == datasets.DIGITS:
    info = datasets.dataset_info(name)
    sizes = info.split_sizes
    return (info.stored_shape, info.num_channels, info.num_classes,
            sizes[datasets.SEARCH_TRAIN] + sizes[datasets.SEARCH_VALIDATION])
  builder = tfds_builders.tfds_builder(name, data_dir, download)
  info = builder.info
  if 'image' not in info.features or 'label' not in info.features:
    raise ValueError(f'Dataset {name!r} is not an image-classification '
                     'dataset (needs "image" and "label" features)')
  if 'train' not in info.splits:
    raise ValueError(f'Dataset {name!r} has no "train" split; it has '
                     f'{sorted(info.splits.keys())}')
  if eval_split not in datasets.SPLITS:
    try:
      info.splits[eval_split]  # pylint: disable=pointless-statement
    except Exception as e:  # TFDS raises several kinds for a bad split.
      raise ValueError(f'--eval_split={eval_split!r} of {name!r}: '
                       f'{str(e).splitlines()[0]}') from None
  shape = info.features['image'].shape
  return ((shape[0], shape[1]), shape[-1], info.features['label'].num_classes,
          info.splits['train'].num_examples)


def default_dropout_rate(ssd: str, epochs: float) -> float:
  """0 below 150 epochs, else 0.25 (MobileNetV3-like spaces) or 0.15."""
  if epochs < 150:
    return 0.0
  return 0.25 if mobile.space_info(ssd).mobilenet_v3_like else 0.15


def derive(*, architecture: Optional[str], allow_other_data: bool = False,
           **values) -> TrainEvalConfig:
  """Builds a `TrainEvalConfig` from flag values.

  Settings that need no file are checked before any file or dataset is
  read, so a typo fails at once.

  Args:
    architecture: an `architecture.json` giving `ssd`, `indices` and, when
      it records them, the search's data (`use_search_data`), or None.
    allow_other_data: let the data flags differ from the search's.
    **values: one keyword per flag-backed field of `TrainEvalConfig`, as the
      flags hold them: `ssd`, `indices`, `dataset` (unset), `use_tpu`,
      `dropout_rate`, `weight_decay`, `num_classes`, `image_size`,
      `preprocessing` and `export_dir` may be None, and `use_bfloat16`
      'auto' (their defaults are resolved here).

  Returns:
    The frozen config.

  Raises:
    ValueError: for missing, malformed or inconsistent settings (the message
      names the flag).
  """
  v = dict(values)
  if not v['model_dir']:
    raise ValueError('--model_dir is required')
  files.check_output_dir(v['model_dir'], '--model_dir')
  if v['export'] and v['export_dir']:
    files.check_output_dir(v['export_dir'], '--export_dir')
  for name in ('num_classes', 'image_size'):
    if v[name] is not None:
      checks.number(name, v[name], 1, integer=True)
  v['ssd'], v['indices'], data = _resolve_architecture(
      architecture, v['ssd'], v['indices'])
  use_search_data(v, data, architecture, allow_other_data)
  v['use_tpu'] = jobs.resolve_use_tpu(v['tpu'], v['use_tpu'])
  if v['dropout_rate'] is None:
    v['dropout_rate'] = default_dropout_rate(v['ssd'], v['epochs'])
  v['use_bfloat16'] = precision.resolve(
      v['use_bfloat16'], mobile.space_info(v['ssd']).mobilenet_v3_like)
  if v['weight_decay'] is None:
    v['weight_decay'] = precision.default_weight_decay(v['use_bfloat16'])
  check_settings(types.SimpleNamespace(**v), v['dataset'])
  if v['init_from_search']:
    v['init_from_search'] = files.abspath(v['init_from_search'])
    inherited = inherit.search_checkpoint(v['init_from_search'],
                                              v['ssd'])
    reason = resume_lib.unreadable_reason(inherited)
    if reason:
      raise ValueError(f'--init_from_search: {inherited} cannot be read '
                       f'({reason})')
  stored_shape, v['num_channels'], classes, v['train_examples'] = (
      _dataset_facts(v['dataset'], v['data_dir'], v['download'],
                     v['eval_split']))
  v['validation_examples'] = v['validation_examples'] or 0
  if v['validation_examples']:
    if v['dataset'] == datasets.DIGITS:
      raise ValueError('--validation_examples: digits has a fixed split '
                       '(leave it unset)')
    datasets.holdout_splits(v['train_examples'], v['validation_examples'])
    v['train_examples'] -= v['validation_examples']
  v['preprocessing'] = v['preprocessing'] or datasets.default_preprocessing(
      v['dataset'], stored_shape)
  if v['num_classes'] is None:
    v['num_classes'] = classes
  if v['num_classes'] < classes:
    raise ValueError(f"--num_classes={v['num_classes']} is fewer than the "
                     f"{classes} labels of {v['dataset']!r}")
  if v['image_size'] is not None:
    if v['dataset'] == datasets.DIGITS and (v['image_size'],) * 2 != tuple(
        stored_shape):
      raise ValueError(f'--image_size: digits images are {stored_shape[0]}x'
                       f'{stored_shape[1]}')
    v['image_size'] = _positive(v['image_size'], 'image_size')
  v['image_size'] = preprocessing.run_image_size(v['dataset'], stored_shape,
                                            v['image_size'])
  v['export_dir'] = v['export_dir'] or os.path.join(v['model_dir'],
                                                    EXPORT_SUBDIR)
  for name in ('filters_multiplier', 'epochs', 'base_learning_rate',
               'warmup_steps_fraction', 'momentum', 'weight_decay',
               'dropout_rate', 'path_dropout_rate', 'label_smoothing',
               'moving_average_decay'):
    v[name] = float(v[name])
  for name in ('freeze_inherited', 'eval_only', 'export'):
    v[name] = bool(v[name])
  return jobs.from_flat(TrainEvalConfig, v)


# Fields added after runs were written: a config.json without one holds the
# value those runs had (they trained in float32, without op determinism or
# path dropout).
ADDED_LATER = {'use_bfloat16': 'false', 'validation_examples': 0,
               'path_dropout_rate': 0.0, **jobs.JobConfig.defaults()}


def check_stored(config: TrainEvalConfig) -> Optional[Dict[str, Any]]:
  """Checks `config` against the stored `config.json`; writes nothing.

  Returns:
    The stored values, or None when there are none (a new run).

  Raises:
    ValueError: naming the first field that differs outside
      `RUN_ONLY_FIELDS` (flag-backed fields before derived ones) with its
      stored and its new value.
  """
  return files.check_config(
      os.path.join(config.job.model_dir, CONFIG_FILE), config.to_json(),
      RUN_ONLY_FIELDS, DERIVED_FIELDS, defaults=ADDED_LATER)


def write(config: TrainEvalConfig, stored: Optional[Dict[str, Any]]) -> None:
  """Writes `config.json` (a restart: the stored one, new run-only values)."""
  files.write_config(os.path.join(config.job.model_dir, CONFIG_FILE),
                     config.to_json(), stored, RUN_ONLY_FIELDS)


def write_or_check(config: TrainEvalConfig) -> bool:
  """`check_stored`, then `write`.

  Returns:
    True when the directory already held a run's config.

  Raises:
    ValueError: as `check_stored` (then nothing is written).
  """
  stored = check_stored(config)
  write(config, stored)
  return stored is not None


def read(model_dir: str) -> TrainEvalConfig:
  """The config stored in a model directory's `config.json`.

  Raises:
    ValueError: if there is none, it is not a JSON object, a field is
      missing or unknown, a value is refused, or a stored derived value
      disagrees with the one computed from the others.
  """
  path = os.path.join(model_dir, CONFIG_FILE)
  stored = {**ADDED_LATER, **files.read_config(model_dir, 'train_eval')}
  names = set(jobs.flat_keys(TrainEvalConfig))
  missing = sorted(names - set(stored))
  unknown = sorted(set(stored) - names)
  if missing or unknown:
    raise ValueError(f'{path} is not a train_eval config: missing '
                     f'{missing}, unknown {unknown}')
  config = jobs.from_flat(TrainEvalConfig,
                          {k: v for k, v in stored.items()
                           if k not in _COMPUTED_FIELDS})
  for name in _COMPUTED_FIELDS:
    if stored[name] != getattr(config, name):
      raise ValueError(f'{path}: {name} is {stored[name]!r}, but the other '
                       f'fields give {getattr(config, name)!r}')
  return config
