"""Does a measuring pass's converting grow the process? RSS over N conversions.

Usage:
  python bench/conversions.py [--ssd=digits_search] [--num=200]
      [--precision=int8] [--image_size=N] [--every=20] [--nocollect]

A measuring pass over `--num` random architectures (seed 0) in one process
with `measure_latency`'s GC thresholds (`process.at_start`), device and
loop (`device.make_device`, `protocol.measure`: each built, converted and
written to a temporary model cache) but a timing protocol of one run a
visit. Prints the resident set (VmRSS) and its peak (VmHWM) after every
`--every`-th row; the growth counts from the 20th (the first ones load the
converter). `--nocollect`: without the pass's `gc.collect` per chunk of
architectures (what it contains). Last line: rss_mb_20= rss_mb_last= peak_mb_20= peak_mb_last=
growth= (peak's, last / 20th - 1) seconds=
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from unittest import mock

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from tunas_tf.cli import process  # pylint: disable=g-import-not-at-top,wrong-import-position

process.at_start()  # As measure_latency: its GC thresholds.

import _harness  # pylint: disable=g-import-not-at-top,wrong-import-position

from tunas_tf.cost_model import macs  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.graph import inference  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.latency import device as device_lib  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.latency import protocol as protocol_lib  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.search_space import sample  # pylint: disable=g-import-not-at-top,wrong-import-position

_FROM = 20  # The conversion the growth counts from.
# The pass's loop with next to no timing: conversions are what it measures.
_QUICK = protocol_lib.Protocol(repeats=2, runs=1, warmup_runs=0,
                               max_warmup_runs=0, max_disturbance=1.0,
                               max_spread=1.0, max_retries=0)


def memory_mb():
  """(VmRSS, VmHWM) of this process in MB."""
  with open('/proc/self/status') as f:
    fields = dict(line.split(':', 1) for line in f)
  return tuple(int(fields[k].split()[0]) / 1024 for k in ('VmRSS', 'VmHWM'))


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--ssd', default='digits_search')
  parser.add_argument('--num', type=int, default=200)
  parser.add_argument('--precision', default='int8',
                      help='float32, or int8 (full-integer models).')
  parser.add_argument('--image_size', type=int, default=None)
  parser.add_argument('--every', type=int, default=20)
  parser.add_argument('--nocollect', action='store_true')
  args = parser.parse_args(argv)
  try:
    shape = macs.resolve_input(args.ssd, args.image_size)
    device = device_lib.make_device(
        args.ssd, shape, _QUICK, inference.builder(args.ssd, shape),
        model_cache=tempfile.mkdtemp(prefix='bench_conversions_'),
        precision=args.precision)
    architectures = sample.sample_indices(args.ssd, args.num, seed=0)
  except ValueError as e:
    sys.exit(f'conversions: {e}')
  start, at = time.time(), {}
  print(f'{args.ssd} at {shape.image_size} px, {args.precision}, '
        f'{args.num} conversions', flush=True)
  with mock.patch.object(gc, 'collect', (lambda: 0) if args.nocollect
                         else gc.collect):
    rows = protocol_lib.measure(device, architectures, _QUICK)
    for n, _ in enumerate(rows, 1):
      if n in (1, _FROM, args.num) or n % args.every == 0:
        at[n] = memory_mb()
        print(f'{n:5d} rows: RSS {at[n][0]:7.0f} MB, peak {at[n][1]:7.0f} '
              f'MB, {time.time() - start:6.0f} s', flush=True)
  first, last = at[min(_FROM, args.num)], at[args.num]
  _harness.finish(
      'conversions',
      f'rss_mb_20={first[0]:.0f} rss_mb_last={last[0]:.0f} '
      f'peak_mb_20={first[1]:.0f} peak_mb_last={last[1]:.0f} '
      f'growth={last[1] / first[1] - 1:.3f} '
      f'seconds={time.time() - start:.0f}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
