"""Tests for the controller's Adam step (hand-computed, TF1 graph)."""

import math

import numpy as np
import tensorflow as tf

from tunas_tf.controller import optimizer
from tunas_tf.runtime import replicas
from tests.testing import replicated


class ControllerAdamTest(tf.test.TestCase):

  def _run(self, grads_per_step, lrs, reg_grads=None, beta1=0.0,
           active=None):
    with tf.Graph().as_default():
      var = tf.Variable([1.0, 2.0])
      adam = optimizer.ControllerAdam([var], beta1=beta1)
      grad = tf.compat.v1.placeholder(tf.float32, [2])
      lr = tf.compat.v1.placeholder(tf.float32, [])
      reg = None if reg_grads is None else [tf.constant(reg_grads)]
      train = adam.apply([grad], lr, regularization_grads=reg,
                         active=None if active is None else
                         tf.constant(active))
      with self.session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        for g, rate in zip(grads_per_step, lrs):
          sess.run(train, {grad: g, lr: rate})
        return sess.run([var, adam.v[0], adam.beta2_power])

  def test_two_steps_match_hand_computation(self):
    b2, eps, lr = 0.999, 1e-8, 0.1
    g1, g2 = np.array([0.5, -1.0]), np.array([1.0, 2.0])
    var, v, power = self._run([g1, g2], [lr, lr])
    # Step 1: m = g1 (beta1 = 0), v = (1 - b2) g1^2, lr_t = lr sqrt(1 - b2).
    v1 = (1 - b2) * g1**2
    w = np.array([1.0, 2.0]) - lr * math.sqrt(1 - b2) * g1 / (np.sqrt(v1) + eps)
    # Step 2: v = b2 v1 + (1 - b2) g2^2, lr_t = lr sqrt(1 - b2^2).
    v2 = b2 * v1 + (1 - b2) * g2**2
    w = w - lr * math.sqrt(1 - b2**2) * g2 / (np.sqrt(v2) + eps)
    self.assertAllClose(var, w, rtol=1e-5)
    self.assertAllClose(v, v2)
    self.assertAllClose(power, b2**3)  # Initialised to b2, times b2 per step.

  def test_an_inactive_step_changes_nothing(self):
    # One policy of several, on another's turn: its state stays put.
    g = [np.array([0.5, -1.0])]
    var, v, power = self._run(g, [0.1], [0.3, 0.3], active=False)
    self.assertAllEqual(var, [1.0, 2.0])
    self.assertAllEqual(v, [0.0, 0.0])
    self.assertEqual(power, np.float32(0.999))
    for gated, plain in zip(self._run(g, [0.1], [0.3, 0.3], active=True),
                            self._run(g, [0.1], [0.3, 0.3])):
      self.assertAllEqual(gated, plain)

  def test_zero_learning_rate_keeps_weights_but_warms_moments(self):
    var, v, _ = self._run([np.array([1.0, 1.0])], [0.0])
    self.assertAllClose(var, [1.0, 2.0])
    self.assertAllClose(v, [0.001, 0.001])

  def test_regularization_is_a_plain_sgd_step(self):
    var, _, _ = self._run([np.zeros(2)], [0.5], reg_grads=[1.0, -2.0])
    # Adam part is 0 (m = 0); then w -= lr * r.
    self.assertAllClose(var, [0.5, 3.0])

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, r'betas must be in \[0, 1\)'):
      optimizer.ControllerAdam([], beta1=1.0)
    with self.assertRaisesRegex(ValueError, 'epsilon must be > 0'):
      optimizer.ControllerAdam([], epsilon=0.0)


class ReplicatedControllerAdamTest(tf.test.TestCase):
  """ControllerAdam in N replicas (MirroredStrategy on N CPU devices)."""

  def _step(self, grads, reg_grads, lr):
    """One step with replica i's gradient grads[i]; returns what it left."""
    n = len(grads)
    with replicated.graph(n) as strategy:

      def replica_step(i):
        with replicas.identical_variables():
          var = tf.Variable([1.0, 2.0], name='var')
          adam = optimizer.ControllerAdam([var])
        train = adam.apply([tf.constant(grads[i], tf.float32)], lr,
                           [tf.constant(reg_grads[i], tf.float32)])
        return train, var, adam

      train, var, adam = replicated.run(strategy, replica_step)
      var, adam = replicated.local(strategy, var)[0], replicated.local(
          strategy, adam)[0]
      copies = [replicated.local(strategy, v)
                for v in (var, adam.m[0], adam.v[0], adam.beta2_power)]
      with replicated.session(n) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(replicated.local(strategy, train))
        return sess.run(copies)

  def test_moments_and_regularisation_use_replica_means(self):
    b2, eps, lr = 0.999, 1e-8, 0.1
    for grads, reg_grads in (
        ([[0.5, -1.0], [1.5, 3.0]], [[1.0, 0.0], [0.0, -2.0]]),
        ([[0.5, -1.0], [1.5, 3.0], [-2.0, 0.0], [0.0, 4.0]],
         [[1.0, 0.0], [0.0, -2.0], [2.0, 2.0], [1.0, 0.0]])):
      got = self._step(grads, reg_grads, lr)
      g, r = np.array(grads), np.array(reg_grads)
      mean_g, mean_g2 = g.mean(axis=0), (g**2).mean(axis=0)  # Square first.
      v = (1 - b2) * mean_g2
      # beta1 = 0: m = mean g; lr_t = lr sqrt(1 - b2); then w -= lr mean r.
      want = (np.array([1.0, 2.0]) - lr * math.sqrt(1 - b2) * mean_g /
              (np.sqrt(v) + eps) - lr * r.mean(axis=0))
      # Not the square of the mean: the two differ here.
      self.assertGreater(np.abs(mean_g2 - mean_g**2).min(), 0.1)
      var, m, v_slot, power = got
      for copy in var:  # Every replica's copy took the same update.
        self.assertAllClose(copy, want, rtol=1e-5)
      for copies in (m, v_slot, power):
        for copy in copies[1:]:
          self.assertAllEqual(copy, copies[0])
      self.assertAllClose(m[0], mean_g)
      self.assertAllClose(v_slot[0], v)


if __name__ == '__main__':
  tf.test.main()
