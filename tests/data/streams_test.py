"""Tests of `data/streams.py`: keyed batches, a pure function of (seed,
position), read the same resumed, made anywhere or split over pipelines."""

import numpy as np
import tensorflow as tf

from tunas_tf.data import streams
from tests.testing import elements


class KeyedBatchesTest(tf.test.TestCase):

  def test_keyed_batches_resumed_equal_the_tail_across_epochs(self):
    # 10 examples, batches of 3 and 2 per step: a step is 6 examples, so
    # steps 0..5 span 3.6 epochs; the stream from step 3 starts mid-epoch.
    examples = tf.data.Dataset.range(10)
    whole = elements.take(streams.keyed_batches(
        examples, 10, 3, key=(7, 0), pipeline=streams.Pipeline(0, 1, 2)), 12)
    tail = elements.take(streams.keyed_batches(
        examples, 10, 3, key=(7, 0), start_step=3,
        pipeline=streams.Pipeline(0, 1, 2)), 6)
    self.assertAllEqual(np.stack(whole[6:]), np.stack(tail))
    flat = np.concatenate(whole)
    # Each epoch is a permutation, and the epochs differ in order.
    for epoch in range(3):
      self.assertCountEqual(flat[10 * epoch:10 * epoch + 10], range(10))
    self.assertFalse(np.array_equal(flat[:10], flat[10:20]))
    # Another seed, another order; the same seed, the same.
    other = np.concatenate(elements.take(streams.keyed_batches(
        examples, 10, 3, key=(8, 0)), 3))
    self.assertFalse(np.array_equal(flat[:9], other))
    again = elements.take(streams.keyed_batches(examples, 10, 3,
                                                key=(7, 0)), 3)
    self.assertAllEqual(flat[:9], np.concatenate(again))

  def test_keyed_batches_made_anywhere_read_the_estimators_order(self):
    # The order the Estimator's graph gives (graph-level seed: the job's,
    # `tf_random_seed`) is the one the stream gives made eagerly (as the
    # distribute engine makes it), also for seed 0.
    epoch_seed = streams._epoch_seed  # pylint: disable=protected-access
    for seed in (0, 7):
      with tf.Graph().as_default():
        tf.compat.v1.set_random_seed(seed)
        key = tf.constant([seed, 1], tf.int64)
        data = tf.data.Dataset.range(10)
        estimator = tf.data.Dataset.counter().flat_map(
            lambda epoch: data.shuffle(10, seed=epoch_seed(key, epoch),
                                       reshuffle_each_iteration=False))
        batch = tf.compat.v1.data.make_one_shot_iterator(
            estimator.batch(5)).get_next()
        with tf.compat.v1.Session() as session:
          expected = [session.run(batch) for _ in range(6)]
      ours = elements.take(streams.keyed_batches(
          tf.data.Dataset.range(10), 10, 5, key=(seed, 1)), 6)
      self.assertAllEqual(np.stack(ours), np.stack(expected))

  def test_keyed_batches_pipelines_split_each_step(self):
    # Two hosts of two replicas: host h yields batches 4s + 2h, 4s + 2h + 1.
    examples = tf.data.Dataset.range(10)
    whole = elements.take(streams.keyed_batches(examples, 10, 3,
                                                key=(1, 2)), 16)
    for host in (0, 1):
      mine = elements.take(streams.keyed_batches(
          examples, 10, 3, key=(1, 2), start_step=1,
          pipeline=streams.Pipeline(host, 2, 2)), 6)
      expected = [whole[4 * s + 2 * host + i] for s in (1, 2, 3)
                  for i in (0, 1)]
      self.assertAllEqual(np.stack(mine), np.stack(expected))

  def test_keyed_batches_prepare_is_keyed_on_the_position(self):
    examples = tf.data.Dataset.range(4)
    prepare = lambda x, seed: (x, seed)
    batches = elements.take(streams.keyed_batches(
        examples, 4, 2, key=(3, 1), prepare=prepare), 4)
    seeds = np.concatenate([b[1] for b in batches])
    expected = [tf.random.experimental.stateless_fold_in(
        tf.constant([3, 1], tf.int64), tf.constant(p, tf.int64)).numpy()
                for p in range(8)]
    self.assertAllEqual(seeds, np.stack(expected))

  def test_keyed_batches_refuses(self):
    examples = tf.data.Dataset.range(4)
    with self.assertRaisesRegex(ValueError, '4 examples are fewer than one '
                                'batch of 5'):
      streams.keyed_batches(examples, 4, 5, key=(0, 0))
    with self.assertRaisesRegex(ValueError, 'start_step must be >= 0'):
      streams.keyed_batches(examples, 4, 2, key=(0, 0), start_step=-1)
    with self.assertRaisesRegex(ValueError, 'Bad pipeline'):
      streams.keyed_batches(examples, 4, 2, key=(0, 0),
                             pipeline=streams.Pipeline(2, 2, 1))


if __name__ == '__main__':
  tf.test.main()
