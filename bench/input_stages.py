"""Where ImageNet preprocessing's time goes: each stage alone, per image.

Usage:
  PYTHONPATH=CHECKOUT python bench/input_stages.py [--num_images 1000]
      [--repeats 5] [--grain 6]

On `bench/input_pipeline.py`'s fixture (the same JPEGs), times one-thread
tf.data passes (its options: a private threadpool of 1, intra-op
parallelism 1, no autotuning or map parallelisation) of each stage on its
own and prints the CPU milliseconds per image (median of `--repeats`
interleaved passes) and the same less the stage's baseline:

- the per-image cost of tf.data and the consuming loop (a trivial map);
- the JPEG header (`extract_jpeg_shape`), and with it each crop window;
- the whole-image decode, and `decode_and_crop_jpeg` of each pipeline's
  windows computed beforehand;
- the module's `decode_crop` (is-JPEG `cond`, header, window, crop decode);
- the TF1 bicubic resize (`preprocessing._resize`) of each pipeline's
  decoded crops, held in memory (baseline: copying the crop out);
- the flip and the normalisation of a 224 x 224 x 3 float32 image;
- `imagenet_train` and `imagenet_eval` whole.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Callable, Dict, List, Tuple

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
os.environ.setdefault('CUDA_VISIBLE_DEVICES', '')

import numpy as np  # pylint: disable=C0413
import tensorflow as tf  # pylint: disable=C0413

import input_pipeline  # pylint: disable=C0413  (this directory)
from tunas_tf.data import preprocessing  # pylint: disable=C0413

SIZE = 224
# (baseline stage or None, source of the slices, map function).
Stage = Tuple[str, Callable[[], object], Callable[..., tf.Tensor]]


def _packed(encoded: List[bytes], windows: np.ndarray):
  """The decoded crops in one flat uint8 Tensor: (flat, offsets, shapes)."""
  crops = [tf.image.decode_and_crop_jpeg(e, w, channels=3)
           for e, w in zip(encoded, windows)]
  sizes = np.array([int(tf.size(c)) for c in crops])
  offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
  shapes = np.array([c.shape for c in crops])
  flat = tf.concat([tf.reshape(c, [-1]) for c in crops], axis=0)
  return flat, tf.constant(offsets, tf.int64), tf.constant(shapes, tf.int64)


def _stages(encoded: List[bytes], shapes: np.ndarray) -> Dict[str, Stage]:
  """Every stage: its baseline, its slices and its map function."""
  images = tf.constant(encoded)
  index = tf.range(len(encoded), dtype=tf.int64)
  train_windows = np.stack([preprocessing.train_crop_window(
      tf.constant(s, tf.int32), tf.constant([i, 0], tf.int64), SIZE).numpy()
                            for i, s in enumerate(shapes)])
  eval_windows = np.stack([preprocessing.eval_crop_window(
      tf.constant(s, tf.int32), SIZE).numpy() for s in shapes])
  packed = {'train': _packed(encoded, train_windows),
            'eval': _packed(encoded, eval_windows)}
  image = tf.constant(np.random.default_rng(0).uniform(
      -20, 275, (SIZE, SIZE, 3)).astype(np.float32))

  def seed(i):
    return tf.stack([i, 0])

  def window(kind):
    if kind == 'train':
      return lambda i, shape: preprocessing.train_crop_window(
          shape, seed(i), SIZE)
    return lambda i, shape: preprocessing.eval_crop_window(shape, SIZE)

  def crop(kind):
    flat = packed[kind][0]
    return lambda offset, shape: tf.reshape(
        tf.slice(flat, [offset], [tf.reduce_prod(shape)]), shape)

  def fresh(i):  # A new 224 x 224 x 3 image each time (not a constant).
    return image + tf.cast(i % 2, tf.float32)

  by_index = lambda: (index, images)  # pylint: disable=C3001
  stages: Dict[str, Stage] = {
      'tf.data + loop': (None, by_index, lambda i, e: tf.strings.length(e)),
      'header': ('tf.data + loop', by_index,
                 lambda i, e: tf.image.extract_jpeg_shape(e)),
      'full decode': ('tf.data + loop', by_index,
                      lambda i, e: tf.io.decode_jpeg(e, channels=3)),
  }
  for kind, windows in (('train', train_windows), ('eval', eval_windows)):
    get_window, get_crop = window(kind), crop(kind)
    stages.update({
        f'{kind}: header + window': (
            'tf.data + loop', by_index,
            lambda i, e, w=get_window: w(i, tf.image.extract_jpeg_shape(e))),
        f'{kind}: crop decode, window given': (
            'tf.data + loop',
            lambda w=windows: (images, tf.constant(w, tf.int32)),
            lambda e, w: tf.image.decode_and_crop_jpeg(e, w, channels=3)),
        f'{kind}: decode_crop (module)': (
            'tf.data + loop', by_index,
            lambda i, e, w=get_window: preprocessing.decode_crop(
                e, lambda shape: w(i, shape))),
        f'{kind}: crop copy': (
            'tf.data + loop', lambda k=kind: packed[k][1:], get_crop),
        f'{kind}: crop copy + resize': (
            f'{kind}: crop copy', lambda k=kind: packed[k][1:],
            lambda o, s, c=get_crop: preprocessing._resize(  # pylint: disable=W0212
                c(o, s), SIZE)),
    })
  stages.update({
      '224x224x3 float32': ('tf.data + loop', lambda: index, fresh),
      '+ flip': ('224x224x3 float32', lambda: index,
                 lambda i: tf.image.stateless_random_flip_left_right(
                     fresh(i), tf.random.experimental.stateless_fold_in(
                         seed(i), 1))),
      '+ normalise': ('224x224x3 float32', lambda: index,
                      lambda i: preprocessing._normalize(  # pylint: disable=W0212
                          fresh(i), 3)),
      'imagenet_train': ('tf.data + loop', by_index,
                         lambda i, e: preprocessing.imagenet_train(
                             e, seed(i), SIZE)),
      'imagenet_eval': ('tf.data + loop', by_index,
                        lambda i, e: preprocessing.imagenet_eval(e, SIZE)),
  })
  return stages


@tf.function
def _consume(iterator, count: tf.Tensor) -> tf.Tensor:
  """Takes `count` elements off `iterator`; sums their first entries."""
  total = tf.constant(0.0)
  for _ in tf.range(count):
    total += tf.cast(tf.reshape(iterator.get_next(), [-1])[0], tf.float32)
  return total


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--num_images', type=int, default=1000)
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--grain', type=float, default=6.0)
  args = parser.parse_args()

  with tempfile.TemporaryDirectory(prefix='bench_jpegs_') as directory:
    encoded, shapes = input_pipeline.make_fixture(
        args.num_images, directory, grain=args.grain)
  sizes = np.array([len(e) for e in encoded])
  print(f'fixture: {len(encoded)} JPEGs, {sizes.mean() / 1e3:.1f} KB mean, '
        f'{np.mean(sizes * 8 / shapes.prod(axis=1)):.2f} bits/px '
        f'(grain {args.grain:g})')
  print(f'load average at start: {os.getloadavg()[0]:.2f}')
  stages = _stages(encoded, shapes)
  iterators = {
      name: iter(input_pipeline.on_threads(
          tf.data.Dataset.from_tensor_slices(source()).map(fn), 1).repeat())
      for name, (_, source, fn) in stages.items()}
  count = tf.constant(len(encoded))
  ms: Dict[str, List[float]] = {name: [] for name in stages}
  for iterator in iterators.values():
    _consume(iterator, count)  # Warm-up, not timed.
  for _ in range(args.repeats):
    for name, iterator in iterators.items():
      cpu = time.process_time()
      _consume(iterator, count).numpy()
      ms[name].append((time.process_time() - cpu) / len(encoded) * 1e3)
  print(f'load average at end: {os.getloadavg()[0]:.2f}')

  median = {name: statistics.median(v) for name, v in ms.items()}
  print(f'\nCPU ms per image, one thread, median of {args.repeats} passes:')
  print(f'{"stage":<34} {"ms":>7} {"net":>7}  (net: less {"baseline":<s})')
  for name, (baseline, _, _) in stages.items():
    net = median[name] - median[baseline] if baseline else median[name]
    print(f'{name:<34} {median[name]:>7.3f} {net:>7.3f}  {baseline or ""}')


if __name__ == '__main__':
  main()
