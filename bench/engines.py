"""Start-up, step time and peak memory of the search on both engines.

Usage:
  python bench/engines.py [--replicas 1,2] [--repeats 2] [--loop 10]
      [--warmup_loops 1] [--loops 3] [--engines estimator,distribute]
      [--ssd cifar_search] [--image_size 32] [--batch 64] [--timeout 900]

Each run is a fresh process (`bench/_child.py`) of `train_search` on
`bench_images` (offline noise, `_harness.bench_data_dir`) resized to
`--image_size`, CPU only, sampled supernet mode, op and filter warm-ups off
(every step samples one architecture), `--tpu_iterations_per_loop=--loop`
(the search's default, 10: the distribute engine's steps per `tf.function`
call and both engines' summary cadence), with `--engine=estimator`
(TPUEstimator's model_fn; with `--replicas=N` > 1 an Estimator over a
`MirroredStrategy`) or `--engine=distribute` (`runtime.distribute`'s loop,
N > 1 under a `MirroredStrategy` too), for each replica count. The runs
alternate between the engines (estimator, distribute, estimator, ...) for
each replica count in each of `--repeats` rounds, so that a change in the
machine's load falls on both alike; the figures are medians over the
rounds.

* start-up: seconds from process start to the end of the first step, as in
  `bench/startup.py` (the distribute engine's first call is traced, then run
  as one step and the rest of its loop; see `_child.py`);
* step: wall seconds per step over a loop of `--loop` steps (from the end
  of one loop's last step to the end of the next's: the host's work between
  loops included, e.g. the summaries written every `--loop` steps), the
  median of `--loops` loops after the first (which traces) and
  `--warmup_loops` more;
* peak RSS: `getrusage` maxrss at the end of the run;
* the same start-up and step in CPU seconds of the process (user + system,
  all threads; `getrusage`): less sensitive than wall seconds to other jobs
  on the machine, though not immune (cache and memory contention).

`--engines` may add variants of the search's Grappler settings (Grappler
is TF's graph optimiser; `_child.py`'s options): `estimator-grappler` and
`distribute-grappler`, all of it, as before the search went without;
`distribute-fourpassesoff` without constant folding, layout, arithmetic and
remapper only (the options `tf.config.optimizer` names),
`distribute-threeoff` without tfg, the memory optimiser and the second
round only (those it does not name); `distribute-nograppler` without any.
Prints one line per run and the machine's load average before and after;
the last line is `startup_s_<engine>_r<N>=<f> step_s_<engine>_r<N>=<f>
rss_mb_<engine>_r<N>=<f> startup_cpu_s_<engine>_r<N>=<f>
step_cpu_s_<engine>_r<N>=<f>` for each engine and replica count, then
`startup_ratio_r<N>`, `step_ratio_r<N>`, `rss_ratio_r<N>`,
`startup_cpu_ratio_r<N>` and `step_cpu_ratio_r<N>` (distribute /
estimator).
"""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Dict, List, Optional

import _harness

_OPTIONS = {'estimator': ['--noarchitectures'],
            'estimator-grappler': ['--noarchitectures', '--grappler'],
            'distribute': [], 'distribute-grappler': ['--grappler'],
            'distribute-fourpassesoff': [
                '--grappler_off=constant_folding,layout_optimizer,'
                'arithmetic_optimization,remapping'],
            'distribute-threeoff': [
                '--grappler_off=tfg_optimizer,memory_optimization,'
                'second_iteration'],
            'distribute-nograppler': ['--nograppler']}


def search_flags(args, engine: str, replicas: int) -> List[str]:
  """The search's flags for one run."""
  return [f'--ssd={args.ssd}', f'--train_batch_size={args.batch}',
          '--supernet_mode=sampled', '--max_steps=100000'
         ] + _harness.NO_WARMUP + [
          '--log_every_steps=100000', '--save_checkpoints_steps=100000',
          f'--tpu_iterations_per_loop={args.loop}',
          f'--engine={engine.split("-")[0]}', f'--replicas={replicas}'
         ] + _harness.data_flags(args.image_size)


def step_ends(record: dict, cpu: bool = False) -> Dict[int, float]:
  """When each known step count ended: seconds since process start, or
  (`cpu`) the process's CPU seconds then."""
  if 'step_end_s' in record:  # Estimator: every step.
    times = record['step_end_cpu_s' if cpu else 'step_end_s']
    return {i + 1: t for i, t in enumerate(times)}
  ends, steps = {}, 0  # Distribute: every loop.
  times = record['loop_end_cpu_s' if cpu else 'loop_end_s']
  for count, t in zip(record['loop_steps'], times):
    steps += count
    ends[steps] = t
  return ends


def step_seconds(record: dict, loop: int, warmup_loops: int, loops: int,
                 cpu: bool = False) -> float:
  """Median (wall or CPU) seconds per step over the loops after the
  warm-up."""
  ends = step_ends(record, cpu)
  first = 1 + warmup_loops
  return statistics.median(
      (ends[(j + 1) * loop] - ends[j * loop]) / loop
      for j in range(first, first + loops))


_FIGURES = ('startup_s', 'step_s', 'rss_mb', 'startup_cpu_s', 'step_cpu_s')


def run(args, engine: str, replicas: int) -> Optional[dict]:
  """One run's figures, or None when it ran past `--timeout`."""
  steps = args.loop * (1 + args.warmup_loops + args.loops)
  record = _harness.run_child('search', search_flags(args, engine, replicas),
                              steps, args.timeout, options=_OPTIONS[engine])
  if record is None:
    return None
  timing = (args.loop, args.warmup_loops, args.loops)
  return {'startup_s': record['first_step_s'],
          'built_s': record['graph_built_s'],
          'step_s': step_seconds(record, *timing),
          'rss_mb': record['max_rss_mb'],
          'startup_cpu_s': record['first_step_cpu_s'],
          'step_cpu_s': step_seconds(record, *timing, cpu=True)}


def load() -> str:
  """The load averages over 1, 5 and 15 minutes."""
  return ' '.join(f'{v:.2f}' for v in os.getloadavg())


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--ssd', default='cifar_search')
  parser.add_argument('--image_size', type=int, default=32)
  parser.add_argument('--batch', type=int, default=64)
  parser.add_argument('--replicas', default='1,2')
  parser.add_argument('--engines', default='estimator,distribute')
  parser.add_argument('--repeats', type=int, default=2)
  parser.add_argument('--loop', type=int, default=10)
  parser.add_argument('--warmup_loops', type=int, default=1)
  parser.add_argument('--loops', type=int, default=3)
  parser.add_argument('--timeout', type=float, default=900.0)
  args = parser.parse_args()
  engines = args.engines.split(',')
  replica_counts = [int(r) for r in args.replicas.split(',')]
  print(f'load average (1, 5, 15 min) at the start: {load()}')
  print(f'{"engine":22s} {"r":>2s} {"round":>5s} {"built":>7s} '
        f'{"1st step":>9s} {"s/step":>7s} {"RSS MB":>7s} '
        f'{"CPU 1st":>8s} {"CPU/step":>8s}', flush=True)
  figures = {}
  for round_ in range(args.repeats):
    for replicas in replica_counts:
      for engine in engines:
        result = run(args, engine, replicas)
        key = (engine, replicas)
        if result is None:
          print(f'{engine:22s} {replicas:2d} {round_:5d} past '
                f'{args.timeout:.0f} s', flush=True)
          result = dict.fromkeys(_FIGURES, float('inf'))
        else:
          print(f'{engine:22s} {replicas:2d} {round_:5d} '
                f'{result["built_s"]:7.1f} {result["startup_s"]:9.1f} '
                f'{result["step_s"]:7.3f} {result["rss_mb"]:7.0f} '
                f'{result["startup_cpu_s"]:8.1f} '
                f'{result["step_cpu_s"]:8.3f}', flush=True)
        figures.setdefault(key, []).append(result)
  print(f'load average (1, 5, 15 min) at the end: {load()}')
  median = {key: {name: statistics.median(r[name] for r in results)
                  for name in _FIGURES}
            for key, results in figures.items()}
  pairs = []
  for replicas in replica_counts:
    for engine in engines:
      m = median[(engine, replicas)]
      name = f'{engine.replace("-", "_")}_r{replicas}'
      pairs += [f'startup_s_{name}={m["startup_s"]:.1f}',
                f'step_s_{name}={m["step_s"]:.3f}',
                f'rss_mb_{name}={m["rss_mb"]:.0f}',
                f'startup_cpu_s_{name}={m["startup_cpu_s"]:.1f}',
                f'step_cpu_s_{name}={m["step_cpu_s"]:.3f}']
  if {'estimator', 'distribute'} <= set(engines):
    for replicas in replica_counts:
      est, dist = (median[('estimator', replicas)],
                   median[('distribute', replicas)])
      pairs += [f'{name}_ratio_r{replicas}={dist[key] / est[key]:.2f}'
                for name, key in (('startup', 'startup_s'),
                                  ('step', 'step_s'), ('rss', 'rss_mb'),
                                  ('startup_cpu', 'startup_cpu_s'),
                                  ('step_cpu', 'step_cpu_s'))]
  _harness.finish('engines', ' '.join(pairs))


if __name__ == '__main__':
  main()
