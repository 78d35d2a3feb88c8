"""Tests for replace_subgraph and SubgraphModel on hand-built graphs."""

import copy

import numpy as np
import tensorflow as tf

from tests.testing import graph_fixtures as fixtures
from tunas_tf.graph import ir
from tunas_tf.graph import model as model_lib
from tunas_tf.graph import rewrite
from tunas_tf.graph import zoo

OpType = ir.OpType
Node = rewrite.SubgraphNode


def _chain():
  # input -> a (dense 4) -> b (relu) -> c (dense 2); output c.
  return ir.new_graph(['input'], ['c'], [
      ir.new_op('a', OpType.DENSE, ['input'], op_kwargs={'features': 4}),
      ir.new_op('b', OpType.RELU, ['a']),
      ir.new_op('c', OpType.DENSE, ['b'], op_kwargs={'features': 2})])


def _inputs(graph):
  return {op.name: op.input_names for op in graph.ops}


class ReplaceSubgraphTest(tf.test.TestCase):

  def _replace(self, graph, spec):
    graph_copy, spec_copy = copy.deepcopy(graph), copy.deepcopy(spec)
    new = rewrite.replace_subgraph(graph, spec)
    self.assertEqual(graph, graph_copy)  # the inputs are never mutated
    self.assertEqual(spec, spec_copy)
    return new

  def test_replace_subgraph_chain_prunes_replaced_op(self):
    spec = [Node(ir.new_op('g', OpType.GELU, ['a']), output_names=['b'])]
    new = self._replace(_chain(), spec)
    self.assertEqual(new.op_names, ('a', 'g', 'c'))
    self.assertEqual(_inputs(new), {'a': ('input:0',), 'g': ('a:0',),
                                    'c': ('g:0',)})
    self.assertEqual(new.output_names, ('c',))

  def test_replace_subgraph_insert_after_tensor(self):
    spec = [Node(ir.new_op('ins', OpType.IDENTITY, ['a']), ['a'])]
    new = self._replace(_chain(), spec)
    self.assertEqual(new.op_names, ('a', 'ins', 'b', 'c'))
    self.assertEqual(new.op('ins').input_names, ('a:0',))  # not redirected
    self.assertEqual(new.op('b').input_names, ('ins:0',))

  def test_replace_subgraph_preprocess_graph_input(self):
    spec = [Node(ir.new_op('pre', OpType.SIGMOID, ['input']), ['input'])]
    new = self._replace(_chain(), spec)
    self.assertEqual(new.op_names, ('pre', 'a', 'b', 'c'))
    self.assertEqual(new.op('a').input_names, ('pre:0',))
    self.assertEqual(new.op('pre').input_names, ('input:0',))

  def test_replace_subgraph_rewires_graph_output(self):
    spec = [Node(ir.new_op('head', OpType.SOFTMAX, ['c']), ['c'])]
    new = self._replace(_chain(), spec)
    self.assertEqual(new.output_names, ('head:0',))
    self.assertEqual(new.op_names, ('a', 'b', 'c', 'head'))

  def test_replace_subgraph_same_name_replaces_op(self):
    spec = [Node(ir.new_op('b', OpType.GELU, ['a']), ['b'])]
    new = self._replace(_chain(), spec)
    self.assertEqual(new.op_names, ('a', 'b', 'c'))
    self.assertEqual(new.op('b').type, OpType.GELU)
    # Without output_names the same-named op still takes the old one's place.
    spec = [Node(ir.new_op('b', OpType.SWISH, ['a']))]
    self.assertEqual(self._replace(_chain(), spec).op('b').type, OpType.SWISH)

  def test_replace_subgraph_accepts_out_of_order_spec(self):
    spec = [Node(ir.new_op('y', OpType.GELU, ['x']), ['b']),
            Node(ir.new_op('x', OpType.DENSE, ['a'],
                           op_kwargs={'features': 3}))]
    new = self._replace(_chain(), spec)
    self.assertEqual(new.op_names, ('a', 'x', 'y', 'c'))

  def test_replace_subgraph_multi_output_op_rewires_one_slot(self):
    spec = [Node(ir.new_op('two', OpType.IDENTITY, ['a'], num_outputs=2),
                 [None, 'b'])]
    new = self._replace(_chain(), spec)
    self.assertEqual(new.op('c').input_names, ('two:1',))
    self.assertNotIn('b', new.op_names)

  def test_replace_subgraph_empty_spec_drops_dead_ops(self):
    graph = ir.new_graph(['input'], ['c'], list(_chain().ops) + [
        ir.new_op('dead', OpType.RELU, ['a'])])
    self.assertEqual(self._replace(graph, []).op_names, ('a', 'b', 'c'))

  def test_replace_subgraph_multi_input_multi_output(self):
    # abstract_nas's G3 with spec M1, except relu1 becomes GELU and add1 MUL.
    graph = fixtures.g3_graph()
    spec = fixtures.g3_spec()
    spec[1] = Node(ir.new_op('relu1', OpType.GELU, ['dense1']))
    spec[4] = Node(ir.new_op('add1', OpType.MUL, ['relu1', 'relu2']), ['add1'])
    new = self._replace(graph, spec)
    self.assertLen(new.ops, 8)
    self.assertEqual(new.op('relu1').type, OpType.GELU)
    self.assertEqual(new.op('add1').type, OpType.MUL)
    sm = rewrite.SubgraphModel(new, {}, None, {}, spec)
    self.assertEqual(sm.input_names, ['dense0:0', 'dense1:0', 'dense2:0'])
    self.assertEqual(sm.output_names, ['add0:0', 'add1:0'])
    out = model_lib.Model(new)(np.ones([2, 4], np.float32))
    self.assertEqual(out['add0'].shape, (2, 3))
    self.assertEqual(out['add1'].shape, (2, 3))


class ReplaceSubgraphErrorsTest(tf.test.TestCase):

  def test_replace_subgraph_rejects_missing_tensor(self):
    spec = [Node(ir.new_op('g', OpType.GELU, ['nowhere']), ['b'])]
    with self.assertRaisesRegex(
        ValueError, "op 'g' reads missing tensor 'nowhere:0'"):
      rewrite.replace_subgraph(_chain(), spec)

  def test_replace_subgraph_rejects_duplicate_spec_name(self):
    spec = [Node(ir.new_op('g', OpType.GELU, ['a'])),
            Node(ir.new_op('g', OpType.RELU, ['g']), ['b'])]
    with self.assertRaisesRegex(ValueError,
                                "op 'g' appears twice in the spec"):
      rewrite.replace_subgraph(_chain(), spec)

  def test_replace_subgraph_rejects_unknown_output_name(self):
    spec = [Node(ir.new_op('g', OpType.GELU, ['a']), ['zzz'])]
    with self.assertRaisesRegex(
        ValueError, "op 'g' rewires 'zzz:0', which is not a tensor"):
      rewrite.replace_subgraph(_chain(), spec)

  def test_replace_subgraph_rejects_cycle(self):
    # g reads c (downstream of b) and replaces b: c -> g -> c.
    spec = [Node(ir.new_op('g', OpType.GELU, ['c']), ['b'])]
    with self.assertRaisesRegex(ValueError, 'cycle: (c -> g -> c|g -> c -> g)'):
      rewrite.replace_subgraph(_chain(), spec)

  def test_replace_subgraph_rejects_unused_node(self):
    spec = [Node(ir.new_op('g', OpType.GELU, ['a']), ['b']),
            Node(ir.new_op('lost', OpType.RELU, ['a']))]
    with self.assertRaisesRegex(ValueError, "op 'lost' of the spec is unused"):
      rewrite.replace_subgraph(_chain(), spec)

  def test_replace_subgraph_rejects_tensor_rewired_twice(self):
    spec = [Node(ir.new_op('g', OpType.GELU, ['a']), ['b']),
            Node(ir.new_op('h', OpType.RELU, ['a']), ['b'])]
    with self.assertRaisesRegex(ValueError, "op 'h' rewires 'b:0', which "
                                "'g:0' already rewires"):
      rewrite.replace_subgraph(_chain(), spec)

  def test_replace_subgraph_rejects_input_name_and_bad_node(self):
    spec = [Node(ir.new_op('input', OpType.GELU, ['a']), ['b'])]
    with self.assertRaisesRegex(ValueError, "op 'input' has the name of a"):
      rewrite.replace_subgraph(_chain(), spec)
    with self.assertRaisesRegex(ValueError, 'expected SubgraphNode'):
      rewrite.replace_subgraph(_chain(), [ir.new_op('g', OpType.GELU, ['a'])])

  def test_subgraph_node_rejects_too_many_output_names(self):
    with self.assertRaisesRegex(ValueError, "SubgraphNode 'g': 2 output_names"):
      Node(ir.new_op('g', OpType.GELU, ['a']), ['b', 'c'])
    self.assertEqual(Node(ir.new_op('g', OpType.GELU, ['a']), ['b']).rewires,
                     [('b:0', 'g:0')])


class ZooRewriteTest(tf.test.TestCase):

  def test_replace_subgraph_cifarnet_spec(self):
    graph, constants, _ = zoo.CifarNet()
    new = rewrite.replace_subgraph(graph, fixtures.cifar_spec())
    self.assertEqual(new.op_names, (
        'proj', 'conv_layer0/conv', 'conv_layer0/relu', 'conv_layer0/avg_pool',
        'conv_layer1/conv/1', 'conv_layer1/gelu/1', 'conv_layer1/avg_pool',
        'flatten', 'fc/dense', 'fc/relu', 'fc/logits'))
    self.assertEqual(new.op('conv_layer1/avg_pool').input_names,
                     ('conv_layer1/gelu/1:0',))
    model = model_lib.Model(new, constants)
    self.assertEqual(model(tf.ones([2, 32, 32, 3])).shape, (2, 10))
    # Fewer parameters: 1,074,186 vs 2,192,458.
    self.assertEqual(model_lib.count_params(model), 1074186)

  def test_replace_subgraph_resnet18_conv_bn_relu_by_conv_gelu(self):
    graph, constants, _ = zoo.ResNet18(num_classes=10,
                                       input_resolution='small')
    p = 'resnet_stride1_filtermul1_basic11/'
    spec = [Node(ir.new_op(p + 'conv0/new', OpType.CONV, ['proj4'],
                           op_kwargs={'features': 'S:-1', 'kernel_size': 3})),
            Node(ir.new_op(p + 'gelu/new', OpType.GELU, [p + 'conv0/new']),
                 [p + 'relu2'])]
    new = rewrite.replace_subgraph(graph, spec)
    self.assertLen(new.ops, len(graph.ops) - 1)  # 68
    for name in ('conv0', 'bn1', 'relu2'):
      self.assertNotIn(p + name, new.op_names)
    self.assertEqual(new.op(p + 'conv3').input_names, (p + 'gelu/new:0',))
    x = tf.ones([2, 16, 16, 3])
    self.assertEqual(model_lib.Model(new, constants)(x).shape,
                     model_lib.Model(graph, constants)(x).shape)

  def test_replace_subgraph_resnet18_two_inputs_two_outputs(self):
    graph, constants, _ = zoo.ResNet18()
    p = 'resnet_stride1_filtermul1_basic11/'
    # Reads conv0, resnet11/bn and proj4; replaces bn1 and the residual add,
    # both read by old ops (relu2, skip/relu1).
    spec = [Node(ir.new_op('new/bn', OpType.BATCH_NORM, [p + 'conv0']),
                 [p + 'bn1']),
            Node(ir.new_op('new/add', OpType.ADD, ['resnet11/bn', 'proj4']),
                 ['resnet11/skip/add0'])]
    new = rewrite.replace_subgraph(graph, spec)
    self.assertLen(new.ops, len(graph.ops))
    self.assertNotIn(p + 'bn1', new.op_names)
    self.assertNotIn('resnet11/skip/add0', new.op_names)
    self.assertEqual(new.op(p + 'relu2').input_names, ('new/bn:0',))
    self.assertEqual(new.op('resnet11/skip/relu1').input_names,
                     ('new/add:0',))
    sm = rewrite.SubgraphModel(new, constants, None, {}, spec)
    self.assertEqual(sm.input_names,
                     [p + 'conv0:0', 'resnet11/bn:0', 'proj4:0'])
    self.assertEqual(sm.output_names, ['new/bn:0', 'new/add:0'])
    self.assertEqual(sm.aliases, {'new/bn:0': [p + 'bn1:0'],
                                  'new/add:0': ['resnet11/skip/add0:0']})
    out = model_lib.Model(new, constants)(tf.ones([2, 16, 16, 3]))
    self.assertEqual(out.shape, (2, 10))


class SubgraphModelTest(tf.test.TestCase):

  def test_subgraph_model_names_with_spec(self):
    graph, constants, _ = zoo.CifarNet()
    spec = fixtures.cifar_spec()
    new = rewrite.replace_subgraph(graph, spec)
    sm = rewrite.SubgraphModel(new, constants, None, {}, spec)
    self.assertEqual(sm.input_names, ['conv_layer0/avg_pool:0'])
    self.assertEqual(sm.output_names, ['conv_layer1/gelu/1:0'])
    self.assertEqual(sm.aliases, {'conv_layer1/gelu/1:0':
                                  ['conv_layer1/relu:0']})
    self.assertEqual(sm.subg_graph.op_names,
                     ('conv_layer1/conv/1', 'conv_layer1/gelu/1'))
    self.assertEqual(sm.subg_inputs_graph.op_names[-1], 'conv_layer0/avg_pool')
    self.assertEqual(sm.subg_outputs_graph.op_names[-1], 'conv_layer1/gelu/1')

  def test_subgraph_model_without_spec(self):
    graph, constants, _ = zoo.CifarNet()
    sm = rewrite.SubgraphModel(graph, constants, None, {})
    self.assertEqual(sm.input_names, ['input:0'])
    self.assertEqual(sm.output_names, ['fc/logits:0'])
    self.assertIs(sm.subg_graph, graph)
    self.assertIsNone(sm.subg_inputs_graph)

  def test_subgraph_model_executes_with_state(self):
    graph, constants, _ = zoo.CifarNet()
    spec = fixtures.cifar_spec()
    new = rewrite.replace_subgraph(graph, spec)
    state = model_lib.Model(new, constants)
    x = np.random.RandomState(0).rand(2, 8, 8, 3).astype(np.float32)
    state(x)
    sm = rewrite.SubgraphModel(new, constants, state, {'input': x}, spec)
    subg_inputs = sm.get_subg_inputs()
    self.assertEqual(subg_inputs['conv_layer0/avg_pool:0'].shape,
                     (2, 4, 4, 64))
    alone = sm.execute_subg(subg_inputs)
    in_context = sm.get_subg_outputs()
    self.assertAllClose(alone['conv_layer1/gelu/1:0'],
                        in_context['conv_layer1/gelu/1:0'])
    self.assertIs(sm.subg_model.op_variables['conv_layer1/conv/1']['kernel'],
                  state.op_variables['conv_layer1/conv/1']['kernel'])

  def test_subgraph_model_errors(self):
    graph, constants, _ = zoo.CifarNet()
    with self.assertRaisesRegex(ValueError, "spec op 'conv_layer1/conv/1' is "
                                'not in the graph'):
      rewrite.SubgraphModel(graph, constants, None, {}, fixtures.cifar_spec())
    new = rewrite.replace_subgraph(graph, fixtures.cifar_spec())
    sm = rewrite.SubgraphModel(new, constants, None, {}, fixtures.cifar_spec())
    with self.assertRaisesRegex(ValueError, 'without state'):
      sm.get_subg_outputs()


if __name__ == '__main__':
  tf.test.main()
