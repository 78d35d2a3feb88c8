"""Tests for search_space/walker.py: the one walker over a spec."""

from absl.testing import absltest

from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import structure
from tunas_tf.search_space import walker
from tunas_tf.search_space.schema import FILTERS_TAG, OP_TAG, OneOf


def _names(part):
  return [getattr(p, 'name', None) for p in structure.walk(part)
          if getattr(p, 'name', None)]


class WalkerTest(absltest.TestCase):

  def test_bottleneck_parts_and_names(self):
    bottleneck = ops.DepthwiseBottleneckSpec(
        OneOf((3, 5), OP_TAG), ops.FilterMultiplier(6.0),
        OneOf((False, True), OP_TAG), 2)
    spec = ops.ConvTowerSpec((ops.Block((ops.ConvSpec(3, 1),), 16),
                              ops.Block((bottleneck,),
                                        OneOf((16, 24), FILTERS_TAG))), 8)
    network = walker.describe_network(spec, 3)
    self.assertLen(network.layers, 2)
    layer = network.layers[1]
    self.assertEqual(layer.prefix, 'blocks/1/layers/0')
    self.assertEqual(_names(layer.part), [
        'blocks/1/layers/0/expand', 'blocks/1/layers/0/depthwise_k3',
        'blocks/1/layers/0/depthwise_k5', 'blocks/1/layers/0/project'])
    chain = layer.part
    self.assertIsInstance(chain, structure.Chain)
    expand, depthwise, se, project = chain.parts
    self.assertEqual(expand.out_width.max, 96)  # 6 x 16.
    self.assertIsInstance(depthwise, structure.Switch)
    self.assertEqual(depthwise.path, 'blocks/1/layers/0/kernel_size')
    self.assertEqual(depthwise.strides, 2)
    # SE is a Switch between the identity (off) and squeeze-excite (on).
    self.assertIsInstance(se, structure.Switch)
    off, on = se.branches
    self.assertIsInstance(off, structure.Identity)
    self.assertEqual((on.reduce_name, on.expand_name, on.hidden.max),
                     ('blocks/1/layers/0/se/reduce',
                      'blocks/1/layers/0/se/expand', 24))
    self.assertIs(project.out_width, layer.out_width)
    self.assertEqual(layer.out_width.path, 'blocks/1/filters')
    self.assertIs(network.output_width, layer.out_width)
    # Inputs come before the widths derived from them.
    order = {id(w): i for i, w in enumerate(network.widths)}
    self.assertLess(order[id(expand.out_width)], order[id(on.hidden)])
    self.assertIs(network.widths[0], network.input_width)

  def test_layer_oneof_is_a_switch_with_zero_branches(self):
    space = mobile.proxylessnas_search()
    network = walker.describe_network(space, 3)
    residual = [l.part for l in network.layers
                if isinstance(l.spec, ops.ResidualSpec)][0]
    self.assertIsInstance(residual, structure.Residual)
    self.assertIsInstance(residual.layer, structure.Switch)
    self.assertIsNone(residual.layer.branches[-1])  # The ZeroSpec choice.
    self.assertLen(residual.layer.branches, 2)
    self.assertIsInstance(residual.layer.branches[0], structure.Chain)

  def test_residual_zero_and_endpoint(self):
    spec = ops.ConvTowerSpec((ops.Block((
        ops.ConvSpec(3, 1), ops.ResidualSpec(ops.ZeroSpec()),
        ops.DetectionEndpointSpec(), ops.ActivationSpec('relu'),
        ops.GlobalAveragePoolSpec()), 8),), 8)
    layers = walker.describe_network(spec, 3).layers
    self.assertIsInstance(layers[1].part, structure.Identity)
    self.assertIsNone(layers[2].part)
    self.assertIs(layers[2].out_width, layers[1].out_width)
    self.assertEqual(layers[3].part.scope, 'blocks/0/layers/3')
    self.assertEqual(layers[4].part.out_size(7), 1)

  def test_pruned_spec_has_static_widths(self):
    arch = mobile.mobilenet_v2()
    network = walker.describe_network(arch, 3)
    for layer in network.layers:
      for part in structure.walk(layer.part):
        self.assertNotIsInstance(part, structure.Switch)
        self.assertIsNotNone(part.out_width.static())

  def test_errors_name_the_path(self):
    def tower(*layers, filters=8):
      return ops.ConvTowerSpec((ops.Block(tuple(layers), filters),), 8)
    for spec, regex in (
        (tower(ops.ConvSpec(0, 1)), 'blocks/0/layers/0/kernel_size: '
         'kernel_size must be a positive'),
        (tower(ops.ResidualSpec(ops.ConvSpec(3, 2))),
         'blocks/0/layers/0: a ResidualSpec layer must keep the shape'),
        (tower(ops.ResidualSpec(ops.GlobalAveragePoolSpec())),
         'blocks/0/layers/0: a ResidualSpec layer must keep the shape'),
        (tower(ops.ResidualSpec(ops.ResidualSpec(ops.ConvSpec(3, 1)))),
         'blocks/0/layers/0: a nested ResidualSpec'),
        (tower(ops.ConvSpec(3, 0)),
         'blocks/0/layers/0/strides: strides must be a positive int, got 0'),
        (tower(ops.SeparableConvSpec(3, True)),
         'blocks/0/layers/0/strides: strides must be a positive int'),
        (tower(OneOf((ops.ConvSpec(3, 1), ops.ConvSpec(3, 2)), OP_TAG)),
         'blocks/0/layers/0: choice 1 gives another stride'),
        (tower(OneOf((ops.DetectionEndpointSpec(),), OP_TAG)),
         'a DetectionEndpointSpec cannot be a OneOf choice'),
        (tower(ops.DepthwiseBottleneckSpec(3, 16, 'yes', 1)),
         'use_squeeze_and_excite: expected a bool'),
        (tower(ops.ConvSpec(3, 1), filters=ops.FilterMultiplier(2.0)),
         'blocks/0/filters: block widths must be ints'),
        (tower('conv'), "blocks/0/layers/0: unsupported layer spec 'conv'")):
      with self.assertRaisesRegex(ValueError, regex):
        walker.describe_network(spec, 3)
    with self.assertRaisesRegex(ValueError, 'expected a ConvTowerSpec'):
      walker.describe_network([], 3)

  def test_unchecked_residual_is_described(self):
    layer = walker.describe_layer(
        ops.ResidualSpec(ops.ConvSpec(3, 2)), structure.FixedWidth(8),
        structure.FixedWidth(8), 8, check_residuals=False)
    self.assertIsInstance(layer.part, structure.Residual)
    self.assertEqual(layer.part.strides, 2)
    self.assertEqual(layer.part.layer.name, 'blocks/0/layers/0/conv_k3')


if __name__ == '__main__':
  absltest.main()
