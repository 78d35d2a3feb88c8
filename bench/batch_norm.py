"""Seconds per batch-norm forward+backward: unfused (moments) vs fused.

Usage:
  python bench/batch_norm.py [--shape 64,16,16,96] [--runs 50] [--warmup 5]

Times, each compiled with `tf.function` (forward, gradients of
sum(y * w) w.r.t. x, gamma and beta):

* stateless: the batch norm the supernet runs, before this change
  (`tf.nn.moments` + `tf.nn.batch_normalization`) against now
  (`masked.stateless_batch_norm`, one `FusedBatchNormV3`);
* stateful training: `graph.ops` batch norm with its moving-average update,
  before (moments + `batch_normalization` + the update) against now (the
  fused op + forward-only moments for the update).

Old and new runs alternate, so that load from other jobs falls on both; it
prints the median (and min) of `--runs` runs of each. CPU only (the GPU, if
any, is hidden).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
os.environ.setdefault('CUDA_VISIBLE_DEVICES', '')
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # pylint: disable=C0413
import tensorflow as tf  # pylint: disable=C0413

from tunas_tf.graph import ops  # pylint: disable=C0413
from tunas_tf.layers import masked  # pylint: disable=C0413

EPSILON = 1e-3
MOMENTUM = 0.99


def old_stateless(x, gamma, beta):
  mean, variance = tf.nn.moments(x, axes=[0, 1, 2])
  return tf.nn.batch_normalization(x, mean, variance, beta, gamma, EPSILON)


def new_stateless(x, gamma, beta):
  width = masked.ActiveWidth(int(x.shape[-1]), int(x.shape[-1]))
  return masked.stateless_batch_norm(x, gamma, beta, width, masked.SAMPLED,
                                     EPSILON)


def old_stateful(x, v):
  mean, variance = tf.nn.moments(x, axes=[0, 1, 2])
  y = tf.nn.batch_normalization(x, mean, variance, v['beta'], v['gamma'],
                                EPSILON)
  updates = [
      v['moving_mean'].assign(
          MOMENTUM * v['moving_mean'] + (1 - MOMENTUM) * mean),
      v['moving_variance'].assign(
          MOMENTUM * v['moving_variance'] + (1 - MOMENTUM) * variance)]
  with tf.control_dependencies(updates):
    return tf.identity(y)


def new_stateful(x, v):
  # pylint: disable=protected-access
  return ops._batch_norm(x, {'epsilon': EPSILON, 'momentum': MOMENTUM}, v,
                         training=True, stateless=False)


def compile_step(fn, params, weights):
  """tf.function: fn's forward and the gradients w.r.t. x and `params`."""

  @tf.function
  def step(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = fn(x)
      loss = tf.reduce_sum(y * weights)
    grads = tape.gradient(loss, [x] + params)
    return loss + tf.add_n([tf.reduce_sum(g) for g in grads]) * 0.0

  return step


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--shape', default='64,16,16,96')
  parser.add_argument('--runs', type=int, default=50)
  parser.add_argument('--warmup', type=int, default=5)
  args = parser.parse_args(argv)
  shape = [int(d) for d in args.shape.split(',')]
  channels = shape[-1]
  rng = np.random.default_rng(0)
  x = tf.constant(rng.normal(size=shape) * 2 + 1, tf.float32)
  weights = tf.constant(rng.normal(size=shape), tf.float32)

  def variables():
    return {'gamma': tf.Variable(rng.normal(size=[channels]), dtype=tf.float32),
            'beta': tf.Variable(rng.normal(size=[channels]), dtype=tf.float32),
            'moving_mean': tf.Variable(tf.zeros([channels]), trainable=False),
            'moving_variance': tf.Variable(tf.ones([channels]),
                                           trainable=False)}

  pairs = {}
  for name, old, new in (('stateless', old_stateless, new_stateless),
                         ('stateful training', old_stateful, new_stateful)):
    steps = []
    for fn in (old, new):
      v = variables()
      if name == 'stateless':
        call = lambda x, fn=fn, v=v: fn(x, v['gamma'], v['beta'])
      else:
        call = lambda x, fn=fn, v=v: fn(x, v)
      steps.append(compile_step(call, [v['gamma'], v['beta']], weights))
    pairs[name] = steps

  for name, (old_step, new_step) in pairs.items():
    times = {'old': [], 'new': []}
    for i in range(args.warmup + args.runs):
      for label, step in (('old', old_step), ('new', new_step)):
        start = time.perf_counter()
        step(x).numpy()
        if i >= args.warmup:
          times[label].append(time.perf_counter() - start)
    old_med = statistics.median(times['old'])
    new_med = statistics.median(times['new'])
    print(f'{name:18s} old {old_med * 1e3:7.2f} ms (min '
          f'{min(times["old"]) * 1e3:.2f})  fused {new_med * 1e3:7.2f} ms '
          f'(min {min(times["new"]) * 1e3:.2f})  old / fused '
          f'{old_med / new_med:.2f}', flush=True)
  print(f'shape {shape}, median of {args.runs} runs each, CPU, '
        f'{os.cpu_count()} cores visible')


if __name__ == '__main__':
  main()
