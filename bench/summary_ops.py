"""The search step's summary ops: how many are built, how many run per step.

Usage:
  PYTHONPATH=CHECKOUT python bench/summary_ops.py [--ssd digits_search]
      [--steps 4] [--every 2]

Builds the search's model_fn graph (TRAIN, CPU) on the digits input, calls
its host_call's host_fn as TPUEstimator does off TPU, and prints:

- ops of the whole graph, and those that `steps.summary_scalars` and
  `summaries.host_call` (the tensors sent to the host) and the host_fn add to it
  (top level; ops inside function bodies such as a `tf.cond`'s branches are
  not graph ops);
- top-level StridedSlice ops of the summary part;
- per step, in a session (`--every`: the summary cadence), the nodes that
  ran (`RunOptions.FULL_TRACE`, function bodies included), StridedSlice and
  Unpack nodes among them, and whether the step wrote summaries.

The `tunas_tf` it imports is the first on `sys.path`: run it with PYTHONPATH
set to the checkout to measure.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import tempfile

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
os.environ.setdefault('CUDA_VISIBLE_DEVICES', '')

import tensorflow as tf  # pylint: disable=C0413
from tensorflow.python.ops import summary_ops_v2  # pylint: disable=C0413

from tunas_tf import train_search  # pylint: disable=C0413
from tunas_tf.runtime import summaries  # pylint: disable=C0413
from tunas_tf.search import runner  # pylint: disable=C0413
from tunas_tf.search import steps  # pylint: disable=C0413

_OP_TYPE = re.compile(r'= (\w+)\(')


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--ssd', default='digits_search')
  parser.add_argument('--steps', type=int, default=4)
  parser.add_argument('--every', type=int, default=2)
  args = parser.parse_args()
  model_dir = tempfile.mkdtemp()
  values = tf.compat.v1.flags.FlagValues()
  train_search.define_flags(values)
  values(['train_search', f'--model_dir={model_dir}', f'--ssd={args.ssd}',
          '--max_steps=100', f'--tpu_iterations_per_loop={args.every}'])
  config = train_search.config_from_flags(values)

  graph = tf.Graph()
  added = collections.Counter()  # Part -> ops it added to the graph.
  slices = collections.Counter()  # Part -> StridedSlice ops it added.

  def counted(part, fn):
    def wrapper(*a, **k):
      before = len(graph.get_operations())
      result = fn(*a, **k)
      new = graph.get_operations()[before:]
      added[part] += len(new)
      slices[part] += sum(op.type == 'StridedSlice' for op in new)
      return result
    return wrapper

  steps.summary_scalars = counted('summary_scalars', steps.summary_scalars)
  summaries.host_call = counted('host_call (tensors)', summaries.host_call)
  with graph.as_default():
    # As the Estimator does: the same samples in every run of this script.
    tf.compat.v1.set_random_seed(config.job.seed)
    dataset = runner.make_input_fn(config)({})
    features, labels = tf.compat.v1.data.make_one_shot_iterator(
        dataset).get_next()
    spec = runner.make_model_fn(config)(features, labels,
                                        tf.estimator.ModeKeys.TRAIN, None)
    host_fn, tensors = spec.host_call
    host_out = counted('host_fn', host_fn)(*tensors)
    init = [tf.compat.v1.global_variables_initializer(),
            summary_ops_v2.summary_writer_initializer_op()]
    total = len(graph.get_operations())
    library = len(graph.as_graph_def().library.function)

  print(f'graph ops: {total:,} (function bodies in the library: {library})')
  for part in ('summary_scalars', 'host_call (tensors)', 'host_fn'):
    print(f'  {part}: {added[part]:,} ops, {slices[part]:,} StridedSlice')
  print(f'  summary part in all: {sum(added.values()):,} ops, '
        f'{sum(slices.values()):,} StridedSlice')

  options = tf.compat.v1.RunOptions(
      trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
  with tf.compat.v1.Session(graph=graph) as session:
    session.run(init)
    global_step = tf.compat.v1.train.get_global_step(graph)
    for _ in range(args.steps):
      step = int(session.run(global_step))
      metadata = tf.compat.v1.RunMetadata()
      session.run([spec.train_op, host_out], options=options,
                  run_metadata=metadata)
      kinds = collections.Counter()
      for device in metadata.step_stats.dev_stats:
        for node in device.node_stats:
          match = _OP_TYPE.search(node.timeline_label)
          kinds[match.group(1) if match else '?'] += 1
      print(f'step {step} ({"writes" if step % args.every == 0 else "no write"}'
            f'): {sum(kinds.values()):,} nodes ran, '
            f'{kinds["StridedSlice"]:,} StridedSlice, {kinds["Unpack"]} Unpack')


if __name__ == '__main__':
  main()
