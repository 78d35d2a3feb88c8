"""How well a fitted latency model predicts this host, from how many minutes.

Usage:
  taskset -c 1 python bench/latency_fit.py [--ssd=cifar_search] [--num=200] \
      [--image_size=32] [--cpus=1] [--repeats=5] [--output_dir=DIR] \
      [--block_table [--table_rows=20]] [--precision=int8] [--holdout=0.2] \
      [--device_command='CMD {model}'] [--reference]

Draws `--num` architectures uniformly (seed 0), measures them twice with
`tools/measure_latency`'s protocol (TFLite, 1 thread, or through
`--device_command`; the second pass reuses the converted models), and fits `tools/fit_cost_model`'s model on the first
pass's rows (`--holdout` of them held out: 100 held-out rows need --num=500
at 0.2; with --block_table, which trains on `--table_rows` only, --num=125
--holdout=0.8 measures a quarter of the networks for the same 100).
Logs each row as it lands (with the ETA). Prints the two passes' median
relative difference (the noise) and the shares within +-5% / +-10% of a pass
that noise leaves an exact model, the pass's own noise (its rows' first two
rounds), the held-out figures and the measurement
minutes of the first pass (what a user spends: conversions and timing).
An existing --output_dir resumes (the CSVs are appended to).
Last line: noise_median= mape= within5= within10= kendall= minutes= calls=
(kendall=n/a on fewer than 10 held-out rows; calls: the first pass's visits)

With --block_table, the block table (`cost_model/block_table`) is measured
too (every unit the space needs, same protocol and device) and fitted with
`--table_rows` of the first pass's training rows for its correction; the
last line's figures are then the table's, on the same held-out rows, and
its minutes the table's plus those rows' share of the first pass, with
`table_minutes=` and `table_calls=` (the table alone) after them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from absl import logging

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import _harness  # pylint: disable=g-import-not-at-top,wrong-import-position

from tunas_tf.cost_model import fit  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.cost_model import macs  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.graph import inference  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.latency import device as device_lib  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.latency import protocol as protocol_lib  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.latency import rows as rows_lib  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.search_space import sample  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.tools import fit_cost_model  # pylint: disable=g-import-not-at-top,wrong-import-position


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--ssd', default='cifar_search')
  parser.add_argument('--num', type=int, default=200)
  parser.add_argument('--image_size', type=int, default=None)
  parser.add_argument('--cpus', default='1',
                      help='CPUs to pin to (comma-separated; empty: none).')
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--output_dir', default=None)
  parser.add_argument('--block_table', action='store_true')
  parser.add_argument('--table_rows', type=int, default=20)
  parser.add_argument('--precision', default='float32',
                      help='float32, or int8 (full-integer models).')
  parser.add_argument('--holdout', type=float, default=0.2,
                      help='The share of the networks held out.')
  parser.add_argument('--reference', action='store_true',
                      help="Time against the space's reference network "
                      "(measure_latency's --reference).")
  parser.add_argument('--device_command', default=None,
                      help="Time on a device: measure_latency's flag.")
  args = parser.parse_args(argv)
  logging.set_verbosity(logging.INFO)  # each row as it lands, with the ETA
  output_dir = args.output_dir or tempfile.mkdtemp(prefix='latency_fit_')
  try:
    if args.cpus:
      device_lib.pin_cpus([int(c) for c in args.cpus.split(',')])
    architectures = sample.sample_indices(args.ssd, args.num, seed=0)
    protocol = protocol_lib.Protocol(repeats=args.repeats)
    cache = os.path.join(output_dir, 'models')
    minutes, noise, calls = [], [], []
    device = dict(protocol=protocol, image_size=args.image_size,
                  model_cache=cache, precision=args.precision,
                  device_command=args.device_command,
                  builder=inference.builder)
    if args.reference:
      device['reference'] = rows_lib.reference_architecture(args.ssd)
    first = os.path.join(output_dir, 'first.csv')
    for name in ('first', 'second'):
      start = time.time()
      result = rows_lib.measure_to_csv(
          args.ssd, architectures, os.path.join(output_dir, f'{name}.csv'),
          **device)
      if args.reference and name == 'first':  # One scale for every CSV.
        device['reference_ms'] = rows_lib.read_provenance(first).reference_ms
      minutes.append((time.time() - start) / 60)
      noise.append(result['noise'])
      calls.append(result['visits'])
      print(f"{name} pass: {len(result['rows'])} measured "
            f"({result['skipped']} resumed) in {minutes[-1]:.1f} min, its "
            f"own noise {_percent(result['noise'])}", flush=True)
    passes = [dict(zip(*rows_lib.read(os.path.join(output_dir,
                                                   f'{name}.csv'),
                                         args.ssd)))
              for name in ('first', 'second')]
    difference, count = protocol_lib.passes_difference(*passes)
    shape = macs.resolve_input(args.ssd, args.image_size)
    fitted = fit_cost_model.fit_csv(first, args.ssd,
                                    holdout_fraction=args.holdout,
                                    allow_poor_fit=True)
    indices = fitted['indices']
    if args.block_table:
      start = time.time()
      result = rows_lib.measure_to_csv(
          args.ssd, None, os.path.join(output_dir, 'table.csv'),
          unit_builder=inference.unit_builder, **device)
      table_minutes = (time.time() - start) / 60
      table_calls = result['visits']
      print(f"block table: {len(result['rows'])} units measured "
            f"({result['skipped']} resumed) in {table_minutes:.1f} min, "
            f"{table_calls} visits, its own noise "
            f"{_percent(result['noise'])}", flush=True)
      tabled = fit_cost_model.fit_csv(
          first, args.ssd, holdout_fraction=args.holdout, allow_poor_fit=True,
          block_csv=os.path.join(output_dir, 'table.csv'),
          train_rows=args.table_rows)
  except ValueError as e:
    sys.exit(f'latency_fit: {e}')
  values = list(passes[0].values())
  print(f'{args.ssd} at {shape.image_size} px, {args.precision}, {count} '
        'architectures, '
        f'{min(values):.4g}..{max(values):.4g} ms; rows in {output_dir}')
  print(f'two passes: {100 * difference:.2f}% median relative difference; '
        'their own noise lets an exact model reach '
        f'{protocol_lib.passes_reach(*passes, 0.05):.3g}% within +-5%, '
        f'{protocol_lib.passes_reach(*passes, 0.10):.3g}% within +-10% of a '
        'pass')
  print('linear fit: ' + fit.summary(fitted['coefficients']))
  for name, one in (('linear fit', fitted),) + (
      (('block table', tabled),) if args.block_table else ()):
    if one.get('warning'):
      print(f"the {name} would be refused: {one['warning']}")
  extra = ''
  if args.block_table:
    print('block table: ' + fit.summary(tabled['coefficients']))
    h = tabled['coefficients']['holdout']
    # Its correction saw only training rows: its held-out predictions hold
    # against the second pass too (a row disturbed in one pass shows here).
    held_out = fit.split(len(indices), args.holdout, 0)[1]
    again = fit.scores(tabled['predictions'][held_out],
                       [passes[1][indices[i]] for i in held_out])
    print('block table against the second pass: ' +
          fit.figures(again, len(held_out)))
    spent = table_minutes + minutes[0] * h['num_train'] / len(indices)
    extra = (f' table_minutes={table_minutes:.1f} '
             f'table_calls={table_calls}')
  else:
    h = fitted['coefficients']['holdout']
    spent = minutes[0]
  tau = h['kendall_tau']
  _harness.finish(
      'latency_fit',
      f"noise_median={100 * difference:.2f}% mape={h['mape_percent']:.1f}% "
      f"within5={h['within5_percent']:.0f}% "
      f"within10={h['within10_percent']:.0f}% "
      f"kendall={'n/a' if tau is None else f'{tau:.3f}'} "
      f'minutes={spent:.1f} calls={calls[0]}{extra}')
  return 0


def _percent(fraction):
  return 'n/a' if fraction is None else f'{100 * fraction:.2f}%'


if __name__ == '__main__':
  sys.exit(main())
