"""CifarNet and ResNet18 in the IR, with abstract_nas's op names. Each builder
returns `(graph, constants, blocks)`: the blocks instantiated in network order
(pass them back as `blocks=` to rebuild with mutated blocks)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from tunas_tf.graph import block as block_lib
from tunas_tf.graph import ir

OpType = ir.OpType
new_op = ir.new_op

ZooModel = Tuple[ir.Graph, Dict[str, Any], List[block_lib.Block]]


def conv_block() -> block_lib.Block:
  """CifarNet's block `conv_layer`: conv 3x3 (twice the channels), relu, avg
  pool 2x2/2: [B, H, W, C] `input` -> [B, H/2, W/2, 2C] `avg_pool`."""
  ops = [
      new_op('conv', OpType.CONV, ['input'],
             op_kwargs={'features': 'S:-1*2', 'kernel_size': 3}),
      new_op('relu', OpType.RELU, ['conv']),
      new_op('avg_pool', OpType.AVG_POOL, ['relu'],
             input_kwargs={'window_shape': 2, 'strides': 2}),
  ]
  return block_lib.Block('conv_layer',
                         ir.new_graph(['input'], ['avg_pool'], ops))


def _chain(ops: List[ir.Op], constants: Dict[str, Any],
           blocks: Sequence[block_lib.Block], x: str,
           ids: Sequence[Any]) -> Tuple[str, List[block_lib.Block]]:
  instances = []
  for blk, instance_id in zip(blocks, ids):
    inst = blk.instantiate([x], instance_id)
    ops.extend(inst.graph.ops)
    constants.update(inst.constants)
    instances.append(inst)
    x = inst.graph.output_names[0]
  return x, instances


def CifarNet(  # pylint: disable=invalid-name
    in_features: int = 32, out_features: int = 256, num_classes: int = 10,
    blocks: Optional[Sequence[block_lib.Block]] = None) -> ZooModel:
  """abstract_nas's small CNN (11 ops, 2,192,458 parameters on 32x32x3): proj
  (1x1 conv to `in_features`), `blocks` (default two `conv_block()`s, ids
  0, 1, ...), flatten, fc/dense (`out_features`), fc/relu, fc/logits."""
  constants: Dict[str, Any] = {'out_features': out_features,
                               'num_classes': num_classes}
  ops = [new_op('proj', OpType.CONV, ['input'],
                op_kwargs={'features': in_features, 'kernel_size': 1})]
  blocks = list(blocks) if blocks is not None else [conv_block(),
                                                    conv_block()]
  x, instances = _chain(ops, constants, blocks, 'proj', range(len(blocks)))
  ops += [
      new_op('flatten', OpType.FLATTEN, [x]),
      new_op('fc/dense', OpType.DENSE, ['flatten'],
             op_kwargs={'features': 'K:out_features'}),
      new_op('fc/relu', OpType.RELU, ['fc/dense']),
      new_op('fc/logits', OpType.DENSE, ['fc/relu'],
             op_kwargs={'features': 'K:num_classes'}),
  ]
  return ir.new_graph(['input'], ['fc/logits'], ops), constants, instances


_BN = {'momentum': 0.9, 'epsilon': 1e-5}


def basic_block(stride: int, filter_mul: int) -> block_lib.Block:
  """The template of ResNet's basic block body: conv0 (`stride`, channels x
  `filter_mul`), bn1, relu2, conv3 (no residual), named
  `resnet_stride{stride}_filtermul{filter_mul}_basic`."""
  features = 'S:-1' if filter_mul == 1 else f'S:-1*{filter_mul}'
  ops = [
      new_op('conv0', OpType.CONV, ['input'],
             op_kwargs={'features': features, 'kernel_size': 3,
                        'strides': stride, 'use_bias': False}),
      new_op('bn1', OpType.BATCH_NORM, ['conv0'], op_kwargs=dict(_BN)),
      new_op('relu2', OpType.RELU, ['bn1']),
      new_op('conv3', OpType.CONV, ['relu2'],
             op_kwargs={'features': 'S:-1', 'kernel_size': 3,
                        'use_bias': False}),
  ]
  return block_lib.Block(
      f'resnet_stride{stride}_filtermul{filter_mul}_basic',
      ir.new_graph(['input'], ['conv3'], ops))


def _residual_ops(layer_id: str, x: str, body_out: str,
                  stride: int) -> List[ir.Op]:
  p = f'resnet{layer_id}/'
  ops = [new_op(p + 'bn', OpType.BATCH_NORM, [body_out],
                op_kwargs={**_BN, 'scale_init': 'I:zeros'})]
  skip = x
  if stride != 1:
    ops += [
        new_op(p + 'proj/conv0', OpType.CONV, [x],
               op_kwargs={'features': 'S:-1*2', 'kernel_size': 1,
                          'strides': stride, 'use_bias': False}),
        new_op(p + 'proj/bn1', OpType.BATCH_NORM, [p + 'proj/conv0'],
               op_kwargs=dict(_BN)),
    ]
    skip = p + 'proj/bn1'
  ops += [new_op(p + 'skip/add0', OpType.ADD, [p + 'bn', skip]),
          new_op(p + 'skip/relu1', OpType.RELU, [p + 'skip/add0'])]
  return ops


def ResNet18(  # pylint: disable=invalid-name
    num_classes: int = 10, input_resolution: str = 'small',
    blocks: Optional[Sequence[block_lib.Block]] = None) -> ZooModel:
  """ResNet18 v1 as abstract_nas's `zoo/resnetv1.py` (69 ops): stem (3x3/1
  for 'small', 7x7/2 for 'large' `input_resolution`), eight residual layers
  (ids 11, 12, 21, ..., 42; 21, 31, 41 stride 2 with a projected skip), head
  `fc/mean`, `fc/dense` (zeros kernel). ValueError for an unknown resolution
  or not eight `blocks`."""
  if input_resolution not in ('small', 'large'):
    raise ValueError(f"Unknown input_resolution {input_resolution!r}; "
                     "expected 'small' or 'large'")
  kernel, stride = (3, 1) if input_resolution == 'small' else (7, 2)
  ops = [
      new_op('init/conv0', OpType.CONV, ['input'],
             op_kwargs={'features': 64, 'kernel_size': kernel,
                        'strides': stride, 'use_bias': False}),
      new_op('init/bn1', OpType.BATCH_NORM, ['init/conv0'],
             op_kwargs=dict(_BN)),
      new_op('init/relu2', OpType.RELU, ['init/bn1']),
      new_op('init/maxpool3', OpType.MAX_POOL, ['init/relu2'],
             input_kwargs={'window_shape': 3, 'strides': 2,
                           'padding': 'SAME'}),
      new_op('proj4', OpType.CONV, ['init/maxpool3'],
             op_kwargs={'features': 64, 'kernel_size': 1, 'use_bias': False}),
  ]
  strides = [1, 1, 2, 1, 2, 1, 2, 1]
  if blocks is None:
    blocks = [basic_block(s, 2 if s == 2 else 1) for s in strides]
  if len(blocks) != len(strides):
    raise ValueError(f'ResNet18 takes {len(strides)} blocks, got '
                     f'{len(blocks)}')
  constants: Dict[str, Any] = {}
  instances = []
  x = 'proj4'
  block_id, layer_id = 1, 0
  for blk, s in zip(blocks, strides):
    if s == 2 and layer_id > 0:
      block_id, layer_id = block_id + 1, 1
    else:
      layer_id += 1
    nn = f'{block_id}{layer_id}'
    body_out, (inst,) = _chain(ops, constants, [blk], x, [nn])
    instances.append(inst)
    ops += _residual_ops(nn, x, body_out, s)
    x = f'resnet{nn}/skip/relu1'
  ops += [
      new_op('fc/mean', OpType.MEAN, [x], input_kwargs={'axis': (1, 2)}),
      new_op('fc/dense', OpType.DENSE, ['fc/mean'],
             op_kwargs={'features': num_classes, 'kernel_init': 'I:zeros'}),
  ]
  return ir.new_graph(['input'], ['fc/dense'], ops), constants, instances
