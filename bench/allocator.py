"""The search and train_eval under glibc's malloc, jemalloc and tcmalloc.

Usage:
  python bench/allocator.py [--ssd cifar_search] [--image_size 32]
      [--batch 64] [--steps 80] [--repeats 2]

TF's CPU kernels allocate their tensors with the process's `malloc`. The
search samples another architecture every step, so its tensors change size
from step to step, and glibc's allocator keeps what it freed. This runs the
search (sampled mode, op and filter warm-ups off, as after the warm-up) and
`train_eval` of the widest architecture (`memory.py`'s runs otherwise) as
fresh processes (`bench/_child.py`, the Estimator engine, CPU only) under
each allocator found on the machine (`LD_PRELOAD` of Debian's
`libjemalloc2` and `libgoogle-perftools4` libraries; glibc always),
`--repeats` interleaved rounds, each stopped after `--steps` steps. Each
run prints its first step's end (s since process start), the median step
after the first 10 and its peak RSS. The last line holds, per allocator, the medians over the rounds of
the search's figures and the two ratios to train_eval under the same
allocator: `<alloc>_first_s=<f> <alloc>_step_s=<f> <alloc>_rss_mb=<f>
<alloc>_startup_ratio=<f> <alloc>_memory_ratio=<f> ...`.
"""

from __future__ import annotations

import argparse
import os
import statistics

import _harness

_LIBRARIES = {
    'jemalloc': '/usr/lib/x86_64-linux-gnu/libjemalloc.so.2',
    'tcmalloc': '/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4',
}


def allocators() -> dict:
  """{name: extra environment} of the allocators this machine has."""
  found = {'glibc': {}}
  for name, path in _LIBRARIES.items():
    if os.path.exists(path):
      found[name] = {'LD_PRELOAD': path}
  return found


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  _harness.memory_arguments(parser)
  parser.add_argument('--repeats', type=int, default=2)
  parser.set_defaults(steps=80)
  args = parser.parse_args()
  runs = _harness.memory_runs(args.ssd, args.image_size, args.batch)
  # The Estimator's hook times every step (where TF has no Estimator the
  # children say so in one line).
  runs['search'] = runs['search'] + _harness.NO_WARMUP
  runs = {kind: flags + ['--engine=estimator'] for kind, flags in runs.items()}
  figures = {}
  for round_index in range(args.repeats):
    for name, env in allocators().items():
      record = {}
      for kind in ('train_eval', 'search'):
        record[kind] = _harness.run_child(kind, runs[kind], args.steps, 3600,
                                          env=env)
        steps = record[kind]['step_s'][10:] or record[kind]['step_s']
        record[kind]['median_step_s'] = statistics.median(steps)
        print(f'round {round_index} {name:9s} {kind:10s} first step '
              f'{record[kind]["first_step_s"]:5.1f} s  step '
              f'{record[kind]["median_step_s"]:.4f} s  peak RSS '
              f'{record[kind]["max_rss_mb"]:5.0f} MB', flush=True)
      search, base = record['search'], record['train_eval']
      for key, value in (
          ('first_s', search['first_step_s']),
          ('step_s', search['median_step_s']),
          ('rss_mb', search['max_rss_mb']),
          ('startup_ratio', search['first_step_s'] / base['first_step_s']),
          ('memory_ratio', search['max_rss_mb'] / base['max_rss_mb'])):
        figures.setdefault(f'{name}_{key}', []).append(value)
  _harness.finish('allocator',
                  ' '.join(f'{key}={statistics.median(values):.4g}'
                           for key, values in figures.items()) +
                  f' repeats={args.repeats}')


if __name__ == '__main__':
  main()
