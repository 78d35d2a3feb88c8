"""One tiny finished search, run once per test session and shared.

Building a search graph costs most of a small search's time (~55 s on 2
cores), so the tests that need a finished search (its checkpoints, events and
architecture.json) share this one instead of each running its own: once per
`pytest` run, the first of its xdist workers to need it runs it (under a
lock) and the other reads it. Tests must not modify it: copy it first
(`copy_finished_search`) to resume it or break it. It runs `train_search --deterministic` in a subprocess (op
determinism is process-wide and cannot be turned off), so that a killed and
resumed `--deterministic` search can be compared with it bit for bit.
"""

import fcntl
import functools
import glob
import os
import re
import shutil
import sys
import tempfile
from typing import Dict, List, Tuple

from absl import flags
import numpy as np
import tensorflow as tf

from tunas_tf import architecture
from tunas_tf import train_search
from tunas_tf.runtime import resume
from tunas_tf.search import config as config_lib
from tunas_tf.search import extract
from tunas_tf.search import report
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema
from tests.testing import forked

# 8 steps of 16 images: warm-ups of 2 (ops) and 4 (filters) steps, RL delay 4,
# summaries every 2 steps, checkpoints at 4 and 8.
SHORT_SEARCH_FLAGS = (
    '--max_steps=8', '--train_batch_size=16', '--rl_delay_steps_fraction=0.5',
    '--increase_ops_warmup_steps_fraction=0.25',
    '--increase_filters_warmup_steps_fraction=0.5',
    '--tpu_iterations_per_loop=2', '--save_checkpoints_steps=4',
    '--rl_learning_rate=1.0')


def search_flags(*args: str) -> flags.FlagValues:
  """Parsed `train_search` flags (`--model_dir` among `args` if needed)."""
  values = flags.FlagValues()
  train_search.define_flags(values)
  values(['train_search'] + list(args))
  return values


def search_config(model_dir: str, *args: str) -> config_lib.SearchConfig:
  """The `SearchConfig` of `train_search --model_dir=model_dir args...`."""
  return train_search.config_from_flags(
      search_flags(f'--model_dir={model_dir}', *args))


def search_command(model_dir: str, *args: str) -> List[str]:
  """The command line of `train_search --model_dir=model_dir args...`."""
  return [sys.executable, '-m', 'tunas_tf.train_search',
          f'--model_dir={model_dir}', *args]


# The environment of a `search_command` subprocess: TF's C++ log quiet.
QUIET = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')


def finished_search() -> str:
  """The model dir of the shared short digits search, with architecture.json.

  Runs `SHORT_SEARCH_FLAGS` with `--deterministic` (in a subprocess) the
  first time it is called in a process, on this TF's default engine (the
  Estimator on TF 2.15, else the distribute engine).

  Raises:
    AssertionError: when the search fails (with the end of its log).
  """
  return _finished_search_run()[0]


def finished_search_log() -> str:
  """What `finished_search()`'s process wrote to stderr."""
  return _finished_search_run()[1]


def _session_dir() -> str:
  """A directory this `pytest` run's processes share (xdist's run id names
  it), or a fresh one outside xdist."""
  run = os.environ.get('PYTEST_XDIST_TESTRUNUID')
  if not run:
    return tempfile.mkdtemp()
  path = os.path.join(tempfile.gettempdir(), f'tunas_tf_tests_{run}')
  os.makedirs(path, exist_ok=True)
  return path


@functools.lru_cache(maxsize=None)
def _finished_search_run() -> Tuple[str, str]:
  root = _session_dir()
  model_dir = os.path.join(root, 'search')
  log = os.path.join(root, 'search.log')
  with open(os.path.join(root, 'search.lock'), 'w') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)  # Released when the file closes.
    if not os.path.exists(log):
      done = forked.run_one(
          search_command(model_dir, '--deterministic', *SHORT_SEARCH_FLAGS),
          env=QUIET)
      if done.returncode:
        raise AssertionError(
            f'the shared search failed:\n{done.stderr[-3000:]}')
      architecture.write(extract.pick(model_dir)[0],
                         os.path.join(model_dir, architecture.FILE_NAME))
      with open(log + '.tmp', 'w') as f:
        f.write(done.stderr)
      os.replace(log + '.tmp', log)
    with open(log) as f:
      return model_dir, f.read()


def finished_architecture() -> architecture.Architecture:
  """The architecture.json record of `finished_search()`."""
  return architecture.read(os.path.join(finished_search(),
                                        architecture.FILE_NAME))


def copy_finished_search(name: str = 'copy') -> str:
  """A private copy of `finished_search()` that a test may change."""
  model_dir = os.path.join(tempfile.mkdtemp(), name)
  shutil.copytree(finished_search(), model_dir)
  return model_dir


def scalar_tags(ssd: str = 'digits_search') -> List[str]:
  """The scalar tags a search writes (without --summarize_tag_logits)."""
  tags = ['model/loss', 'model/empirical_loss', 'model/regularization_loss',
          'model/learning_rate', 'rlcontroller/empirical_loss',
          'rlcontroller/entropy_loss', 'rlcontroller/validation_accuracy',
          'rlcontroller/reward', 'rlcontroller/step_baseline',
          'rlcontroller/baseline', 'rlcontroller/advantage',
          'rlcontroller/log_prob', 'rlcontroller/estimated_cost',
          'rlcontroller/cost_ratio', 'rlcontroller/cost_adjustment',
          'rlcontroller/learning_rate', 'rlcontroller/increase_ops_prob',
          'rlcontroller/increase_filters_prob']
  for path, oneof in schema.flatten_with_paths(mobile.get_search_space(ssd)):
    tags += [f'rlpathlogits/{path}/{j}' for j in range(len(oneof.choices))]
  return tags


def events(model_dir: str) -> Dict[str, Dict[int, float]]:
  """{tag: {step: value}} of the scalar summaries of `model_dir`."""
  return report.read_scalars(model_dir)


def images(model_dir: str) -> Dict[str, Dict[int, 'np.ndarray']]:
  """{tag: {step: uint8 [H, W, C]}} of the image summaries of `model_dir`."""
  out = {}
  for path in glob.glob(os.path.join(model_dir, 'events*.v2')):
    for record in tf.data.TFRecordDataset(path):
      event = tf.compat.v1.Event.FromString(record.numpy())
      for value in event.summary.value:
        if value.metadata.plugin_data.plugin_name == 'images':
          # The tensor holds [width, height, PNG bytes, ...].
          png = tf.make_ndarray(value.tensor)[2]
          out.setdefault(value.tag, {})[event.step] = tf.io.decode_png(
              png).numpy()
  return out


def reader(path: str):
  """A reader, by variable name, of the checkpoint `path` or of a model
  directory's latest, either engine's (`resume.reader`)."""
  if tf.io.gfile.isdir(path):
    path = tf.train.latest_checkpoint(path)
  return resume.reader(path)


def global_step(model_dir: str) -> int:
  """The global step of the latest checkpoint in `model_dir`."""
  return resume.checkpoint_step(tf.train.latest_checkpoint(model_dir))


def without_max_steps(args: List[str]) -> List[str]:
  return [a for a in args if not a.startswith('--max_steps')]


# What TensorFlow's autograph leaves in a process's temporary directory where
# Python writes bytecode (PYTHONDONTWRITEBYTECODE unset): the bytecode of the
# modules it generates there, then deletes. TensorFlow's, not a run's.
_AUTOGRAPH_BYTECODE = re.compile(
    r'^__autograph_generated_file\w+\.cpython-\d+\.pyc$')


def written(directory: str) -> List[str]:
  """The names in `directory`, but a `__pycache__` that holds only
  autograph's bytecode."""
  names = sorted(os.listdir(directory))
  cache = os.path.join(directory, '__pycache__')
  if '__pycache__' in names and all(
      _AUTOGRAPH_BYTECODE.match(name) for name in os.listdir(cache)):
    names.remove('__pycache__')
  return names


def refusal_line(*args: str) -> str:
  """The exit line of `train_search.main` on `args`, which must refuse them.

  Raises:
    AssertionError: when main returns instead of exiting.
  """
  values = search_flags(*args)
  try:
    train_search.main([], values)
  except SystemExit as e:
    return str(e.code)
  raise AssertionError(f'train_search accepted {args}')

