"""ImageNet preprocessing throughput per core: train, eval, bare JPEG decode.

Usage:
  python bench/input_pipeline.py [--num_images 1000]
      [--image_size 224] [--repeats 5] [--grain 6]

Makes a fixture of JPEGs at ImageNet-like sizes offline (sides 300-600 px,
smooth shapes, edges and grain of std `--grain` levels, quality 90, 4:2:0;
~2.2 bits a pixel at the default 6, 3.8 at 16, where ImageNet's train set
averages roughly 4.8 (~110 KB at ~470 x 390 px); encoded by TF's
libjpeg-turbo, the library that decodes them, into a temp dir and
read back; the same files every run), holds the encoded bytes in memory,
then times tf.data passes over them of

- train: `preprocessing.imagenet_train` (seed = (index, 0));
- eval: `preprocessing.imagenet_eval`;
- decode: `tf.io.decode_jpeg(channels=3)` of the whole image, nothing else;
- the stages of train and eval, one thread: the crop window decoded
  (`decode_crop`), then also resized (TF1 bicubic); the rest of the full
  pipeline is the flip and the normalisation.

Per core: one thread does the work, image after image (`map` without
parallel calls, a private threadpool of 1, intra-op parallelism 1, no map
parallelisation), and the rate is images per CPU-second of this process:
the rate of one fully busy core, which a shared machine's other jobs lower
far less than the wall-clock rate (that counts the time they hold the
core). The wall-clock rate and CPU/wall (~1.0: one core) are printed
beside it. The same passes
with two threads (`num_parallel_calls=2`, threadpool 2) give the total
rate of this 2-core machine, divided by 2 for a second per-core figure.

Each pipeline has one iterator over its repeated dataset; a first pass of
`--num_images` images (tracing, function instantiation, allocators) is not
timed; each timed figure is the median of `--repeats` further passes of
`--num_images`, the pipelines interleaved.
The last line is `train_images_per_s=<f> eval_images_per_s=<f>
decode_images_per_s=<f>`, the one-thread per-core rates.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Dict, List, Tuple

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
os.environ.setdefault('CUDA_VISIBLE_DEVICES', '')

import _harness  # pylint: disable=C0413
import numpy as np  # pylint: disable=C0413
import tensorflow as tf  # pylint: disable=C0413

from tunas_tf.data import preprocessing  # pylint: disable=C0413

KINDS = ('train', 'eval', 'decode')
# Parts of train and eval, one thread: where their time goes.
STAGES = ('train: window', 'train: + resize', 'eval: window',
          'eval: + resize')
CORES = 2  # This machine's; the two-thread run's total is divided by it.


def _picture(rng: np.random.Generator, height: int, width: int,
             grain: float = 6.0) -> np.ndarray:
  """uint8 [h, w, 3]: smooth colour fields, a few hard-edged shapes, grain
  (Gaussian, std `grain` levels)."""
  image = np.zeros((height, width, 3), np.float32)
  for cells, amplitude in ((4, 70.0), (16, 35.0), (64, 15.0)):
    coarse = rng.normal(0, amplitude, (cells, cells, 3)).astype(np.float32)
    image += tf.image.resize(coarse, (height, width)).numpy()
  y, x = np.mgrid[:height, :width]
  for _ in range(int(rng.integers(3, 9))):
    cy, cx = rng.uniform(0, height), rng.uniform(0, width)
    ry, rx = rng.uniform(20, height / 3), rng.uniform(20, width / 3)
    if rng.random() < 0.5:
      inside = ((y - cy) / ry)**2 + ((x - cx) / rx)**2 < 1
    else:
      inside = (np.abs(y - cy) < ry) & (np.abs(x - cx) < rx)
    image[inside] = 0.4 * image[inside] + rng.uniform(-100, 100, 3)
  image += 128 + grain * rng.standard_normal(image.shape, np.float32)
  return np.clip(image, 0, 255).astype(np.uint8)


def make_fixture(num_images: int, directory: str, seed: int = 0,
                 grain: float = 6.0) -> Tuple[List[bytes], np.ndarray]:
  """Writes `num_images` JPEGs to `directory`; returns (bytes, [N, 2] h, w).

  `grain` (std of the pixel noise, in levels) sets the bytes per pixel: 6
  gives ~2.2 bits a pixel, 16 ~3.8 (ImageNet's train JPEGs: roughly 110 KB
  at ~470 x 390 px, ~4.8; approximate public figures, not measured here).
  """
  rng = np.random.default_rng(seed)
  shapes = rng.integers(300, 601, (num_images, 2))
  encoded = []
  for i, (height, width) in enumerate(shapes):
    path = os.path.join(directory, f'{i:05d}.jpg')
    jpeg = tf.io.encode_jpeg(
        _picture(rng, int(height), int(width), grain), quality=90)
    tf.io.write_file(path, jpeg)
    with open(path, 'rb') as f:
      encoded.append(f.read())
  return encoded, shapes


def _stage_fn(kind: str, image_size: int):
  """One image's work for pipeline `kind`: (index, encoded) -> tensor."""

  def train_window(i, e):
    return preprocessing.decode_crop(
        e, lambda shape: preprocessing.train_crop_window(
            shape, tf.stack([i, 0]), image_size))

  def eval_window(e):
    return preprocessing.decode_crop(
        e, lambda shape: preprocessing.eval_crop_window(shape, image_size))

  def resize(image):  # As the module's: TF1 bicubic, from float32.
    return tf.raw_ops.ResizeBicubic(
        images=tf.cast(image, tf.float32)[tf.newaxis],
        size=[image_size, image_size])[0]

  return {
      'train': lambda i, e: preprocessing.imagenet_train(
          e, tf.stack([i, 0]), image_size),
      'eval': lambda i, e: preprocessing.imagenet_eval(e, image_size),
      'decode': lambda i, e: tf.io.decode_jpeg(e, channels=3),
      'train: window': train_window,
      'train: + resize': lambda i, e: resize(train_window(i, e)),
      'eval: window': lambda i, e: eval_window(e),
      'eval: + resize': lambda i, e: resize(eval_window(e)),
  }[kind]


def make_dataset(encoded: tf.Tensor, kind: str, image_size: int,
                 threads: int) -> tf.data.Dataset:
  """The `kind` pipeline over in-memory bytes, on `threads` threads."""
  dataset = tf.data.Dataset.from_tensor_slices(encoded).enumerate().map(
      _stage_fn(kind, image_size),
      num_parallel_calls=threads if threads > 1 else None)
  return on_threads(dataset, threads)


def on_threads(dataset: tf.data.Dataset, threads: int) -> tf.data.Dataset:
  """`dataset` on a private pool of `threads`, one thread per op, no
  autotuning (the map's `num_parallel_calls` is the caller's)."""
  options = tf.data.Options()
  options.threading.private_threadpool_size = threads
  options.threading.max_intra_op_parallelism = 1
  options.autotune.enabled = False
  # Else tf.data may make the one-thread map parallel on its own.
  options.experimental_optimization.map_parallelization = False
  return dataset.with_options(options)


@tf.function
def _consume(iterator, count: tf.Tensor) -> tf.Tensor:
  """Takes `count` images off `iterator` in one graph loop (no Python)."""
  total = tf.constant(0.0)
  for _ in tf.range(count):
    # One pixel of each image into the sum: every image must be computed.
    total += tf.cast(iterator.get_next()[0, 0, 0], tf.float32)
  return total


def run_pass(iterator, count: int) -> Tuple[int, float, float]:
  """Takes `count` images; returns (images, wall s, process CPU s).

  The iterator lives across passes (its dataset repeats), so its functions
  are instantiated once, in the warm-up: a pass times images only (a fresh
  iterator costs 30-100 ms of set-up, more for train than for decode).
  """
  wall, cpu = time.perf_counter(), time.process_time()
  _consume(iterator, tf.constant(count)).numpy()
  return count, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--num_images', type=int, default=1000)
  parser.add_argument('--image_size', type=int, default=224)
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--grain', type=float, default=6.0,
                      help='pixel noise std of the fixture (levels): denser '
                      'JPEGs cost more entropy decoding')
  args = parser.parse_args()

  start = time.perf_counter()
  with tempfile.TemporaryDirectory(prefix='bench_jpegs_') as directory:
    encoded, shapes = make_fixture(args.num_images, directory,
                                   grain=args.grain)
  sizes = np.array([len(e) for e in encoded])
  pixels = shapes.prod(axis=1)
  train_area = np.mean([
      float(tf.reduce_prod(preprocessing.train_crop_window(
          shape, [i, 0], args.image_size)[2:])) / (shape[0] * shape[1])
      for i, shape in enumerate(shapes)])
  eval_area = np.mean([
      float(tf.reduce_prod(preprocessing.eval_crop_window(
          shape, args.image_size)[2:])) / (shape[0] * shape[1])
      for shape in shapes])
  print(f'fixture: {len(encoded)} JPEGs (q90), {shapes[:, 0].mean():.0f} x '
        f'{shapes[:, 1].mean():.0f} px mean, {pixels.mean() / 1e3:.0f} kpx, '
        f'{sizes.mean() / 1e3:.1f} KB mean, '
        f'{np.mean(sizes * 8 / pixels):.2f} bits/px, grain {args.grain:g} '
        f'({sizes.sum() / 1e6:.1f} MB in memory), made in {time.perf_counter() - start:.1f} s')
  print(f'decoded area: train crop {train_area:.3f} of the image (mean), '
        f'eval crop {eval_area:.3f}; output {args.image_size}x'
        f'{args.image_size}')
  print(f'load average at start: {os.getloadavg()[0]:.2f} ({CORES} cores)')

  images = tf.constant(encoded)
  count = len(encoded)
  passes: Dict[Tuple[str, int], List[Tuple[int, float, float]]] = {}
  keys = [(kind, threads) for threads in (1, CORES) for kind in KINDS]
  keys += [(stage, 1) for stage in STAGES]
  iterators = {(kind, threads): iter(make_dataset(
      images, kind, args.image_size, threads).repeat())
               for kind, threads in keys}
  for key, iterator in iterators.items():
    run_pass(iterator, count)  # Warm-up, not timed.
    passes[key] = []
  for _ in range(args.repeats):
    for key, iterator in iterators.items():
      passes[key].append(run_pass(iterator, count))

  per_core: Dict[str, float] = {}
  print(f'\nmedian of {args.repeats} passes of {len(encoded)} images '
        f'(images/s):')
  print(f'{"pipeline":<16} {"threads":>7} {"per CPU-s":>10} {"wall":>8} '
        f'{"CPU/wall":>9} {"per core (wall/threads)":>24}')
  for (kind, threads), runs in passes.items():
    if kind in STAGES and kind == STAGES[0]:
      print('stages (one thread):')
    by_cpu = statistics.median(n / cpu for n, _, cpu in runs)
    by_wall = statistics.median(n / wall for n, wall, _ in runs)
    busy = statistics.median(cpu / wall for _, wall, cpu in runs)
    if threads == 1:
      per_core[kind] = by_cpu
    print(f'{kind:<16} {threads:>7} {by_cpu:>10.1f} {by_wall:>8.1f} '
          f'{busy:>9.2f} {by_wall / threads:>24.1f}')
  print(f'load average at end: {os.getloadavg()[0]:.2f}')

  train, evaluated, decode = (per_core[k] for k in KINDS)
  print(f'\nper core: train / decode = {train / decode:.2f} (target >= 1.0), '
        f'eval / decode = {evaluated / decode:.2f} (target >= 0.8)')
  # The original's search step on a v2-32/v3-32: 4 hosts, each feeding 8
  # cores 128 train and 512 validation images (4096 + 4 x 4096 in all).
  host_train, host_eval = 4096 // 4, 4 * 4096 // 4
  core_s = host_train / train + host_eval / evaluated
  print(f'per TPU host and search step: {host_train} train + {host_eval} '
        f'eval images = {core_s:.1f} core-seconds at these rates')
  _harness.finish('input_pipeline',
                  f'train_images_per_s={train:.1f} '
                  f'eval_images_per_s={evaluated:.1f} '
                  f'decode_images_per_s={decode:.1f}')


if __name__ == '__main__':
  main()
