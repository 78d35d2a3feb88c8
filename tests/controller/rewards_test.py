"""Tests for the cost-aware rewards, against hand-computed values."""

import dataclasses
import itertools

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tunas_tf.controller import rewards

# Quality 0.8, target 100, exponent -0.1.
_Q, _T, _B = 0.8, 100.0, -0.1


def _fields(stats):
  # Not dataclasses.astuple: it deep-copies, which symbolic tensors refuse.
  return (stats.reward, stats.cost_ratio, stats.cost_adjustment)


class RewardsTest(parameterized.TestCase, tf.test.TestCase):

  @parameterized.named_parameters(
      # (cost, reward, cost_ratio, cost_adjustment)
      ('abs_slower', rewards.REWARD_ABS, 110.0,
       0.8 - 0.1 * 0.1, 1.1, -0.1 * 0.1),  # Q + beta*|1.1 - 1|
      ('abs_faster', rewards.REWARD_ABS, 90.0,
       0.8 - 0.1 * 0.1, 0.9, -0.1 * 0.1),  # Same penalty either side.
      ('abs_on_target', rewards.REWARD_ABS, 100.0, 0.8, 1.0, 0.0),
      ('abs_zero_cost', rewards.REWARD_ABS, 0.0, 0.8 - 0.1, 0.0, -0.1),
      ('mnas_slower', rewards.REWARD_MNAS, 110.0,
       0.8 * 1.1**-0.1, 1.1, 1.1**-0.1),
      ('mnas_faster', rewards.REWARD_MNAS, 90.0,
       0.8 * 0.9**-0.1, 0.9, 0.9**-0.1),  # A bonus: 0.9**-0.1 > 1.
      ('mnas_on_target', rewards.REWARD_MNAS, 100.0, 0.8, 1.0, 1.0),
      ('mnas_hard_slower', rewards.REWARD_MNAS_HARD, 110.0,
       0.8 * 1.1**-0.1, 1.1, 1.1**-0.1),
      ('mnas_hard_faster', rewards.REWARD_MNAS_HARD, 90.0,
       0.8, 0.9, 1.0),  # min(0.9**-0.1, 1): no bonus.
      ('mnas_hard_on_target', rewards.REWARD_MNAS_HARD, 100.0, 0.8, 1.0, 1.0),
  )
  def test_compute_reward(self, kind, cost, reward, ratio, adjustment):
    stats = rewards.compute_reward(_Q, cost, _T, _B, kind)
    self.assertIsInstance(stats.reward, float)
    self.assertIsInstance(stats.cost_ratio, float)
    self.assertIsInstance(stats.cost_adjustment, float)
    self.assertAllClose(
        [stats.reward, stats.cost_ratio, stats.cost_adjustment],
        [reward, ratio, adjustment], rtol=1e-12, atol=1e-12)

    tf_stats = rewards.compute_reward(
        tf.constant(_Q), tf.constant(cost), _T, _B, kind)
    for value in _fields(tf_stats):
      self.assertTrue(tf.is_tensor(value))
      self.assertEqual(value.dtype, tf.float32)
      self.assertEqual(value.shape, [])
    self.assertAllClose(
        [tf_stats.reward, tf_stats.cost_ratio, tf_stats.cost_adjustment],
        [reward, ratio, adjustment], rtol=1e-6, atol=1e-6)

  def test_compute_reward_numpy_inputs(self):
    stats = rewards.compute_reward(np.float32(_Q), np.float64(110.0),
                                   np.int64(100), _B, rewards.REWARD_MNAS)
    self.assertIsInstance(stats.reward, float)
    self.assertAllClose(stats.reward, 0.8 * 1.1**-0.1)
    stats = rewards.compute_reward(np.array([0.5, 1.0]),
                                   np.array([50.0, 200.0]), _T, _B,
                                   rewards.REWARD_ABS)
    # 0.5 - 0.1*|0.5 - 1|, 1.0 - 0.1*|2 - 1|
    self.assertAllClose(stats.reward, [0.45, 0.9])

  def test_compute_reward_matches_tf_twin_on_grid(self):
    # Python's formula one point at a time; the TF twin on all the points of
    # a kind at once (its ops are elementwise: each point's value is the one
    # a scalar call gives), traced in one graph.
    points = list(itertools.product(
        [0.0, 0.5, 0.8, 1.0],  # quality
        [1.0, 84.0, 85.0, 86.0, 200.0],  # cost
        [85.0, 1.5],  # target
        [-0.1, -0.07, 0.0, 0.3]))  # exponent
    expected = [[_fields(rewards.compute_reward(*point, kind))
                 for point in points] for kind in rewards.REWARDS]
    columns = [tf.constant(column) for column in zip(*points)]

    @tf.function
    def tf_rewards():
      return [_fields(rewards.compute_reward(*columns, kind))
              for kind in rewards.REWARDS]

    got = [np.transpose(fields) for fields in tf_rewards()]
    self.assertAllClose(got, expected, rtol=1e-5, atol=1e-6)

  def test_compute_reward_bfloat16_quality(self):
    stats = rewards.compute_reward(
        tf.constant(0.75, tf.bfloat16), 110.0, _T, _B, rewards.REWARD_MNAS)
    self.assertEqual(stats.reward.dtype, tf.float32)
    self.assertAllClose(stats.reward, 0.75 * 1.1**-0.1)

  def test_reward_stats_is_frozen(self):
    stats = rewards.compute_reward(_Q, 110.0, _T, _B, rewards.REWARD_ABS)
    with self.assertRaises(dataclasses.FrozenInstanceError):
      stats.reward = 1.0

  def test_rewards_tuple(self):
    self.assertEqual(rewards.REWARDS, ('abs', 'mnas', 'mnas_hard'))

  @parameterized.named_parameters(
      ('python', rewards.compute_reward, 1.0),
      ('tf_dispatch', rewards.compute_reward, tf.constant(1.0)))
  def test_compute_reward_unknown_kind_raises(self, fn, quality):
    regex = (r"Unknown reward 'mnas_soft'; expected one of "
             r"\('abs', 'mnas', 'mnas_hard'\)")
    with self.assertRaisesRegex(ValueError, regex):
      fn(quality, 110.0, _T, _B, 'mnas_soft')

  @parameterized.named_parameters(
      ('python_zero', rewards.compute_reward, 0.0),
      ('python_negative', rewards.compute_reward, -5.0),
      ('tf_zero', rewards.compute_reward, tf.constant(0.0)),
      ('tf_constant_negative', rewards.compute_reward, tf.constant(-5.0)))
  def test_compute_reward_non_positive_target_raises(self, fn, target):
    with self.assertRaisesRegex(ValueError, r'target must be > 0.*target=-?\d'):
      fn(_Q, 110.0, target, _B, rewards.REWARD_MNAS)


if __name__ == '__main__':
  tf.test.main()
