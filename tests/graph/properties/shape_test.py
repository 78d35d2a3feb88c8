"""Tests for ShapeProperty (abstract_nas's shape_test: CifarNet, batch 5)."""

import random

import numpy as np
import tensorflow as tf

from tests.testing import graph_fixtures as fixtures
from tunas_tf.graph import ir
from tunas_tf.graph import model as model_lib
from tunas_tf.graph import rewrite
from tunas_tf.graph import zoo
from tunas_tf.graph.properties import shape

_X = np.ones([5, 32, 32, 3], np.float32)


def _cifar(graph=None, spec=None, state=False):
  base, constants, _ = zoo.CifarNet()
  graph = graph or base
  model = None
  if state:
    model = model_lib.Model(graph, constants)
    model.build(_X.shape)
  return rewrite.SubgraphModel(graph, constants, model, {'input': _X}, spec)


def _fc_relu_graph():
  graph, _, _ = zoo.CifarNet()
  return ir.new_graph(['input'], ['fc/relu'], graph.ops)


class ShapePropertyTest(tf.test.TestCase):

  def test_infer_concrete_and_abstract(self):
    sm = _cifar(state=True)
    for abstract in (False, True):
      sp = shape.ShapeProperty().infer(sm, abstract=abstract)
      self.assertEqual(sp.input_shapes, {'input': (5, 32, 32, 3)})
      self.assertEqual(sp.output_shapes, {'fc/logits': (5, 10)})

  def test_infer_intermediates(self):
    sp = shape.ShapeProperty().infer(_cifar(), intermediates=True)
    self.assertLen(sp.output_shapes, 11)
    self.assertEqual(sp.output_shapes['fc/logits'], (5, 10))
    self.assertEqual(sp.output_shapes['conv_layer0/conv:0'], (5, 32, 32, 64))

  def test_infer_max_size(self):
    # The largest tensor is conv_layer0/conv's output: 5*32*32*64 = 327,680.
    with self.assertRaisesRegex(RuntimeError, 'max_size'):
      shape.ShapeProperty().infer(_cifar(), max_size=327679)
    shape.ShapeProperty().infer(_cifar(), max_size=327680)

  def test_infer_malformed_graph(self):
    ops = [ir.new_op('c', ir.OpType.CONV, ['input'],
                     op_kwargs={'features': 2, 'kernel_size': 1})]
    graph = ir.new_graph(['input'], ['c'], ops)
    sm = rewrite.SubgraphModel(graph, {}, None, {'input': np.ones([2, 3])})
    with self.assertRaisesRegex(RuntimeError, 'Malformed graph.*rank-4'):
      shape.ShapeProperty().infer(sm)

  def test_self_satisfy(self):
    sm = _cifar()
    sp = shape.ShapeProperty().infer(sm)
    self.assertTrue(sp.verify(sm))
    self.assertEqual(sp.distance_from(sp), 0.0)

  def test_unsatisfy(self):
    sp = shape.ShapeProperty().infer(_cifar())
    other = _cifar(graph=_fc_relu_graph())
    self.assertFalse(sp.verify(other))
    with self.assertRaisesRegex(ValueError, "Output 'fc/logits' is missing"):
      sp.distance_from(shape.ShapeProperty().infer(other))

  def test_rewire(self):
    graph, _, _ = zoo.CifarNet()
    spec = fixtures.cifar_spec()
    sm = _cifar(rewrite.replace_subgraph(graph, spec), spec, state=True)
    for abstract in (True, False):
      sp = shape.ShapeProperty().infer(sm, abstract=abstract)
      self.assertEqual(sp.input_shapes,
                       {'conv_layer0/avg_pool:0': (5, 16, 16, 64)})
      self.assertEqual(sp.output_shapes,
                       {'conv_layer1/gelu/1:0': (5, 16, 16, 64),
                        'conv_layer1/relu:0': (5, 16, 16, 64)})

  def test_mutate_drops_outputs_with_probability_p(self):
    sp = shape.ShapeProperty(output_shapes={'a': (1, 2), 'b': (1, 3)}, p=1.0)
    self.assertEqual(sp.mutate(random.Random(0)).output_shapes, {})
    sp.p = 0.0
    self.assertEqual(sp.mutate().output_shapes, sp.output_shapes)
    with self.assertRaisesRegex(ValueError, r'p must be in \[0, 1\]'):
      shape.ShapeProperty(p=1.5)

  def test_distance_from_values_and_errors(self):
    mine = shape.ShapeProperty({'x': (2, 8)}, {'y': (2, 4, 4, 8)})
    # One of 4 dims differs (channels).
    self.assertAllClose(mine.distance_from(shape.ShapeProperty(
        {'x': (2, 8)}, {'y': (2, 4, 4, 16), 'extra': (1,)})), 0.25)
    # Spatial 8x8 is 2x of 4x4: feasible, 2 of 4 dims differ.
    self.assertAllClose(mine.distance_from(shape.ShapeProperty(
        {'x': (2, 8)}, {'y': (2, 8, 8, 8)})), 0.5)
    for other, regex in (
        (shape.ShapeProperty({'x': (3, 8)}, {'y': (2, 4, 4, 8)}), 'Input'),
        (shape.ShapeProperty({'x': (2, 8)}, {'y': (2, 16, 8)}), 'rank'),
        (shape.ShapeProperty({'x': (2, 8)}, {'y': (3, 4, 4, 8)}), 'batch'),
        (shape.ShapeProperty({'x': (2, 8)}, {'y': (2, 8, 12, 8)}),
         'spatial')):
      with self.assertRaisesRegex(ValueError, regex):
        mine.distance_from(other)
    safe = shape.ShapeProperty({'x': (2, 8)}, {'y': (2, 4, 4, 8)},
                               safety_only=True)
    self.assertEqual(safe.distance_from(shape.ShapeProperty(
        {'x': (2, 8)}, {'y': (2, 4, 4, 16)})), 0.0)


if __name__ == '__main__':
  tf.test.main()
