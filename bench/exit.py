"""Wall seconds of the binaries, with and without the interpreter's teardown.

Usage:
  python bench/exit.py [--repeats 3]

Every binary ends through `tunas_tf.flags.run`, which, once `main` is done,
runs the exit handlers and calls `os._exit` (`fast_exit.exit_now`) instead of
letting Python take the interpreter and TensorFlow apart. This times, as
fresh processes from `python -m` to exit, the commands the test suite and a
researcher run most (the short digits search of `tests/testing/searches.py`,
then `extract_architecture` and `report` on it), each `--repeats` times in
the order fast, teardown, fast, teardown, ... ("teardown" runs the same
binary with `fast_exit.exit_now` replaced by `sys.exit`). It checks that both
kinds of run wrote the same files (names and sizes; for the events files,
whose names hold a time and a pid, the number of scalars they hold; for
`checkpoint`, its latest checkpoint). Per command it prints
the median seconds of each kind; the last line is
`search_s=<f> search_teardown_s=<f> tools_s=<f> tools_teardown_s=<f>
saved_s=<f>` (tools: extract_architecture + report; saved: the medians'
difference over the three commands).
"""

from __future__ import annotations

import argparse
import os
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

# Runs module argv[1] as __main__ with `fast_exit.exit_now` replaced by sys.exit.
_TEARDOWN = ('import runpy, sys; from tunas_tf import fast_exit; '
             'fast_exit.exit_now = sys.exit; m = sys.argv.pop(1); '
             'sys.argv[0] = m; runpy.run_module(m, run_name="__main__", '
             'alter_sys=True)')


def _command(module: str, args, teardown: bool):
  if teardown:
    return [sys.executable, '-c', _TEARDOWN, module, *args]
  return [sys.executable, '-m', module, *args]


def _timed(command) -> float:
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', PYTHONPATH=_REPO)
  start = time.perf_counter()
  done = subprocess.run(command, capture_output=True, text=True, env=env,
                        cwd=_REPO, check=False)
  seconds = time.perf_counter() - start
  if done.returncode:
    sys.exit(f'{command[1:4]} failed:\n{done.stderr[-2000:]}')
  return seconds


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


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--repeats', type=int, default=3)
  args = parser.parse_args()
  times = {}  # (command, teardown) -> [seconds]
  written = {}
  for repeat in range(args.repeats):
    for teardown in (False, True):
      model_dir = os.path.join(tempfile.mkdtemp(), 'search')
      for name, module, flags in commands(model_dir):
        seconds = _timed(_command(module, flags, teardown))
        times.setdefault((name, teardown), []).append(seconds)
        print(f'round {repeat} {"teardown" if teardown else "fast":8s} '
              f'{name:22s} {seconds:6.2f} s', flush=True)
      written.setdefault(teardown, set()).add(_written(model_dir))
  if len(written[False] | written[True]) != 1:
    sys.exit(f'the two kinds of run wrote different files: {written}')
  median = {k: statistics.median(v) for k, v in times.items()}
  print(f'{"command":22s} {"fast":>7s} {"teardown":>9s}  (median s)')
  for name in ('search', 'extract_architecture', 'report'):
    print(f'{name:22s} {median[name, False]:7.2f} {median[name, True]:9.2f}')
  tools = [sum(median[n, t] for n in ('extract_architecture', 'report'))
           for t in (False, True)]
  saved = sum(median[n, True] - median[n, False]
              for n in ('search', 'extract_architecture', 'report'))
  _harness.finish('exit',
                  f'search_s={median["search", False]:.2f} '
                  f'search_teardown_s={median["search", True]:.2f} '
                  f'tools_s={tools[0]:.2f} '
                  f'tools_teardown_s={tools[1]:.2f} saved_s={saved:.2f}')


if __name__ == '__main__':
  main()
