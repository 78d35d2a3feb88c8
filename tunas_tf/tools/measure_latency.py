r"""Measures the single-image inference latency of architectures.

Each is built as a standalone network (untrained, seeded), float32 or int8
(`--precision`), timed by `latency/protocol` on this host or through
`--device_command` (`--block_table`: the space's units instead), appended to
the CSV (a killed run resumes); the pass prints its noise (docs/tools.md):

  taskset -c 1 python -m tunas_tf.tools.measure_latency --ssd=digits_search \
      --num=40 --cpus=1 --output=/tmp/latency.csv
"""

from __future__ import annotations

if __name__ == '__main__':  # A binary: before anything imports TensorFlow.
  from tunas_tf.cli import process as _process  # pylint: disable=g-import-not-at-top
  _process.at_start()

import sys
from typing import Any, Dict, List, Optional

from absl import flags
from absl import logging

from tunas_tf.io import files
from tunas_tf.cli import flags as common_flags
from tunas_tf.io import errors
from tunas_tf.cost_model import macs
from tunas_tf.latency import device as device_lib
from tunas_tf.latency import protocol as protocol_lib
from tunas_tf.latency import rows as rows_lib
from tunas_tf.search_space import sample

FLAGS = flags.FLAGS


def define_flags(f: flags.FlagValues = FLAGS) -> None:
  common_flags.define_space_flags(f, 'What to measure.')
  flags.DEFINE_string('indices_file', None, 'JSON (tools/random_architectures'
                      ' output) or text file of colon-separated index lists.',
                      flag_values=f)
  flags.DEFINE_integer('num', None, 'Without --indices_file: how many '
                       'architectures to draw uniformly.', flag_values=f)
  common_flags.define_seed_flag(f, 'the draws with --num')
  flags.DEFINE_bool('most_informative', False, 'With --num: instead of '
                    'uniform draws, the architectures a fit of the rows '
                    'already in --output is least sure of (greedy '
                    'D-optimal, latency/adaptive).', flag_values=f)
  flags.DEFINE_bool('block_table', False, 'Measure the block table instead '
                    '(cost_model/block_table): each unit of a network (a '
                    'layer with its activation, the head with the '
                    'classifier) built alone at its input shape; every unit '
                    'the space needs, or those of --num / --indices_file. '
                    'Rows are keyed by unit; fit_cost_model --block_csv '
                    'reads them.', flag_values=f)
  flags.DEFINE_string('backend', 'tflite', f'On this host: one of '
                      f'{list(device_lib.BACKENDS)}.', flag_values=f)
  common_flags.define_precision_flag(f, 'precision', "The models' "
                                     'arithmetic (recorded):')
  flags.DEFINE_string('device_command', None, 'Measure on a device instead: '
                      'a command run per architecture and round, {model} '
                      "replaced by its .tflite path, printing TFLite "
                      "benchmark_model's 'Inference (avg): N' (us).",
                      flag_values=f)
  flags.DEFINE_string('device_name', None, "A command's device by name, its "
                      'identity whatever the command.', flag_values=f)
  flags.DEFINE_float('device_timeout', 600.0, 'Seconds a device command may '
                     'take before the device counts as gone.', flag_values=f)
  flags.DEFINE_string('model_cache', None, 'Directory of converted .tflite '
                      'models (reused); default OUTPUT.models.', flag_values=f)
  defaults = protocol_lib.Protocol()
  for name, text in (
      ('repeats', 'Rounds per architecture (interleaved) before retries; 2 '
       'if they agree.'),
      ('runs', 'Timed runs per visit (this host); the visit counts their '
       'median.'),
      ('warmup_runs', 'Untimed runs at each later visit (the first warms up '
       'until stable).'),
      ('interleave', 'Architectures visited in turn.'),
      ('max_disturbance', 'A visit is redone when this share of its time was '
       'not ours.'),
      ('max_spread', 'A row is done once IQR / median is within this.'),
      ('max_retries', 'Extra visits or rounds per architecture.')):
    value = getattr(defaults, name)
    (flags.DEFINE_integer if isinstance(value, int) else flags.DEFINE_float)(
        name, value, text, flag_values=f)
  flags.DEFINE_integer('num_threads', 1, 'Threads of the TFLite interpreter '
                       'and of TensorFlow.', flag_values=f)
  flags.DEFINE_list('cpus', None, 'Pin the measurement to these CPUs (e.g. '
                    '1); default the CPUs this process may use. Recorded.',
                    flag_values=f)
  flags.DEFINE_string('compare_with', None, 'Another latency CSV of the same '
                      'architectures: print the two passes\' median '
                      'relative difference.', flag_values=f)
  flags.DEFINE_bool('reference', False, 'Time each visit against the '
                    "space's reference network and scale by it: a drift of "
                    "the device's speed (a shared host, a warming phone) "
                    'cancels (docs/tools.md). Recorded.', flag_values=f)
  flags.DEFINE_string('reference_from', None, 'With --reference: the scale '
                      'another latency CSV of the device recorded (the block '
                      "table's and its networks' must share one).",
                      flag_values=f)
  common_flags.define_input_flags(f)
  flags.DEFINE_string('output', None, 'Output CSV (appended to / resumed).',
                      flag_values=f)


def _set_tf_threads(num_threads: int) -> None:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    tf.config.threading.set_intra_op_parallelism_threads(num_threads)
    tf.config.threading.set_inter_op_parallelism_threads(num_threads)
  except RuntimeError:  # TensorFlow already initialised.
    logging.warning('could not set TensorFlow to %d threads', num_threads)


def _most_informative(f: flags.FlagValues) -> List[str]:
  """--num architectures the fit of --output's rows is least sure of."""
  from tunas_tf.latency import adaptive  # pylint: disable=g-import-not-at-top
  measured = (rows_lib.read(f.output, f.ssd)[0]
              if files.exists(f.output) else [])
  shape = macs.resolve_input(f.ssd, f.image_size, f.num_classes,
                             f.input_channels)
  return adaptive.most_informative(f.ssd, measured, f.num, shape,
                                   seed=f.seed)


def _reference(f: flags.FlagValues) -> Dict[str, Any]:
  """`measure_to_csv`'s reference and its scale: --reference_from's, the
  space's reference network's (the scale --output records, or measured), or
  none."""
  if f.reference_from is not None:
    if not f.reference:
      raise ValueError('--reference_from takes the scale of a --reference; '
                       'add --reference')
    recorded = rows_lib.read_provenance(f.reference_from)
    if recorded.reference is None:
      raise ValueError(f'{f.reference_from} was measured without a '
                       'reference: nothing to take from it')
    return dict(reference=recorded.reference,
                reference_ms=recorded.reference_ms)
  return dict(reference=rows_lib.reference_architecture(f.ssd)
              if f.reference else None)


def _cpus(values: Optional[List[str]]) -> Optional[List[int]]:
  if not values:
    return None
  try:
    return [int(v) for v in values]
  except ValueError:
    raise ValueError(f'--cpus {",".join(values)!r}: expected CPU numbers, '
                     'e.g. 1 or 0,1') from None


def main(argv, f: flags.FlagValues = FLAGS) -> None:
  """Measures and appends the latencies; bad input exits with one line."""
  common_flags.check_tool_args('measure_latency', argv, f, 'output')
  if f.indices_file is not None and f.num is not None:
    sys.exit('measure_latency: give at most one of --indices_file and --num')
  if f.block_table and f.most_informative:
    sys.exit('measure_latency: --most_informative picks networks for the '
             'linear fit; a block table needs every unit (--block_table '
             'alone)')
  if f.device_name is not None and (
      not f.device_command or not f.device_name.strip() or
      f.device_name.startswith('command: ')):
    sys.exit('measure_latency: --device_name names the device of a '
             "--device_command (not empty, not starting 'command: ')")
  if f.indices_file is None and f.num is None and not f.block_table:
    sys.exit('measure_latency: give one of --indices_file and --num (or '
             '--block_table: every unit of the space)')
  common_flags.when_stopped(f'the rows measured so far are in {f.output}; '
                            'the same command measures the rest')
  with errors.errors_in_one_line('measure_latency'):
    files.check_output_file(f.output, '--output')
    cpus = _cpus(f.cpus)
    if cpus is not None:
      device_lib.pin_cpus(cpus)
    architectures = None  # --block_table alone: every unit of the space.
    if f.indices_file is not None:
      architectures = rows_lib.read_indices_file(f.indices_file, f.ssd)
    elif f.num is not None and f.most_informative:
      architectures = _most_informative(f)
    elif f.num is not None:
      architectures = sample.sample_indices(f.ssd, f.num, f.seed)
    columns = (rows_lib.BLOCK_COLUMNS if f.block_table else
               rows_lib.COLUMNS)
    earlier = (dict(zip(*rows_lib.read(f.compare_with, f.ssd, columns)))
               if f.compare_with else None)
    if f.backend == 'tf' and f.device_command is None:
      _set_tf_threads(f.num_threads)
    protocol = protocol_lib.Protocol(**common_flags.config_values(
        f, protocol_lib.Protocol, max_warmup_runs=max(
            protocol_lib.Protocol.max_warmup_runs, f.warmup_runs)))
    from tunas_tf.graph import inference  # pylint: disable=g-import-not-at-top
    result = rows_lib.measure_to_csv(
        f.ssd, architectures, f.output, f.backend, protocol,
        builder=inference.builder,
        unit_builder=inference.unit_builder if f.block_table else None,
        image_size=f.image_size, num_classes=f.num_classes,
        input_channels=f.input_channels, num_threads=f.num_threads,
        device_command=f.device_command, device_timeout=f.device_timeout,
        model_cache=f.model_cache, precision=f.precision,
        device_name=f.device_name, **_reference(f))
  rows, device = result['rows'], bool(f.device_command)
  what = 'block-table units' if f.block_table else 'architectures'
  print(f"measured {len(rows)} {what} ({result['skipped']} already in "
        f"{f.output}) with {'device command' if device else f.backend}, "
        f"{f.precision} in {rows_lib.duration_text(result['seconds'])}, "
        f"{result['visits']} {'device calls' if device else 'visits'}")
  if rows:
    print(f'median latency {min(r.latency_ms for r in rows):.4g}..'
          f'{max(r.latency_ms for r in rows):.4g} ms; written to {f.output}')
    unsettled = sum(r.spread_ms > protocol.max_spread * r.latency_ms
                    for r in rows)
    print(f"noise of this pass: {100 * result['noise']:.2f}% median relative "
          f'difference between the first two rounds of each architecture '
          f'({sum(1 for r in rows if r.remeasured)} of {len(rows)} rows '
          f're-measured, load '
          f'{min(r.load for r in rows):.2f}..{max(r.load for r in rows):.2f})')
    if unsettled:
      print(f'{unsettled} rows still spread more than '
            f'{100 * protocol.max_spread:g}% (IQR over median) ' + (
                "not retried: the pass's noise is above --max_spread" if
                result['noise'] > protocol.max_spread else f'after up to '
                f'{protocol.max_retries} retries: the machine was busy') +
            '; their spread_ms says how far to trust them')
  if earlier is not None:
    with errors.errors_in_one_line('measure_latency: --compare_with'):
      now = dict(zip(*rows_lib.read(f.output, f.ssd, columns)))
      difference, count = protocol_lib.passes_difference(earlier, now)
    print(f'against {f.compare_with}: {100 * difference:.2f}% median relative '
          f'difference over {count} {what}')
  if result['error']:
    sys.exit(f"measure_latency: {result['error']}; the {len(rows)} rows "
             f'measured before it are in {f.output} (run again to resume)')


if __name__ == '__main__':
  common_flags.run(main, define_flags)
