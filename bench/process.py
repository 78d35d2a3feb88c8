"""Seconds of the binaries with and without one of their process tweaks.

Usage:
  python bench/process.py --tweak exit|gc [--repeats 5]

The tweaks (`tunas_tf/cli/process.py`): `exit`, the end by `os._exit` once
`main` is done (`process.exit_now`) instead of Python's teardown of the
interpreter and TensorFlow; `gc`, the garbage collector's thresholds raised
before TensorFlow's import (`process.GC_THRESHOLDS`). This times, as fresh
processes, the commands the test suite and a researcher run most (the short
digits search of `tests/testing/searches.py`, then `extract_architecture`
and `report` on it), each `--repeats` times in the order on, off, on, off,
... Both kinds start as `python -m` does (`_RUN`); "off" runs the same
binary with `exit_now` replaced by `sys.exit` or the thresholds left at
Python's. Per run: wall and CPU seconds (user + system of all threads: less
moved by other jobs) and the CPU seconds of the collector's own passes
(`gc.callbacks`). It checks that both kinds wrote the same files (names and
sizes; for the events files, whose names hold a time and a pid, the number
of scalars they hold; for `checkpoint`, its latest checkpoint). Per command
it prints the medians of each kind and of the paired differences (off - on,
the runs of one round side by side); the last line is `search_s=<f>
search_cpu_s=<f> search_saved_s=<f> search_saved_cpu_s=<f> saved_s=<f>
saved_cpu_s=<f> saved_cpu_share=<f> gc_cpu_s=<f> gc_off_cpu_s=<f>` (saved:
the paired medians summed over the three commands; the share: of the three
commands' CPU seconds without the tweak; gc: the collector's seconds summed
over them).
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

# Runs module argv[3] as __main__ as `python -m` does, the tweak argv[1] off unless it is 'on', and
# writes the collector's CPU seconds to file argv[2] at exit.
_RUN = '''
import atexit, gc, runpy, sys, time
tweak, out, module = sys.argv[1:4]
del sys.argv[1:4]
spent, start = [0.0], [0.0]
def timer(phase, info):
  if phase == 'start':
    start[0] = time.thread_time()
  else:
    spent[0] += time.thread_time() - start[0]
gc.callbacks.append(timer)
atexit.register(lambda: open(out, 'w').write(str(spent[0])))
if tweak == 'gc':
  gc.set_threshold = lambda *thresholds: None
from tunas_tf.cli import process
if tweak == 'exit':
  process.exit_now = sys.exit
sys.argv[0] = module
runpy.run_module(module, run_name='__main__', alter_sys=True)
'''
_COMMANDS = ('search', 'extract_architecture', 'report')


def _timed(tweak: str, module: str, args):
  """(wall, CPU, the collector's CPU) seconds of one binary's run."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', PYTHONPATH=_REPO)
  out = os.path.join(tempfile.mkdtemp(), 'gc_s')
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  start = time.perf_counter()
  done = subprocess.run([sys.executable, '-c', _RUN, tweak, out, module,
                         *args], capture_output=True, text=True, env=env,
                        cwd=_REPO, check=False)
  seconds = time.perf_counter() - start
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  if done.returncode:
    sys.exit(f'{module} failed:\n{done.stderr[-2000:]}')
  with open(out) as f:
    gc_s = float(f.read())
  return seconds, (after.ru_utime - before.ru_utime +
                   after.ru_stime - before.ru_stime), gc_s


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
  """The medians of each (command, off) and of each command's paired
  differences (off - on)."""
  median = {k: statistics.median(v) for k, v in values.items()}
  paired = {n: statistics.median(b - a for a, b in zip(values[n, False],
                                                        values[n, True]))
            for n in _COMMANDS}
  return median, paired


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--tweak', choices=('exit', 'gc'), required=True)
  parser.add_argument('--repeats', type=int, default=5)
  args = parser.parse_args()
  times, cpus, gcs, written = {}, {}, {}, {}  # (command, off) -> [seconds]
  for repeat in range(args.repeats):
    for off in (False, True):
      model_dir = os.path.join(tempfile.mkdtemp(), 'search')
      for name, module, flags in commands(model_dir):
        seconds, cpu, gc_s = _timed(args.tweak if off else 'on', module,
                                    flags)
        for values, value in ((times, seconds), (cpus, cpu), (gcs, gc_s)):
          values.setdefault((name, off), []).append(value)
        print(f'round {repeat} {"off" if off else "on":3s} {name:22s} '
              f'{seconds:6.2f} s  CPU {cpu:6.2f} s  GC {gc_s:5.2f} s',
              flush=True)
      written.setdefault(off, set()).add(_written(model_dir))
  if len(written[False] | written[True]) != 1:
    sys.exit(f'the two kinds of run wrote different files: {written}')
  (median, paired), (cpu, cpu_paired) = _medians(times), _medians(cpus)
  gc_median = _medians(gcs)[0]
  print(f'{"command":22s} {"on":>7s} {"off":>7s} {"paired":>7s}  '
        f'{"CPU: on":>8s} {"off":>7s} {"paired":>7s}  {"GC: on":>7s} '
        f'{"off":>6s}  (medians, s)')
  for name in _COMMANDS:
    print(f'{name:22s} {median[name, False]:7.2f} {median[name, True]:7.2f} '
          f'{paired[name]:7.2f}  {cpu[name, False]:8.2f} '
          f'{cpu[name, True]:7.2f} {cpu_paired[name]:7.2f}  '
          f'{gc_median[name, False]:7.2f} {gc_median[name, True]:6.2f}')
  saved_cpu = sum(cpu_paired.values())
  _harness.finish(
      'process',
      f'search_s={median["search", False]:.2f} '
      f'search_cpu_s={cpu["search", False]:.2f} '
      f'search_saved_s={paired["search"]:.2f} '
      f'search_saved_cpu_s={cpu_paired["search"]:.2f} '
      f'saved_s={sum(paired.values()):.2f} saved_cpu_s={saved_cpu:.2f} '
      f'saved_cpu_share={saved_cpu / sum(cpu[n, True] for n in _COMMANDS):.3f} '
      f'gc_cpu_s={sum(gc_median[n, False] for n in _COMMANDS):.2f} '
      f'gc_off_cpu_s={sum(gc_median[n, True] for n in _COMMANDS):.2f}')


if __name__ == '__main__':
  main()
