"""Tests for the MAC count and the exact linear `macs` cost model."""

import random

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tunas_tf.cost_model import features
from tunas_tf.cost_model import macs
from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import resolve
from tunas_tf.search_space import sample
from tunas_tf.search_space import schema
from tunas_tf.search_space.schema import FILTERS_TAG, OP_TAG, OneOf


def _tower(*blocks):
  return ops.ConvTowerSpec(tuple(blocks), filters_base=8)


class MacsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      # Published: MobileNetV2 300M, ProxylessNAS-Mobile 320M, MnasNet-B1
      # 315M, MobileNetV3-Large 219M multiply-adds (224 px).
      ('mobilenet_v2', 'mobilenet_v2', 300e6, 300_775_552),
      ('proxylessnas_mobile', 'proxylessnas_mobile', 320e6, 320_428_864),
      ('mnasnet_b1', 'mnasnet_b1', 315e6, 314_417_152),
      ('mobilenet_v3_large', 'mobilenet_v3_large', 219e6, 216_591_040))
  def test_count_macs_published_figures(self, ssd, published, ours):
    count = macs.count_macs(mobile.get_search_space(ssd), 224, 1001)
    self.assertIsInstance(count, int)
    self.assertBetween(count, 0.95 * published, 1.05 * published)
    self.assertEqual(count, ours)  # Pinned: catches silent changes.

  def test_count_macs_by_hand(self):
    spec = _tower(
        ops.Block((ops.ConvSpec(3, 2), ops.ActivationSpec('relu')), 16),
        ops.Block((ops.DepthwiseBottleneckSpec(
            5, ops.FilterMultiplier(3.0), True, 2),
                   ops.ResidualSpec(ops.ZeroSpec()),
                   ops.GlobalAveragePoolSpec()), 24))
    # Stem on 9x9x3 -> 5x5x16: 25 * 9 * 3 * 16 = 10800.
    # Bottleneck 16 -> 24, expanded 48, SE make_divisible(12, 8) = 16,
    # stride 2 (5 -> 3): expand 25*16*48 = 19200, depthwise 9*25*48 = 10800,
    # SE 48*16 + 16*48 = 1536, project 9*48*24 = 10368. Skip and pool: 0.
    # Classifier on the pooled 1x1x24: 24 * 10 = 240.
    expected = 10800 + 19200 + 10800 + 1536 + 10368 + 240
    self.assertEqual(macs.count_macs(spec, 9, 10), expected)

  def test_count_macs_separable_and_no_pool(self):
    spec = _tower(ops.Block((ops.SeparableConvSpec(3, 1),), 8))
    # Depthwise 4*4*9*2 = 288, pointwise 16*2*8 = 256; classifier 1x1 conv
    # at 4x4 before the pool: 16 * 8 * 5 = 640.
    self.assertEqual(macs.count_macs(spec, 4, 5, input_channels=2),
                     288 + 256 + 640)

  def test_count_macs_input_channels(self):
    spec = schema.prune(mobile.digits_search(),
                        [0] * len(schema.flatten(mobile.digits_search())))
    # Only the stem (3x3, stride 1, 8x8, width 8) sees the image channels.
    delta = macs.count_macs(spec, 8, 10, 3) - macs.count_macs(spec, 8, 10, 1)
    self.assertEqual(delta, 64 * 9 * 2 * 8)

  def test_count_macs_needs_pruned_spec(self):
    with self.assertRaisesRegex(ValueError, 'resolve a pruned spec'):
      macs.count_macs(mobile.proxylessnas_search(), 224, 1001)

  @parameterized.parameters(*sorted(mobile.SEARCH_SPACES))
  def test_macs_cost_model_matches_direct_count(self, ssd):
    spec = mobile.get_search_space(ssd)
    shape = macs.resolve_input(ssd)
    kernel, bias = macs.macs_cost_model(ssd, shape.image_size,
                                        shape.num_classes,
                                        shape.input_channels)
    self.assertEqual(kernel.shape, (features.feature_length(spec),))
    rng = random.Random(ssd)
    counts = schema.num_choices(spec)
    for _ in range(50):
      indices = [rng.randrange(n) for n in counts]
      values = features.features(features.attach_one_hot_masks(spec, indices))
      estimate = float(values.astype(np.float64) @ kernel + bias)
      direct = macs.count_macs(schema.prune(spec, indices), shape.image_size,
                               shape.num_classes, shape.input_channels)
      self.assertAllClose(estimate, direct, rtol=1e-6, atol=0)

  @parameterized.parameters('mobilenet_v2', 'mobilenet_v3_large')
  def test_macs_cost_model_reference_model_is_a_bias(self, ssd):
    kernel, bias = macs.macs_cost_model(ssd, 224, 1001, 3)
    self.assertAllEqual(kernel, [0.0])
    self.assertEqual(bias, macs.count_macs(mobile.get_search_space(ssd), 224,
                                           1001))

  def test_macs_cost_model_other_input(self):
    kernel, bias = macs.macs_cost_model('cifar_search', 64, 100, 3)
    spec = mobile.cifar_search()
    indices = schema.extreme_indices(spec, largest=True)
    values = features.features(features.attach_one_hot_masks(spec, indices))
    self.assertAllClose(values.astype(np.float64) @ kernel + bias,
                        macs.count_macs(schema.prune(spec, indices), 64, 100),
                        rtol=1e-9)

  def test_macs_cost_model_choice_changing_resolution(self):
    spec = _tower(ops.Block(
        (OneOf((ops.ConvSpec(3, 1), ops.ConvSpec(3, 2)), OP_TAG),),
        OneOf((8, 16), FILTERS_TAG)))
    with self.assertRaisesRegex(ValueError,
                                'choices of blocks/0/layers/0 change the output'
                                ' resolution'):
      macs.macs_cost_model_for_spec(spec, 8, 10)

  def test_layer_counts_models_match_direct_counts(self):
    space = mobile.get_search_space('digits_search')
    for count in macs.LAYER_COUNTS:
      kernel, bias = macs.layer_counts_model('digits_search', count, 8, 10, 1)
      for indices in sample.sample_indices('digits_search', 5, seed=3):
        values = features.features(features.attach_one_hot_masks(space,
                                                                 indices))
        layers = resolve.resolve_layers(schema.prune(space, indices), 8, 1)
        direct = sum(macs._layer_counts(layer)[count] for layer in layers)
        self.assertAlmostEqual(float(values @ kernel + bias), direct,
                               msg=f'{count} {indices}')
    with self.assertRaisesRegex(ValueError, "Unknown count 'flops'"):
      macs.layer_counts_model('digits_search', 'flops', 8, 10, 1)

  def test_resolve_input_defaults(self):
    self.assertEqual(macs.resolve_input('proxylessnas_search'),
                     macs.InputSpec(224, 1001, 3))
    self.assertEqual(macs.resolve_input('mobilenet_v2'),
                     macs.InputSpec(224, 1001, 3))
    self.assertEqual(macs.resolve_input('cifar_search'),
                     macs.InputSpec(32, 10, 3))
    self.assertEqual(macs.resolve_input('digits_search'),
                     macs.InputSpec(8, 10, 1))
    self.assertEqual(macs.resolve_input('digits_search', num_classes=12),
                     macs.InputSpec(8, 12, 1))

  def test_resolve_input_errors(self):
    with self.assertRaisesRegex(ValueError, "Unknown search space 'nope'"):
      macs.resolve_input('nope')
    with self.assertRaisesRegex(ValueError,
                                'image_size must be a positive int, got 0'):
      macs.resolve_input('digits_search', image_size=0)

  def test_layer_macs_skipped_layer(self):
    layer = resolve.resolve_layer(ops.ResidualSpec(ops.ZeroSpec()), 16, 16,
                                  8, 8)
    self.assertEqual(macs.layer_macs(layer), 0)


if __name__ == '__main__':
  tf.test.main()
