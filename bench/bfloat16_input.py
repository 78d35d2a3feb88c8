"""`--use_bfloat16=true`'s input: bytes per step, and the host's cast cost.

Usage:
  PYTHONPATH=CHECKOUT python bench/bfloat16_input.py [--repeats 5]

Prints, for each `--use_bfloat16` mode, the bytes of one element of each
binary's real input_fn on digits (the search's zipped train and validation
batches at --train_batch_size=16; train_eval's training batch of 32 and
eval batch of 50): the images' and the labels' bytes, which are what the
infeed carries per replica and step. Then the CPU time of the cast itself
(`tf.cast` of a float32 [128, 224, 224, 3] batch to bfloat16, one thread,
intra-op parallelism 1, CPU seconds of this process; median of `--repeats`
passes of 10 casts), per image. The last line is
`search_image_bytes_ratio=<f> cast_ms_per_224_image=<f>`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
os.environ.setdefault('CUDA_VISIBLE_DEVICES', '')

from absl import flags  # pylint: disable=C0413
import numpy as np  # pylint: disable=C0413
import tensorflow as tf  # pylint: disable=C0413

from tunas_tf import train_search  # pylint: disable=C0413
from tunas_tf.search import runner  # pylint: disable=C0413
from tunas_tf.train_eval import __main__ as train_eval  # pylint: disable=C0413
from tunas_tf.train_eval import data  # pylint: disable=C0413

MODES = ('false', 'ontpu', 'true')
BATCH, SIDE = 128, 224


def _config(binary, *args: str):
  """The config of `binary` (train_search or train_eval) for `args`."""
  values = flags.FlagValues()
  binary.define_flags(values)
  values(['bench', f'--model_dir={tempfile.mkdtemp()}', *args])
  return binary.config_from_flags(values)


def _bytes(dataset: tf.data.Dataset):
  """(images' bytes, labels' bytes) of the dataset's first element."""
  features, labels = next(dataset.as_numpy_iterator())
  total = lambda s: sum(np.asarray(x).nbytes for x in tf.nest.flatten(s))
  return total(features), total(labels)


def input_bytes():
  """{(binary, mode): (images' bytes, labels' bytes)} on digits."""
  out = {}
  for mode in MODES:
    search = _config(train_search, '--train_batch_size=16',
                     f'--use_bfloat16={mode}')
    out['search', mode] = _bytes(runner.make_input_fn(search)({}))
    config = _config(train_eval, '--ssd=digits_search',
                     '--indices=' + ':'.join(['0'] * 18),
                     f'--use_bfloat16={mode}', '--train_batch_size=32',
                     '--eval_batch_size=50')
    for training, name in ((True, 'train_eval train'),
                           (False, 'train_eval eval')):
      out[name, mode] = _bytes(data.make_input_fn(config, training)({}))
  return out


def cast_ms_per_image(repeats: int) -> float:
  """Median CPU ms of casting one float32 224x224x3 image to bfloat16."""
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  images = tf.random.normal([BATCH, SIDE, SIDE, 3])
  # The slice keeps the fetch small; the cast is of the whole batch.
  cast = tf.function(lambda x: tf.cast(x, tf.bfloat16)[0, 0, 0, 0],
                     autograph=False)
  cast(images)
  runs = []
  for _ in range(repeats):
    start = time.process_time()
    for _ in range(10):
      cast(images).numpy()
    runs.append((time.process_time() - start) / 10 / BATCH * 1e3)
  return statistics.median(runs)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--repeats', type=int, default=5)
  args = parser.parse_args()
  cast_ms = cast_ms_per_image(args.repeats)  # Before any other graph.
  sizes = input_bytes()
  for (binary, mode), (images, labels) in sizes.items():
    print(f'{binary:16s} {mode:5s} images {images:7,d} B  labels '
          f'{labels:6,d} B')
  print(f'cast float32 -> bfloat16: {cast_ms:.3f} ms CPU per {SIDE}x{SIDE}x3 '
        'image (one thread)')
  ratio = sizes['search', 'true'][0] / sizes['search', 'false'][0]
  print(f'search_image_bytes_ratio={ratio:.3f} '
        f'cast_ms_per_224_image={cast_ms:.3f}')


if __name__ == '__main__':
  main()
