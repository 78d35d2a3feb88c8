"""Tests for LinopProperty and Pairing (with abstract_nas's linear_test)."""

import itertools
import random

import numpy as np
import tensorflow as tf

from tests.testing import graph_fixtures as fixtures
from tunas_tf.graph import ir
from tunas_tf.graph import model as model_lib
from tunas_tf.graph import rewrite
from tunas_tf.graph import zoo
from tunas_tf.graph.properties import linear

OpType = ir.OpType
M = linear.Pairing.Mapping
ONE, MANY, ALL = int(M.ONE_TO_ONE), int(M.MANY_TO_ONE), int(M.ALL_TO_ONE)


def _one_op(op_type, shape, **op_kwargs):
  graph = ir.new_graph(['input'], ['output'], [
      ir.new_op('output', op_type, ['input'], op_kwargs=op_kwargs)])
  return rewrite.SubgraphModel(graph, {}, None,
                               {'input': np.ones(shape, np.float32)})


def _with_abs_state(graph, x):
  """A SubgraphModel with every variable made non-negative (as upstream)."""
  model = model_lib.Model(graph, seed=0)
  model.build(x.shape)
  model_lib.set_params(model, {
      op: {k: np.abs(v) for k, v in group.items()}
      for op, group in model_lib.get_params(model).items()})
  return rewrite.SubgraphModel(graph, {}, model, {'input': x})


class PairingTest(tf.test.TestCase):

  def test_pairing_join_and_compose(self):
    a = linear.Pairing([[ONE, 0], [0, MANY]])
    b = linear.Pairing([[MANY, 0], [ALL, ONE]])
    self.assertEqual(a.join(b), linear.Pairing([[MANY, 0], [ALL, MANY]]))
    with self.assertRaisesRegex(ValueError, 'Cannot join'):
      a.join(linear.Pairing([[ONE]]))
    # (0,0): via b=0 max(1, 2) = 2; (1,0): via b=1 max(2, 3) = 3;
    # (1,1): via b=1 max(2, 1) = 2; (0,1): no path.
    self.assertEqual(a.compose(b), linear.Pairing([[MANY, 0], [ALL, MANY]]))
    # An ALL_TO_ONE on the first side wins through any connected dim.
    c = linear.Pairing([[ALL, 0]])
    self.assertEqual(c.compose(linear.Pairing([[ONE, ONE], [0, 0]])),
                     linear.Pairing([[ALL, ALL]]))
    self.assertEqual(linear.Pairing.identity(2),
                     linear.Pairing([[ONE, 0], [0, ONE]]))
    with self.assertRaisesRegex(ValueError, 'Cannot compose'):
      a.compose(c)


class LinopPropertyTest(tf.test.TestCase):

  def test_infer_softmax(self):
    lp = linear.LinopProperty().infer(_one_op(OpType.SOFTMAX, [5, 5, 5]))
    self.assertEqual(list(lp.pairings), ['output'])
    self.assertEqual(list(lp.pairings['output']), ['input'])
    self.assertEqual(lp.pairings['output']['input'], linear.Pairing(
        [[ONE, 0, 0], [0, ONE, 0], [ALL, ALL, ALL]]))

  def test_infer_conv(self):
    # NHWC here; upstream's conv input was unbatched HWC.
    lp = linear.LinopProperty().infer(_one_op(
        OpType.CONV, [5, 5, 5, 5], features=10, kernel_size=[3, 3]))
    self.assertEqual(lp.pairings['output']['input'], linear.Pairing(
        [[ONE, 0, 0, 0], [0, MANY, 0, 0], [0, 0, MANY, 0],
         [ALL, ALL, ALL, ALL]]))

  def test_abstract_matches_concrete_on_two_op_graphs(self):
    x = np.ones([5, 5, 5, 5], np.float32)
    activations = (OpType.RELU, OpType.SOFTMAX, OpType.LAYER_NORM,
                   OpType.BATCH_NORM)
    linears = ((OpType.CONV, {'features': 10, 'kernel_size': [3, 3]}),
               (OpType.DENSE, {'features': 10}))
    for act, (lin, kwargs), lin_first in itertools.product(
        activations, linears, (True, False)):
      with self.subTest(act=act.name, lin=lin.name, lin_first=lin_first):
        if lin_first:
          ops = [ir.new_op('other', lin, ['input'], op_kwargs=kwargs),
                 ir.new_op('output', act, ['other'])]
        else:
          ops = [ir.new_op('other', act, ['input']),
                 ir.new_op('output', lin, ['other'], op_kwargs=kwargs)]
        sm = _with_abs_state(ir.new_graph(['input'], ['output'], ops), x)
        abstract = linear.LinopProperty().infer(sm, abstract=True)
        concrete = linear.LinopProperty().infer(sm, abstract=False)
        self.assertEqual(abstract.pairings, concrete.pairings)
        self.assertEqual(abstract.pairings['output']['input'].shape, (4, 4))

  def test_self_satisfy(self):
    for sm in (_one_op(OpType.SOFTMAX, [5, 5, 5, 5]),
               _one_op(OpType.CONV, [5, 5, 5, 5], features=10,
                       kernel_size=[3, 3])):
      self.assertTrue(linear.LinopProperty().infer(sm).verify(sm))

  def test_satisfy_and_unsatisfy(self):
    softmax_sm = _one_op(OpType.SOFTMAX, [5, 5, 5, 5])
    conv_sm = _one_op(OpType.CONV, [5, 5, 5, 5], features=10,
                      kernel_size=[3, 3])
    lp_softmax = linear.LinopProperty().infer(softmax_sm)
    lp_conv = linear.LinopProperty().infer(conv_sm)
    self.assertTrue(lp_softmax.verify(conv_sm))
    self.assertFalse(lp_conv.verify(softmax_sm))
    # Conv is stronger in 2 (H->H, W->W) of its 7 non-zero cells.
    self.assertAllClose(lp_conv.distance_from(lp_softmax), 2 / 7)

  def test_full_cifarnet_abstract(self):
    graph, constants, _ = zoo.CifarNet()
    sm = rewrite.SubgraphModel(graph, constants, None,
                               {'input': np.ones([2, 32, 32, 3], np.float32)})
    lp = linear.LinopProperty().infer(sm)
    # Flatten + dense mix everything into the logits' last dim.
    self.assertEqual(lp.pairings['fc/logits']['input'],
                     linear.Pairing([[ONE, 0], [ALL, ALL], [ALL, ALL],
                                     [ALL, ALL]]))

  def test_rewire_and_concrete_with_spec(self):
    graph, constants, _ = zoo.CifarNet()
    spec = fixtures.cifar_spec()
    new = rewrite.replace_subgraph(graph, spec)
    state = model_lib.Model(new, constants)
    x = np.ones([2, 8, 8, 3], np.float32)
    state(x)
    sm = rewrite.SubgraphModel(new, constants, state, {'input': x}, spec)
    expected = linear.Pairing([[ONE, 0, 0, 0], [0, ONE, 0, 0],
                               [0, 0, ONE, 0], [ALL, ALL, ALL, ALL]])
    for abstract in (True, False):
      lp = linear.LinopProperty().infer(sm, abstract=abstract)
      self.assertEqual(sorted(lp.pairings),
                       ['conv_layer1/gelu/1:0', 'conv_layer1/relu:0'])
      for row in lp.pairings.values():
        self.assertEqual(row, {'conv_layer0/avg_pool:0': expected})

  def test_multi_input_pairings(self):
    spec = fixtures.g3_spec()
    graph = rewrite.replace_subgraph(fixtures.g3_graph(), spec)
    sm = rewrite.SubgraphModel(graph, {}, None,
                               {'input': np.ones([2, 4], np.float32)}, spec)
    lp = linear.LinopProperty().infer(sm)
    self.assertEqual(sorted(lp.pairings['add0:0']), ['dense0:0', 'dense1:0'])
    self.assertEqual(sorted(lp.pairings['add1:0']), ['dense1:0', 'dense2:0'])
    self.assertEqual(lp.pairings['add0:0']['dense0:0'],
                     linear.Pairing.identity(2))

  def test_mutate_and_distance(self):
    pr = linear.Pairing([[ONE, 0], [0, MANY]])
    lp = linear.LinopProperty({'y': {'x': pr, 'w': pr}}, p=1.0)
    self.assertEqual(lp.mutate(random.Random(0)).pairings, {'y': {}})
    lp.p = 0.0
    self.assertEqual(lp.mutate().pairings, lp.pairings)
    weaker = linear.LinopProperty({'y': {'x': linear.Pairing(
        [[ONE, 0], [0, ONE]])}})
    # x: 1 of 2 non-zero cells weaker; w missing: 2 of 2.
    self.assertAllClose(lp.distance_from(weaker), (0.5 + 1.0) / 2)
    with self.assertRaisesRegex(ValueError, 'shape'):
      lp.distance_from(linear.LinopProperty({'y': {'x': linear.Pairing(
          [[ONE]])}}))


if __name__ == '__main__':
  tf.test.main()
