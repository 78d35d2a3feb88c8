"""Tests of `runtime/summaries.py`: the host call writes the step's scalars,
vectors element by element and what the task writes from them, every n
steps, splitting its row only on the steps that write."""

import tempfile

from absl.testing import absltest
import numpy as np
import tensorflow as tf
from tensorflow.python.ops import summary_ops_v2  # pylint: disable=g-direct-tensorflow-import

from tunas_tf.runtime import guards
from tunas_tf.runtime import summaries as summaries_lib
from tests.testing import searches


class HostCallTest(absltest.TestCase):

  def test_host_call_writes_every_n_steps(self):
    model_dir = tempfile.mkdtemp()
    scalars = {'a/x': tf.constant(1.5), 'b/y': tf.constant(-2.0)}
    for step in range(5):
      host_fn, args = summaries_lib.host_call(
          scalars, tf.constant(step, tf.int64), model_dir, every_n_steps=2)
      host_fn(*args)
    seen = searches.events(model_dir)
    self.assertEqual(sorted(seen), ['a/x', 'b/y'])
    self.assertEqual(sorted(seen['a/x']), [0, 2, 4])
    self.assertEqual(set(seen['b/y'].values()), {-2.0})

  def test_host_call_writes_vectors_element_by_element(self):
    model_dir = tempfile.mkdtemp()
    logits = tf.constant([0.5, -1.0, 2.0])
    summaries = {'a/x': tf.constant(1.5), 'p/v': logits, 't/w': logits,
                 'b/y': tf.constant(-2.0)}
    # What a task writes of its own, from the written values by tag.
    more = lambda values, step: [tf.summary.scalar(
        'more/sum', values['p/v/2'] + values['a/x'], step=step)]
    host_fn, args = summaries_lib.host_call(
        summaries, tf.constant(0, tf.int64), model_dir, every_n_steps=1,
        write_more=more)
    # One [1, n] tensor; a tensor under two names is sent once.
    self.assertEqual(args[1].shape, [1, 5])
    host_fn(*args)
    seen = {tag: values[0] for tag, values in
            searches.events(model_dir).items()}
    self.assertEqual(seen, {'a/x': 1.5, 'b/y': -2.0, 'p/v/0': 0.5,
                            'p/v/1': -1.0, 'p/v/2': 2.0, 't/w/0': 0.5,
                            't/w/1': -1.0, 't/w/2': 2.0, 'more/sum': 3.5})
    with self.assertRaisesRegex(ValueError, "'m': a scalar or a vector"):
      summaries_lib.host_call({'m': tf.zeros([2, 2])},
                              tf.constant(0, tf.int64), model_dir,
                              every_n_steps=1)

  def test_host_call_queues_the_finite_scalars_of_every_replica(self):
    model_dir = tempfile.mkdtemp()
    with tf.Graph().as_default():
      summaries = {'a/x': tf.constant(1.5), 'p/v': tf.range(2.0),
                   'b/y': tf.constant(-2.0)}
      check = guards.FiniteHook({'b/y': 'y', 'a/x': 'x'}, model_dir, 'toy')
      host_fn, (step, row) = summaries_lib.host_call(
          summaries, tf.constant(3, tf.int64), model_dir, every_n_steps=2,
          check=check)
      # Two replicas' rows, as TPU's host_call gets them: the mean is queued.
      wrote = host_fn(tf.concat([step, step], 0),
                      tf.concat([row, 3 * row], 0))
      queue = check._fifo()  # pylint: disable=protected-access
      with tf.compat.v1.Session() as sess:
        sess.run(summary_ops_v2.summary_writer_initializer_op())
        self.assertFalse(sess.run(wrote))  # Step 3 writes nothing.
        self.assertEqual(sess.run(queue.size()), 1)
        queued_step, queued = sess.run(queue.dequeue())
    self.assertEqual(queued_step, 3)
    np.testing.assert_array_equal(queued, [-4.0, 3.0])
    for finite in ('p/v', 'c/z'):  # A vector, or no such scalar.
      with self.assertRaisesRegex(ValueError, r"^a task's finite_scalars "
                                  r"\['.*'\] are not among its scalars$"):
        summaries_lib.host_call(summaries, tf.constant(0, tf.int64),
                                model_dir, 1, check=guards.FiniteHook(
                                    {finite: finite}, model_dir, 'toy'))

  def test_host_call_splits_the_row_only_on_steps_that_write(self):
    model_dir = tempfile.mkdtemp()
    with tf.Graph().as_default():
      step = tf.compat.v1.placeholder(tf.int64, [])
      summaries = {'a/x': tf.constant(1.5),
                   'p/v': tf.range(4, dtype=tf.float32)}
      host_fn, args = summaries_lib.host_call(summaries, step, model_dir,
                                              every_n_steps=2)
      wrote = host_fn(*args)
      # What TPUEstimator's host-call hook runs at session start off TPU.
      init = summary_ops_v2.summary_writer_initializer_op()
      options = tf.compat.v1.RunOptions(
          trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
      unpacks, results = [], []
      with tf.compat.v1.Session() as sess:
        sess.run(init)
        for t in range(4):
          metadata = tf.compat.v1.RunMetadata()
          results.append(sess.run(wrote, {step: t}, options=options,
                                  run_metadata=metadata))
          unpacks.append(sum(
              '= Unpack(' in node.timeline_label
              for device in metadata.step_stats.dev_stats
              for node in device.node_stats))
    self.assertEqual(results, [True, False, True, False])
    # The row is split into scalars (one Unpack) only when the step writes.
    self.assertEqual(unpacks, [1, 0, 1, 0])


if __name__ == '__main__':
  absltest.main()
