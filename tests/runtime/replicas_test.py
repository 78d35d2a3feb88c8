"""Tests for `tunas_tf.runtime.replicas`: one replica, a TPU context, N CPU replicas."""

import os
import tempfile

from absl.testing import absltest
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.tpu import tpu_function  # pylint: disable=g-direct-tensorflow-import

from tunas_tf.runtime import replicas
from tests.testing import replicated


def _mirrored(variables):
  return [v for v in variables
          if isinstance(v, tf.distribute.DistributedValues)]


class OneReplicaTest(absltest.TestCase):

  def test_means_are_the_values_and_nothing_changes(self):
    with tf.Graph().as_default():
      x = tf.constant([1.0, -2.0])
      mean_x, mean_square = replicas.means([x, tf.square(x)])
      self.assertIsNone(tf.gradients(mean_x, x)[0])  # No gradient.
      opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)
      self.assertIs(replicas.averaging_optimizer(opt), opt)
      self.assertTrue(replicas.is_first_replica())
      replica = replicas.replica_id()
      self.assertEqual(replica.dtype, tf.int32)
      with replicas.identical_variables():
        v = tf.Variable(0.0)
      self.assertEqual(v.aggregation, tf.VariableAggregation.NONE)
      with tf.compat.v1.Session() as sess:
        self.assertEqual(sess.run(replica), 0)
        np.testing.assert_array_equal(sess.run(mean_x), [1.0, -2.0])
        np.testing.assert_array_equal(sess.run(mean_square), [1.0, 4.0])


class TpuContextTest(absltest.TestCase):
  """Inside `tpu_shard_context`, as TPUEstimator calls the model_fn on TPU.

  Builds the graph only (running it needs a TPU).
  """

  def test_cross_replica_sums_and_cross_shard_optimizer(self):
    with tf.Graph().as_default() as graph:
      with tpu_function.tpu_shard_context(4):
        mean = replicas.mean(tf.constant([1.0, 2.0]))
        opt = replicas.averaging_optimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.1))
        self.assertTrue(replicas.is_first_replica())
        replica = replicas.replica_id()
        with replicas.identical_variables():
          v = tf.Variable(0.0)
    # XLA's replica id (XLA gives each replica of the computation its own).
    self.assertEqual((replica.op.type, replica.dtype),
                     ('XlaReplicaId', tf.int32))
    self.assertIsInstance(opt, tf.compat.v1.tpu.CrossShardOptimizer)
    self.assertEqual(v.aggregation, tf.VariableAggregation.NONE)
    types = [op.type for op in graph.get_operations()]
    self.assertEqual(types.count('CrossReplicaSum'), 1)
    self.assertEqual(mean.op.type, 'RealDiv')  # sum / 4


class MirroredTest(absltest.TestCase):
  """N replicas: MirroredStrategy on N CPU devices, as `--replicas=N`."""

  @pytest.mark.numerics
  def test_means_count_replica_ids_and_identical_variables(self):
    for n in (2, 4):
      seen = []  # Per replica: (count, first, gradient of the mean).
      with replicated.graph(n) as strategy:

        def step(i):
          x = tf.constant([float(i), 2.0 * i + 1.0])
          mean_x, mean_square = replicas.means([x, tf.square(x)])
          with replicas.identical_variables():
            v = tf.Variable([0.0, 0.0], name='v')
          # Every replica assigns; each assigns the same value.
          assign = v.assign_add(mean_x)
          seen.append((replicas.is_first_replica(),
                       tf.gradients(mean_x, x)[0]))
          return mean_x, mean_square, assign, v, replicas.replica_id()

        mean_x, mean_square, assign, v, replica = [
            replicated.local(strategy, out)
            for out in replicated.run(strategy, step)]
        self.assertEqual(seen, [(i == 0, None) for i in range(n)])
        self.assertEqual(v[0].aggregation,
                         tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.assertEqual({r.dtype for r in replica}, {tf.int32})
        with replicated.session(n) as sess:
          sess.run(tf.compat.v1.global_variables_initializer())
          got_x, got_square, _ = sess.run([mean_x, mean_square, assign])
          copies = sess.run(v)  # Its copies.
          self.assertEqual(sess.run(replica), list(range(n)))
      x = np.array([[i, 2 * i + 1] for i in range(n)], np.float32)
      for i in range(n):
        np.testing.assert_allclose(got_x[i], x.mean(axis=0))
        np.testing.assert_allclose(got_square[i], (x**2).mean(axis=0))
      self.assertLen(copies, n)
      for copy in copies:
        np.testing.assert_allclose(copy, x.mean(axis=0))

  def _rmsprop_steps(self, grads_per_replica, num_steps):
    """`num_steps` averaged RMSProp steps on w; every replica's copy of w."""
    n = len(grads_per_replica)
    with replicated.graph(n) as strategy:

      def step(i):
        w = tf.Variable([1.0, -1.0], name='w')
        # A mean-reduced loss (as softmax_cross_entropy) with gradient c_i.
        loss = tf.compat.v1.losses.absolute_difference(
            tf.zeros([2]), grads_per_replica[i] * w)
        loss *= 2.0  # absolute_difference averages over the 2 entries.
        opt = replicas.averaging_optimizer(
            tf.compat.v1.train.RMSPropOptimizer(0.1, decay=0.9, epsilon=1.0))
        return opt.minimize(loss), w

      train, w = replicated.run(strategy, step)
      train = replicated.local(strategy, train)
      with replicated.session(n) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        for _ in range(num_steps):
          sess.run(train)
        return sess.run(replicated.local(strategy, w))

  @pytest.mark.numerics
  def test_averaging_optimizer_applies_the_mean_gradient(self):
    # w = [1, -1] stays on its sides of 0, so for c > 0 the gradient of
    # |c w| is c * sign(w): replica i's gradient is c_i * [1, -1].
    grads = np.array([[1.0, 2.0], [2.0, 0.5]], np.float32)
    copies = self._rmsprop_steps(grads, num_steps=3)
    mean_g = grads.mean(axis=0) * [1.0, -1.0]
    # TF1 RMSProp (ms starts at 1, epsilon inside the root, no momentum).
    w, ms = np.array([1.0, -1.0]), np.ones(2)
    for _ in range(3):
      ms = 0.9 * ms + 0.1 * mean_g**2
      w = w - 0.1 * mean_g / np.sqrt(ms + 1.0)
    for copy in copies:  # float32 steps against float64: measured 6e-8.
      np.testing.assert_allclose(copy, w, rtol=1e-5)

  def test_rmsprop_steps_at_the_rate_of_each_update_on_its_own_slots(self):
    with tf.Graph().as_default():
      w = tf.Variable([1.0, -1.0], name='w')
      optimizer = replicas.rmsprop(0.0, [w])
      slots = tf.compat.v1.global_variables()
      grads = [(tf.constant([1.0, 1.0]), w)]
      with self.assertRaisesRegex(ValueError, 'without its learning rate'):
        optimizer.apply_gradients(grads)
      update = optimizer.at(tf.constant(0.1)).apply_gradients(grads)
      self.assertEqual(tf.compat.v1.global_variables(), slots)  # No new one.
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(update)
        # TF1 RMSProp: ms = 0.9 * 1 + 0.1 * 1, w -= 0.1 * 1 / sqrt(ms + 1).
        np.testing.assert_allclose(sess.run(w), [1.0 - 0.1 / np.sqrt(2.0),
                                                 -1.0 - 0.1 / np.sqrt(2.0)],
                                   rtol=1e-6)

  def test_averaging_optimizer_refuses_to_sum(self):
    strategy = replicas.mirrored_strategy(['/cpu:0', '/cpu:1'])
    # Outside Estimator.train the v1 optimizer would sum the gradients.
    with tf.Graph().as_default(), strategy.scope():
      with self.assertRaisesRegex(ValueError, 'would sum the replicas'):
        replicated.run(strategy, lambda i: replicas.averaging_optimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.1)))

  def test_saver_names_ignore_replicas_and_restore_every_copy(self):
    directory = tempfile.mkdtemp()

    def variables():
      return (tf.Variable([1.0, 2.0], name='a'),
              tf.Variable(3.0, name='scope/b'))

    with tf.Graph().as_default():
      a, b = variables()
      saver = replicas.saver()
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        one = saver.save(sess, os.path.join(directory, 'one'))
    with replicated.graph(2) as strategy:
      replicated.run(strategy, lambda i: variables())
      mirrored = _mirrored(tf.compat.v1.global_variables())
      saver = replicas.saver()
      with replicated.session(2) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        two = saver.save(sess, os.path.join(directory, 'two'))
        # Restoring writes every copy (of a one-replica checkpoint, too).
        copies = [c for v in mirrored for c in replicated.local(strategy, v)]
        sess.run([c.assign(tf.zeros_like(c)) for c in copies])
        saver.restore(sess, one)
        restored = sess.run(copies)
    names = lambda path: sorted(n for n, _ in tf.train.list_variables(path))
    self.assertEqual(names(two), ['a', 'scope/b'])
    self.assertEqual(names(two), names(one))
    self.assertLen(restored, 4)
    np.testing.assert_array_equal(restored[0], [1.0, 2.0])
    np.testing.assert_array_equal(restored[1], [1.0, 2.0])
    self.assertEqual(restored[2:], [3.0, 3.0])

  def test_replica_devices(self):
    if tf.config.list_physical_devices('GPU'):
      self.skipTest('the CPU case')
    self.assertEqual(replicas.replica_devices(3),
                     (['/cpu:0', '/cpu:1', '/cpu:2'], 3))


if __name__ == '__main__':
  absltest.main()
