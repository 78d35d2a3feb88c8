"""Tests for cost_model/arena: the in-graph arena against `memory.arena_bytes`.

Over 200 random architectures each of mcu_search and digits_search the two
were 0 bytes apart (docs/microcontrollers.md), so these fixed ones must be
equal; a maximum of per-op live bytes alone was up to 13% below.
"""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tunas_tf.cost_model import arena
from tunas_tf.cost_model import features
from tunas_tf.cost_model import macs
from tunas_tf.cost_model import memory
from tunas_tf.search_space import mobile
from tunas_tf.search_space import sample
from tunas_tf.search_space import schema

# Architectures the planner fragments: a per-op maximum of live bytes is
# 13.2% (mcu) and 3.1% (digits) below their arena.
_FRAGMENTED = {
    'mcu_search': '1:2:0:2:1:0:1:0:1:2:2:1:3:1:1:0:2:2:1:2:2:1:3:1:2:0:2:2:'
                  '1:2:0:1:0:2',
    'digits_search': '0:0:0:1:0:0:0:0:1:3:2:0:0:1:0:0:2:5',
}


def _model(ssd, shape):
  return arena.arena_model(ssd, shape.image_size, shape.num_classes,
                           shape.input_channels)


class ArenaTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(('mcu', 'mcu_search', 28),
                                  ('digits', 'digits_search', 8))
  def test_equals_the_planner_replay_in_a_graph_and_eagerly(self, ssd, size):
    space = mobile.get_search_space(ssd)
    shape = macs.resolve_input(ssd, image_size=size)
    model = _model(ssd, shape)
    chosen = [_FRAGMENTED[ssd], schema.extreme_indices(space, False),
              schema.extreme_indices(space, True)] + sample.sample_indices(
                  ssd, 4, seed=11)
    estimate = tf.function(lambda f: arena.estimate_arena(f, model))
    for indices in chosen:
      values = features.features(features.attach_one_hot_masks(space,
                                                               indices))
      exact = memory.arena_bytes(schema.prune(space, indices), shape)
      self.assertEqual(float(estimate(tf.constant(values))), exact, indices)
    # Eagerly too (the distribute engine's tf.function is a graph as well).
    self.assertEqual(float(arena.estimate_arena(values, model)), exact)
    with tf.Graph().as_default():  # And in a TF1 graph, as the Estimator's.
      estimates = [arena.estimate_arena(features.features(
          features.attach_one_hot_masks(space, indices)), model)
                   for indices in chosen]
      with tf.compat.v1.Session() as sess:
        self.assertEqual(sess.run(estimates), [memory.arena_bytes(
            schema.prune(space, indices), shape) for indices in chosen])

  def test_the_smallest_arena_is_the_smallest_architectures(self):
    for ssd in ('mcu_search', 'digits_search'):
      space = mobile.get_search_space(ssd)
      shape = macs.resolve_input(ssd)
      lowest = _model(ssd, shape).lowest
      self.assertEqual(lowest, memory.arena_bytes(schema.prune(
          space, schema.extreme_indices(space, False)), shape))
      self.assertLessEqual(lowest, min(
          memory.arena_bytes(schema.prune(space, i), shape)
          for i in sample.sample_indices(ssd, 30, seed=2)))

  def test_a_mixture_of_choices_of_the_same_buffers_is_their_arena(self):
    # Warm-up masks mix an op decision's choices; the kernel sizes of the
    # separable convolution change no buffer, so a mixture's expected bytes
    # are each choice's (halves: exact in float32).
    space = mobile.get_search_space('digits_search')
    shape = macs.resolve_input('digits_search')
    indices = sample.sample_indices('digits_search', 1, seed=4)[0]
    one_hot = features.attach_one_hot_masks(space, indices)
    kernel = next(path for path, _ in schema.flatten_with_paths(space)
                  if path.endswith('kernel_size'))
    mixed = schema.with_masks(one_hot, lambda path, oneof: (
        np.float32([0.5, 0.5] + [0] * (len(oneof.choices) - 2))
        if path == kernel else oneof.mask))
    self.assertEqual(
        float(arena.estimate_arena(features.features(mixed),
                                   _model('digits_search', shape))),
        memory.arena_bytes(schema.prune(space, indices), shape))

  def test_a_space_it_does_not_model_is_refused(self):
    with self.assertRaisesRegex(ValueError, 'swish6 is not supported'):
      arena.arena_model('mobilenet_v3_like_search', 224, 1001, 3)


if __name__ == '__main__':
  tf.test.main()
