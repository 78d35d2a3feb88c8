r"""Measures the single-image inference latency of architectures here.

Each architecture is built as a standalone network (untrained, seeded; batch
norm on moving statistics), run as TFLite (`--backend=tflite`) or as the TF
function (`--backend=tf`), and timed `--runs` times after `--warmup_runs`;
rows (median and interquartile range, ms) are appended to the latency CSV
and a killed run skips the rows it has (docs/tools.md):

  python -m tunas_tf.tools.measure_latency --ssd=digits_search \
      --indices_file=/tmp/archs.json --output=/tmp/latency.csv
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from absl import flags
from absl import logging
import numpy as np

from tunas_tf import checks
from tunas_tf import lite
from tunas_tf import native_output
from tunas_tf import flags as common_flags
from tunas_tf import files
from tunas_tf.cost_model import latency_csv
from tunas_tf.cost_model import macs
from tunas_tf.cost_model import random_search
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema

FLAGS = flags.FLAGS
BACKENDS = ('tflite', 'tf')


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


def build_runner(ssd: str, indices: Any, backend: str = 'tflite', *,
                 image_size: Optional[int] = None,
                 num_classes: Optional[int] = None,
                 input_channels: Optional[int] = None,
                 num_threads: int = 1) -> Callable[[], np.ndarray]:
  """Builds one architecture for single-image inference.

  Args:
    ssd: a name of `mobile.SEARCH_SPACES`.
    indices: the architecture (list of ints or '0:2:1').
    backend: 'tflite' or 'tf'.
    image_size: input resolution (default: the space's).
    num_classes: classifier width (default: the space's).
    input_channels: image channels (default: the space's).
    num_threads: TFLite interpreter threads.

  Returns:
    A function of no arguments that runs the network once on a fixed random
    image and returns the logits [1, num_classes] as a NumPy array.

  Raises:
    ValueError: for an unknown space or backend, bad indices or a bad size.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tunas_tf.graph import from_spec  # pylint: disable=g-import-not-at-top
  from tunas_tf.graph import model as model_lib  # pylint: disable=g-import-not-at-top
  if backend not in BACKENDS:
    raise ValueError(f'unknown backend {backend!r}; expected one of '
                     f'{list(BACKENDS)}')
  space = mobile.get_search_space(ssd)
  shape = macs.resolve_input(ssd, image_size, num_classes, input_channels)
  pruned = schema.prune(space, indices)
  graph, constants = from_spec.graph_from_spec(
      pruned, shape.num_classes, input_channels=shape.input_channels)
  # The deployed network: batch norm with (moving) statistics, as inference.
  net = model_lib.Model(graph, constants, seed=0)
  signature = [1, shape.image_size, shape.image_size, shape.input_channels]

  @tf.function(input_signature=[tf.TensorSpec(signature, tf.float32)])
  def forward(images):
    return net(images, training=False)

  concrete = forward.get_concrete_function()
  image = np.random.RandomState(0).uniform(size=signature).astype(np.float32)
  if backend == 'tf':
    tensor = tf.constant(image)
    return lambda: concrete(tensor).numpy()
  converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], net)
  with native_output.captured():  # The converter's op summary.
    content = converter.convert()
  interpreter = lite.interpreter(content, num_threads=num_threads)
  interpreter.allocate_tensors()
  input_index = interpreter.get_input_details()[0]['index']
  output_index = interpreter.get_output_details()[0]['index']
  interpreter.set_tensor(input_index, image)

  def run():
    interpreter.invoke()
    return interpreter.get_tensor(output_index)

  return run


def time_runs(run: Callable[[], Any], warmup_runs: int = 5,
              runs: int = 20) -> Tuple[float, float]:
  """Median and interquartile range (ms) of `runs` timed calls of `run`.

  Args:
    run: a function of no arguments.
    warmup_runs: untimed calls first (>= 0).
    runs: timed calls (>= 1), each timed on its own.

  Returns:
    (median_ms, spread_ms), spread = 75th - 25th percentile.
  """
  for _ in range(warmup_runs):
    run()
  times = np.empty([runs])
  for i in range(runs):
    start = time.perf_counter()
    run()
    times[i] = time.perf_counter() - start
  times *= 1e3
  q25, median, q75 = np.percentile(times, [25, 50, 75])
  return float(median), float(q75 - q25)


def measure_latency(ssd: str, indices: Any, backend: str = 'tflite',
                    warmup_runs: int = 5, runs: int = 20,
                    **build_kwargs) -> Tuple[float, float]:
  """(median_ms, spread_ms) of one architecture; see `build_runner`."""
  return time_runs(build_runner(ssd, indices, backend, **build_kwargs),
                   warmup_runs, runs)


def measure_to_csv(ssd: str, architectures: Sequence[Any], output: str,
                   backend: str = 'tflite', warmup_runs: int = 5,
                   runs: int = 20, *, image_size: Optional[int] = None,
                   num_classes: Optional[int] = None,
                   input_channels: Optional[int] = None,
                   num_threads: int = 1) -> Dict[str, Any]:
  """Measures architectures not yet in `output` and appends a row for each.

  Args:
    ssd: a name of `mobile.SEARCH_SPACES`.
    architectures: index lists or strings (validated before any build).
    output: the CSV path; created with the header `indices,latency_ms,
      spread_ms` if missing, else appended to (rows flushed one by one; see
      `cost_model.latency_csv`). The settings are written to
      `latency_csv.settings_path(output)`.
    backend: 'tflite' or 'tf'.
    warmup_runs: untimed runs per architecture (>= 0).
    runs: timed runs per architecture (>= 1).
    image_size: input resolution (default: the space's).
    num_classes: classifier width (default: the space's).
    input_channels: image channels (default: the space's).
    num_threads: TFLite interpreter threads (>= 1).

  Returns:
    dict with `rows` (the new rows as (indices, latency_ms, spread_ms)) and
    `skipped` (how many were already in the CSV).

  Raises:
    ValueError: for a bad argument, indices that do not fit the space, or an
      existing `output` with another header, bad rows, or other settings
      (`latency_csv.check_settings`).
  """
  space = mobile.get_search_space(ssd)
  if backend not in BACKENDS:
    raise ValueError(f'unknown backend {backend!r}; expected one of '
                     f'{list(BACKENDS)}')
  for name, value, low in (('warmup_runs', warmup_runs, 0), ('runs', runs, 1),
                           ('num_threads', num_threads, 1)):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
      raise ValueError(f'{name} must be an int >= {low}, got {value!r}')
  wanted = []
  for i, indices in enumerate(architectures):
    indices = normalize_indices(space, indices, f'architecture {i}: ')
    if indices not in wanted:
      wanted.append(indices)
  shape = macs.resolve_input(ssd, image_size, num_classes, input_channels)
  settings = {'ssd': ssd, 'backend': backend, 'image_size': shape.image_size,
              'num_classes': shape.num_classes,
              'input_channels': shape.input_channels,
              'num_threads': num_threads, 'device': _device()}
  latency_csv.check_settings(output, settings)
  done = set(latency_csv.read_for_append(output, ssd))
  todo = [indices for indices in wanted if indices not in done]
  skipped = len(wanted) - len(todo)
  if skipped:
    logging.info('%d of %d architectures already in %s; skipping them',
                 skipped, len(wanted), output)
  files.write_json(settings, latency_csv.settings_path(output))
  new_rows = []
  start = time.time()
  with latency_csv.appender(output) as write_row:
    for n, indices in enumerate(todo, 1):
      median, spread = measure_latency(
          ssd, indices, backend, warmup_runs, runs, image_size=image_size,
          num_classes=num_classes, input_channels=input_channels,
          num_threads=num_threads)
      write_row(indices, median, spread)
      new_rows.append((indices, median, spread))
      eta = (time.time() - start) / n * (len(todo) - n)
      logging.info('%d/%d %s: %.4f ms (IQR %.4f ms, %s)  ETA %s', n,
                   len(todo), indices, median, spread, backend,
                   _duration(eta))
  return {'rows': new_rows, 'skipped': skipped}


def _duration(seconds: float) -> str:
  """'42s', '7m05s' or '1h02m'."""
  seconds = int(round(seconds))
  if seconds < 60:
    return f'{seconds}s'
  if seconds < 3600:
    return f'{seconds // 60}m{seconds % 60:02d}s'
  return f'{seconds // 3600}h{seconds % 3600 // 60:02d}m'


def _device() -> str:
  """This machine, as the latencies' context: CPU model and core count."""
  import platform  # pylint: disable=g-import-not-at-top
  name = platform.processor() or platform.machine()
  try:
    with open('/proc/cpuinfo') as f:
      models = [line.split(':', 1)[1].strip() for line in f
                if line.startswith('model name')]
    if models:
      name = models[0]
  except OSError:
    pass
  return f'{name}, {os.cpu_count()} cores'


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
  flags.DEFINE_string('backend', 'tflite', f'One of {list(BACKENDS)}.',
                      flag_values=flag_values)
  flags.DEFINE_integer('warmup_runs', 5, 'Untimed runs per architecture.',
                       flag_values=flag_values)
  flags.DEFINE_integer('runs', 20, 'Timed runs per architecture.',
                       flag_values=flag_values)
  flags.DEFINE_integer('num_threads', 1, 'Threads of the TFLite interpreter '
                       'and of TensorFlow.', flag_values=flag_values)
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


def main(argv, flag_values: flags.FlagValues = FLAGS) -> None:
  """Measures and appends the latencies; bad input exits with one line."""
  f = flag_values
  if len(argv) > 1:
    sys.exit(f'measure_latency: unexpected arguments {argv[1:]}')
  if not f.output:
    sys.exit('measure_latency: --output is required')
  if (f.indices_file is None) == (f.num is None):
    sys.exit('measure_latency: give exactly one of --indices_file and --num')
  try:
    files.check_output_file(f.output, '--output')
    checks.seed('seed', f.seed)
    if f.indices_file is not None:
      architectures = read_indices_file(f.indices_file, f.ssd)
    else:
      architectures = random_search.sample_indices(f.ssd, f.num, f.seed)
    if f.backend == 'tf' and f.num_threads >= 1:
      _set_tf_threads(f.num_threads)
    result = measure_to_csv(
        f.ssd, architectures, f.output, f.backend, f.warmup_runs, f.runs,
        image_size=f.image_size, num_classes=f.num_classes,
        input_channels=f.input_channels, num_threads=f.num_threads)
  except ValueError as e:
    sys.exit(f'measure_latency: {e}')
  rows = result['rows']
  print(f"measured {len(rows)} architectures ({result['skipped']} already in "
        f'{f.output}) with {f.backend}')
  if rows:
    latencies = [row[1] for row in rows]
    print(f'median latency {min(latencies):.4g}..{max(latencies):.4g} ms; '
          f'written to {f.output}')


if __name__ == '__main__':
  define_flags()
  common_flags.run(main)
