"""What a short search writes into its events files, and how soon it steps.

Usage:
  python bench/search_events.py [--ssd digits_search] [--steps 30]
      [--root DIR] [--keep]

Runs `--steps` steps of the offline digits search in a fresh process (CPU
only) with the code under `--root` (default: this checkout; pass another
checkout to measure it the same way) and prints:

- seconds from `run_search`'s start to the end of the first step (graph
  build, session creation, the first step), to the end of the run, and of the
  whole process, and the process's CPU seconds (user + system: less
  sensitive than wall time to other jobs on the machine);
- every events file of the model directory with its size and its events by
  kind (graph_def, meta_graph_def, summary, session_log, ...), and whether
  graph.pbtxt or model.ckpt-*.meta files exist.

One run; the machine should have nothing else to do.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Runs in the child: one search; the first step's end is the first
# `ProgressHook.after_run` (the hook is on every CPU search).
_CHILD = '''
import json, sys, time
from absl import flags
from tunas_tf import train_search
from tunas_tf.runtime import hooks
from tunas_tf.search import runner
marks = {}
after_run = hooks.ProgressHook.after_run
def timed_after_run(self, run_context, run_values):
  marks.setdefault('first_step_s', time.time() - start)
  return after_run(self, run_context, run_values)
hooks.ProgressHook.after_run = timed_after_run
values = flags.FlagValues()
train_search.define_flags(values)
values(['train_search'] + sys.argv[1:])
config = train_search.config_from_flags(values)
start = time.time()
runner.run_search(config)
marks['run_search_s'] = time.time() - start
print(json.dumps(marks))
'''


def run_child(root: str, model_dir: str, ssd: str, steps: int) -> dict:
  """Times one search in a fresh process; returns the child's JSON line."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', CUDA_VISIBLE_DEVICES='',
             PYTHONPATH=root)
  start = time.time()
  cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
  done = subprocess.run(
      [sys.executable, '-c', _CHILD, f'--model_dir={model_dir}',
       f'--ssd={ssd}', f'--max_steps={steps}'],
      capture_output=True, text=True, env=env, check=False, cwd=root)
  if done.returncode != 0:
    sys.exit(f'search_events: the search failed: '
             f'{done.stderr.strip().splitlines()[-1:]}')
  result = json.loads(done.stdout.strip().splitlines()[-1])
  result['process_s'] = time.time() - start
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  result['cpu_s'] = (after.ru_utime - cpu.ru_utime +
                     after.ru_stime - cpu.ru_stime)
  return result


def event_kinds(path: str) -> 'collections.OrderedDict[str, list]':
  """{kind: [count, bytes]} of one events file, in order of appearance."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  kinds = collections.OrderedDict()
  for record in tf.data.TFRecordDataset(path):
    event = tf.compat.v1.Event.FromString(record.numpy())
    kind = event.WhichOneof('what')
    entry = kinds.setdefault(kind, [0, 0])
    entry[0] += 1
    entry[1] += len(record.numpy())
  return kinds


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--ssd', default='digits_search')
  parser.add_argument('--steps', type=int, default=30)
  parser.add_argument('--root', default=_ROOT)
  parser.add_argument('--keep', action='store_true',
                      help='keep (and print) the model directory')
  args = parser.parse_args()
  model_dir = tempfile.mkdtemp()
  try:
    result = run_child(os.path.abspath(args.root), model_dir, args.ssd,
                       args.steps)
    print(f'start to first step {result["first_step_s"]:.1f} s, '
          f'run_search {result["run_search_s"]:.1f} s, '
          f'process {result["process_s"]:.1f} s '
          f'(CPU {result["cpu_s"]:.1f} s)')
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
    total = 0
    for path in sorted(glob.glob(os.path.join(model_dir, 'events*'))):
      size = os.path.getsize(path)
      total += size
      kinds = ', '.join(f'{kind} x{n} ({size_of:,} B)' for kind, (n, size_of)
                        in event_kinds(path).items())
      print(f'{os.path.basename(path)}: {size:,} B: {kinds}')
    print(f'events files in all: {total:,} B')
    extra = [os.path.basename(p) for p in
             glob.glob(os.path.join(model_dir, 'graph.pbtxt')) +
             glob.glob(os.path.join(model_dir, '*.meta'))]
    print(f'graph.pbtxt / .meta files: {extra or "none"}')
  finally:
    if args.keep:
      print(f'model directory: {model_dir}')
    else:
      shutil.rmtree(model_dir, ignore_errors=True)


if __name__ == '__main__':
  main()
