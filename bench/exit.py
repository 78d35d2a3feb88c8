"""Seconds of the binaries, with and without the interpreter's teardown.

Usage:
  python bench/exit.py [--repeats 5]

Every binary ends through `tunas_tf.flags.run`, which, once `main` is done,
runs the exit handlers and calls `os._exit` (`process.exit_now`) instead of
letting Python take the interpreter and TensorFlow apart. This times, as
fresh processes from `python -m` to exit, the commands the test suite and a
researcher run most (the short digits search of `tests/testing/searches.py`,
then `extract_architecture` and `report` on it), each `--repeats` times in
the order fast, teardown, fast, teardown, ... ("teardown" runs the same
binary with `process.exit_now` replaced by `sys.exit`), in wall and CPU
seconds (user + system of all threads: less moved by other jobs). It checks
that both kinds of run wrote the same files (names and sizes; for the events
files, whose names hold a time and a pid, the number of scalars they hold;
for `checkpoint`, its latest checkpoint). Per command it prints the medians
of each kind and the median of the paired differences (teardown - fast, the
runs of one round side by side); the last line is `search_s=<f>
search_cpu_s=<f> search_saved_s=<f> search_saved_cpu_s=<f> saved_s=<f>
saved_cpu_s=<f> saved_cpu_share=<f>` (saved: the paired medians summed over
the three commands; the share: of the three commands' CPU seconds).
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

import tensorflow as tf

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)

# pylint: disable=g-import-not-at-top,wrong-import-position
import _harness
from tests.testing import searches  # The suite's short search.
from tunas_tf.search import report

# Runs module argv[1] as __main__ with `process.exit_now` replaced by sys.exit.
_TEARDOWN = ('import runpy, sys; from tunas_tf import process; '
             'process.exit_now = sys.exit; m = sys.argv.pop(1); '
             'sys.argv[0] = m; runpy.run_module(m, run_name="__main__", '
             'alter_sys=True)')
_COMMANDS = ('search', 'extract_architecture', 'report')


def _command(module: str, args, teardown: bool):
  if teardown:
    return [sys.executable, '-c', _TEARDOWN, module, *args]
  return [sys.executable, '-m', module, *args]


def _timed(command):
  """(wall, CPU) seconds of `command` (CPU: user + system, all threads)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', PYTHONPATH=_REPO)
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  start = time.perf_counter()
  done = subprocess.run(command, capture_output=True, text=True, env=env,
                        cwd=_REPO, check=False)
  seconds = time.perf_counter() - start
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  if done.returncode:
    sys.exit(f'{command[1:4]} failed:\n{done.stderr[-2000:]}')
  return seconds, (after.ru_utime - before.ru_utime +
                   after.ru_stime - before.ru_stime)


def _written(model_dir: str):
  """The files but the events (their names hold a timestamp and a pid) with
  their sizes (the `checkpoint` file's holds timestamps on TF 2.16+: its
  latest checkpoint instead), and the number of (tag, step) scalars in the
  events."""
  files = tuple(
      (name, os.path.basename(tf.train.latest_checkpoint(model_dir))
       if name == 'checkpoint'
       else os.path.getsize(os.path.join(model_dir, name)))
      for name in sorted(os.listdir(model_dir))
      if not name.startswith('events'))
  scalars = sum(len(v) for v in report.read_scalars(model_dir).values())
  return files + (('scalars', scalars),)


def commands(model_dir: str):
  """(name, module, flags) of the short search into `model_dir`, then
  `extract_architecture` and `report` on it."""
  return (('search', 'tunas_tf.train_search',
           [f'--model_dir={model_dir}', *searches.SHORT_SEARCH_FLAGS]),
          ('extract_architecture', 'tunas_tf.tools.extract_architecture',
           [f'--model_dir={model_dir}']),
          ('report', 'tunas_tf.tools.report', [f'--model_dir={model_dir}']))


def _medians(values):
  """The medians of each (command, teardown) and of each command's paired
  differences (teardown - fast)."""
  median = {k: statistics.median(v) for k, v in values.items()}
  paired = {n: statistics.median(t - f for f, t in zip(values[n, False],
                                                        values[n, True]))
            for n in _COMMANDS}
  return median, paired


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--repeats', type=int, default=5)
  args = parser.parse_args()
  times, cpus, written = {}, {}, {}  # (command, teardown) -> [seconds]
  for repeat in range(args.repeats):
    for teardown in (False, True):
      model_dir = os.path.join(tempfile.mkdtemp(), 'search')
      for name, module, flags in commands(model_dir):
        seconds, cpu = _timed(_command(module, flags, teardown))
        times.setdefault((name, teardown), []).append(seconds)
        cpus.setdefault((name, teardown), []).append(cpu)
        print(f'round {repeat} {"teardown" if teardown else "fast":8s} '
              f'{name:22s} {seconds:6.2f} s  CPU {cpu:6.2f} s', flush=True)
      written.setdefault(teardown, set()).add(_written(model_dir))
  if len(written[False] | written[True]) != 1:
    sys.exit(f'the two kinds of run wrote different files: {written}')
  (median, paired), (cpu, cpu_paired) = _medians(times), _medians(cpus)
  print(f'{"command":22s} {"fast":>7s} {"teardown":>9s} {"paired":>7s}'
        f'  {"CPU: fast":>9s} {"teardown":>9s} {"paired":>7s}  (medians, s)')
  for name in _COMMANDS:
    print(f'{name:22s} {median[name, False]:7.2f} {median[name, True]:9.2f} '
          f'{paired[name]:7.2f}  {cpu[name, False]:9.2f} '
          f'{cpu[name, True]:9.2f} {cpu_paired[name]:7.2f}')
  saved_cpu = sum(cpu_paired.values())
  _harness.finish('exit',
                  f'search_s={median["search", False]:.2f} '
                  f'search_cpu_s={cpu["search", False]:.2f} '
                  f'search_saved_s={paired["search"]:.2f} '
                  f'search_saved_cpu_s={cpu_paired["search"]:.2f} '
                  f'saved_s={sum(paired.values()):.2f} '
                  f'saved_cpu_s={saved_cpu:.2f} saved_cpu_share='
                  f'{saved_cpu / sum(cpu[n, True] for n in _COMMANDS):.3f}')


if __name__ == '__main__':
  main()
