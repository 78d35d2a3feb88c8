"""Tests for block templates and their instantiation (renaming)."""

import tensorflow as tf

from tunas_tf.graph import block
from tunas_tf.graph import ir

OpType = ir.OpType


def _template():
  ops = [
      ir.new_op('conv', OpType.CONV, ['input'],
                op_kwargs={'features': 'K:width', 'kernel_size': 3}),
      ir.new_op('scale', OpType.DENSE, ['conv'],
                op_kwargs={'features': 'S:conv:-1*2'}),
      ir.new_op('mix', OpType.DENSE, ['scale'],
                op_kwargs={'features': 'S:input:-1', 'kernel_init': 'I:zeros'}),
      ir.new_op('out', OpType.ADD, ['mix', 'input'],
                input_kwargs={'note': 'S:-1'}),
  ]
  graph = ir.new_graph(['input'], ['out'], ops)
  return block.Block('blk', graph, constants={'width': 8})


class BlockTest(tf.test.TestCase):

  def test_instantiate_renames_ops_inputs_and_outputs(self):
    inst = _template().instantiate(['stem/relu'], instance_id=3)
    graph = inst.graph
    self.assertEqual(graph.op_names,
                     ('blk3/conv', 'blk3/scale', 'blk3/mix', 'blk3/out'))
    self.assertEqual(graph.input_names, ('stem/relu',))
    self.assertEqual(graph.output_names, ('blk3/out',))
    self.assertEqual(graph.op('blk3/conv').input_names, ('stem/relu:0',))
    self.assertEqual(graph.op('blk3/out').input_names,
                     ('blk3/mix:0', 'stem/relu:0'))
    self.assertEqual(inst.instance_id, 3)

  def test_instantiate_rewrites_symbolic_kwargs(self):
    inst = _template().instantiate(['x'], instance_id=0)
    graph = inst.graph
    # K: names a block constant: prefixed.
    self.assertEqual(graph.op('blk0/conv').op_kwargs['features'],
                     'K:blk0/width')
    # S:<tensor>:d: prefixed, suffix kept.
    self.assertEqual(graph.op('blk0/scale').op_kwargs['features'],
                     'S:blk0/conv:0:-1*2')
    # S:<block input>:d: becomes the given input.
    self.assertEqual(graph.op('blk0/mix').op_kwargs['features'], 'S:x:0:-1')
    # S:d and initializers: unchanged.
    self.assertEqual(graph.op('blk0/out').input_kwargs['note'], 'S:-1')
    self.assertEqual(graph.op('blk0/mix').op_kwargs['kernel_init'], 'I:zeros')
    self.assertEqual(inst.constants, {'blk0/width': 8})

  def test_instantiate_without_id_and_constant_override(self):
    inst = _template().instantiate(['x'], constants={'width': 4})
    self.assertEqual(inst.graph.ops[0].name, 'blk/conv')
    self.assertEqual(inst.constants, {'blk/width': 4})

  def test_instantiate_restarts_from_template(self):
    template = _template()
    first = template.instantiate(['x'], instance_id=0)
    again = first.instantiate(['y'], instance_id=1)
    self.assertEqual(again.graph, template.instantiate(['y'], 1).graph)
    self.assertEqual(again.template_graph, template.graph)

  def test_instantiate_rejects_wrong_input_count(self):
    with self.assertRaisesRegex(ValueError, "Block 'blk' takes 1 input"):
      _template().instantiate(['x', 'y'])


if __name__ == '__main__':
  tf.test.main()
