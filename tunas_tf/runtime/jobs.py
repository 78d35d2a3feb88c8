"""The `JobConfig` both binaries share and config.json, the one owner of it:
the flat layout, the checks a restart passes, the writes, which binary wrote
a model directory (`written_by`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import (Any, Callable, ClassVar, Collection, Dict, List, Mapping,
                    Optional, Sequence)

from tunas_tf.io import checks
from tunas_tf.io import files
from tunas_tf.io import records

# A run's settings in its model directory (the search's and train_eval's).
CONFIG_FILE = 'config.json'
# `JobConfig` fields a restarted run may change (where, how often, which copy).
JOB_RUN_ONLY_FIELDS = frozenset({
    'model_dir', 'tpu', 'tpu_zone', 'gcp_project', 'tpu_iterations_per_loop',
    'data_dir', 'download', 'log_every_steps', 'save_checkpoints_steps',
    'keep_checkpoint_max', 'deterministic',
})
# TPUEstimator (TF <= 2.15) or a tf.distribute loop; stored in config.json.
ENGINES = ('estimator', 'distribute')
# The config.json field only each binary's config has: tells the kinds apart.
_OWN_FIELDS = {'train_search': 'search_train_examples',
               'train_eval': 'train_examples'}
# What each binary's model directory is called in messages.
DIRECTORY_KINDS = {'train_search': 'search', 'train_eval': 'train_eval'}
_POSITIVE_FIELDS = ('num_classes', 'image_size', 'num_channels',
                    'tpu_iterations_per_loop', 'save_checkpoints_steps',
                    'keep_checkpoint_max', 'log_every_steps')


@dataclasses.dataclass(frozen=True)
class JobConfig:
  """Where a run writes, on what data, on which backend, how often it saves:
  both binaries' configs' `job`, its fields named as the flags (help in
  `tunas_tf/cli/flags.py`), the dataset's facts resolved.

  Raises (on construction):
    ValueError: naming the flag: an empty `model_dir` or `dataset`, `use_tpu`
      without `tpu`, a size or cadence not a positive int, a bad seed or
      engine.
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
  engine: str
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
      checks.number(name, getattr(self, name), 1, integer=True)
    checks.seed('seed', self.seed)
    if self.engine not in ENGINES:
      raise ValueError(f'--engine must be one of {", ".join(ENGINES)}, got '
                       f'{self.engine!r}')

  @property
  def data_text(self) -> str:
    """'digits 8x8, preprocessing none', for a run's first line."""
    return (f'{self.dataset} {self.image_size}x{self.image_size}, '
            f'preprocessing {self.preprocessing}')


# config.json's flat layout of a run's config: the job's fields beside its own.
_JOB_FIELDS = sorted(f.name for f in dataclasses.fields(JobConfig))


def flat_keys(config_type: type) -> List[str]:
  """config.json keys of `config_type`: its own fields, the job's sorted."""
  own = [f.name for f in dataclasses.fields(config_type) if f.name != 'job']
  return own + _JOB_FIELDS


def to_flat(config: Any) -> Dict[str, Any]:
  """`config`'s fields, the job's flat beside its own (config.json)."""
  values = dataclasses.asdict(config.job)
  values.update((f.name, getattr(config, f.name))
                for f in dataclasses.fields(config) if f.name != 'job')
  return values


def check_config(path: str, new: Dict[str, Any],
                 run_only_fields: Collection[str],
                 derived_fields: Collection[str] = (),
                 check_stored: Optional[Callable[[Dict[str, Any]], None]]
                 = None,
                 added_fields: Optional[Mapping[str, Any]] = None
                 ) -> Optional[Dict[str, Any]]:
  """Checks a run's settings against those stored at `path`; writes nothing.

  Args:
    new: this run's settings (JSON-able, flat).
    run_only_fields: settings a restart may change (cadence, where to run).
    derived_fields: compared last, so an error names what the user changed.
    check_stored: called with the stored settings before any comparison.
    added_fields: settings an earlier version did not store, with the value
      it ran with: taken where the stored file lacks them.

  Returns:
    The stored settings, or None when `path` does not exist (a new run).

  Raises:
    ValueError: naming the first differing field with both values, or a
      stored file that is not a JSON object.
  """
  if not files.exists(path):
    return None
  old = files.read_json(path)
  if not isinstance(old, dict):
    raise ValueError(f'{path} does not hold a JSON object')
  if check_stored is not None:
    check_stored(old)
  old = {**(added_fields or {}), **old}
  derived = set(derived_fields)
  for key in sorted(set(old) | set(new), key=lambda k: (k in derived, k)):
    if key in run_only_fields:
      continue
    if key not in old:
      raise ValueError(f'{path} has no field {key!r}: written by another '
                       'binary or an earlier version; use a new --model_dir')
    if old.get(key, '<missing>') != new.get(key, '<missing>'):
      raise ValueError(
          f'{path} was written by a different run: {key} is '
          f"{old.get(key, '<missing>')!r} there and "
          f"{new.get(key, '<missing>')!r} now; use a new --model_dir or the "
          'same settings')
  return old


def write_config(path: str, new: Dict[str, Any],
                 stored: Optional[Dict[str, Any]],
                 run_only_fields: Collection[str]) -> None:
  """Writes `new` (a new run), or `stored` (what `check_config` returned)
  with the new run-only values, only when the content changes."""
  if stored is None:
    files.write_json(new, path, sort_keys=True)
    return
  merged = {**stored, **{k: new[k] for k in run_only_fields if k in new}}
  if merged != stored:
    files.write_json(merged, path, sort_keys=True)


class StoredConfig:
  """A binary's run config (a frozen dataclass with a `job`) as its model
  directory's config.json holds it: `to_json` writes the fields flat with
  `DERIVED_FIELDS`, `from_json`/`read` read them back, `check_stored` and
  `write_stored` keep a restart to what `RUN_ONLY_FIELDS` lets change."""
  BINARY: ClassVar[str]  # 'train_search' or 'train_eval'.
  RUN_ONLY_FIELDS: ClassVar[Collection[str]]
  DERIVED_FIELDS: ClassVar[Sequence[str]]
  # Fields added after a release, with the value an older config.json ran
  # with, read as that where the file lacks them.
  ADDED_FIELDS: ClassVar[Mapping[str, Any]] = {}

  def to_json(self) -> Dict[str, Any]:
    """The fields, the job's and the derived values, flat (config.json)."""
    values = to_flat(self)
    values.update((name, getattr(self, name)) for name in self.DERIVED_FIELDS)
    return values

  @classmethod
  def from_json(cls, values: Mapping[str, Any], where: str) -> Any:
    """The config stored as `to_json` wrote it (`where`, for messages).

    Raises:
      ValueError: one line: another binary's directory, or naming `where`
        and the field, a missing or unknown field, a refused value, or a
        derived value that disagrees.
    """
    values = {**cls.ADDED_FIELDS, **values}
    # Before the fields: the other binary's file lacks them all.
    check_written_by(values, cls.BINARY, os.path.dirname(where) or where)
    names = flat_keys(cls)
    records.check_keys(values, where, names, [*names, *cls.DERIVED_FIELDS],
                       f': not written by this version of {cls.BINARY}')
    try:
      config = cls(
          job=JobConfig(**{name: values[name] for name in _JOB_FIELDS}),
          **{name: values[name] for name in names if name not in _JOB_FIELDS})
    except (TypeError, ValueError) as e:
      raise ValueError(f'{where}: {e}') from None
    for name in cls.DERIVED_FIELDS:
      if name in values and values[name] != getattr(config, name):
        raise ValueError(f'{where}: {name} is {values[name]!r}, but the '
                         f'other fields give {getattr(config, name)!r}')
    return config

  @classmethod
  def read(cls, model_dir: str) -> Any:
    """The config in `model_dir`'s config.json; ValueError: no such file
    (not this binary's directory), not a JSON object, or as `from_json`."""
    path = os.path.join(model_dir, CONFIG_FILE)
    if not files.exists(path):
      raise ValueError(f'No {CONFIG_FILE} in {model_dir!r}: not a '
                       f'{DIRECTORY_KINDS[cls.BINARY]} directory')
    values = files.read_json(path)
    if not isinstance(values, dict):
      raise ValueError(f'{path} does not hold a JSON object')
    return cls.from_json(values, path)

  def check_stored(self) -> Optional[Dict[str, Any]]:
    """The stored config.json values (None: a new run), checked against this
    config; writes nothing. ValueError (`check_config`) names the first
    field differing outside `RUN_ONLY_FIELDS`, or another binary's directory."""
    model_dir = self.job.model_dir
    return check_config(
        os.path.join(model_dir, CONFIG_FILE), self.to_json(),
        self.RUN_ONLY_FIELDS,
        tuple(self.DERIVED_FIELDS) + (_OWN_FIELDS[self.BINARY],),
        check_stored=lambda stored: check_written_by(
            stored, self.BINARY, f'--model_dir={model_dir}'),
        added_fields=self.ADDED_FIELDS)

  def write_stored(self, stored: Optional[Dict[str, Any]]) -> None:
    """Writes config.json: this config, or on a restart (`stored`, from
    `check_stored`) the stored one with the new run-only values."""
    write_config(os.path.join(self.job.model_dir, CONFIG_FILE),
                 self.to_json(), stored, self.RUN_ONLY_FIELDS)


def written_by(values: Mapping[str, Any]) -> Optional[str]:
  """The binary ('train_search', 'train_eval') whose config.json holds
  `values`, told by the field only its config has; None for neither."""
  found = [binary for binary, field in _OWN_FIELDS.items() if field in values]
  return found[0] if len(found) == 1 else None


def check_written_by(values: Mapping[str, Any], binary: str,
                     where: str) -> None:
  """ValueError 'WHERE is a train_eval directory, not a search directory'
  (or the other way round) when another binary wrote `values`."""
  other = written_by(values)
  if other is not None and other != binary:
    raise ValueError(f'{where} is a {DIRECTORY_KINDS[other]} directory, not '
                     f'a {DIRECTORY_KINDS[binary]} directory')


def resolve_use_tpu(tpu: str, use_tpu: Optional[bool]) -> bool:
  """--use_tpu, defaulting to whether --tpu is set."""
  return bool(tpu) if use_tpu is None else use_tpu
