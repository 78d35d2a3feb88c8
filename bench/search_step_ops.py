"""Where a sampled search step's time goes, by op type (RunMetadata).

Usage:
  python bench/search_step_ops.py [--ssd cifar_search] [--image_size 32]
      [--batch 64] [--warmup 4] [--steps 12] [--top 30]
      [--by type|scope] [--depth 1]

Builds the search's model_fn (`runtime.estimator.task_model_fn`, sampled mode,
op and filter warm-ups and the RL delay off, the MACs cost model) in a TF1
graph on constant random batches (the train batch and `rl_batch_size_multiplier`
x it for validation: no input pipeline, no Estimator), runs its train op in
a session configured as the search's (Grappler off), `--warmup` steps, then
`--steps` steps with a full trace. Prints the median wall seconds of a traced
step, the ops run per step, and per op type the milliseconds (summed over
its ops' run times, so parallel ops add up beyond the wall time) and the
count per step, the `--top` largest; with `--by scope`, the same per name
scope (the first `--depth` components of the node names) instead of per op
type. The last line is
`step_s=<f> ops_per_step=<n> kernels_ms=<f> other_ms=<f>` (kernels: the
convolutions and batch norms, forward and backward; other: every other op).
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# pylint: disable=g-import-not-at-top,wrong-import-position
import _harness
import numpy as np
import tensorflow as tf

from tunas_tf import train_search
from tunas_tf.data import datasets
from tunas_tf.runtime import estimator
from tunas_tf.search import task as search_task
from tests.testing import searches

_KERNELS = ('Conv2D', 'DepthwiseConv2dNative', 'FusedBatchNorm')


def _flags(ssd: str, batch: int):
  return searches.search_flags(
      f'--model_dir={tempfile.mkdtemp()}', f'--ssd={ssd}',
      '--max_steps=100000', '--supernet_mode=sampled',
      f'--train_batch_size={batch}', '--cost_model=macs',
      '--preprocessing=none', '--increase_ops_warmup_steps_fraction=0',
      '--increase_filters_warmup_steps_fraction=0',
      '--rl_delay_steps_fraction=0')


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--ssd', default='cifar_search')
  parser.add_argument('--image_size', type=int, default=32)
  parser.add_argument('--batch', type=int, default=64)
  parser.add_argument('--warmup', type=int, default=4)
  parser.add_argument('--steps', type=int, default=12)
  parser.add_argument('--top', type=int, default=30)
  parser.add_argument('--by', choices=('type', 'scope'), default='type')
  parser.add_argument('--depth', type=int, default=1)
  args = parser.parse_args()
  size, batch = args.image_size, args.batch
  info = datasets.DatasetInfo(
      'made_up', size, 3, 10,
      {'search_train': 100000, 'search_validation': 10000, 'test': 100})
  config = train_search.config_from_flags(_flags(args.ssd, batch), info)
  rng = np.random.default_rng(0)
  millis, counts, walls = collections.Counter(), collections.Counter(), []
  type_millis = collections.Counter()  # By op type whatever the key.
  with tf.Graph().as_default():
    tf.compat.v1.train.get_or_create_global_step()

    def batch_of(n):
      return (tf.constant(rng.uniform(size=[n, size, size, 3]), tf.float32),
              tf.one_hot(rng.integers(10, size=[n]), 10))

    train_images, train_labels = batch_of(batch)
    valid_images, valid_labels = batch_of(
        int(batch * config.rl_batch_size_multiplier))
    spec = estimator.task_model_fn(search_task.SearchTask(config), config.job,
                                   config.max_global_step)(
        {'train': train_images, 'validation': valid_images},
        {'train': train_labels, 'validation': valid_labels},
        tf.estimator.ModeKeys.TRAIN, {})
    session_config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    session_config.graph_options.rewrite_options.disable_meta_optimizer = True
    with tf.compat.v1.Session(config=session_config) as session:
      session.run(tf.compat.v1.global_variables_initializer())
      for _ in range(args.warmup):
        session.run(spec.train_op)
      for _ in range(args.steps):
        options = tf.compat.v1.RunOptions(
            trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        metadata = tf.compat.v1.RunMetadata()
        start = time.perf_counter()
        session.run(spec.train_op, options=options, run_metadata=metadata)
        walls.append(time.perf_counter() - start)
        for device in metadata.step_stats.dev_stats:
          for node in device.node_stats:
            label = node.timeline_label
            op_type = (label.split(' = ')[1].split('(')[0] if ' = ' in label
                       else node.node_name)
            key = (op_type if args.by == 'type' else
                   '/'.join(node.node_name.split('/')[:args.depth]))
            millis[key] += node.all_end_rel_micros / 1e3 / args.steps
            counts[key] += 1 / args.steps
            type_millis[op_type] += node.all_end_rel_micros / 1e3 / args.steps
  print(f'{"op type" if args.by == "type" else "name scope":46s} '
        f'{"ms/step":>8s} {"ops/step":>9s}')
  for op_type, ms in millis.most_common(args.top):
    print(f'{op_type:46s} {ms:8.2f} {counts[op_type]:9.0f}')
  kernels = sum(ms for t, ms in type_millis.items()
                if any(k in t for k in _KERNELS))
  _harness.finish('search_step_ops',
                  f'step_s={statistics.median(walls):.4f} '
                  f'ops_per_step={sum(counts.values()):.0f} '
                  f'kernels_ms={kernels:.1f} '
                  f'other_ms={sum(millis.values()) - kernels:.1f}')


if __name__ == '__main__':
  main()
