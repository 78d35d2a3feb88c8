"""Tests for the graph IR: names, new_op, new_graph validation, pruning."""

import copy

from absl.testing import parameterized
import tensorflow as tf

from tunas_tf.graph import ir

OpType = ir.OpType


def _chain():
  # input -> a (dense) -> b (relu) -> c (dense)
  return [ir.new_op('a', OpType.DENSE, ['input'], op_kwargs={'features': 4}),
          ir.new_op('b', OpType.RELU, ['a']),
          ir.new_op('c', OpType.DENSE, ['b'], op_kwargs={'features': 2})]


class IrTest(parameterized.TestCase, tf.test.TestCase):

  @parameterized.named_parameters(
      ('bare', 'conv', 'conv:0'),
      ('indexed', 'conv:2', 'conv:2'),
      ('scoped', 'conv_layer0/conv', 'conv_layer0/conv:0'),
      ('leading_zero', 'x:01', 'x:1'))
  def test_canonicalize_tensor_name_cases(self, name, expected):
    self.assertEqual(ir.canonicalize_tensor_name(name), expected)

  @parameterized.named_parameters(('empty', ''), ('no_index', 'x:'),
                                  ('bad_index', 'x:y'), ('no_op', ':0'))
  def test_canonicalize_tensor_name_rejects(self, name):
    with self.assertRaisesRegex(ValueError, 'ensor name'):
      ir.canonicalize_tensor_name(name)

  def test_split_tensor_name_bare_and_indexed(self):
    self.assertEqual(ir.split_tensor_name('a/b'), ('a/b', 0))
    self.assertEqual(ir.split_tensor_name('a/b:3'), ('a/b', 3))

  def test_is_nonlinear_table(self):
    nonlinear = {OpType.RELU, OpType.RELU6, OpType.GELU, OpType.SWISH,
                 OpType.H_SWISH, OpType.SIGMOID, OpType.H_SIGMOID,
                 OpType.SOFTMAX}
    for t in OpType:
      self.assertEqual(ir.is_nonlinear(t), t in nonlinear, t)
    with self.assertRaisesRegex(ValueError, 'Unknown op type'):
      ir.is_nonlinear('relu')

  def test_new_op_canonicalizes_inputs_and_copies_kwargs(self):
    kwargs = {'features': [4]}
    op = ir.new_op('fc', OpType.DENSE, ['flat'], op_kwargs=kwargs)
    kwargs['features'].append(5)
    self.assertEqual(op.input_names, ('flat:0',))
    self.assertEqual(op.op_kwargs, {'features': [4]})
    self.assertEqual(op.input_kwargs, {})
    self.assertEqual(op.output_names, ('fc:0',))

  def test_new_op_num_outputs_names_every_output(self):
    op = ir.new_op('split', OpType.IDENTITY, ['x'], num_outputs=3)
    self.assertEqual(op.output_names, ('split:0', 'split:1', 'split:2'))

  @parameterized.named_parameters(('colon', 'a:b'), ('star', 'a*2'),
                                  ('percent', 'a%2'))
  def test_new_op_rejects_reserved_characters(self, name):
    with self.assertRaisesRegex(ValueError, 'reserved'):
      ir.new_op(name, OpType.RELU, ['x'])

  def test_new_op_rejects_bad_scope_and_type(self):
    with self.assertRaisesRegex(ValueError, "Op name 'a b'"):
      ir.new_op('a b', OpType.RELU, ['x'])
    with self.assertRaisesRegex(ValueError, "Op 'r': unknown op type"):
      ir.new_op('r', 'relu', ['x'])

  @parameterized.named_parameters(
      ('add_one_input', OpType.ADD, ['x'], 'at least 2'),
      ('relu_two_inputs', OpType.RELU, ['x', 'y'], 'takes 1 input'),
      ('conv_no_input', OpType.CONV, [], 'takes 1 input'))
  def test_new_op_rejects_wrong_arity(self, op_type, inputs, regex):
    with self.assertRaisesRegex(ValueError, f"Op 'op' .*{regex}"):
      ir.new_op('op', op_type, inputs)

  def test_new_op_rejects_string_inputs(self):
    with self.assertRaisesRegex(ValueError, "Op 'r': input_names must be a"):
      ir.new_op('r', OpType.RELU, 'x')

  def test_new_graph_keeps_sorted_order_and_copies(self):
    ops = _chain()
    graph = ir.new_graph(['input'], ['c'], ops)
    self.assertEqual(graph.op_names, ('a', 'b', 'c'))
    self.assertEqual(graph.input_names, ('input',))
    self.assertEqual(graph.output_names, ('c',))
    self.assertIsNot(graph.ops[0], ops[0])
    self.assertEqual(graph.ops[0], ops[0])

  def test_new_graph_sorts_out_of_order_ops(self):
    a, b, c = _chain()
    graph = ir.new_graph(['input'], ['c'], [c, a, b])
    self.assertEqual(graph.op_names, ('a', 'b', 'c'))

  def test_new_graph_accepts_indexed_and_input_outputs(self):
    graph = ir.new_graph(['input'], ['b:0', 'input'], _chain())
    self.assertEqual(graph.output_names, ('b:0', 'input'))

  def test_new_graph_rejects_duplicate_op_name(self):
    ops = _chain() + [ir.new_op('b', OpType.GELU, ['a'])]
    with self.assertRaisesRegex(ValueError, "duplicate op name 'b'"):
      ir.new_graph(['input'], ['c'], ops)

  def test_new_graph_rejects_unknown_input(self):
    ops = _chain() + [ir.new_op('d', OpType.RELU, ['nowhere'])]
    with self.assertRaisesRegex(ValueError,
                                "op 'd' reads unknown tensor 'nowhere:0'"):
      ir.new_graph(['input'], ['c'], ops)

  def test_new_graph_rejects_missing_output_slot(self):
    with self.assertRaisesRegex(ValueError, "output 'c:1' is not produced"):
      ir.new_graph(['input'], ['c:1'], _chain())

  def test_new_graph_rejects_op_named_like_input(self):
    ops = [ir.new_op('input', OpType.RELU, ['x'])]
    with self.assertRaisesRegex(ValueError, "op 'input' has the name of a"):
      ir.new_graph(['input', 'x'], ['input'], ops)

  def test_new_graph_rejects_duplicate_input(self):
    with self.assertRaisesRegex(ValueError, 'duplicate graph input'):
      ir.new_graph(['x', 'x:0'], ['x'], [])

  def test_new_graph_rejects_cycle_naming_ops(self):
    ops = [ir.new_op('a', OpType.ADD, ['input', 'c']),
           ir.new_op('b', OpType.RELU, ['a']),
           ir.new_op('c', OpType.RELU, ['b']),
           ir.new_op('d', OpType.RELU, ['c'])]
    with self.assertRaisesRegex(ValueError, 'cycle: a -> b -> c -> a'):
      ir.new_graph(['input'], ['d'], ops)

  def test_graph_producer_consumers_and_op(self):
    graph = ir.new_graph(['input'], ['c'], _chain())
    self.assertEqual(graph.producer('b:0').name, 'b')
    self.assertIsNone(graph.producer('input'))
    self.assertIsNone(graph.producer('b:1'))
    self.assertEqual([op.name for op in graph.consumers('a')], ['b'])
    self.assertEqual(graph.op('c').type, OpType.DENSE)
    with self.assertRaisesRegex(ValueError, "no op named 'z'"):
      graph.op('z')

  def test_prune_graph_keeps_needed_ops(self):
    ops = _chain() + [ir.new_op('dead', OpType.RELU, ['a'])]
    graph = ir.new_graph(['input'], ['c'], ops)
    before = copy.deepcopy(graph)
    pruned = ir.prune_graph(graph)
    self.assertEqual(pruned.op_names, ('a', 'b', 'c'))
    self.assertEqual(ir.prune_graph(graph, ['b']).op_names, ('a', 'b'))
    self.assertEqual(ir.prune_graph(graph, ['input']).op_names, ())
    self.assertEqual(graph, before)

  def test_op_kwargs_merges_with_input_kwargs_winning(self):
    op = ir.new_op('p', OpType.AVG_POOL, ['x'], input_kwargs={'strides': 2},
                   op_kwargs={'strides': 1, 'padding': 'SAME'})
    self.assertEqual(op.kwargs, {'strides': 2, 'padding': 'SAME'})


if __name__ == '__main__':
  tf.test.main()
