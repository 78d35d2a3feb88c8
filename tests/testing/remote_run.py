r"""A search, its extraction, its report and a training, all on `ram://`.

  python -m tests.testing.remote_run ram://UNIQUE

runs, in this one process (TensorFlow's `ram://` filesystem lives in the
process's memory), the binaries' `main` functions as a user runs them on a
Cloud TPU with `gs://` directories:

1. `train_search` (the 8-step digits search of `searches.SHORT_SEARCH_FLAGS`)
   into `ROOT/search`;
2. `tools/extract_architecture --oneshot=3` to
   `ROOT/extracted/architecture.json` (a folder that does not exist yet);
3. `tools/report` into `ROOT/report` (another new folder);
4. `train_eval` of the extracted architecture for 4 steps, starting from the
   search's weights (`--init_from_search`), into `ROOT/train`.

then checks, in the same process, that every file each step should write is
on `ROOT` (`check`), and prints their paths and sizes. Exits non-zero (with
the reason on stderr) when a step or a check fails. The test
(`tests/integration/remote_storage_test.py`) runs it in an empty working directory and
checks that nothing was written to the local disk.

`train_eval` runs with `--noexport`: the export renames its SavedModel folder
into place, and `ram://` renames only a folder's own entry, not the files in
it (Cloud Storage renames each file).
"""

import json
import sys
from typing import Dict, List

from absl import flags
import tensorflow as tf

from tunas_tf.cli import process
from tunas_tf import train_search
from tunas_tf.tools import extract_architecture
from tunas_tf.tools import report
from tunas_tf.train_eval import __main__ as train_eval_main
from tests.testing import searches

# 4 steps of 8 images with a checkpoint every 2, then the final evaluation.
TRAIN_FLAGS = ('--max_steps=4', '--train_batch_size=8',
               '--eval_batch_size=50', '--save_checkpoints_steps=2',
               '--log_every_steps=2', '--tpu_iterations_per_loop=2',
               '--noexport')

# Files each step must leave under ROOT (events files are matched by glob).
EXPECTED = (
    'search/config.json', 'search/model_spec.json', 'search/checkpoint',
    'search/model.ckpt-8.index', 'search/model.ckpt-8.data-00000-of-00001',
    'search/events.out.tfevents.*.v2',
    'extracted/architecture.json',
    'report/report.png', 'report/report.html',
    'train/config.json', 'train/metrics.json', 'train/checkpoint',
    'train/model.ckpt-4.index', 'train/events.out.tfevents.*.v2',
    'train/eval/events.out.tfevents.*.v2')


def _run(name: str, define, main, args: List[str]) -> None:
  """`main([], flags)` with the binary's own freshly parsed flags."""
  values = flags.FlagValues()
  define(values)
  values([name] + args)
  print(f'remote_run: {name} {" ".join(args)}', file=sys.stderr, flush=True)
  main([], values)


def run_chain(root: str) -> None:
  """The four steps of the module doc, under `root`."""
  search_dir = f'{root}/search'
  architecture = f'{root}/extracted/architecture.json'
  _run('train_search', train_search.define_flags, train_search.main,
       [f'--model_dir={search_dir}', *searches.SHORT_SEARCH_FLAGS])
  # The one-shot pick reads the search's checkpoint from `root` too: of 3
  # candidates, not the default 50 (extract_architecture_test runs those).
  _run('extract_architecture', extract_architecture.define_flags,
       extract_architecture.main,
       [f'--model_dir={search_dir}', f'--output={architecture}',
        '--oneshot=3'])
  _run('report', report.define_flags, report.main,
       [f'--model_dir={search_dir}', f'--output_dir={root}/report'])
  _run('train_eval', train_eval_main.define_flags, train_eval_main.main,
       [f'--architecture={architecture}', f'--model_dir={root}/train',
        f'--init_from_search={search_dir}', *TRAIN_FLAGS])


def listing(root: str) -> Dict[str, int]:
  """{path: size} of every file under `root`, through `tf.io.gfile`."""
  found = {}
  for directory, _, names in tf.io.gfile.walk(root):
    for name in names:
      path = f'{directory.rstrip("/")}/{name}'
      found[path] = tf.io.gfile.stat(path).length
  return found


def _read_json(path: str):
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)


def check(root: str) -> None:
  """Checks the files of `run_chain(root)` on `root`.

  Raises:
    AssertionError: naming what is missing or wrong.
  """
  found = listing(root)
  missing = [p for p in EXPECTED if not tf.io.gfile.glob(f'{root}/{p}')]
  assert not missing, f'missing on {root}: {missing}; found {sorted(found)}'
  empty = [p for p, size in found.items() if not size]
  assert not empty, f'empty files: {empty}'
  # Every write goes through a temporary name renamed into place.
  leftovers = [p for p in found if '.tmp' in p]
  assert not leftovers, f'temporary files left: {leftovers}'
  # Each binary held its model directory (a lease, `run_lock`) and let go.
  leases = [p for p in found if p.endswith('/run.lock')]
  assert not leases, f'leases left: {leases}'
  with tf.io.gfile.GFile(f'{root}/report/report.png', 'rb') as f:
    assert f.read(8) == b'\x89PNG\r\n\x1a\n', 'report.png is not a PNG'
  # Paths recorded in the files stay remote (`os.path.abspath` would have
  # made `<cwd>/ram:/...` of them).
  extracted = _read_json(f'{root}/extracted/architecture.json')
  assert extracted['checkpoint'] == f'{root}/search/model.ckpt-8', extracted
  assert extracted.get('oneshot'), f'no one-shot pick: {extracted}'
  config = _read_json(f'{root}/train/config.json')
  assert config['init_from_search'] == f'{root}/search', config
  metrics = _read_json(f'{root}/train/metrics.json')
  assert metrics['global_step'] == 4, metrics


def main(argv: List[str]) -> None:
  [root] = argv[1:]
  process.quiet_python_log(verbose=False)
  run_chain(root)
  check(root)
  print(json.dumps(listing(root), indent=1, sort_keys=True))


if __name__ == '__main__':
  main(sys.argv)
