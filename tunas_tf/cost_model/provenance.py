"""How latencies were measured: one record, written beside a latency CSV,
copied into the model fitted from it and compared wherever rows or models
meet."""

from __future__ import annotations

import dataclasses
import os
import shlex
from typing import Any, Dict, Optional, Tuple

from tunas_tf.io import checks
from tunas_tf.io import lite
from tunas_tf.io import records
from tunas_tf.cost_model import macs

BACKENDS = ('tflite', 'tf', 'command')  # This host's two, or a command.
PRECISIONS = lite.PRECISIONS
# Settings files note these too (`latency/rows`); they are not provenance.
NOTES = ('protocol', 'load_at_start')
SHAPE = ('image_size', 'num_classes', 'input_channels')


@dataclasses.dataclass(frozen=True)
class Provenance:
  """How a set of latency rows was measured.

  Attributes:
    ssd: the search space.
    image_size, num_classes, input_channels: the networks' input and
      classifier (ints >= 1).
    backend: 'tflite' or 'tf' on the measuring host, or 'command'.
    device: what ran them, e.g. 'Intel Xeon ..., 2 cores' or 'command: CMD'.
    num_threads: interpreter threads on the host (None for a command).
    cpus: the host CPUs the process was pinned to (empty for a command).
    device_command: the command (backend 'command' only).
    precision: the models' arithmetic, one of `PRECISIONS`.
    reference, reference_ms: the architecture each visit was timed against
      and its scale (`latency/protocol.measure`), or None.
  """
  ssd: str
  image_size: int
  num_classes: int
  input_channels: int
  backend: str
  device: str
  num_threads: Optional[int] = None
  cpus: Tuple[int, ...] = ()
  device_command: Optional[str] = None
  precision: str = 'float32'
  reference: Optional[str] = None
  reference_ms: Optional[float] = None

  def __post_init__(self):
    object.__setattr__(self, 'cpus', tuple(self.cpus))

  @classmethod
  def from_dict(cls, data: Any, source: str) -> 'Provenance':
    """The record of a settings file or a model's `measured_with`; ValueError
    naming `source` and a missing, unknown or malformed key."""
    names = [f.name for f in dataclasses.fields(cls)]
    record = records.from_dict(cls, data, source, ignored=NOTES,
                               hint=f'; a provenance has {names}')
    for name in SHAPE + (() if record.num_threads is None else
                         ('num_threads',)):
      checks.number(name, getattr(record, name), 1, integer=True,
                    prefix=f'{source}: ')
    for name, allowed in (('backend', BACKENDS), ('precision', PRECISIONS)):
      if getattr(record, name) not in allowed:
        raise ValueError(f'{source}: unknown {name} '
                         f'{getattr(record, name)!r}; expected one of '
                         f'{list(allowed)}')
    if (record.backend == 'command') != bool(record.device_command):
      raise ValueError(f'{source}: backend {record.backend!r} with '
                       f'device_command {record.device_command!r} (a command '
                       "is backend 'command', and only it)")
    if (record.reference is None) != (record.reference_ms is None):
      raise ValueError(f'{source}: reference {record.reference!r} with '
                       f'reference_ms {record.reference_ms!r} (both or '
                       'neither)')
    if record.reference_ms is not None:
      checks.number('reference_ms', record.reference_ms, 0, low_open=True,
                    prefix=f'{source}: ')
    return record

  def as_dict(self) -> Dict[str, Any]:
    """Every key (JSON: `cpus` a list)."""
    return dict(dataclasses.asdict(self), cpus=list(self.cpus))

  @property
  def shape(self) -> macs.InputSpec:
    return macs.InputSpec(self.image_size, self.num_classes,
                          self.input_channels)

  def difference(self, other: 'Provenance', keys: Tuple[str, ...] = ()
                 ) -> Optional[str]:
    """'backend='tf', not 'tflite'': the first of `keys` (default all) where
    this record differs from `other`; None if none does. Commands compare
    as `normalized_command`s; a named device's command does not count."""
    for key in keys or tuple(f.name for f in dataclasses.fields(self)):
      mine, theirs = getattr(self, key), getattr(other, key)
      if key == 'device_command' and self.backend == 'command' and (
          self.device == other.device) and not self.device.startswith(
              'command: '):
        continue  # A named device (`--device_name`): its name is its identity.
      if key in ('device', 'device_command') and mine and theirs:
        mine, theirs = normalized_command(mine), normalized_command(theirs)
      if mine != theirs:
        return f'{key}={getattr(self, key)!r}, not {getattr(other, key)!r}'
    return None


def normalized_command(command: str) -> str:
  """`command` with each path-like token (or a --flag=value's value)
  through `os.path.normpath` ('//' and '/./' collapse): a command's
  identity, whatever its spelling."""
  try:
    tokens = shlex.split(command)
  except ValueError:
    return command
  parts = [token.rpartition('=') for token in tokens]
  return shlex.join(head + sep + (os.path.normpath(value) if value.startswith(
      ('/', './', '../')) else value) for head, sep, value in parts)
