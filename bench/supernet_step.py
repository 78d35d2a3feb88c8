"""Seconds per supernet forward+backward step, `masked` vs `sampled` mode.

Usage:
  python bench/supernet_step.py [--space cifar_search] [--batch 32]
      [--warmup 3] [--steps 15] [--threads 0]

For each mode, builds the supernet of the space, compiles one training step
(forward on a random batch, softmax cross-entropy plus the masked L2
regulariser, gradients w.r.t. every variable; no update) with `tf.function`,
runs `--warmup` steps and then times `--steps` steps, each on a fresh random
one-hot architecture (the same sequence of architectures for both modes). It
prints the median seconds per step of each mode and their ratio. CPU only
(the GPU, if any, is hidden).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Dict, List

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
os.environ.setdefault('CUDA_VISIBLE_DEVICES', '')
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # pylint: disable=C0413
import tensorflow as tf  # pylint: disable=C0413

from tunas_tf.models import supernet as supernet_lib  # pylint: disable=C0413
from tunas_tf.search_space import mobile  # pylint: disable=C0413
from tunas_tf.search_space import schema  # pylint: disable=C0413

NUM_CLASSES = 10
WEIGHT_DECAY = 4e-5


def random_masks(spec, rng: np.random.Generator) -> Dict[str, np.ndarray]:
  """A random one-hot float32 mask per OneOf path."""
  masks = {}
  for path, oneof in schema.flatten_with_paths(spec):
    mask = np.zeros([len(oneof.choices)], np.float32)
    mask[rng.integers(len(oneof.choices))] = 1.0
    masks[path] = mask
  return masks


def time_mode(space: str, mode: str, batch: int, samples: List[Dict],
              warmup: int) -> List[float]:
  """Seconds of each step after `warmup` steps (one per entry of samples)."""
  spec = mobile.get_search_space(space)
  size = mobile.get_image_size(space)
  channels = 1 if space == 'digits_search' else 3
  net = supernet_lib.Supernet(spec, NUM_CLASSES, mode=mode,
                              input_channels=channels, seed=0)
  rng = np.random.default_rng(1)
  images = tf.constant(rng.uniform(size=[batch, size, size, channels]),
                       tf.float32)
  labels = tf.one_hot(rng.integers(NUM_CLASSES, size=[batch]), NUM_CLASSES)

  @tf.function
  def step(masks):
    sampled = schema.with_masks(spec, masks)
    with tf.GradientTape() as tape:
      logits = net(sampled, images, training=True)
      loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(
          labels, logits)) + net.regularization_loss(sampled, WEIGHT_DECAY)
    grads = tape.gradient(loss, net.trainable_variables,
                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
    # Reduce to one scalar so that fetching the result costs nothing.
    return loss + tf.add_n([tf.reduce_sum(g) for g in grads]) * 0.0

  times = []
  for i, masks in enumerate(samples):
    feed = {k: tf.constant(v) for k, v in masks.items()}
    start = time.perf_counter()
    step(feed).numpy()
    if i >= warmup:
      times.append(time.perf_counter() - start)
  return times


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--space', default='cifar_search',
                      choices=sorted(mobile.SEARCH_SPACES))
  parser.add_argument('--batch', type=int, default=32)
  parser.add_argument('--warmup', type=int, default=3)
  parser.add_argument('--steps', type=int, default=15)
  parser.add_argument('--threads', type=int, default=0,
                      help='intra/inter-op threads (0: TF default)')
  args = parser.parse_args(argv)
  if args.threads:
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)

  spec = mobile.get_search_space(args.space)
  rng = np.random.default_rng(0)
  samples = [random_masks(spec, rng) for _ in range(args.warmup + args.steps)]
  medians = {}
  for mode in supernet_lib.MODES:
    start = time.perf_counter()
    times = time_mode(args.space, mode, args.batch, samples, args.warmup)
    medians[mode] = statistics.median(times)
    print(f'{mode:8s} {medians[mode]:.4f} s/step (median of {len(times)}; '
          f'min {min(times):.4f}, max {max(times):.4f}; '
          f'{time.perf_counter() - start:.1f} s incl. tracing)', flush=True)
  print(f'space {args.space}, batch {args.batch}, CPU, '
        f'{os.cpu_count()} cores visible')
  print(f'masked / sampled = {medians["masked"] / medians["sampled"]:.2f}')


if __name__ == '__main__':
  main()
