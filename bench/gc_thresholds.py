"""Wall seconds of the binaries, with raised and default GC thresholds.

Usage:
  python bench/gc_thresholds.py [--repeats 5]

Every binary runs `main` through `tunas_tf.flags.run`, which first raises
Python's cyclic-GC thresholds (`gc_thresholds.tune_gc`, `gc_thresholds.GC_THRESHOLDS`). This
times, as fresh processes from `python -m` to exit, the commands the test
suite and a researcher run most (the short digits search of
`tests/testing/searches.py`, then `extract_architecture` and `report` on
it), each `--repeats` times in the order raised, default, raised, default,
... ("default" runs the same binary with `gc_thresholds.tune_gc` replaced by a
no-op: Python's (700, 10, 10)). It checks that both kinds of run wrote the
same files (as `bench/exit.py`). Per command it prints the median seconds of
each kind and the median of the paired differences (default - raised, the
runs of one round side by side, which the machine's drift over the rounds
touches less); the same in CPU seconds (user + system, all threads: less
moved by other jobs). The last line is `search_s=<f> search_default_gc_s=<f>
search_saved_s=<f> search_saved_cpu_s=<f> saved_s=<f> saved_cpu_s=<f>`
(saved: the paired differences' medians summed over the three commands).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

# pylint: disable=g-import-not-at-top,wrong-import-position
import _harness
import exit as exit_bench  # bench/exit.py: its commands, _written, _REPO.

# Runs module argv[1] as __main__ with `gc_thresholds.tune_gc` a no-op.
_DEFAULT_GC = ('import runpy, sys; from tunas_tf import gc_thresholds; '
               'gc_thresholds.tune_gc = lambda: None; m = sys.argv.pop(1); '
               'sys.argv[0] = m; runpy.run_module(m, run_name="__main__", '
               'alter_sys=True)')

_COMMANDS = ('search', 'extract_architecture', 'report')


def _command(module: str, args, default_gc: bool):
  if default_gc:
    return [sys.executable, '-c', _DEFAULT_GC, module, *args]
  return [sys.executable, '-m', module, *args]


def _timed(command):
  """(wall, CPU) seconds of `command` (CPU: user + system, all threads)."""
  repo = exit_bench._REPO  # pylint: disable=protected-access
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', PYTHONPATH=repo)
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  start = time.perf_counter()
  done = subprocess.run(command, capture_output=True, text=True, env=env,
                        cwd=repo, check=False)
  seconds = time.perf_counter() - start
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  if done.returncode:
    sys.exit(f'{command[1:4]} failed:\n{done.stderr[-2000:]}')
  return seconds, (after.ru_utime - before.ru_utime +
                   after.ru_stime - before.ru_stime)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--repeats', type=int, default=5)
  args = parser.parse_args()
  times = {}  # (command, default_gc) -> [seconds]
  cpus = {}  # (command, default_gc) -> [CPU seconds]
  written = {}
  for repeat in range(args.repeats):
    for default_gc in (False, True):
      model_dir = os.path.join(tempfile.mkdtemp(), 'search')
      for name, module, flags in exit_bench.commands(model_dir):
        seconds, cpu = _timed(_command(module, flags, default_gc))
        times.setdefault((name, default_gc), []).append(seconds)
        cpus.setdefault((name, default_gc), []).append(cpu)
        print(f'round {repeat} {"default" if default_gc else "raised":8s} '
              f'{name:22s} {seconds:6.2f} s  CPU {cpu:6.2f} s', flush=True)
      written.setdefault(default_gc, set()).add(
          exit_bench._written(model_dir))  # pylint: disable=protected-access
  if len(written[False] | written[True]) != 1:
    sys.exit(f'the two kinds of run wrote different files: {written}')
  def medians(values):
    median = {k: statistics.median(v) for k, v in values.items()}
    paired = {n: statistics.median(d - r for r, d in zip(values[n, False],
                                                          values[n, True]))
              for n in _COMMANDS}
    return median, paired

  print(f'{"command":22s} {"raised":>7s} {"default":>8s} {"paired":>7s}'
        f'  {"CPU: raised":>11s} {"default":>8s} {"paired":>7s}  (medians, s)')
  (median, paired), (cpu, cpu_paired) = medians(times), medians(cpus)
  for name in _COMMANDS:
    print(f'{name:22s} {median[name, False]:7.2f} {median[name, True]:8.2f} '
          f'{paired[name]:7.2f}  {cpu[name, False]:11.2f} '
          f'{cpu[name, True]:8.2f} {cpu_paired[name]:7.2f}')
  _harness.finish('gc_thresholds',
                  f'search_s={median["search", False]:.2f} '
                  f'search_default_gc_s={median["search", True]:.2f} '
                  f'search_saved_s={paired["search"]:.2f} '
                  f'search_saved_cpu_s={cpu_paired["search"]:.2f} '
                  f'saved_s={sum(paired.values()):.2f} '
                  f'saved_cpu_s={sum(cpu_paired.values()):.2f}')

if __name__ == '__main__':
  main()
