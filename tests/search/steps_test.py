"""Tests for the search step's pieces in `search/steps.py`, in a TF1 graph.

The engines increment the global step after a step; `_then_increment` does
it here as they do."""

import tempfile
from unittest import mock

from absl.testing import absltest
import numpy as np
import pytest
import tensorflow as tf

from tunas_tf import train_search
from tunas_tf.controller import optimizer as controller_optimizer
from tunas_tf.controller import rewards
from tunas_tf.cost_model import features as cost_features
from tunas_tf.cost_model import memory
from tunas_tf.data import datasets
from tunas_tf.models import supernet as supernet_lib
from tunas_tf.runtime import estimator as estimator_lib
from tunas_tf.runtime import replicas
from tunas_tf.search import steps
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema
from absl import flags
from tests.testing import ancestry
from tests.testing import replicated
from tests.testing import searches

_DIGITS = datasets.DatasetInfo(
    'digits', 8, 1, 10,
    {'search_train': 1078, 'search_validation': 359, 'test': 360})


def _config(*args):
  values = flags.FlagValues()
  train_search.define_flags(values)
  values(['train_search', '--model_dir=/tmp/unused', '--max_steps=40']
         + list(args))
  return train_search.config_from_flags(values, _DIGITS)


def _reachable(start, target_names):
  """Names in `target_names` reachable backwards from `start` (data+control)."""
  return {op.name for op in ancestry.ancestors(start)} & set(target_names)


def _then_increment(global_step, train_op):
  """`train_op`, then the global step's increment (as an engine does)."""
  with tf.control_dependencies([train_op]):
    return global_step.assign_add(1).op


def _controller_step(dist_info, advantage, global_step, config):
  """`controller_train_op` with a new Adam, its train op then incrementing
  the global step."""
  controller = steps.controller_train_op(
      dist_info, advantage, global_step, config,
      steps.make_controller_adam(dist_info.controller))
  return controller._replace(
      train_op=_then_increment(global_step, controller.train_op))


def _sample(spec, p_ops, p_filters, seed=None):
  """`sample_architecture` from a new controller."""
  return steps.sample_architecture(spec, p_ops, p_filters,
                                   steps.make_controller(spec), seed=seed)

def _scalar_args(cost):
  """(spec, the arguments of steps.summary_scalars) of a digits_search
  sample, the step's values as mocks; `cost` the estimated cost or None."""
  spec = mobile.get_search_space('digits_search')
  _, dist_info = _sample(spec, tf.constant(0.0), tf.constant(0.0))
  step = mock.Mock(loss=tf.constant(1.0), empirical_loss=tf.constant(1.0),
                   regularization_loss=tf.constant(0.0),
                   learning_rate=tf.constant(0.1))
  rl = mock.Mock(reward=tf.constant(0.5), step_baseline=tf.constant(0.5),
                 baseline=tf.constant(0.5), advantage=tf.constant(0.0),
                 cost_ratio=tf.constant(1.0), cost_adjustment=tf.constant(0.0))
  controller = mock.Mock(empirical_loss=tf.constant(0.0),
                         entropy_loss=tf.constant(0.0),
                         learning_rate=tf.constant(0.0))
  return spec, (step, tf.constant(1.0), rl, controller, dist_info, cost,
                tf.constant(0.0), tf.constant(0.0))


def _sampling_step(spec, config, seed):
  """(global step, masks, controller train op) of a one-replica graph."""
  global_step = tf.compat.v1.train.get_or_create_global_step()
  p_ops, p_filters = steps.warmup_probabilities(global_step, config)
  sampled, dist_info = _sample(spec, p_ops, p_filters,
                               seed=steps.sample_seed(seed, global_step))
  controller = _controller_step(dist_info, tf.constant(1.0), global_step,
                                config)
  masks = [oneof.mask for oneof in schema.flatten(sampled)]
  return global_step, masks, controller.train_op


def _digits_controller(config, reward):
  """The global step, controller distribution and train op of digits_search.

  Built in the default graph: no warm-up, `reward` fed as a constant.
  """
  spec = mobile.get_search_space('digits_search')
  global_step = tf.compat.v1.train.get_or_create_global_step()
  _, dist_info = _sample(spec, tf.constant(0.0), tf.constant(0.0))
  controller = _controller_step(dist_info, tf.constant(reward), global_step,
                                config)
  return global_step, dist_info, controller


def _reward(accuracy, cost, config):
  """`reward_and_advantage` with a new baseline."""
  return steps.reward_and_advantage(accuracy, cost, config,
                                    steps.make_baseline(config))


def _model_step(net, sampled, images, labels, global_step, config,
                learning_rate=None):
  """`supernet_train_op` with a new `model_optimizer`, at the step's
  `model_learning_rate` unless given one."""
  if learning_rate is None:
    learning_rate = steps.model_learning_rate(global_step, config)
  return steps.supernet_train_op(net, sampled, images, labels, learning_rate,
                                 config, steps.model_optimizer(config))


def _same(masks, other):
  return all(np.array_equal(a, b) for a, b in zip(masks, other))


class StepsTest(absltest.TestCase):

  def test_sample_at_step_t_is_a_function_of_seed_and_step(self):
    config = _config()  # 40 steps: warm-ups of 10, RL delay 10.
    spec = mobile.get_search_space('digits_search')
    with tf.Graph().as_default():  # Steps 0-5 in a row.
      global_step, masks, train_op = _sampling_step(spec, config, seed=7)
      read = global_step.op.outputs[0].consumers()
      # Grappler off, as in the search's Estimator sessions.
      with tf.compat.v1.Session(
          config=estimator_lib.no_grappler_config()) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        run = [sess.run([masks, train_op])[0] for _ in range(6)]
        self.assertEqual(sess.run(global_step), 6)
    # The step's increment waits for the sample's read of the step.
    seed_reads = {op.name for op in read
                  if op.type == 'ReadVariableOp' and
                  any(c.type == 'Cast' and c.outputs[0].dtype == tf.int32
                      for c in op.outputs[0].consumers())}
    self.assertLen(seed_reads, 1)
    self.assertEqual(_reachable(train_op, seed_reads), seed_reads)
    # A new graph restored at step 3 (the logits are still 0 in the RL
    # delay) draws steps 3-5 as the run did; another seed draws otherwise.
    for seed, equal in ((7, True), (8, False)):
      with tf.Graph().as_default():
        global_step, masks, _ = _sampling_step(spec, config, seed=seed)
        # Grappler off, as in the search's Estimator sessions.
        with tf.compat.v1.Session(
            config=estimator_lib.no_grappler_config()) as sess:
          sess.run(tf.compat.v1.global_variables_initializer())
          for t in (3, 4, 5):
            sess.run(global_step.assign(t))
            self.assertEqual(_same(sess.run(masks), run[t]), equal, t)
    # Each step draws anew (steps 0 and 1 replace most masks: warm-up
    # probabilities 1 and 0.9).
    for t in range(2, 6):
      self.assertFalse(any(_same(run[t], run[u]) for u in range(t)), t)

  def test_training_architecture_controller_or_uniform(self):
    spec = mobile.get_search_space('digits_search')
    original = _config()
    self.assertEqual(original.supernet_sampling, 'controller')
    uniform = _config('--supernet_sampling=uniform')
    with tf.Graph().as_default():
      global_step = tf.compat.v1.train.get_or_create_global_step()
      p_ops, p_filters = steps.warmup_probabilities(global_step, uniform)
      sampled, dist_info = _sample(spec, p_ops, p_filters,
                                   seed=steps.sample_seed(7, global_step))
      # The original trains what the controller sampled: the same masks.
      self.assertIs(steps.training_architecture(
          spec, sampled, p_ops, p_filters, global_step, original), sampled)
      trained = steps.training_architecture(
          spec, sampled, p_ops, p_filters, global_step, uniform)
      pairs = [(a.mask, b.mask) for a, b in
               zip(schema.flatten(sampled), schema.flatten(trained))]
      # Grappler off, as in the search's Estimator sessions.
      with tf.compat.v1.Session(
          config=estimator_lib.no_grappler_config()) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        # The controller sure of its first choice everywhere.
        sess.run([v.assign(tf.one_hot(0, v.shape[0], 30.0, 0.0))
                  for v in dist_info.controller.trainable_variables])
        runs = []
        for t in (20, 21, 22, 23, 20):  # After the warm-ups.
          sess.run(global_step.assign(t))
          runs.append(sess.run(pairs))
    multi = [i for i, (a, _) in enumerate(runs[0]) if len(a) > 1]
    for run in runs:
      # The controller's sample is its argmax; the uniform one is not.
      self.assertTrue(all(run[i][0][0] == 1.0 for i in multi))
      self.assertFalse(all(run[i][1][0] == 1.0 for i in multi))
    # A function of (seed, step): step 20 again draws what it drew.
    self.assertTrue(_same([b for _, b in runs[4]], [b for _, b in runs[0]]))
    self.assertFalse(_same([b for _, b in runs[1]], [b for _, b in runs[0]]))

  def test_warmup_probabilities_decay_linearly(self):
    config = _config()  # 40 steps: warm-ups of 10.
    with tf.Graph().as_default():
      step = tf.compat.v1.placeholder(tf.int64, [])
      p_ops, p_filters = steps.warmup_probabilities(step, config)
      # Grappler off, as in the search's Estimator sessions.
      with tf.compat.v1.Session(
          config=estimator_lib.no_grappler_config()) as sess:
        got = [sess.run([p_ops, p_filters], {step: t}) for t in (0, 5, 10, 30)]
    np.testing.assert_allclose(got, [[1, 1], [0.5, 0.5], [0, 0], [0, 0]])

  def test_first_baseline_is_first_reward_and_advantage(self):
    config = _config('--rl_cost_model_target=100000.0',
                     '--rl_cost_model_exponent=-0.5')
    with tf.Graph().as_default():
      acc = tf.compat.v1.placeholder(tf.float32, [])
      cost = tf.compat.v1.placeholder(tf.float32, [])
      rl = _reward(acc, cost, config)
      # Grappler off, as in the search's Estimator sessions.
      with tf.compat.v1.Session(
          config=estimator_lib.no_grappler_config()) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        first = sess.run(rl, {acc: 0.5, cost: 150000.0})
        second = sess.run(rl, {acc: 0.9, cost: 100000.0})
    expected = rewards.compute_reward(0.5, 150000.0, 100000.0, -0.5,
                                      'abs').reward
    self.assertAlmostEqual(first.reward, expected, places=6)
    self.assertAlmostEqual(first.reward, 0.5 - 0.5 * 0.5, places=6)
    self.assertAlmostEqual(first.baseline, first.reward, places=6)
    self.assertAlmostEqual(first.advantage, 0.0, places=6)
    # Zero-debiased EMA after two values: (m(1-m) r1 + (1-m) r2)/(1-m^2).
    m = config.rl_baseline_momentum
    ema = (m * (1 - m) * first.reward + (1 - m) * 0.9) / (1 - m * m)
    self.assertAlmostEqual(second.baseline, ema, places=5)
    self.assertAlmostEqual(second.advantage, 0.9 - ema, places=5)

  def test_a_sample_over_a_limit_has_its_accuracy_scaled(self):
    # 8 KB SRAM, 20 KB flash: 10 KB of arena (25% over) scales the accuracy
    # by 8 / 10, 25 KB of flash by 20 / 25 more, then the abs cost term adds;
    # under a limit leaves it.
    config = _config('--rl_cost_model_target=100000.0', '--sram_kb=8',
                     '--flash_kb=20')
    with tf.Graph().as_default():
      acc, cost, arena, flash = (tf.compat.v1.placeholder(tf.float32, [])
                                 for _ in range(4))
      rl = steps.reward_and_advantage(
          acc, cost, config, steps.make_baseline(config),
          limits={'estimated_arena': arena, 'estimated_flash': flash})
      with tf.compat.v1.Session(
          config=estimator_lib.no_grappler_config()) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        both, sram, flash_only, under = (
            sess.run(rl.reward, {acc: 0.5, cost: 150000.0,
                                 arena: a * 1024.0, flash: f * 1024.0})
            for a, f in ((10, 25), (10, 20), (6, 25), (6, 20)))
    self.assertAlmostEqual(both, 0.5 * 0.8 * 0.8 - 0.5 * 0.5, places=6)
    self.assertAlmostEqual(sram, 0.5 * 0.8 - 0.5 * 0.5, places=6)
    self.assertAlmostEqual(flash_only, 0.5 * 0.8 - 0.5 * 0.5, places=6)
    self.assertAlmostEqual(under, 0.5 - 0.5 * 0.5, places=6)

  def test_the_limits_are_estimated_for_the_sample_only_when_set(self):
    space = mobile.get_search_space('digits_search')
    indices = schema.extreme_indices(space, True)
    sampled = cost_features.attach_one_hot_masks(space, indices)
    with tf.Graph().as_default() as graph:
      self.assertEqual(steps.estimate_limits(sampled, _config()), {})
      self.assertEmpty(graph.get_operations())  # Not an op more.
      limits = steps.estimate_limits(sampled, _config('--flash_kb=300'))
      self.assertEqual(list(limits), ['estimated_flash'])
      both = steps.estimate_limits(sampled, _config('--sram_kb=30',
                                                    '--flash_kb=300'))
      with tf.compat.v1.Session() as sess:
        flash, arena = sess.run((limits['estimated_flash'],
                                 both['estimated_arena']))
    pruned, shape = schema.prune(space, indices), memory.Shape(8, 10, 1)
    self.assertEqual(flash, memory.flash_bytes(pruned, shape))
    self.assertEqual(arena, memory.arena_bytes(pruned, shape))

  def test_the_limits_are_scalars_only_when_set_shared_by_pairs(self):
    with tf.Graph().as_default():
      _, args = _scalar_args(tf.constant(2.0))
      self.assertNotIn('rlcontroller/estimated_arena',
                       steps.summary_scalars(*args))
      limits = {'estimated_arena': tf.constant(9000.0),
                'estimated_flash': tf.constant(30000.0)}
      s = steps.summary_scalars(*args, limits=limits)
      values = [s['rlcontroller/estimated_arena'],
                s['rlcontroller/estimated_flash']]
      self.assertEmpty([tag for tag in steps.pair_scalars(
          1, *args, limits=limits) if tag.endswith(tuple(limits))])
      with tf.compat.v1.Session() as sess:
        self.assertEqual(sess.run(values), [9000.0, 30000.0])

  def test_barriers_order_the_updates(self):
    """Every update waits for every gradient; validation reads updated weights.

    Removing either barrier (or the control dependency) fails this test.
    """
    config = _config()
    spec = mobile.get_search_space('digits_search')
    with tf.Graph().as_default():
      global_step = tf.compat.v1.train.get_or_create_global_step()
      sampled, dist_info = _sample(spec, tf.constant(0.0), tf.constant(0.0))
      net = supernet_lib.Supernet(spec, 10, input_channels=1)
      images = tf.zeros([4, 8, 8, 1])
      labels = tf.one_hot([0, 1, 2, 3], 10)
      model = _model_step(net, sampled, images, labels, global_step, config)
      accuracy = steps.validation_accuracy(net, sampled, images, labels,
                                           model.train_op, model.grads,
                                           use_barrier=True)
      grad_ops = {g.op.name for g in model.raw_grads}
      self.assertGreater(len(grad_ops), 10)
      apply_ops = [op for op in tf.compat.v1.get_default_graph().get_operations()
                   if op.type.startswith('ResourceApplyRMSProp')]
      self.assertLen(apply_ops, len(model.grads))
      for op in apply_ops:
        self.assertEqual(_reachable(op, grad_ops), grad_ops, op.name)
      # Necessary, not sufficient: the reads inside the supernet's lowered
      # conds wait only through their predicates (supernet_test's
      # test_a_call_after_an_update_reads_the_updated_weights runs it).
      self.assertTrue(
          _reachable(accuracy.op, {model.train_op.name}),
          'validation accuracy does not wait for the model update')
      rl = _reward(accuracy, None, _config('--noenable_cost_model'))
      controller = _controller_step(dist_info, rl.advantage, global_step,
                                    config)
      # The controller step reads the accuracy, hence the updated weights.
      self.assertTrue(_reachable(controller.train_op,
                                 {model.train_op.name}))

  def test_the_model_step_applies_the_learning_rate_it_is_given(self):

    class TinyNet:
      """A linear classifier with the supernet's interface."""

      def __init__(self):
        self.kernel = tf.compat.v1.get_variable('kernel', initializer=tf.ones(
            [64, 10]) * 0.01)
        self.trainable_variables = [self.kernel]

      def __call__(self, spec, images, training):
        del spec, training
        return tf.matmul(tf.reshape(images, [-1, 64]), self.kernel)

      def regularization_loss(self, spec, weight_decay):
        del spec
        return weight_decay / 2 * tf.reduce_sum(tf.square(self.kernel))

    with tf.Graph().as_default():
      global_step = tf.compat.v1.train.get_or_create_global_step()
      net = TinyNet()
      rate = tf.compat.v1.placeholder(tf.float32, [])
      model = _model_step(net, None, tf.ones([4, 8, 8, 1]),
                          tf.one_hot([0, 1, 2, 3], 10), global_step,
                          _config(), learning_rate=rate)
      self.assertIs(model.learning_rate, rate)  # Returned as given.
      with tf.compat.v1.Session(
          config=estimator_lib.no_grappler_config()) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        before = sess.run(net.kernel)
        sess.run(model.train_op, {rate: 0.0})  # Its slots move, not w.
        np.testing.assert_array_equal(sess.run(net.kernel), before)
        sess.run(model.train_op, {rate: 0.1})
        self.assertFalse(np.array_equal(sess.run(net.kernel), before))

  def test_controller_frozen_during_delay(self):
    config = _config('--rl_learning_rate=10.0')  # Delay 10 of 40 steps.
    with tf.Graph().as_default():
      global_step, dist_info, controller = _digits_controller(config, 1.0)
      logits = dist_info.controller.trainable_variables
      # Grappler off, as in the search's Estimator sessions.
      with tf.compat.v1.Session(
          config=estimator_lib.no_grappler_config()) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        for expected_step in range(1, 11):
          lr = sess.run(controller.learning_rate)
          sess.run(controller.train_op)
          self.assertEqual(sess.run(global_step), expected_step)
          self.assertEqual(lr, 0.0)  # Steps 0..9 are the delay.
        for value in sess.run(logits):
          np.testing.assert_array_equal(value, np.zeros_like(value))
        self.assertGreater(sess.run(controller.learning_rate), 0.0)
        sess.run(controller.train_op)
        self.assertEqual(sess.run(global_step), 11)
        moved = sum(float(np.abs(v).sum()) for v in sess.run(logits))
        self.assertGreater(moved, 0.0)

  def test_linear_entropy_schedule_weighs_the_bonus_by_step(self):
    config = _config('--rl_entropy_regularization=2.0',
                     '--rl_entropy_schedule=linear')  # Delay 10 of 40 steps.
    with tf.Graph().as_default():
      global_step, dist_info, controller = _digits_controller(config, 0.0)
      # Grappler off, as in the search's Estimator sessions.
      with tf.compat.v1.Session(
          config=estimator_lib.no_grappler_config()) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        for step, weight in ((0, 2.0), (10, 2.0), (25, 1.0), (40, 0.0)):
          sess.run(global_step.assign(step))
          loss, entropy = sess.run([controller.entropy_loss,
                                    dist_info.entropy])
          self.assertGreater(entropy, 0.0)
          np.testing.assert_allclose(loss, -weight * entropy, rtol=1e-6,
                                     err_msg=f'step {step}')

  def test_summary_scalars_tag_logits_only_when_asked(self):
    with tf.Graph().as_default():
      spec, args = _scalar_args(None)
      plain = steps.summary_scalars(*args)
      tagged = steps.summary_scalars(*args, tag_logits=True)
    self.assertFalse(any(k.startswith('rltaglogits/') for k in plain))
    self.assertEqual(len([k for k in plain if k.startswith('rlpathlogits/')]),
                     len(schema.flatten(spec)))
    extra = [k for k in tagged if k not in plain]
    self.assertTrue(extra)
    self.assertTrue(all(k.startswith('rltaglogits/') for k in extra))

  def test_probability_summaries_probabilities_entropy_and_heatmap(self):
    model_dir = tempfile.mkdtemp()
    logits = {'b/0/filters': [0.5, -1.0, 2.0], 'b/1/op': [0.0, 0.0]}
    scalars = {f'rlpathlogits/{path}/{j}': value
               for path, values in logits.items()
               for j, value in enumerate(values)}
    decisions = [('b/0/filters', ('8', '16', '24')),
                 ('b/1/op', ('Conv', 'skip'))]
    writer = tf.summary.create_file_writer(model_dir)
    with writer.as_default():
      steps.probability_summaries(decisions, scalars, 0)
    writer.close()
    seen, images = searches.events(model_dir), searches.images(model_dir)
    expected = np.exp([0.5, -1.0, 2.0]) / np.exp([0.5, -1.0, 2.0]).sum()
    for label, p in zip(('8', '16', '24'), expected):
      self.assertAlmostEqual(seen[f'rlprobs/b/0/filters/{label}'][0], p,
                             places=6)
    self.assertAlmostEqual(seen['rlprobs/b/1/op/skip'][0], 0.5, places=6)
    self.assertAlmostEqual(seen['rlentropy/b/0/filters'][0],
                           float(-(expected * np.log(expected)).sum()),
                           places=5)
    self.assertAlmostEqual(seen['rlentropy/b/1/op'][0], np.log(2.0), places=6)
    # One row per decision, one column per choice (12 x 24 pixel cells);
    # the missing third choice of b/1/op is grey, a probability near 1 dark.
    heatmap = images['rlprobs_heatmap'][0]
    self.assertEqual(heatmap.shape, (24, 72, 3))
    np.testing.assert_array_equal(heatmap[12, 48], [191, 191, 191])
    self.assertLess(int(heatmap[0, 48].sum()), int(heatmap[0, 0].sum()))


  def test_pair_scalars_name_each_pair_apart(self):
    with tf.Graph().as_default():
      spec, args = _scalar_args(tf.constant(2.0))
      first = steps.pair_scalars(0, *args)
      second = steps.pair_scalars(2, *args)
      self.assertEqual(list(first), list(steps.summary_scalars(*args)))
    self.assertIn('rlcontroller_2/reward', second)
    self.assertIn('rlcontroller_2/estimated_cost', second)
    self.assertEqual(len([k for k in second if k.startswith(
        'rlpathlogits_2/')]), len(schema.flatten(spec)))
    # The shared ones once, under pair 0's (the original's) names.
    self.assertTrue(all(k.startswith(('rlcontroller_2/', 'rlpathlogits_2/'))
                        for k in second))
    self.assertNotIn('rlcontroller_2/validation_accuracy', second)

  def test_the_pairs_take_turns_and_select_their_sample(self):
    with tf.Graph().as_default():
      spec = mobile.get_search_space('digits_search')
      step = tf.compat.v1.placeholder(tf.int64, [])
      self.assertIsNone(steps.active_pair(step, 1))
      pair = steps.active_pair(step, 3)
      samples = [schema.with_masks(spec, lambda _, o, k=k: tf.one_hot(
          k % len(o.choices), len(o.choices))) for k in range(3)]
      chosen = [o.mask for o in schema.flatten(
          steps.select(spec, samples, pair))]
      self.assertIs(steps.select(spec, samples, None), samples[0])
      with tf.compat.v1.Session() as sess:
        for t in (0, 1, 2, 3, 7):
          got = sess.run(chosen, {step: t})
          want = [o.mask for o in schema.flatten(samples[t % 3])]
          self.assertTrue(_same(got, sess.run(want)), t)


class ReplicatedStepsTest(absltest.TestCase):
  """Steps 1-2 and 7-8 in N replicas (MirroredStrategy on N CPU devices).

  Only `tf.distribute` and the steps (no `runtime.replicas` here): before
  the replica module, the baseline used each replica's own reward and the
  controller each replica's own gradient, and this test failed.
  """

  def _build(self, strategy, config, spec):
    """Sample, reward, baseline and controller step of every replica."""
    global_step = tf.compat.v1.train.get_or_create_global_step()

    def replica_step(i):
      with replicas.identical_variables():
        controller = steps.make_controller(spec)
      sampled, dist_info = steps.sample_architecture(
          spec, tf.constant(0.0), tf.constant(0.0), controller,
          seed=steps.sample_seed(5, global_step))
      accuracy = tf.constant(0.25 * (i + 1))  # Replica i's own reward.
      rl = _reward(accuracy, None, config)
      controller = _controller_step(dist_info, rl.advantage, global_step,
                                    config)
      variables = dist_info.controller.trainable_variables
      # The same gradients as the step's (the hand computation's input).
      grads = controller_optimizer.gradients(controller.empirical_loss,
                                             variables)
      grads = [tf.zeros_like(v) if g is None else g
               for g, v in zip(grads, variables)]
      masks = [oneof.mask for oneof in schema.flatten(sampled)]
      baselines = (rl.step_baseline, rl.baseline, rl.advantage)
      return (controller.train_op, grads, masks, baselines,
              controller.learning_rate)

    return replicated.run(strategy, replica_step), global_step

  @pytest.mark.numerics
  def test_baseline_and_controller_use_replica_means(self):
    config = _config('--rl_delay_steps_fraction=0', '--noenable_cost_model',
                     '--increase_ops_warmup_steps_fraction=0',
                     '--increase_filters_warmup_steps_fraction=0')
    # Six decisions (3^4 * 2^2 architectures): what the replicas' means act
    # on, without a supernet's worth of OneOfs to build.
    spec = [schema.OneOf((3, 5, 7), schema.OP_TAG) for _ in range(4)] + [
        schema.OneOf((8, 16), schema.FILTERS_TAG) for _ in range(2)]
    first_masks = None  # Of the 2-replica run.
    for n in (2, 4):
      with replicated.graph(n) as strategy:
        built, global_step = self._build(strategy, config, spec)
        train, grads, masks, rl, lr = [
            replicated.local(strategy, x) for x in built]
        local = lambda v: replicated.local(strategy, v)
        state = [v for v in tf.compat.v1.global_variables()  # Not copies.
                 if isinstance(v, tf.distribute.DistributedValues)]
        with replicated.session(n) as sess:
          sess.run(tf.compat.v1.global_variables_initializer())
          _, grads, masks, rl, lr = sess.run([train, grads, masks, rl, lr])
          logits = sess.run([local(v) for v in state
                             if v.name.startswith('rl_controller/logits/')])
          for _ in range(3):
            sess.run(train)
          copies = sess.run([local(v) for v in state])
          step = sess.run(global_step)
      # Each replica drew its own architecture, the same for replica i
      # whatever the count.
      for i in range(n):
        for j in range(i):
          self.assertFalse(_same(masks[i], masks[j]), (n, i, j))
      first_masks = first_masks or masks
      for i in range(2):
        self.assertTrue(_same(masks[i], first_masks[i]), (n, i))
      # The baseline is the mean reward (its first value), on every replica.
      mean_reward = np.mean([0.25 * (i + 1) for i in range(n)])
      for i, (step_baseline, baseline, advantage) in enumerate(rl):
        self.assertAlmostEqual(step_baseline, mean_reward, places=6)
        self.assertAlmostEqual(baseline, mean_reward, places=6)
        self.assertAlmostEqual(advantage, 0.25 * (i + 1) - mean_reward,
                               places=6)
      # Logits after one step: Adam (beta1 0) on mean g and mean g^2.
      g = np.array([np.concatenate(per_replica) for per_replica in grads])
      self.assertGreater(np.abs(g).max(), 0.0)
      want = replicated.first_adam_step(lr[0], g)
      # float32 Adam against the float64 formula, a few roundings of ~6e-8
      # each: measured at 6% of this bound.
      for copy in zip(*logits):  # Each replica's copy of every variable.
        np.testing.assert_allclose(np.concatenate(copy), want, rtol=1e-4,
                                   atol=1e-7)
      # After 4 steps every variable is the same on every replica, and the
      # global step counted steps, not replica steps.
      for variable in copies:
        for copy in variable[1:]:
          np.testing.assert_array_equal(copy, variable[0])
      self.assertEqual(step, 4)


if __name__ == '__main__':
  absltest.main()
