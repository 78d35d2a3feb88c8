"""One architecture of a search space, and the one reader and writer of its
file `architecture.json` (docs/search.md, 'architecture.json').
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, List, Optional, Tuple

from tunas_tf.cost_model import memory
from tunas_tf.io import checks
from tunas_tf.io import files
from tunas_tf.io import records
from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema
from tunas_tf.search_space import spec_io

FILE_NAME = 'architecture.json'
# 2: `checkpoint` relative to the file's directory when inside it, `choices`
# as plain JSON values. 1: an absolute `checkpoint`, `choices` as reprs.
FORMAT_VERSION = 2
READ_VERSIONS = (1, 2)
# The search's data, as its config.json names them (optional, in this order).
DATA_FIELDS = ('dataset', 'image_size', 'num_classes', 'num_channels',
               'preprocessing', 'validation_examples')
# The optional scalar fields, in the order they are written.
_OPTIONAL_FIELDS = ('estimated_cost', 'cost_model', 'cost_target',
                    'cost_tolerance', 'argmax_indices', 'oneshot', 'global_step',
                    'max_global_step', 'checkpoint') + DATA_FIELDS


@dataclasses.dataclass(frozen=True)
class Architecture:
  """One architecture of a registered search space, with what is known of it
  (None: not recorded). `indices` (one per OneOf, in visit order) may be
  given as a list or '0:2:1'; ValueError for an unknown `ssd` or indices
  that do not fit it.

  `cost_tolerance` is set when it is the most likely one within the cost
  band rather than the argmax (`argmax_indices`); `oneshot` when it is the
  best by one-shot accuracy of that many in the band.
  """
  ssd: str
  indices: Tuple[int, ...]
  estimated_cost: Optional[float] = None
  cost_model: Optional[str] = None
  cost_target: Optional[float] = None
  cost_tolerance: Optional[float] = None
  argmax_indices: Optional[str] = None
  oneshot: Optional[int] = None
  global_step: Optional[int] = None
  max_global_step: Optional[int] = None
  checkpoint: Optional[str] = None
  dataset: Optional[str] = None
  image_size: Optional[int] = None
  num_classes: Optional[int] = None
  num_channels: Optional[int] = None
  preprocessing: Optional[str] = None
  validation_examples: Optional[int] = None
  probabilities: Optional[Dict[str, Tuple[float, ...]]] = dataclasses.field(
      default=None, hash=False)

  def __post_init__(self):
    space = mobile.get_search_space(self.ssd)
    object.__setattr__(self, 'indices',
                       tuple(schema.check_indices(space, self.indices)))

  @property
  def indices_string(self) -> str:
    """The indices as '0:2:1' (what `--indices=` takes)."""
    return schema.format_indices(self.indices)

  @property
  def data(self) -> Dict[str, Any]:
    """The recorded `DATA_FIELDS` by name (those that are not None)."""
    return {name: getattr(self, name) for name in DATA_FIELDS
            if getattr(self, name) is not None}

  @property
  def spec(self) -> Any:
    """The pruned spec (no OneOf left) of this architecture."""
    return schema.prune(mobile.get_search_space(self.ssd), self.indices)

  @property
  def choice_values(self) -> Dict[str, Any]:
    """The chosen value (`plain_choices`) of every active decision by path."""
    found = schema.flatten_with_paths(mobile.get_search_space(self.ssd))
    chosen = {path: index for (path, _), index in zip(found, self.indices)}
    return {path: plain_choices(oneof.choices)[chosen[path]]
            for path, oneof in found if _is_active(path, chosen)}

  @property
  def decisions(self) -> List[Dict[str, Any]]:
    """Every decision as a table row: path, named choices, index, value,
    active, and the probabilities when known (the `decisions` of the file)."""
    found = schema.flatten_with_paths(mobile.get_search_space(self.ssd))
    chosen = {path: index for (path, _), index in zip(found, self.indices)}
    rows = []
    for path, oneof in found:
      labels = ops.choice_labels(oneof.choices)
      row = {'path': path, 'choices': list(labels), 'index': chosen[path],
             'value': labels[chosen[path]],
             'active': _is_active(path, chosen)}
      if self.probabilities is not None and path in self.probabilities:
        row['probabilities'] = list(self.probabilities[path])
      rows.append(row)
    return rows

  def to_json(self, directory: Optional[str] = None) -> Dict[str, Any]:
    """The JSON object of `architecture.json` (None fields left out), its
    `checkpoint` relative to `directory` (absolute) when inside it."""
    document = {'format_version': FORMAT_VERSION, 'ssd': self.ssd,
                'indices': self.indices_string}
    for name in _OPTIONAL_FIELDS:
      if getattr(self, name) is not None:
        document[name] = getattr(self, name)
    if self.checkpoint is not None and directory is not None:
      document['checkpoint'] = files.abspath(self.checkpoint).removeprefix(
          directory.rstrip('/') + '/')
    if self.probabilities is not None:
      document['probabilities'] = {path: list(values) for path, values
                                   in self.probabilities.items()}
    document.update(self.memory)
    document['choices'] = self.choice_values
    document['decisions'] = self.decisions
    document['architecture'] = spec_io.to_json(self.spec)
    return document

  @property
  def memory(self) -> Dict[str, int]:
    """{'arena_bytes', 'flash_bytes'}: TFLite Micro's arena and the int8
    file at the recorded input (`cost_model.memory`'s estimates; {} for a
    network the estimate does not model)."""
    info = mobile.space_info(self.ssd)
    shape = memory.Shape(self.image_size or info.image_size,
                         self.num_classes or info.num_classes,
                         self.num_channels or info.input_channels)
    try:
      return memory.needs(self.spec, shape)
    except ValueError:
      return {}

  @classmethod
  def from_json(cls, document: Any, where: str,
                directory: Optional[str] = None) -> 'Architecture':
    """The record from a JSON object of any of `READ_VERSIONS`, a relative
    `checkpoint` joined to `directory` (None: kept); derived and unknown keys
    are ignored. ValueError: one line naming `where` and the field."""
    records.check_keys(document, where, ('ssd', 'indices'))
    version = document.get('format_version', FORMAT_VERSION)
    if version not in READ_VERSIONS or isinstance(version, bool):
      raise ValueError(f"{where}: field 'format_version' is {version!r}; this "
                       'version reads '
                       f"{' and '.join(map(str, READ_VERSIONS))}")
    for name in ('ssd', 'indices'):
      records.check_value(where, name, document[name], 'str')
    try:
      space = mobile.get_search_space(document['ssd'])
    except ValueError as e:
      raise ValueError(f"{where}: field 'ssd': {e}") from None
    try:
      schema.check_indices(space, document['indices'])
    except ValueError as e:
      raise ValueError(f"{where}: field 'indices' does not fit "
                       f"{document['ssd']!r}: {e}") from None
    record = records.from_dict(
        cls, {**document, 'probabilities': _probabilities(document, where)},
        where, ignored=None)
    if record.checkpoint is not None and directory is not None:
      record = dataclasses.replace(
          record, checkpoint=_resolve(record.checkpoint, directory))
    return record


def _probabilities(document: Dict[str, Any], where: str
                   ) -> Optional[Dict[str, Tuple[float, ...]]]:
  value = document.get('probabilities')
  if value is None:
    return None
  if not isinstance(value, dict) or not all(
      isinstance(v, list) and all(checks.is_number(p) for p in v)
      for v in value.values()):
    raise ValueError(f"{where}: field 'probabilities' is not an object of "
                     'lists of numbers by path')
  return {path: tuple(float(p) for p in v) for path, v in value.items()}


def plain_choices(choices: Tuple[Any, ...]) -> List[Any]:
  """Each choice as a plain JSON scalar (a `FilterMultiplier` its scale, an op
  its label); the `ops.choice_labels` where two would read alike."""
  values = [c if isinstance(c, (type(None), bool, int, float, str)) else
            c.scale if isinstance(c, ops.FilterMultiplier) else
            ops.choice_label(c) for c in choices]
  # `count` compares with ==, so 6 and 6.0 (or 1 and True) collide too.
  if any(values.count(value) > 1 for value in values):
    return list(ops.choice_labels(choices))
  return values


def _resolve(path: str, directory: str) -> str:
  """A relative `path` joined to `directory`; another as it is."""
  if files.is_remote(path) or os.path.isabs(path):
    return path
  return os.path.join(directory, path)


def _is_active(path: str, chosen: Dict[str, int]) -> bool:
  """Whether every alternative on the way to `path` is the chosen one."""
  return all(chosen.get(owner) == index
             for owner, index in schema.enclosing_choices(path))


def read(path: str) -> Architecture:
  """Reads an `architecture.json`, its `checkpoint` absolute (one that is
  gone: the same name beside the file, if there).

  Raises:
    ValueError: one line naming `path` (and the field).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if not files.exists(path):
    raise ValueError(f'Cannot read {path}: no such file')
  try:
    text = files.read_text(path)
  except (tf.errors.OpError, OSError, UnicodeDecodeError) as e:
    raise ValueError(f'Cannot read {path}: '
                     f'{str(e).splitlines()[0]}') from None
  try:
    document = json.loads(text)
  except json.JSONDecodeError as e:
    raise ValueError(f'{path} is not valid JSON: {e}') from None
  directory = files.abspath(os.path.dirname(path))
  architecture = Architecture.from_json(document, path, directory)
  checkpoint = architecture.checkpoint
  if (checkpoint is not None and os.path.isabs(checkpoint) and
      not files.exists(checkpoint + '.index')):
    beside = os.path.join(directory, os.path.basename(checkpoint))
    if files.exists(beside + '.index'):
      architecture = dataclasses.replace(architecture, checkpoint=beside)
  return architecture


def write(architecture: Architecture, path: str) -> None:
  """Writes `architecture` to `path` atomically (`files.write_json`), its
  `checkpoint` relative to the file's directory when inside it."""
  files.write_json(architecture.to_json(
      files.abspath(os.path.dirname(path))), path)

