"""Shared by the benchmarks: their results file and `bench/_child.py` runs.

Every benchmark ends with `finish(name, line)`: it prints its figures as
one line of `name=value` pairs (the last line of its output, which scripts
outside read) and appends a JSON row to the results file (`RESULTS`, or the
path in `$TUNAS_BENCH_RESULTS`; an empty value writes none): the figures,
the command's arguments, the commit, the machine (CPU model, its widest
vector ISA, cores, TensorFlow and Python versions, the kernel and allocator
settings of the environment) and the date.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence, Union

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CHILD = os.path.join(ROOT, 'bench', '_child.py')
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

# Not committed (.gitignore): every run appends, smallest and loaded runs
# too; bench/README.md's table holds the figures adopted, with their row's
# commit and machine.
RESULTS = os.path.join(ROOT, 'bench', 'results.jsonl')
RESULTS_ENV = 'TUNAS_BENCH_RESULTS'
# Environment variables that change the figures: the kernels and the
# allocator.
_SETTINGS = ('TF_ENABLE_ONEDNN_OPTS', 'ONEDNN_MAX_CPU_ISA', 'LD_PRELOAD',
             'MALLOC_ARENA_MAX', 'PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION')


def figures_of(line: str) -> Dict[str, Union[int, float, str]]:
  """The `name=value` pairs of a last line, in order.

  A value is an int or a float when it reads as a finite number, else the
  string printed (`>600`, `8/10`, `nan`, `-`).

  Raises:
    ValueError: when the line is empty or a word is not `name=value`.
  """
  figures: Dict[str, Union[int, float, str]] = {}
  for word in line.split():
    name, sep, value = word.partition('=')
    if not sep or not name or not value:
      raise ValueError(f'not a name=value pair: {word!r} in {line!r}')
    figures[name] = value
    for kind in (int, float):
      try:
        number = kind(value)
      except ValueError:
        continue
      if math.isfinite(number):
        figures[name] = number
      break
  if not figures:
    raise ValueError('an empty last line')
  return figures


def _cpu() -> Dict[str, Any]:
  """The CPU's model, its widest vector ISA and its logical cores (Linux)."""
  model = platform.processor() or platform.machine()
  info: Dict[str, str] = {}
  try:
    with open('/proc/cpuinfo') as f:
      for line in f:
        key, _, value = line.partition(':')
        info.setdefault(key.strip(), value.strip())
        if key.strip() == 'flags':
          break
  except OSError:
    pass
  flags = set(info.get('flags', '').split())
  if 'model name' in info:
    # A VM may name only the vendor ('AMD EPYC'): family and model tell
    # the generation (AMD family 25 Zen 3/4, 26 Zen 5).
    model = (f"{info['model name']} (family {info.get('cpu family', '?')} "
             f"model {info.get('model', '?')})")
  isa = ('AVX-512' if 'avx512f' in flags else 'AVX2' if 'avx2' in flags
         else 'unknown' if not flags else 'no AVX2')
  extras = sorted(f for f in flags if f in (
      'avx512_vnni', 'avx512_bf16', 'amx_bf16', 'amx_tile', 'avx_vnni'))
  return {'cpu': model, 'isa': isa, 'isa_extras': extras,
          'cores': os.cpu_count()}


def _version(*packages: str) -> Optional[str]:
  for package in packages:
    try:
      return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
      continue
  return None


def machine() -> Dict[str, Any]:
  """Where a figure came from: CPU, TF and Python, figure-moving settings."""
  return dict(_cpu(),
              tensorflow=_version('tensorflow', 'tensorflow-cpu'),
              python=platform.python_version(),
              settings={k: os.environ[k] for k in _SETTINGS
                        if k in os.environ})


def commit() -> str:
  """This checkout's short commit, `-dirty` when tracked files changed."""
  def git(*args: str) -> str:
    return subprocess.run(['git', '-C', ROOT, *args], capture_output=True,
                          text=True, check=True).stdout.strip()
  try:
    head = git('rev-parse', '--short', 'HEAD')
    dirty = git('status', '--porcelain', '--untracked-files=no')
  except (OSError, subprocess.CalledProcessError):
    return 'unknown'
  return head + ('-dirty' if dirty else '')


def row(name: str, line: str, argv: Sequence[str],
        now: Optional[datetime.datetime] = None) -> Dict[str, Any]:
  """The results file's row for benchmark `name`'s last line."""
  now = now or datetime.datetime.now(datetime.timezone.utc)
  return {'benchmark': name, 'figures': figures_of(line),
          'args': list(argv), 'commit': commit(), 'machine': machine(),
          'date': now.isoformat(timespec='seconds')}


def results_path() -> Optional[str]:
  """The results file: `$TUNAS_BENCH_RESULTS` if set (empty: none)."""
  return os.environ.get(RESULTS_ENV, RESULTS) or None


def finish(name: str, line: str,
           argv: Optional[Sequence[str]] = None) -> None:
  """Prints `line`, the benchmark's last, and appends its row.

  Raises:
    SystemExit: when the line is not `name=value` pairs (before it is
      printed) or the results file cannot be written (after).
  """
  try:
    record = row(name, line, sys.argv[1:] if argv is None else argv)
  except ValueError as e:
    sys.exit(f'{name}: {e}')
  print(line, flush=True)
  path = results_path()
  if path is None:
    return
  try:
    with open(path, 'a') as f:
      f.write(json.dumps(record, allow_nan=False) + '\n')
  except OSError as e:
    sys.exit(f'{name}: cannot append to the results file {path}: {e}')


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
