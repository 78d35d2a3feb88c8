"""The latency CSV (docs/tools.md, 'Reading the fit'): `measure_to_csv`
writes it row by row, `read` checks it against the space; how its rows were
measured is kept beside it (`settings_path`)."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import functools
import io
import json
import math
import os
import time
from typing import (Any, Callable, Dict, Iterator, List, Optional, Sequence,
                    Tuple)

from absl import logging
import numpy as np

from tunas_tf.io import checks
from tunas_tf.io import files
from tunas_tf.cost_model import block_table as block_table_lib
from tunas_tf.cost_model import macs
from tunas_tf.cost_model import provenance as provenance_lib
from tunas_tf.latency import device as device_lib
from tunas_tf.latency import protocol as protocol_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import sample
from tunas_tf.search_space import schema

# Meanings in docs/tools.md, 'Reading the fit'.
COLUMNS = ('indices', 'latency_ms', 'spread_ms', 'repeats', 'remeasured',
           'load')
# A block table's CSV: a unit's key (`block_table.Unit.key`) for indices.
BLOCK_COLUMNS = ('block',) + COLUMNS[1:]


def _parse(rows: Sequence[Sequence[str]], path: str, ssd: str,
           columns: Sequence[str] = COLUMNS) -> Tuple[List[str], np.ndarray]:
  """(indices, latencies) of CSV rows (header first), checked as `read` says."""
  blocks = columns[0] == BLOCK_COLUMNS[0]
  # Checks and canonicalises a row's first cell: a unit's key, or indices.
  check_key = (block_table_lib.check_key if blocks else
               functools.partial(_canonical, mobile.get_search_space(ssd)))
  header = [h.strip() for h in rows[0]]
  missing = [c for c in (columns[0], 'latency_ms') if c not in header]
  if missing:
    raise ValueError(f'{path} has columns {",".join(header)!r}; expected '
                     f'{",".join(columns)} (as tools/measure_latency writes), '
                     f'missing {missing}')
  at_indices = header.index(columns[0])
  at_latency = header.index('latency_ms')
  indices, latencies = [], []
  for number, row in enumerate(rows[1:], 2):
    if not row or not any(cell.strip() for cell in row):
      continue
    where = f'{path}: line {number}'
    if len(row) != len(header):
      raise ValueError(f'{where}: expected {len(header)} columns, got '
                       f'{len(row)}')
    try:
      key = check_key(row[at_indices].strip())
    except ValueError as e:
      what = '' if blocks else f' (not an architecture of {ssd!r}?)'
      raise ValueError(f'{where}: {e}{what}') from None
    text = row[at_latency].strip()
    try:
      latency = float(text)
    except ValueError:
      raise ValueError(f'{where}: latency_ms {text!r} is not a number'
                       ) from None
    if not math.isfinite(latency) or latency <= 0:
      raise ValueError(f'{where}: latency_ms {text!r} is not a positive '
                       'finite number')
    indices.append(key)
    latencies.append(latency)
  return indices, np.asarray(latencies, np.float64)


def read(path: str, ssd: str, columns: Sequence[str] = COLUMNS
         ) -> Tuple[List[str], np.ndarray]:
  """(indices, latencies) of a latency CSV of space `ssd`: canonical '0:2:1'
  strings (unit keys with `BLOCK_COLUMNS`) and float64 ms, in file order.

  Raises:
    ValueError: an unreadable or empty file, missing columns, indices that
      do not fit the space or a latency not positive and finite (naming the
      line).
  """
  try:
    rows = list(csv.reader(io.StringIO(files.read_input(path))))
  except (csv.Error, UnicodeDecodeError) as e:
    raise ValueError(f'{path} is not a CSV file: {e}') from None
  if not rows:
    raise ValueError(f'{path} is empty; expected the header '
                     f'{",".join(columns)} of tools/measure_latency')
  return _parse(rows, path, ssd, columns)


def read_for_append(path: str, ssd: str,
                    columns: Sequence[str] = COLUMNS) -> List[str]:
  """The architectures already in `path` (none without a file). A last line
  cut short by a killed run is dropped from the file, so appending goes on
  from a fresh line. ValueError: another header than `columns`, or a row
  `read` refuses."""
  found = text = files.read_input(path) if files.exists(path) else ''
  if not text:
    return []
  if not text.endswith('\n'):
    cut = text.rfind('\n') + 1
    if cut > 0:  # Keep a lone header line to be checked below.
      logging.warning('%s: dropping an incomplete last line %r', path,
                      text[cut:])
      text = text[:cut]
  rows = list(csv.reader(io.StringIO(text)))
  header = rows[0] if rows else []
  if tuple(h.strip() for h in header) != tuple(columns):
    raise ValueError(f'{path} exists with header {",".join(header)!r}, not '
                     f'{",".join(columns)!r}; not a latency CSV of this version '
                     'of the tool (fit_cost_model still reads it; measure into '
                     'another --output)')
  indices = _parse(rows, path, ssd, columns)[0]
  if not text.endswith('\n'):  # A lone header: rows go on the next line.
    text += '\n'
  if text != found:
    # Rewritten whole (Cloud Storage cannot truncate a file in place).
    files.write_text(text, path)
  return indices


@contextlib.contextmanager
def appender(path: str, columns: Sequence[str] = COLUMNS
             ) -> Iterator[Callable[[Sequence[Any]], None]]:
  """Yields `write_row(values)` (of `columns`, floats with 6 decimals),
  appending to `path` (header written when new). Each row is flushed (and
  fsynced locally), so a killed run loses at most the row being written."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  remote = files.is_remote(path)
  tf.io.gfile.makedirs(os.path.dirname(files.abspath(path)))
  new = not tf.io.gfile.exists(path) or not tf.io.gfile.stat(path).length
  with (tf.io.gfile.GFile(path, 'a') if remote else
        open(path, 'a', newline='')) as f:
    if new:
      f.write(','.join(columns) + '\n')
      f.flush()

    def write_row(values: Sequence[Any]) -> None:
      if len(values) != len(columns):
        raise ValueError(f'a row has {len(columns)} values, got {values!r}')
      f.write(','.join(f'{v:.6f}' if isinstance(v, float) else str(v)
                       for v in values) + '\n')
      f.flush()
      if not remote:  # A GFile has no file descriptor to sync.
        os.fsync(f.fileno())

    yield write_row


def reference_architecture(ssd: str) -> str:
  """The space's reference network (`measure_to_csv`'s `reference`): the
  first of seed 1's uniform draws, a typical size."""
  return sample.sample_indices(ssd, 1, seed=1)[0]


def settings_path(path: str) -> str:
  """Where the settings of a latency CSV are kept: `<path>.settings.json`."""
  return path + '.settings.json'


def read_provenance(path: str) -> provenance_lib.Provenance:
  """How the rows of a latency CSV were measured (`settings_path(path)`);
  ValueError when that file is missing or malformed."""
  recorded = settings_path(path)
  if not files.exists(recorded):
    raise ValueError(
        f'{path} has no {os.path.basename(recorded)} beside it: nothing says '
        'how its rows were measured (measure_latency writes it with the CSV; '
        'keep the two together)')
  try:
    data = json.loads(files.read_input(recorded))
  except json.JSONDecodeError as e:
    raise ValueError(f'cannot read {recorded}: {e}') from None
  return provenance_lib.Provenance.from_dict(data, recorded)


def check_provenance(path: str, provenance: provenance_lib.Provenance
                     ) -> None:
  """ValueError (naming the first key that differs, or as `read_provenance`)
  unless the rows of `path` were measured as `provenance`."""
  recorded = read_provenance(path)
  difference = recorded.difference(provenance)
  if difference:
    add = (f'add --precision={recorded.precision} to add to it, or '
           if recorded.precision != provenance.precision else '')
    raise ValueError(f'{path} was measured with {difference} (see '
                     f'{settings_path(path)}); {add}choose another --output')


def _canonical(space: Any, indices: Any, where: str = '') -> str:
  """The canonical '0:2:1' form of `indices` in `space`; ValueError
  (prefixed by `where`) when they do not fit."""
  try:
    return schema.format_indices(schema.check_indices(space, indices))
  except ValueError as e:
    raise ValueError(f'{where}{e}') from None


def read_indices_file(path: str, ssd: str) -> List[str]:
  """The canonical index strings in `path` (in order, duplicates dropped): a
  JSON list of `{"indices": ...}` objects or strings, one such object, or a
  text file of one '0:2:1' list per line ('#' comments skipped).

  Raises:
    ValueError: an unreadable file, an entry without indices, or indices
      not of space `ssd` (naming the entry).
  """
  space = mobile.get_search_space(ssd)
  text = files.read_input(path)
  try:
    document = json.loads(text)
  except json.JSONDecodeError:
    document = None
  entries: List[Tuple[str, Any]] = []
  if isinstance(document, dict):
    document = [document]
  if isinstance(document, list):
    for i, entry in enumerate(document):
      if isinstance(entry, dict):
        if 'indices' not in entry:
          raise ValueError(f'{path}: entry {i} has no "indices"')
        entry = entry['indices']
      if not isinstance(entry, (str, list)):
        raise ValueError(f'{path}: entry {i} is {entry!r}, not indices')
      entries.append((f'{path}: entry {i}: ', entry))
  else:
    for number, line in enumerate(text.splitlines(), 1):
      line = line.strip()
      if line and not line.startswith('#'):
        entries.append((f'{path}: line {number}: ', line))
  found = list(dict.fromkeys(_canonical(space, entry, where)
                             for where, entry in entries))
  if not found:
    raise ValueError(f'{path}: no architectures in it')
  return found


def measure_to_csv(ssd: str, architectures: Sequence[Any], output: str,
                   backend: str = 'tflite',
                   protocol: protocol_lib.Protocol = protocol_lib.Protocol(),
                   *,
                   image_size: Optional[int] = None,
                   num_classes: Optional[int] = None,
                   input_channels: Optional[int] = None,
                   num_threads: int = 1,
                   device_command: Optional[str] = None,
                   device_timeout: float = 600.0,
                   model_cache: Optional[str] = None,
                   precision: str = 'float32',
                   device_name: Optional[str] = None,
                   builder: Callable[[str, macs.InputSpec], Any],
                   unit_builder: Optional[Callable[[Dict[str, Any]], Any]]
                   = None,
                   reference: Optional[Any] = None,
                   reference_ms: Optional[float] = None) -> Dict[str, Any]:
  """Measures the `architectures` not yet in `output` and appends a row each
  (provenance to `settings_path(output)`).

  Args:
    architectures: index lists or strings; with `unit_builder`, None for
      every unit of the block table.
    backend, num_threads, device_command, device_timeout, precision: as
      `device.make_device`; `device_name` names the device in the provenance.
    builder: (ssd, input) -> the networks' `device.Build`; `unit_builder`
      measures block-table units instead (rows of `BLOCK_COLUMNS`).
    model_cache: default `<output>.models`.
    reference: an architecture of `ssd` each visit is timed against
      (`protocol.measure`); its scale `reference_ms` is the one `output`
      records, or given, or `protocol.reference_ms`.

  Returns:
    dict: `rows` (new `protocol.Row`s), `skipped`, `noise`
    (`protocol.pass_noise`), `seconds`, `visits` (device calls) and `error`
    (None, or a failed device's one line; the rows before it are written).

  Raises:
    ValueError: a bad argument or index, or an `output` with another header,
      bad rows or another provenance.
  """
  space = mobile.get_search_space(ssd)
  protocol.check()
  checks.number('num_threads', num_threads, 1, integer=True, prefix='')
  wanted = list(dict.fromkeys(  # In order, duplicates dropped.
      _canonical(space, indices, f'architecture {i}: ')
      for i, indices in enumerate(architectures or ())))
  shape = macs.resolve_input(ssd, image_size, num_classes, input_channels)
  if unit_builder is None:
    columns, build = COLUMNS, builder(ssd, shape)
  else:
    units = block_table_lib.units_of(ssd, shape,
                                     wanted if architectures else None)
    wanted, columns = list(units), BLOCK_COLUMNS
    build = unit_builder(units)
  device_for = functools.partial(
      device_lib.make_device, ssd, shape, protocol, backend=backend,
      num_threads=num_threads, model_cache=model_cache or output + '.models',
      device_command=device_command, command_timeout=device_timeout,
      precision=precision)
  device = device_for(build)
  scaled = None
  if reference is not None:  # A network, on the networks' device.
    reference = _canonical(space, reference, 'the reference: ')
    visit = (device if unit_builder is None else
             device_for(builder(ssd, shape))).open(reference)
    if reference_ms is None and files.exists(settings_path(output)):
      reference_ms = read_provenance(output).reference_ms
    if reference_ms is None:
      reference_ms = protocol_lib.reference_ms(visit)
      logging.info('the reference %s: %.4g ms', reference, reference_ms)
    scaled = (visit, reference_ms)
  provenance = provenance_lib.Provenance(
      ssd=ssd, **dataclasses.asdict(shape),
      **dict(device.settings, **({'device': device_name} if device_name
                                 else {})),
      reference=reference, reference_ms=scaled and scaled[1])
  done = set(read_for_append(output, ssd, columns))
  if done:
    check_provenance(output, provenance)
  todo = [indices for indices in wanted if indices not in done]
  skipped = len(wanted) - len(todo)
  if skipped:
    logging.info('%d of %d architectures already in %s; skipping them',
                 skipped, len(wanted), output)
  files.write_json(dict(provenance.as_dict(),
                        protocol=dataclasses.asdict(protocol),
                        load_at_start=protocol_lib.load_average()),
                   settings_path(output))
  new_rows, error, start = [], None, time.time()
  logging.info('%d to measure, %d at a time: each row is written when its '
               'rounds are done (2 to %d)', len(todo), protocol.interleave,
               protocol.repeats + protocol.max_retries)
  progress = protocol_lib.Progress()
  with appender(output, columns) as write_row:
    try:
      for n, row in enumerate(protocol_lib.measure(device, todo, protocol,
                                                   progress, scaled), 1):
        write_row(dataclasses.astuple(row)[:len(columns)])
        new_rows.append(row)
        logging.info('%d/%d %s: %.4f ms (IQR %.4f ms, %d rounds, %d redone, '
                     'load %.2f)  ETA %s', n, len(todo), row.indices,
                     row.latency_ms, row.spread_ms, row.repeats,
                     row.remeasured, row.load, duration_text(seconds_left(
                         new_rows, len(todo), time.time() - start,
                         progress.work_seconds)))
    except device_lib.DeviceError as e:
      error = str(e)
  return {'rows': new_rows, 'skipped': skipped, 'visits': progress.visits,
          'noise': protocol_lib.pass_noise(new_rows),
          'seconds': time.time() - start, 'error': error}


def seconds_left(rows: Sequence[protocol_lib.Row], total: int,
                 elapsed: float, work_seconds: float) -> float:
  """A pass's remaining seconds: `total` at the rows' mean seconds, scaled by
  wall time over `work_seconds` (time spent elsewhere), less `elapsed`."""
  mean = sum(r.seconds for r in rows) / len(rows)
  return max(0.0, mean * total * elapsed / max(work_seconds, 1e-9) - elapsed)


def duration_text(seconds: float) -> str:
  """'42s', '7m05s' or '1h02m'."""
  seconds = int(round(seconds))
  if seconds < 60:
    return f'{seconds}s'
  if seconds < 3600:
    return f'{seconds // 60}m{seconds % 60:02d}s'
  return f'{seconds // 3600}h{seconds % 3600 // 60:02d}m'
