"""Seconds of a short search under each protobuf implementation, one run.

Usage:
  python bench/search_startup.py [--ssd digits_search] [--steps 2]
      [--implementations upb,python]

A search's start serialises its large graph (the graph def for the Estimator;
until the events file stopped holding the graph, its graph and meta graph
twice too); with protobuf's pure-Python implementation that dominated the
start. For each implementation
(`PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION`, which protobuf 4 honours) this runs
`--steps` steps of the offline digits search in a fresh process and prints the
seconds of `run_search` (graph build, session creation and the steps) and of
the whole process (TF import included). CPU only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Runs in the child: one short search, then its timing as a JSON line.
_CHILD = '''
import json, sys, time
from absl import flags
from google.protobuf.internal import api_implementation
from tunas_tf import train_search
from tunas_tf.search import runner
values = flags.FlagValues()
train_search.define_flags(values)
values(['train_search'] + sys.argv[1:])
config = train_search.config_from_flags(values)
start = time.time()
runner.run_search(config)
print(json.dumps({'implementation': api_implementation.Type(),
                  'run_search_s': time.time() - start}))
'''


def run_child(implementation: str, ssd: str, steps: int) -> dict:
  """Times one search in a fresh process; returns the child's JSON line."""
  env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=implementation,
             TF_CPP_MIN_LOG_LEVEL='3', CUDA_VISIBLE_DEVICES='',
             PYTHONPATH=_ROOT)
  model_dir = tempfile.mkdtemp()
  start = time.time()
  done = subprocess.run(
      [sys.executable, '-c', _CHILD, f'--model_dir={model_dir}',
       f'--ssd={ssd}', f'--max_steps={steps}', '--train_batch_size=16',
       '--tpu_iterations_per_loop=1'],
      capture_output=True, text=True, env=env, check=False)
  if done.returncode != 0:
    sys.exit(f'search_startup: the {implementation} run failed: '
             f'{done.stderr.strip().splitlines()[-1:]}')
  result = json.loads(done.stdout.strip().splitlines()[-1])
  result['process_s'] = time.time() - start
  return result


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--ssd', default='digits_search')
  parser.add_argument('--steps', type=int, default=2)
  parser.add_argument('--implementations', default='upb,python')
  args = parser.parse_args()
  print(f'{"protobuf":10s} {"run_search s":>12s} {"process s":>10s}')
  for implementation in args.implementations.split(','):
    result = run_child(implementation, args.ssd, args.steps)
    print(f'{result["implementation"]:10s} {result["run_search_s"]:12.1f} '
          f'{result["process_s"]:10.1f}')


if __name__ == '__main__':
  main()
