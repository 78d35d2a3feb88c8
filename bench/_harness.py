"""Shared by the benchmarks: runs `bench/_child.py` in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CHILD = os.path.join(ROOT, 'bench', '_child.py')
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)


def child_env() -> Dict[str, str]:
  """CPU only, TF's C++ log quiet, this checkout first on the path."""
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', CUDA_VISIBLE_DEVICES='',
              PYTHONPATH=ROOT)


def run_child(kind: str, flags: List[str], stop_after: int,
              timeout: float, options: Sequence[str] = (),
              env: Optional[Dict[str, str]] = None) -> Optional[dict]:
  """Runs `kind` ('search' or 'train_eval') until `stop_after` steps.

  `options` go to `_child.py` before its flags (e.g. '--noarchitectures');
  `env` adds to the child's environment (e.g. `LD_PRELOAD`).

  Returns the child's record (see `_child.py`) plus `process_s` (seconds of
  the whole process as the parent saw it), or None when it ran past
  `timeout` seconds (the child is killed).

  Raises:
    SystemExit: when the child fails (its last stderr line).
  """
  work = tempfile.mkdtemp(prefix=f'bench_{kind}_')
  output = os.path.join(work, 'record.json')
  if (kind == 'search' and f'--dataset={DATA_NAME}' in flags and
      not any(f.startswith('--validation_examples') for f in flags)):
    # The search refuses a validation batch larger than its hold-out (10% of
    # the 2,048 images by default): hold out 512, two batches of 256.
    flags = list(flags) + ['--validation_examples=512']
  command = [sys.executable, _CHILD, kind, str(stop_after), output,
             *options, '--',
             f'--model_dir={os.path.join(work, "model")}'] + flags
  start = time.time()
  try:
    done = subprocess.run(command, capture_output=True, text=True,
                          env=dict(child_env(), **(env or {})),
                          timeout=timeout, check=False)
  except subprocess.TimeoutExpired:
    return None
  if not os.path.exists(output):
    tail = (done.stderr.strip().splitlines() or ['(no output)'])[-1]
    sys.exit(f'{kind} child failed (exit {done.returncode}): {tail}')
  with open(output) as f:
    record = json.load(f)
  record['process_s'] = time.time() - start
  return record


def widest_indices(ssd: str) -> str:
  """The index string of the space's largest architecture (by MACs)."""
  from tunas_tf.search_space import mobile  # pylint: disable=g-import-not-at-top
  from tunas_tf.search_space import schema  # pylint: disable=g-import-not-at-top
  indices = schema.extreme_indices(mobile.get_search_space(ssd), True)
  return schema.format_indices(indices)


DATA_NAME = 'bench_images'
_DATA_DIR: List[str] = []


def bench_data_dir() -> str:
  """A TFDS data dir holding `bench_images`, built here once (offline).

  `bench_images`: 32x32 RGB noise in 10 classes, 2,048 training and 256 test
  images: CIFAR-10's shape, for timings only (the pipeline resizes it to
  the benchmark's side).
  """
  if _DATA_DIR:
    return _DATA_DIR[0]
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  class BenchImages(tfds.core.GeneratorBasedBuilder):
    """Random 32x32x3 images in 10 classes."""
    VERSION = tfds.core.Version('1.0.0')

    def _info(self):
      return tfds.core.DatasetInfo(
          builder=self,
          features=tfds.features.FeaturesDict({
              'image': tfds.features.Image(shape=(32, 32, 3)),
              'label': tfds.features.ClassLabel(num_classes=10)}),
          supervised_keys=('image', 'label'))

    def _split_generators(self, dl_manager):
      del dl_manager
      return {'train': self._generate_examples(2048, 0),
              'test': self._generate_examples(256, 1)}

    def _generate_examples(self, count, seed):  # pylint: disable=arguments-differ
      rng = np.random.default_rng(seed)
      for i in range(count):
        yield i, {'image': rng.integers(0, 256, (32, 32, 3), dtype=np.uint8),
                  'label': int(rng.integers(10))}

  data_dir = os.path.join(tempfile.gettempdir(), 'tunas_tf_bench_data')
  builder = BenchImages(data_dir=data_dir)
  builder.download_and_prepare()
  _DATA_DIR.append(data_dir)
  return data_dir


def data_flags(image_size: int) -> List[str]:
  """Flags for the benchmark dataset at `image_size` (built if missing)."""
  return [f'--dataset={DATA_NAME}', f'--data_dir={bench_data_dir()}',
          '--nodownload', f'--image_size={image_size}', '--num_classes=10']


# The search without the op and filter warm-ups: every step samples one
# architecture, as after the warm-up.
NO_WARMUP = ['--increase_ops_warmup_steps_fraction=0',
             '--increase_filters_warmup_steps_fraction=0']


def memory_arguments(parser) -> None:
  """`memory_runs`' arguments (and `--steps`) on an argparse parser."""
  parser.add_argument('--ssd', default='cifar_search')
  parser.add_argument('--image_size', type=int, default=32)
  parser.add_argument('--batch', type=int, default=64)
  parser.add_argument('--steps', type=int, default=30)


def memory_runs(ssd: str, image_size: int, batch: int) -> Dict[str, List[str]]:
  """Flags of `memory.py`'s two runs: {'search': ..., 'train_eval': ...}.

  The search in sampled mode and `train_eval` of the space's widest
  architecture, on the benchmark dataset at `image_size`, with the same
  train batch, no checkpoint or log in the way of the first hundred
  thousand steps.
  """
  common = [f'--ssd={ssd}', f'--train_batch_size={batch}',
            '--max_steps=100000', '--log_every_steps=100000',
            '--save_checkpoints_steps=100000'] + data_flags(image_size)
  return {'search': common + ['--supernet_mode=sampled'],
          'train_eval': common + [f'--indices={widest_indices(ssd)}',
                                  '--noexport']}
