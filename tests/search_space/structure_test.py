"""Tests for search_space/structure.py: widths and parts."""

from absl.testing import absltest

from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import structure
from tunas_tf.search_space import walker
from tunas_tf.search_space.schema import OP_TAG, OneOf


class WidthTest(absltest.TestCase):

  def test_fixed_choice_and_divisible_widths(self):
    fixed = structure.FixedWidth(16)
    self.assertEqual((fixed.max, fixed.static()), (16, 16))
    # scale_filters(16, 3, 8) = 48, scale_filters(16, 6, 8) = 96.
    choice = structure.ChoiceWidth(
        'p', (ops.FilterMultiplier(3.0), ops.FilterMultiplier(6.0)), fixed, 8)
    self.assertEqual((choice.max, choice.static()), (96, None))
    single = structure.ChoiceWidth(None, (ops.FilterMultiplier(3.0),), fixed,
                                   8)
    self.assertEqual(single.static(), 48)
    # make_divisible(0.25 * 48, 8) = 16; of the widest 96: 24.
    self.assertEqual(structure.DivisibleWidth(single, 0.25, 8).static(), 16)
    self.assertEqual(structure.DivisibleWidth(choice, 0.25, 8).max, 24)
    self.assertIsNone(structure.DivisibleWidth(choice, 0.25, 8).static())

  def test_same_width(self):
    a, b = structure.FixedWidth(8), structure.FixedWidth(8)
    choice = structure.ChoiceWidth('p', (8, 16), None, 8)
    self.assertTrue(structure.same_width(a, b))
    self.assertTrue(structure.same_width(choice, choice))
    self.assertFalse(structure.same_width(a, choice))
    self.assertFalse(structure.same_width(a, structure.FixedWidth(16)))

  def test_multiplier_without_input_is_refused(self):
    with self.assertRaisesRegex(ValueError, 'x: a FilterMultiplier needs an '
                                'input width'):
      structure.ChoiceWidth('x', (ops.FilterMultiplier(2.0),), None, 8)
    with self.assertRaisesRegex(ValueError, 'x: filters must be positive'):
      structure.ChoiceWidth('x', (0,), None, 8)


class PartsTest(absltest.TestCase):

  def test_sized_leaves_of_a_pruned_bottleneck(self):
    network = walker.describe_network(mobile.mobilenet_v2(), 3)
    at = {(l.block_index, l.layer_index): l for l in network.layers}
    # Block 2, layer 0: expand at 112, depthwise stride 2 -> 56, project.
    leaves = structure.sized_leaves(at[(2, 0)].part, 112)
    self.assertEqual([(type(p).__name__, i, o) for p, i, o in leaves],
                     [('Conv', 112, 112), ('Depthwise', 112, 56),
                      ('Conv', 56, 56)])
    self.assertEqual(at[(2, 0)].part.out_size(112), 56)
    self.assertEqual(at[(2, 0)].part.strides, 2)

  def test_sized_leaves_refuses_a_switch(self):
    switch = walker.describe_layer(
        ops.ConvSpec(OneOf((3, 5), OP_TAG), 1), structure.FixedWidth(3),
        structure.FixedWidth(8), 8).part
    self.assertIsInstance(switch, structure.Switch)
    with self.assertRaisesRegex(ValueError, 'blocks/0/layers/0/kernel_size: '
                                'a OneOf; resolve a pruned spec'):
      structure.sized_leaves(switch, 224)

  def test_walk_visits_parents_first_and_switch_branches(self):
    a = structure.FixedWidth(8)
    conv = structure.Conv(a, a, 'c')
    switch = structure.Switch(a, a, path='p', branches=(conv, None))
    chain = structure.Chain(a, a, parts=(switch,))
    residual = structure.Residual(a, a, layer=chain)
    self.assertEqual(structure.walk(residual),
                     [residual, chain, switch, conv])
    self.assertEqual(structure.walk(None), [])


if __name__ == '__main__':
  absltest.main()
