"""Tests for DepthProperty (with abstract_nas's depth_test values)."""

import random

from absl.testing import parameterized
import tensorflow as tf

from tests.testing import graph_fixtures as fixtures
from tunas_tf.graph import ir
from tunas_tf.graph import rewrite
from tunas_tf.graph import zoo
from tunas_tf.graph.properties import depth

OpType = ir.OpType


def _cifar_sm(graph=None, spec=None):
  base, constants, _ = zoo.CifarNet()
  return rewrite.SubgraphModel(graph or base, constants, None, {}, spec)


def _infer(sm, **kwargs):
  return depth.DepthProperty(**kwargs).infer(sm)


class DepthPropertyTest(parameterized.TestCase, tf.test.TestCase):

  def test_infer_cifarnet(self):
    # L L N L L L N L L L N L from a nonlinear graph input: 7 flips.
    self.assertEqual(_infer(_cifar_sm()).depth_map,
                     {'input:0': {'fc/logits:0': 7}})

  def test_infer_resnet18(self):
    graph, constants, _ = zoo.ResNet18()
    sm = rewrite.SubgraphModel(graph, constants, None, {})
    self.assertEqual(_infer(sm).depth_map, {'input:0': {'fc/dense:0': 35}})

  def test_mutate(self):
    dp = _infer(_cifar_sm(), p=1.0, delta_max=5)
    for seed in range(4):
      mutated = dp.mutate(random.Random(seed)).depth_map
      self.assertLen(mutated, 1)
      self.assertIn(mutated['input:0']['fc/logits:0'], (2, 12))
    self.assertEqual(dp.depth_map, {'input:0': {'fc/logits:0': 7}})
    unchanged = _infer(_cifar_sm(), p=0.0).mutate(random.Random(0))
    self.assertEqual(unchanged.depth_map, {'input:0': {'fc/logits:0': 7}})

  def test_self_satisfy(self):
    sm = _cifar_sm()
    self.assertTrue(_infer(sm).verify(sm))

  def test_unsatisfy(self):
    graph, _, _ = zoo.CifarNet()
    other = _cifar_sm(ir.new_graph(['input'], ['fc/relu'], graph.ops))
    self.assertEqual(_infer(other).depth_map, {'input:0': {'fc/relu:0': 6}})
    self.assertFalse(_infer(_cifar_sm()).verify(other))

  def test_satisfy(self):
    graph, _, _ = zoo.CifarNet()
    ops = list(graph.ops[:-2]) + [ir.new_op('fc/logits', OpType.RELU,
                                            ['fc/dense'])]
    shorter = _cifar_sm(ir.new_graph(['input'], ['fc/logits'], ops))
    dp = _infer(shorter)
    self.assertEqual(dp.depth_map, {'input:0': {'fc/logits:0': 6}})
    self.assertTrue(dp.verify(_cifar_sm()))  # deeper is fine

  def test_rewire(self):
    graph, _, _ = zoo.CifarNet()
    spec = fixtures.cifar_spec()
    sm = _cifar_sm(rewrite.replace_subgraph(graph, spec), spec)
    self.assertEqual(_infer(sm).depth_map, {
        'conv_layer0/avg_pool:0': {'conv_layer1/relu:0': 1,
                                   'conv_layer1/gelu/1:0': 1}})

  @parameterized.named_parameters(
      ('conv', ['conv_layer1/conv'], 0),
      ('conv_relu', ['conv_layer1/conv', 'conv_layer1/relu'], 1),
      ('conv_relu_pool', ['conv_layer1/conv', 'conv_layer1/relu',
                          'conv_layer1/avg_pool'], 2))
  def test_infer_cifarnet_subgraphs(self, names, expected):
    graph, _, _ = zoo.CifarNet()
    spec = fixtures.self_spec(graph, names, rewired=[names[-1]])
    new = rewrite.replace_subgraph(graph, spec)
    self.assertEqual(new, graph)  # re-inserting the same ops is a no-op
    dp = _infer(_cifar_sm(new, spec))
    self.assertEqual(dp.depth_map,
                     {'conv_layer0/avg_pool:0': {f'{names[-1]}:0': expected}})

  def test_infer_multi_input(self):
    spec = fixtures.g3_spec()
    graph = rewrite.replace_subgraph(fixtures.g3_graph(), spec)
    sm = rewrite.SubgraphModel(graph, {}, None, {}, spec)
    # dense (L) -> relu (N) -> add (L): 2 flips from each linear input.
    self.assertEqual(_infer(sm).depth_map, {
        'dense0:0': {'add0:0': 2},
        'dense1:0': {'add0:0': 2, 'add1:0': 2},
        'dense2:0': {'add1:0': 2}})

  def test_infer_identity_transparent_and_none_cuts(self):
    ops = [ir.new_op('r', OpType.RELU, ['input']),
           ir.new_op('i', OpType.IDENTITY, ['r']),
           ir.new_op('d', OpType.DENSE, ['i'], op_kwargs={'features': 2}),
           ir.new_op('stop', OpType.NONE, ['d']),
           ir.new_op('e', OpType.DENSE, ['stop'], op_kwargs={'features': 2})]
    graph = ir.new_graph(['input'], ['d', 'e'], ops)
    dp = _infer(rewrite.SubgraphModel(graph, {}, None, {}))
    # input (N) -> relu (N): 0; identity: no flip; dense (L): 1. e is cut off.
    self.assertEqual(dp.depth_map, {'input:0': {'d:0': 1}})

  def test_distance_from(self):
    mine = depth.DepthProperty({'x': {'y': 4, 'z': 2}})
    self.assertEqual(mine.distance_from(depth.DepthProperty(
        {'x': {'y': 5, 'z': 2}})), 0.0)
    # y: (4 - 3) / 4; z missing: 1.
    self.assertAllClose(mine.distance_from(depth.DepthProperty(
        {'x': {'y': 3}})), (0.25 + 1.0) / 2)
    safe = depth.DepthProperty({'x': {'y': 4}}, safety_only=True)
    self.assertEqual(safe.distance_from(depth.DepthProperty({})), 0.0)
    with self.assertRaisesRegex(ValueError, 'delta_max must be >= 0'):
      depth.DepthProperty(delta_max=-1)


if __name__ == '__main__':
  tf.test.main()
