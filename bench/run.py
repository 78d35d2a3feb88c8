"""Runs a benchmark by name; without one, lists them.

Usage:
  python bench/run.py                         # the benchmarks and what they measure
  python bench/run.py NAME [ARGS...]          # bench/<script> ARGS...
  python bench/run.py --smallest NAME         # its smallest run (does it run?)

Each benchmark is a script of its own (`python bench/startup.py` is the same
run as `python bench/run.py startup`): it prints its figures from one run,
the last line `name=value` pairs, and appends a JSON row (figures, commit,
machine, date) to `bench/results.jsonl` (`_harness.finish`). `--smallest`
runs it at its smallest sizes (`SMALLEST`): figures that mean nothing, a
check that the script still runs end to end. bench/README.md has the
current figures; bench/DECISIONS.md what they decided.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Dict, NamedTuple, Optional, Sequence

_BENCH = os.path.dirname(os.path.abspath(__file__))
# Where --smallest's search_vs_random run goes and supernet_ranking reads
# (runs/ is not committed).
_SMALLEST_RUN = os.path.join('runs', 'bench_smallest', 'search_vs_random')


class Benchmark(NamedTuple):
  script: str  # in bench/
  what: str
  # Arguments of the smallest run; None: none defined.
  smallest: Optional[Sequence[str]]
  # A figure of merit (bench/README.md's table) or a diagnostic that
  # explains one or re-measures a decision.
  merit: bool = True


_SMALL_SEARCH = ('--batch', '8')
BENCHMARKS: Dict[str, Benchmark] = {
    'startup': Benchmark(
        'startup.py', 'process start -> first step: search against the '
        'widest train_eval', ('--skip_proxylessnas',)),
    'search_step': Benchmark(
        'search_step.py', 'search step against the standalone work of the '
        'same architectures, sampled and masked',
        ('--modes', 'sampled', '--warmup', '1', '--steps', '2',
         '--repeats', '1', *_SMALL_SEARCH)),
    'memory': Benchmark(
        'memory.py', 'peak RSS: 30-step search against the widest '
        'train_eval', ('--steps', '2', *_SMALL_SEARCH)),
    'engines': Benchmark(
        'engines.py', 'start-up, step and peak RSS of the search on the '
        'Estimator and distribute engines',
        ('--replicas', '1', '--repeats', '1', '--loop', '2',
         '--warmup_loops', '0', '--loops', '1', *_SMALL_SEARCH)),
    'input_pipeline': Benchmark(
        'input_pipeline.py', 'ImageNet preprocessing, images per CPU-second '
        'of one core: train, eval, bare decode',
        ('--num_images', '8', '--repeats', '1')),
    'search_vs_random': Benchmark(
        'search_vs_random.py', 'the searched architecture against random '
        'ones of equal cost (Fashion-MNIST)',
        ('--dataset=digits', '--num_random=2', f'--output_dir={_SMALLEST_RUN}',
         '--search_flags=--max_steps=20', '--train_flags=--epochs=1')),
    'supernet_ranking': Benchmark(
        'supernet_ranking.py', "Spearman's rho of one-shot against "
        'standalone top-1 over a search_vs_random run', (_SMALLEST_RUN,)),
    'latency_fit': Benchmark(
        'latency_fit.py', 'the latency cost model fitted to measured '
        'architectures: two passes\' noise, held-out error, minutes',
        ('--ssd=digits_search', '--num=30', '--repeats=2')),
    'conversions': Benchmark(
        'conversions.py', 'peak RSS over a 200-conversion measuring pass, '
        'its growth from the 20th row', ('--num', '2')),
    'search_semantics': Benchmark(
        'search_semantics.py', 'what the op warm-up and the 4x validation '
        'batch add to the start and the peak memory',
        ('--steps', '2', '--repeats', '1', *_SMALL_SEARCH), merit=False),
    'search_step_ops': Benchmark(
        'search_step_ops.py', "a sampled search step's op time by op type or "
        'name scope', ('--warmup', '1', '--steps', '2', *_SMALL_SEARCH),
        merit=False),
    'allocator': Benchmark(
        'allocator.py', 'search and train_eval under glibc malloc, jemalloc, '
        'tcmalloc', ('--steps', '2', '--repeats', '1', *_SMALL_SEARCH),
        merit=False),
    'process': Benchmark(
        'process.py', "the binaries with and without one of their process "
        'tweaks (--tweak exit: os._exit after main; gc: raised GC '
        'thresholds)', ('--tweak', 'exit', '--repeats', '1'), merit=False),
}


def listing() -> str:
  """The benchmarks, one a line: name, kind, script (or missing), what."""
  lines = []
  for name, b in BENCHMARKS.items():
    present = os.path.exists(os.path.join(_BENCH, b.script))
    lines.append(f'{name:17s} {"merit" if b.merit else "probe":5s} '
                 f'{b.script if present else "(not written yet)":20s} '
                 f'{b.what}')
  return '\n'.join(lines)


def command(name: str, args: Sequence[str], smallest: bool = False):
  """The command line of benchmark `name`.

  Raises:
    ValueError: for an unknown name, a script not there, or `smallest`
      where the benchmark defines no smallest run.
  """
  if name not in BENCHMARKS:
    raise ValueError(f'unknown benchmark {name!r} (known: '
                     f'{", ".join(BENCHMARKS)})')
  benchmark = BENCHMARKS[name]
  script = os.path.join(_BENCH, benchmark.script)
  if not os.path.exists(script):
    raise ValueError(f'{name}: bench/{benchmark.script} is not written yet')
  if smallest:
    if benchmark.smallest is None:
      raise ValueError(f'{name}: no smallest run defined')
    args = list(benchmark.smallest) + list(args)
  return [sys.executable, script, *args]


def main(argv: Sequence[str]) -> int:
  smallest = bool(argv) and argv[0] == '--smallest'
  argv = argv[1:] if smallest else argv
  if not argv or argv[0] in ('-h', '--help', '--list'):
    print(__doc__.strip() + '\n\n' + listing())
    return 0
  try:
    line = command(argv[0], argv[1:], smallest)
  except ValueError as e:
    sys.exit(f'bench/run.py: {e}')
  return subprocess.run(line, check=False).returncode


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
