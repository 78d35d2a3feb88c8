"""Seconds per search step against the standalone work of the same networks.

Usage:
  python bench/search_step.py [--ssd cifar_search] [--image_size 32]
      [--batch 64] [--warmup 3] [--steps 10] [--modes sampled,masked]
      [--repeats 3] [--preprocessing none]

For each supernet mode, a search (`train_search`, the model_fn in the
Estimator as `train_search` runs it, on `bench_images` (offline noise,
`_harness.bench_data_dir`) resized to `--image_size`, op and filter warm-ups off so that every step samples one
architecture) runs `--warmup` + `--steps` steps in a fresh process
(`bench/_child.py`); the last `--steps` step times and their sampled
architectures are kept. Then, in this process, each of those architectures
is built standalone with the graph module (`graph.from_spec` +
`graph.model.Model`, batch norm on batch statistics as in the search) and one
step of the same work is timed: an RMSProp step on the train batch
(label-smoothed cross-entropy plus L2 (wd / 2) on the kernels, the search's
optimizer settings) and a forward of the validation batch
(`rl_batch_size_multiplier` x the batch, 4 by default) after it, on constant
random images, `--warmup` runs then the median of `--steps`.

The measurements are interleaved, `--repeats` rounds of (for each mode:
the search's steps, then the standalone steps of its architectures), so that
a change in the machine's load falls on the search and on the standalone
work of the same round alike (run to run, one round's `ratio_sampled` moved
by +-0.05 on an idle 2-core machine, and to 1.48 with another job on the
second core). Each round prints its per-step seconds (mean over the
architectures) and ratios; the last line is the medians over the rounds,
`ratio_sampled=<f> ratio_masked=<f> sampled_speedup=<f> repeats=<n>`
(search step / standalone work of the same round; masked search step /
sampled search step of the same round). CPU only.

The search reads its batches through its input pipeline, with the dataset's
default preprocessing (random crops and flips, on the same 2 cores) unless
`--preprocessing` names another (`none`: only the conversion to floats);
the standalone work runs on constant tensors. `--preprocessing none` takes
the preprocessing out of the search's side (at 6ab8aad on an AVX-512 EPYC,
paired runs differed by 0 to 0.06 s of a ~0.35-0.43 s step: not shown to
matter beyond the spread).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import _harness

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
os.environ.setdefault('CUDA_VISIBLE_DEVICES', '')

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

from tunas_tf.graph import from_spec  # pylint: disable=wrong-import-position
from tunas_tf.graph import model as model_lib  # pylint: disable=wrong-import-position
from tunas_tf.search_space import mobile  # pylint: disable=wrong-import-position
from tunas_tf.search_space import schema  # pylint: disable=wrong-import-position

NUM_CLASSES = 10
CHANNELS = 3  # bench_images
WEIGHT_DECAY = 4e-5
VALIDATION_MULTIPLIER = 4


def search_steps(ssd: str, image_size: int, batch: int, mode: str,
                 warmup: int, steps: int, preprocessing: str = ''):
  """(step seconds, architectures) of the last `steps` search steps.

  On the Estimator engine (its hook reports each step's time and
  architecture; where TF has none, the child says so in one line).
  """
  flags = ([f'--preprocessing={preprocessing}'] if preprocessing else []) + [
      '--engine=estimator', f'--ssd={ssd}', f'--train_batch_size={batch}',
      f'--supernet_mode={mode}', '--max_steps=100000'] + _harness.NO_WARMUP + [
      '--log_every_steps=100000', '--save_checkpoints_steps=100000',
      '--tpu_iterations_per_loop=100'] + _harness.data_flags(image_size)
  record = _harness.run_child('search', flags, warmup + steps, 3600)
  return record['step_s'][warmup:], record['architectures'][warmup:]


def standalone_step(ssd: str, architecture, image_size: int, batch: int,
                    warmup: int, steps: int) -> float:
  """Median seconds of one train step + one validation forward."""
  space = mobile.get_search_space(ssd)
  indices = [architecture[path] for path, _ in schema.flatten_with_paths(space)]
  arch = schema.prune(space, indices)
  graph, constants = from_spec.graph_from_spec(arch, NUM_CLASSES,
                                               input_channels=CHANNELS)
  rng = np.random.default_rng(0)
  with tf.Graph().as_default():
    def batch_of(n):
      images = tf.constant(rng.uniform(size=[n, image_size, image_size,
                                             CHANNELS]), tf.float32)
      labels = tf.one_hot(rng.integers(NUM_CLASSES, size=[n]), NUM_CLASSES)
      return images, labels
    train_images, train_labels = batch_of(batch)
    valid_images, valid_labels = batch_of(batch * VALIDATION_MULTIPLIER)
    model = model_lib.Model(graph, constants, stateless_batch_norm=True,
                            seed=0)
    logits = model(train_images, training=True)
    kernels = [g['kernel'] for op, g in model.op_variables.items()
               if 'kernel' in g and op != from_spec.CLASSIFIER_NAME]
    loss = tf.compat.v1.losses.softmax_cross_entropy(
        train_labels, logits, label_smoothing=0.1) + (WEIGHT_DECAY / 2) * (
            tf.add_n([tf.reduce_sum(tf.square(k)) for k in kernels]))
    opt = tf.compat.v1.train.RMSPropOptimizer(0.1, decay=0.9, momentum=0.9,
                                              epsilon=1.0)
    train_op = opt.minimize(loss)
    with tf.control_dependencies([train_op]):
      valid_logits = model(valid_images, training=False)
    accuracy = tf.reduce_mean(tf.cast(tf.equal(
        tf.argmax(valid_logits, -1), tf.argmax(valid_labels, -1)),
                                      tf.float32))
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      times = []
      for i in range(warmup + steps):
        start = time.perf_counter()
        session.run(accuracy)
        if i >= warmup:
          times.append(time.perf_counter() - start)
  return statistics.median(times)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--ssd', default='cifar_search')
  parser.add_argument('--image_size', type=int, default=32)
  parser.add_argument('--batch', type=int, default=64)
  parser.add_argument('--warmup', type=int, default=3)
  parser.add_argument('--steps', type=int, default=10)
  parser.add_argument('--modes', default='sampled,masked')
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--preprocessing', default='',
                      help="the search's; default: the dataset's")
  args = parser.parse_args()
  modes = args.modes.split(',')
  ratios = {m: [] for m in modes}
  speedups = []
  for round_ in range(args.repeats):
    search = {}
    for mode in modes:
      times, architectures = search_steps(args.ssd, args.image_size,
                                          args.batch, mode, args.warmup,
                                          args.steps, args.preprocessing)
      alone = statistics.mean(
          standalone_step(args.ssd, a, args.image_size, args.batch,
                          args.warmup, args.steps) for a in architectures)
      search[mode] = statistics.mean(times)
      ratios[mode].append(search[mode] / alone)
      print(f'round {round_} {mode:8s} search step {search[mode]:.4f} s   '
            f'standalone train + validation {alone:.4f} s   ratio '
            f'{ratios[mode][-1]:.3f}', flush=True)
    if {'masked', 'sampled'} <= set(search):
      speedups.append(search['masked'] / search['sampled'])
  median = lambda values: statistics.median(values) if values else float(
      'nan')
  _harness.finish('search_step',
                  f'ratio_sampled={median(ratios.get("sampled", [])):.3f} '
                  f'ratio_masked={median(ratios.get("masked", [])):.3f} '
                  f'sampled_speedup={median(speedups):.3f} '
                  f'repeats={args.repeats}')


if __name__ == '__main__':
  main()
