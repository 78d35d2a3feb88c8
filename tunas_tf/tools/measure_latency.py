r"""Measures the single-image inference latency of architectures.

Each architecture is built as a standalone network (untrained, seeded; batch
norm on moving statistics) and timed on this host as TFLite
(`--backend=tflite`, converted once into `--model_cache`) or as the TF
function (`--backend=tf`), or on any device through `--device_command`, by
the protocol of `cost_model/latency` (interleaved rounds, warm-up until
stable, medians, disturbed visits redone). Rows are appended to the latency
CSV (a killed run skips the rows it has); the pass prints its own noise
(docs/tools.md, 'Search for your device'):

  taskset -c 1 python -m tunas_tf.tools.measure_latency --ssd=digits_search \
      --num=40 --cpus=1 --output=/tmp/latency.csv

`--block_table` measures the space's units instead, each built alone
(`cost_model/block_table`), for `fit_cost_model --block_csv`.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from absl import flags
from absl import logging

from tunas_tf import checks
from tunas_tf import flags as common_flags
from tunas_tf import files
from tunas_tf.cost_model import block_table as block_table_lib
from tunas_tf.cost_model import latency
from tunas_tf.cost_model import latency_csv
from tunas_tf.cost_model import macs
from tunas_tf.cost_model import random_search
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema

FLAGS = flags.FLAGS


def normalize_indices(space: Any, indices: Any, where: str = '') -> str:
  """Validates `indices` against `space`; returns the canonical '0:2:1' form.

  Raises:
    ValueError: for a bad token, a wrong count or an index out of range
      (`where` prefixes the message, e.g. 'line 3: ').
  """
  try:
    return schema.format_indices(schema.check_indices(space, indices))
  except ValueError as e:
    raise ValueError(f'{where}{e}') from None


def read_indices_file(path: str, ssd: str) -> List[str]:
  """Reads architectures from a JSON or text file, validated against `ssd`.

  Args:
    path: a JSON list (of `{"indices": ...}` objects or of index strings), a
      JSON object with an "indices" key, or a text file of one colon-separated
      index list per line ('#' comments and blank lines skipped).
    ssd: a name of `mobile.SEARCH_SPACES`.

  Returns:
    The canonical index strings, in file order, duplicates dropped.

  Raises:
    ValueError: for an unreadable file, an entry without indices, or indices
      that do not fit the space (the message names the entry).
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
  found = []
  for where, entry in entries:
    indices = normalize_indices(space, entry, where)
    if indices not in found:
      found.append(indices)
  if not found:
    raise ValueError(f'{path}: no architectures in it')
  return found


def measure_to_csv(ssd: str, architectures: Sequence[Any], output: str,
                   backend: str = 'tflite',
                   protocol: latency.Protocol = latency.Protocol(), *,
                   image_size: Optional[int] = None,
                   num_classes: Optional[int] = None,
                   input_channels: Optional[int] = None,
                   num_threads: int = 1,
                   device_command: Optional[str] = None,
                   device_timeout: float = 600.0,
                   model_cache: Optional[str] = None,
                   block_table: bool = False) -> Dict[str, Any]:
  """Measures architectures not yet in `output` and appends a row for each.

  Args:
    ssd: a name of `mobile.SEARCH_SPACES`.
    architectures: index lists or strings (validated before any build);
      with `block_table`, None for every unit the space needs.
    output: the CSV path (`latency_csv.COLUMNS`); created if missing, else
      appended to (rows flushed one by one). The settings are written to
      `latency_csv.settings_path(output)`.
    backend: 'tflite' or 'tf' on this host (ignored with `device_command`).
    protocol: how each architecture is timed (`latency.Protocol`).
    image_size: input resolution (default: the space's).
    num_classes: classifier width (default: the space's).
    input_channels: image channels (default: the space's).
    num_threads: TFLite interpreter threads (>= 1).
    device_command: time on a device through this command instead
      (`latency.make_device`).
    device_timeout: seconds a device command may take.
    model_cache: where converted models are kept; default
      `<output>.models`.
    block_table: measure the units of the block table instead
      (`cost_model/block_table`: each built alone), those `architectures`
      use or every one the space needs; rows keyed by unit
      (`latency_csv.BLOCK_COLUMNS`).

  Returns:
    dict with `rows` (the new `latency.Row`s), `skipped` (how many were
    already in the CSV), `noise` (`latency.pass_noise` of the new rows, a
    fraction, or None), `seconds` (the pass's wall time) and `error` (None,
    or the one line of a device that failed; the rows before it are
    written).

  Raises:
    ValueError: for a bad argument, indices that do not fit the space, or an
      existing `output` with another header, bad rows, or other settings
      (`latency_csv.check_settings`).
  """
  space = mobile.get_search_space(ssd)
  protocol.check()
  if isinstance(num_threads, bool) or not isinstance(num_threads, int) or (
      num_threads < 1):
    raise ValueError(f'num_threads must be an int >= 1, got {num_threads!r}')
  wanted = []
  for i, indices in enumerate(architectures or ()):
    indices = normalize_indices(space, indices, f'architecture {i}: ')
    if indices not in wanted:
      wanted.append(indices)
  shape = macs.resolve_input(ssd, image_size, num_classes, input_channels)
  from tunas_tf.graph import inference  # pylint: disable=g-import-not-at-top
  columns = latency_csv.COLUMNS
  build = inference.builder(ssd, shape)
  if block_table:
    units = block_table_lib.units_of(ssd, shape,
                                     wanted if architectures else None)
    wanted, columns = list(units), latency_csv.BLOCK_COLUMNS
    build = inference.unit_builder(units)
  device = latency.make_device(
      ssd, shape, protocol, build, backend=backend, num_threads=num_threads,
      model_cache=model_cache or output + '.models',
      device_command=device_command, command_timeout=device_timeout)
  settings = {'ssd': ssd, 'image_size': shape.image_size,
              'num_classes': shape.num_classes,
              'input_channels': shape.input_channels, **device.settings}
  latency_csv.check_settings(output, settings)
  done = set(latency_csv.read_for_append(output, ssd, columns))
  todo = [indices for indices in wanted if indices not in done]
  skipped = len(wanted) - len(todo)
  if skipped:
    logging.info('%d of %d architectures already in %s; skipping them',
                 skipped, len(wanted), output)
  files.write_json(dict(settings, protocol=dataclasses.asdict(protocol),
                        load_at_start=latency.load_average()),
                   latency_csv.settings_path(output))
  new_rows, error = [], None
  start = time.time()
  with latency_csv.appender(output, columns) as write_row:
    try:
      for n, row in enumerate(latency.measure(device, todo, protocol), 1):
        write_row(row.as_csv())
        new_rows.append(row)
        eta = (time.time() - start) / n * (len(todo) - n)
        logging.info('%d/%d %s: %.4f ms (IQR %.4f ms, %d rounds, %d redone, '
                     'load %.2f)  ETA %s', n, len(todo), row.indices,
                     row.latency_ms, row.spread_ms, row.repeats,
                     row.remeasured, row.load, _duration(eta))
    except latency.DeviceError as e:
      error = str(e)
  return {'rows': new_rows, 'skipped': skipped,
          'noise': latency.pass_noise(new_rows),
          'seconds': time.time() - start, 'error': error}


def _duration(seconds: float) -> str:
  """'42s', '7m05s' or '1h02m'."""
  seconds = int(round(seconds))
  if seconds < 60:
    return f'{seconds}s'
  if seconds < 3600:
    return f'{seconds // 60}m{seconds % 60:02d}s'
  return f'{seconds // 3600}h{seconds % 3600 // 60:02d}m'


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
  """Defines the tool's flags (only when run as a program)."""
  flags.DEFINE_string('ssd', 'digits_search', 'Search space, one of '
                      f'{sorted(mobile.SEARCH_SPACES)}.',
                      flag_values=flag_values)
  flags.DEFINE_string('indices_file', None, 'JSON (tools/random_architectures'
                      ' output) or text file of colon-separated index lists.',
                      flag_values=flag_values)
  flags.DEFINE_integer('num', None, 'Without --indices_file: how many '
                       'architectures to draw uniformly.',
                       flag_values=flag_values)
  flags.DEFINE_integer('seed', 0, 'Seed of the draws with --num.',
                       flag_values=flag_values)
  flags.DEFINE_bool('most_informative', False, 'With --num: instead of '
                    'uniform draws, the architectures a fit of the rows '
                    'already in --output is least sure of (greedy '
                    'D-optimal, cost_model/adaptive).',
                    flag_values=flag_values)
  flags.DEFINE_bool('block_table', False, 'Measure the block table instead '
                    '(cost_model/block_table): each unit of a network (a '
                    'layer with its activation, the head with the '
                    'classifier) built alone at its input shape; every unit '
                    'the space needs, or those of --num / --indices_file. '
                    'Rows are keyed by unit; fit_cost_model --block_csv '
                    'reads them.', flag_values=flag_values)
  flags.DEFINE_string('backend', 'tflite', f'On this host: one of '
                      f'{list(latency.BACKENDS)}.', flag_values=flag_values)
  flags.DEFINE_string('device_command', None, 'Measure on a device instead: '
                      'a command run per architecture and round, {model} '
                      "replaced by its .tflite path, printing TFLite "
                      "benchmark_model's 'Inference (avg): N' (us).",
                      flag_values=flag_values)
  flags.DEFINE_float('device_timeout', 600.0, 'Seconds a device command may '
                     'take before the device counts as gone.',
                     flag_values=flag_values)
  flags.DEFINE_string('model_cache', None, 'Directory of converted .tflite '
                      'models (reused); default OUTPUT.models.',
                      flag_values=flag_values)
  defaults = latency.Protocol()
  flags.DEFINE_integer('repeats', defaults.repeats, 'Rounds per '
                       'architecture, interleaved across architectures.',
                       flag_values=flag_values)
  flags.DEFINE_integer('runs', defaults.runs, 'Timed runs per visit (this '
                       'host); the visit counts their median.',
                       flag_values=flag_values)
  flags.DEFINE_integer('warmup_runs', defaults.warmup_runs, 'Untimed runs '
                       'at each later visit (the first warms up until '
                       'stable).', flag_values=flag_values)
  flags.DEFINE_integer('interleave', defaults.interleave, 'Architectures '
                       'visited in turn.', flag_values=flag_values)
  flags.DEFINE_float('max_disturbance', defaults.max_disturbance, 'A visit '
                     'is redone when this share of its time was not ours.',
                     flag_values=flag_values)
  flags.DEFINE_float('max_spread', defaults.max_spread, 'A row gets more '
                     'rounds while IQR / median exceeds this.',
                     flag_values=flag_values)
  flags.DEFINE_integer('max_retries', defaults.max_retries, 'Extra visits '
                       'or rounds per architecture.', flag_values=flag_values)
  flags.DEFINE_integer('num_threads', 1, 'Threads of the TFLite interpreter '
                       'and of TensorFlow.', flag_values=flag_values)
  flags.DEFINE_list('cpus', None, 'Pin the measurement to these CPUs (e.g. '
                    '1); default the CPUs this process may use. Recorded.',
                    flag_values=flag_values)
  flags.DEFINE_string('compare_with', None, 'Another latency CSV of the same '
                      'architectures: print the two passes\' median '
                      'relative difference.', flag_values=flag_values)
  flags.DEFINE_integer('image_size', None, "Input resolution; default the "
                       "space's.", flag_values=flag_values)
  flags.DEFINE_integer('num_classes', None, "Classifier width; default the "
                       "space's.", flag_values=flag_values)
  flags.DEFINE_integer('input_channels', None, "Image channels; default the "
                       "space's.", flag_values=flag_values)
  flags.DEFINE_string('output', None, 'Output CSV (appended to / resumed).',
                      flag_values=flag_values)


def _set_tf_threads(num_threads: int) -> None:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    tf.config.threading.set_intra_op_parallelism_threads(num_threads)
    tf.config.threading.set_inter_op_parallelism_threads(num_threads)
  except RuntimeError:  # TensorFlow already initialised.
    logging.warning('could not set TensorFlow to %d threads', num_threads)


def _most_informative(f: flags.FlagValues) -> List[str]:
  """--num architectures the fit of --output's rows is least sure of."""
  from tunas_tf.cost_model import adaptive  # pylint: disable=g-import-not-at-top
  measured = (latency_csv.read(f.output, f.ssd)[0]
              if files.exists(f.output) else [])
  shape = macs.resolve_input(f.ssd, f.image_size, f.num_classes,
                             f.input_channels)
  return adaptive.most_informative(f.ssd, measured, f.num, shape,
                                   seed=f.seed)


def _protocol(f: flags.FlagValues) -> latency.Protocol:
  return latency.Protocol(
      repeats=f.repeats, runs=f.runs, warmup_runs=f.warmup_runs,
      max_warmup_runs=max(latency.Protocol.max_warmup_runs, f.warmup_runs),
      max_disturbance=f.max_disturbance, max_spread=f.max_spread,
      max_retries=f.max_retries, interleave=f.interleave)


def _cpus(values: Optional[List[str]]) -> Optional[List[int]]:
  if not values:
    return None
  try:
    return [int(v) for v in values]
  except ValueError:
    raise ValueError(f'--cpus {",".join(values)!r}: expected CPU numbers, '
                     'e.g. 1 or 0,1') from None


def main(argv, flag_values: flags.FlagValues = FLAGS) -> None:
  """Measures and appends the latencies; bad input exits with one line."""
  f = flag_values
  if len(argv) > 1:
    sys.exit(f'measure_latency: unexpected arguments {argv[1:]}')
  if not f.output:
    sys.exit('measure_latency: --output is required')
  if f.indices_file is not None and f.num is not None:
    sys.exit('measure_latency: give at most one of --indices_file and --num')
  if f.block_table and f.most_informative:
    sys.exit('measure_latency: --most_informative picks networks for the '
             'linear fit; a block table needs every unit (--block_table '
             'alone)')
  if f.indices_file is None and f.num is None and not f.block_table:
    sys.exit('measure_latency: give one of --indices_file and --num (or '
             '--block_table: every unit of the space)')
  try:
    files.check_output_file(f.output, '--output')
    checks.seed('seed', f.seed)
    cpus = _cpus(f.cpus)
    if cpus is not None:
      latency.pin_cpus(cpus)
    architectures = None  # --block_table alone: every unit of the space.
    if f.indices_file is not None:
      architectures = read_indices_file(f.indices_file, f.ssd)
    elif f.num is not None and f.most_informative:
      architectures = _most_informative(f)
    elif f.num is not None:
      architectures = random_search.sample_indices(f.ssd, f.num, f.seed)
    columns = (latency_csv.BLOCK_COLUMNS if f.block_table else
               latency_csv.COLUMNS)
    earlier = (dict(zip(*latency_csv.read(f.compare_with, f.ssd, columns)))
               if f.compare_with else None)
    if f.backend == 'tf' and f.device_command is None:
      _set_tf_threads(f.num_threads)
    protocol = _protocol(f)
    result = measure_to_csv(
        f.ssd, architectures, f.output, f.backend, protocol,
        image_size=f.image_size, num_classes=f.num_classes,
        input_channels=f.input_channels, num_threads=f.num_threads,
        device_command=f.device_command, device_timeout=f.device_timeout,
        model_cache=f.model_cache, block_table=f.block_table)
  except ValueError as e:
    sys.exit(f'measure_latency: {e}')
  rows = result['rows']
  where = 'device command' if f.device_command else f.backend
  what = 'block-table units' if f.block_table else 'architectures'
  print(f"measured {len(rows)} {what} ({result['skipped']} already in "
        f"{f.output}) with {where} in {_duration(result['seconds'])}")
  if rows:
    latencies = [row.latency_ms for row in rows]
    print(f'median latency {min(latencies):.4g}..{max(latencies):.4g} ms; '
          f'written to {f.output}')
    redone = sum(1 for row in rows if row.remeasured)
    unsettled = [row for row in rows if row.spread_ms >
                 protocol.max_spread * row.latency_ms]
    print(f"noise of this pass: {100 * result['noise']:.2f}% median relative "
          f'difference between the even and odd rounds of each architecture '
          f'({redone} of {len(rows)} rows re-measured, load '
          f'{min(r.load for r in rows):.2f}..{max(r.load for r in rows):.2f})')
    if unsettled:
      print(f'{len(unsettled)} rows still spread more than '
            f'{100 * protocol.max_spread:g}% (IQR over median) after '
            f'{protocol.max_retries} retries: the machine was busy; their '
            'spread_ms says how far to trust them')
  if earlier is not None:
    try:
      now = dict(zip(*latency_csv.read(f.output, f.ssd, columns)))
      difference, count = latency.passes_difference(earlier, now)
    except ValueError as e:
      sys.exit(f'measure_latency: --compare_with: {e}')
    print(f'against {f.compare_with}: {100 * difference:.2f}% median relative '
          f'difference over {count} {what}')
  if result['error']:
    sys.exit(f"measure_latency: {result['error']}; the {len(rows)} rows "
             f'measured before it are in {f.output} (run again to resume)')


if __name__ == '__main__':
  define_flags()
  common_flags.run(main)
