"""Peak memory of a 30-step search against train_eval of the widest network.

Usage:
  python bench/memory.py [--ssd cifar_search] [--image_size 32]
      [--batch 64] [--steps 30]

Two fresh processes (`bench/_child.py`) on `bench_images` (offline noise,
`_harness.bench_data_dir`) resized to `--image_size`, CPU only: a search (`train_search`, sampled mode) and
`train_eval` of the space's largest architecture (`schema.extreme_indices`),
both with the same train batch, each stopped after `--steps` steps. Prints
each one's peak resident set size (`getrusage` maxrss) and the graph's op
count; the last line is `memory_ratio=<f>` (search / train_eval).
"""

from __future__ import annotations

import argparse

import _harness


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  _harness.memory_arguments(parser)
  args = parser.parse_args()
  runs = _harness.memory_runs(args.ssd, args.image_size, args.batch)
  peak = {}
  for kind, flags in runs.items():
    record = _harness.run_child(kind, flags, args.steps, 3600)
    peak[kind] = record['max_rss_mb']
    print(f'{kind:10s} peak RSS {peak[kind]:8.0f} MB   graph ops '
          f'{record["graph_ops"]:6d}', flush=True)
  _harness.finish('memory',
                  f'memory_ratio={peak["search"] / peak["train_eval"]:.2f}')


if __name__ == '__main__':
  main()
