"""Tests for resolving the layer shapes of a pruned network."""

from absl.testing import absltest
from absl.testing import parameterized

from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import resolve
from tunas_tf.search_space import schema
from tunas_tf.search_space.schema import OP_TAG, OneOf


def _tower(*blocks):
  return ops.ConvTowerSpec(tuple(blocks), filters_base=8)


def _by_position(layers):
  return {(l.block_index, l.layer_index): l for l in layers}


class ResolveTest(parameterized.TestCase):

  def test_resolve_layers_mobilenet_v2(self):
    layers = resolve.resolve_layers(mobile.mobilenet_v2(), 224, 3)
    spec = mobile.mobilenet_v2()
    self.assertLen(layers, sum(len(b.layers) for b in spec.blocks))
    at = _by_position(layers)
    stem = at[(0, 0)]
    self.assertEqual((stem.input_width, stem.output_width), (3, 32))
    self.assertEqual((stem.input_size, stem.output_size), (224, 112))
    self.assertEqual((stem.kernel_size, stem.strides), (3, 2))
    # Block 2's first bottleneck: 16 -> 24, expansion 6 of 16 = 96, 112 -> 56.
    first = at[(2, 0)]
    self.assertEqual((first.input_width, first.expanded_width,
                      first.output_width), (16, 96, 24))
    self.assertEqual((first.input_size, first.output_size), (112, 56))
    self.assertIsNone(first.se_width)
    self.assertFalse(first.residual)
    # Block 2's second layer: residual, expansion 6 of 24 = 144.
    second = at[(2, 1)]
    self.assertTrue(second.residual)
    self.assertFalse(second.is_skipped)
    self.assertEqual((second.input_width, second.expanded_width), (24, 144))
    # MobileNetV2 skips block 2's third layer (op index 6 = Zero).
    self.assertTrue(at[(2, 2)].is_skipped)
    self.assertIsInstance(at[(2, 2)].op, ops.ZeroSpec)
    self.assertEqual((at[(2, 2)].input_width, at[(2, 2)].output_width),
                     (24, 24))
    last = layers[-1]
    self.assertIsInstance(last.spec, ops.GlobalAveragePoolSpec)
    self.assertEqual((last.output_width, last.output_size), (1280, 1))

  def test_resolve_layers_mobilenet_v3_large(self):
    at = _by_position(resolve.resolve_layers(mobile.mobilenet_v3_large(), 224))
    # Block 2, layer 0: 5x5, expanded 72, SE make_divisible(18, 8) = 24
    # (16 would lose more than 10% of 18).
    layer = at[(2, 0)]
    self.assertEqual((layer.kernel_size, layer.expanded_width, layer.se_width),
                     (5, 72, 24))
    self.assertEqual((layer.input_size, layer.output_size), (56, 28))
    # Block 6 ends with the global pool; block 7's conv runs at 1x1.
    self.assertEqual(at[(6, 2)].output_size, 1)
    head = at[(7, 0)]
    self.assertEqual((head.input_width, head.output_width), (960, 1280))
    self.assertEqual((head.input_size, head.output_size), (1, 1))

  def test_resolve_layers_relative_expansion_uses_input_width(self):
    spec = schema.prune(mobile.proxylessnas_enlarged_search(),
                        schema.extreme_indices(
                            mobile.proxylessnas_enlarged_search(), True))
    at = _by_position(resolve.resolve_layers(spec, 224))
    # Block 2 (32 wide) follows block 1 (32 wide): x6 of 32 = 192; block 3's
    # first layer reads 32 channels too, its later layers 64: x6 = 384.
    self.assertEqual(at[(2, 0)].expanded_width, 192)
    self.assertEqual(at[(3, 0)].expanded_width, 192)
    self.assertEqual(at[(3, 1)].expanded_width, 384)

  @parameterized.named_parameters(('even', 8, 4), ('odd', 7, 4), ('one', 1, 1))
  def test_resolve_layer_same_padding(self, size, expected):
    layer = resolve.resolve_layer(ops.ConvSpec(3, 2), 3, 8, size, 8)
    self.assertEqual(layer.output_size, expected)

  def test_resolve_layer_filter_multiplier_rounding(self):
    bottleneck = ops.DepthwiseBottleneckSpec(3, ops.FilterMultiplier(3.0),
                                             True, 1)
    # scale_filters(20, 3, 8) = 8 * floor(60/8 + 0.5) = 64;
    # SE: make_divisible(16, 8) = 16.
    layer = resolve.resolve_layer(bottleneck, 20, 24, 4, 8)
    self.assertEqual((layer.expanded_width, layer.se_width), (64, 16))
    absolute = ops.DepthwiseBottleneckSpec(3, 50, False, 1)
    self.assertEqual(
        resolve.resolve_layer(absolute, 20, 24, 4, 8).expanded_width, 50)

  def test_resolve_layers_empty_and_identity_layers(self):
    spec = _tower(ops.Block((ops.ActivationSpec('relu'),
                             ops.DetectionEndpointSpec()), 16))
    layers = resolve.resolve_layers(spec, 5, input_channels=2)
    self.assertEqual([(l.output_width, l.output_size) for l in layers],
                     [(2, 5), (2, 5)])

  def test_resolve_layers_not_pruned(self):
    with self.assertRaisesRegex(
        ValueError, 'filters at blocks/0/filters is a OneOf; resolve a pruned'
        r' spec \(schema.prune\)'):
      resolve.resolve_layers(mobile.proxylessnas_search(), 224)
    spec = _tower(ops.Block((OneOf((ops.ConvSpec(3, 1),), OP_TAG),), 8))
    with self.assertRaisesRegex(ValueError,
                                'layer at blocks/0/layers/0 is a OneOf'):
      resolve.resolve_layers(spec, 8)
    spec = _tower(ops.Block((ops.ConvSpec(OneOf((3, 5), OP_TAG), 1),), 8))
    with self.assertRaisesRegex(ValueError,
                                'kernel_size at blocks/0/layers/0 is a OneOf'):
      resolve.resolve_layers(spec, 8)

  def test_resolve_layers_residual_changing_shape(self):
    spec = _tower(ops.Block((ops.ResidualSpec(ops.ConvSpec(3, 1)),), 16))
    with self.assertRaisesRegex(
        ValueError, r'residual layer at blocks/0/layers/0 changes the shape '
        r'\(width 3 -> 16, size 8 -> 8\)'):
      resolve.resolve_layers(spec, 8)
    spec = _tower(ops.Block((ops.ConvSpec(3, 1),
                             ops.ResidualSpec(ops.ConvSpec(3, 2))), 16))
    with self.assertRaisesRegex(ValueError, 'size 8 -> 4'):
      resolve.resolve_layers(spec, 8)

  def test_resolve_layers_bad_input(self):
    with self.assertRaisesRegex(ValueError, 'image_size .* is 0; expected a '
                                'positive int'):
      resolve.resolve_layers(mobile.mobilenet_v2(), 0)
    with self.assertRaisesRegex(ValueError, 'expected a ConvTowerSpec'):
      resolve.resolve_layers([ops.ConvSpec(3, 1)], 8)

  def test_resolve_layer_unsupported(self):
    with self.assertRaisesRegex(ValueError,
                                "unsupported layer str at blocks/1/layers/2"):
      resolve.resolve_layer('conv', 3, 8, 8, 8, block_index=1, layer_index=2)


if __name__ == '__main__':
  absltest.main()
