"""Tests for cost_model/memory: TFLite Micro's arena and the int8 file's
size, estimated from a spec, against tflite-micro and the converter.

The networks are exported as train_eval exports them (uint8 pixels / 255,
int8 weights and activations), untrained but with batch-norm statistics
drawn at random, so biases differ as a trained network's do (an untrained
one's zero biases share buffers in the file).
"""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tunas_tf.cost_model import linear
from tunas_tf.cost_model import macs
from tunas_tf.cost_model import memory
from tunas_tf.graph import inference
from tunas_tf.graph import model as model_lib
from tunas_tf.io import lite
from tunas_tf.search_space import mobile
from tunas_tf.search_space import resolve
from tunas_tf.search_space import sample
from tunas_tf.search_space import schema


def _export(pruned, shape: macs.InputSpec) -> bytes:
  """The int8 .tflite of `pruned`, batch-norm statistics drawn at random."""
  _, net = inference.spec_function(pruned, shape.image_size,
                                   shape.input_channels, shape.num_classes)
  rng = np.random.RandomState(0)
  model_lib.set_params(net, {
      op: {name: (rng.uniform(0.5, 1.5, v.shape)
                  if name in ('gamma', 'moving_variance')
                  else rng.normal(0, 0.1, v.shape))
           for name, v in group.items() if name != 'kernel'}
      for op, group in net.op_variables.items()})
  side, channels = shape.image_size, shape.input_channels
  serve = tf.function(lambda images: net(images / 255.0, training=False),
                      input_signature=[tf.TensorSpec(
                          [None, side, side, channels], tf.float32)])
  calibration = [np.random.RandomState(i).uniform(
      0, 255, [1, side, side, channels]).astype(np.float32) for i in range(4)]
  return lite.convert(serve.get_concrete_function(), net, lite.INT8,
                      calibration=calibration, input_type='uint8')


class AgainstTFLiteMicroTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ('digits', 'digits_search', 8, 2), ('mcu', 'mcu_search', 16, 2))
  def test_arena_within_5_percent_above_and_flash_within_2(self, ssd, size,
                                                           count):
    space = mobile.get_search_space(ssd)
    shape = macs.resolve_input(ssd, image_size=size)  # Small: a fast test.
    for indices in sample.sample_indices(ssd, count, seed=7):
      pruned = schema.prune(space, indices)
      content = _export(pruned, shape)
      needed = lite.micro_arena(content)
      arena = memory.arena_bytes(pruned, shape)
      self.assertBetween(arena, needed, 1.05 * needed, indices)
      self.assertBetween(memory.flash_bytes(pruned, shape),
                         0.98 * len(content), 1.02 * len(content), indices)


class PlannerTest(tf.test.TestCase):

  def test_ties_are_placed_last_requested_first(self):
    # Two 1024-byte buffers in a row, then 512 beside the second: TFLite
    # Micro places the later 1024 first, so the 512 fits where the earlier
    # one was (2048 bytes); request order would need 2560.
    sizes, first, last = [1024, 1024, 512, 1536], [1, 2, 3, 4], [2, 3, 4, 5]
    self.assertEqual(memory.greedy_plan(sizes, first, last), 2048)
    self.assertEqual(memory.greedy_plan([64, 64], [0, 0], [0, 0]), 128)
    self.assertEqual(memory.greedy_plan([64, 64], [0, 1], [0, 1]), 64)

  def test_ops_follow_the_converter(self):
    space = mobile.get_search_space('digits_search')
    shape = macs.resolve_input('digits_search')
    skipped = schema.prune(space, sample.sample_indices('digits_search', 1)[0])
    kinds = [op.kind for op in memory.lite_ops(skipped, shape)[0]]
    self.assertEqual(kinds[:2], ['QUANTIZE', 'CONV_2D'])
    self.assertEqual(kinds[-3:], ['MEAN', 'CONV_2D', 'MEAN'])
    self.assertEqual(kinds.count('ADD'), sum(
        layer.residual and not layer.is_skipped
        for layer in resolve.resolve_layers(skipped, 8, 1)))

  def test_a_network_it_does_not_model_is_refused_naming_the_part(self):
    spec = mobile.get_search_space('mobilenet_v3_large')
    shape = macs.resolve_input('mobilenet_v3_large')
    with self.assertRaisesRegex(ValueError, 'not supported'):
      memory.arena_bytes(spec, shape)
    self.assertIn('not estimated', memory.memory_text(spec, shape))

  def test_flash_is_an_exact_linear_cost_model(self):
    for ssd in ('digits_search', 'mcu_search'):
      model = linear.get_cost_model(ssd, linear.FLASH, image_size=28)
      self.assertEqual((model.kind, linear.short_units(model.units)),
                       ('flash', 'bytes'))
      indices = sample.sample_indices(ssd, 20, seed=1)
      shape = macs.resolve_input(ssd, image_size=28)
      space = mobile.get_search_space(ssd)
      np.testing.assert_allclose(
          linear.estimate_costs_of_indices(indices, model),
          [memory.flash_bytes(schema.prune(space, i), shape)
           for i in indices], rtol=1e-12)
      # The cheapest: the smallest architecture (narrowest, layers skipped).
      self.assertEqual(linear.cost_range(model)[0], memory.flash_bytes(
          schema.prune(space, schema.extreme_indices(space, False)), shape))

  def test_text_in_kilobytes(self):
    spec = mobile.get_search_space('mobilenet_v2')
    text = memory.memory_text(spec, macs.resolve_input('mobilenet_v2'))
    self.assertRegex(text, r'arena [\d,]+\.\d KB, flash [\d,]+\.\d KB$')
    self.assertEqual(memory.kilobytes(1536), '1.5 KB')


if __name__ == '__main__':
  tf.test.main()
