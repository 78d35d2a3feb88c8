"""What the search's own semantics add to its start and peak memory.

Usage:
  python bench/search_semantics.py [--ssd cifar_search] [--image_size 32]
      [--batch 64] [--steps 30] [--repeats 2]

`startup.py` and `memory.py` compare the search with `train_eval` of the
space's widest network, which has neither of two things TuNAS's search does
on purpose: the op warm-up (at step 0 every Switch takes the uniform mask, so
every branch of every Switch runs, forward and backward, and the graph holds
that mixture beside the one-hot cases) and the validation forward on
`rl_batch_size_multiplier` (4) times the train batch. This benchmark runs,
as fresh processes (`bench/_child.py`, the Estimator engine, sampled mode,
`bench_images` resized to `--image_size`, CPU only), each stopped after
`--steps` steps:

* `train_eval`: the widest architecture, and
* `search`: the search, both as `memory.py` runs them;
* `search-nowarmup`: op and filter warm-ups off (the mixture is still built,
  never run);
* `search-nowarmup-val1`: also a validation batch of the train batch's size
  (`--rl_batch_size_multiplier=1`).

The runs are interleaved, `--repeats` rounds of the four. Each prints its
first step's end (s since process start) and its peak RSS, and their ratios
to the round's `train_eval`; the last line holds the medians over the rounds,
`startup_ratio_<run>=<f> memory_ratio_<run>=<f> ...` (`<run>`: `search`,
`nowarmup`, `nowarmup_val1`). So the gap between `startup_ratio_search` and
`startup_ratio_nowarmup_val1` is what the two semantics cost, the rest what
the search's implementation adds around the network.
"""

from __future__ import annotations

import argparse
import statistics

import _harness

_RUNS = ('train_eval', 'search', 'search-nowarmup', 'search-nowarmup-val1')


def run_flags(args) -> dict:
  """{run name: (kind, flags)}."""
  runs = _harness.memory_runs(args.ssd, args.image_size, args.batch)
  search = runs['search']
  return {
      'train_eval': ('train_eval', runs['train_eval']),
      'search': ('search', search),
      'search-nowarmup': ('search', search + _harness.NO_WARMUP),
      'search-nowarmup-val1': ('search', search + _harness.NO_WARMUP + [
          '--rl_batch_size_multiplier=1']),
  }


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  _harness.memory_arguments(parser)
  parser.add_argument('--repeats', type=int, default=2)
  args = parser.parse_args()
  flags = run_flags(args)
  ratios = {}
  for round_index in range(args.repeats):
    base = {}
    for name in _RUNS:
      kind, run = flags[name]
      record = _harness.run_child(kind, run, args.steps, 3600)
      first, rss = record['first_step_s'], record['max_rss_mb']
      if name == 'train_eval':
        base = {'first': first, 'rss': rss}
      key = name.replace('search-', '').replace('-', '_')
      startup, memory = first / base['first'], rss / base['rss']
      if name != 'train_eval':
        ratios.setdefault(f'startup_ratio_{key}', []).append(startup)
        ratios.setdefault(f'memory_ratio_{key}', []).append(memory)
      print(f'round {round_index} {name:22s} first step {first:6.1f} s '
            f'({startup:4.2f}x)  peak RSS {rss:6.0f} MB ({memory:4.2f}x)  '
            f'graph ops {record["graph_ops"]:6d}', flush=True)
  _harness.finish('search_semantics',
                  ' '.join(f'{name}={statistics.median(values):.2f}'
                           for name, values in sorted(ratios.items())) +
                  f' repeats={args.repeats}')


if __name__ == '__main__':
  main()
