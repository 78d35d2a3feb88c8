"""Graphs and specs shared by the graph tests (abstract_nas's examples)."""

from tunas_tf.graph import ir
from tunas_tf.graph import rewrite

OpType = ir.OpType
Node = rewrite.SubgraphNode


def cifar_spec():
  """Spec S1 (subgraph_test): conv_layer1's conv+relu -> 1x1 conv + GELU."""
  return [
      Node(ir.new_op('conv_layer1/conv/1', OpType.CONV,
                     ['conv_layer0/avg_pool'],
                     op_kwargs={'features': 64, 'kernel_size': [1, 1]})),
      Node(ir.new_op('conv_layer1/gelu/1', OpType.GELU, ['conv_layer1/conv/1']),
           output_names=['conv_layer1/relu']),
  ]


def g3_graph():
  """Graph G3 (depth_test): three dense+relu branches, two adds."""
  ops = [ir.new_op(f'dense{k}', OpType.DENSE, ['input'],
                   op_kwargs={'features': 3}) for k in range(3)]
  ops += [ir.new_op(f'relu{k}', OpType.RELU, [f'dense{k}']) for k in range(3)]
  ops += [ir.new_op('add0', OpType.ADD, ['relu0', 'relu1']),
          ir.new_op('add1', OpType.ADD, ['relu1', 'relu2'])]
  return ir.new_graph(['input'], ['add0', 'add1'], ops)


def g3_spec():
  """Spec M1: copies of relu0-2 (same names), add0 and add1 rewired."""
  spec = [Node(ir.new_op(f'relu{k}', OpType.RELU, [f'dense{k}']))
          for k in range(3)]
  spec += [Node(ir.new_op('add0', OpType.ADD, ['relu0', 'relu1']), ['add0']),
           Node(ir.new_op('add1', OpType.ADD, ['relu1', 'relu2']), ['add1'])]
  return spec


def self_spec(graph, names, rewired):
  """A spec of existing ops of `graph`, rewiring the `rewired` ones."""
  return [Node(graph.op(n), [n] if n in rewired else None) for n in names]
