"""Tests for the zoo: CifarNet and ResNet18 op names, order and shapes."""

import tensorflow as tf

from tunas_tf.graph import model as model_lib
from tunas_tf.graph import zoo

OpType = zoo.OpType


class ZooTest(tf.test.TestCase):

  def test_cifarnet_ops_match_reference_table(self):
    graph, constants, blocks = zoo.CifarNet()
    self.assertEqual(constants, {'out_features': 256, 'num_classes': 10})
    self.assertEqual(graph.input_names, ('input',))
    self.assertEqual(graph.output_names, ('fc/logits',))
    expected = [
        ('proj', OpType.CONV, 'input:0', (5, 32, 32, 32)),
        ('conv_layer0/conv', OpType.CONV, 'proj:0', (5, 32, 32, 64)),
        ('conv_layer0/relu', OpType.RELU, 'conv_layer0/conv:0',
         (5, 32, 32, 64)),
        ('conv_layer0/avg_pool', OpType.AVG_POOL, 'conv_layer0/relu:0',
         (5, 16, 16, 64)),
        ('conv_layer1/conv', OpType.CONV, 'conv_layer0/avg_pool:0',
         (5, 16, 16, 128)),
        ('conv_layer1/relu', OpType.RELU, 'conv_layer1/conv:0',
         (5, 16, 16, 128)),
        ('conv_layer1/avg_pool', OpType.AVG_POOL, 'conv_layer1/relu:0',
         (5, 8, 8, 128)),
        ('flatten', OpType.FLATTEN, 'conv_layer1/avg_pool:0', (5, 8192)),
        ('fc/dense', OpType.DENSE, 'flatten:0', (5, 256)),
        ('fc/relu', OpType.RELU, 'fc/dense:0', (5, 256)),
        ('fc/logits', OpType.DENSE, 'fc/relu:0', (5, 10)),
    ]
    shapes = model_lib.abstract_shapes(graph, constants, (5, 32, 32, 3))
    self.assertLen(graph.ops, len(expected))
    for op, (name, op_type, inp, shape) in zip(graph.ops, expected):
      self.assertEqual((op.name, op.type, op.input_names), (name, op_type,
                                                            (inp,)))
      self.assertEqual(shapes[f'{name}:0'], shape, name)
    self.assertEqual(graph.op('conv_layer1/conv').op_kwargs,
                     {'features': 'S:-1*2', 'kernel_size': 3})
    self.assertEqual(graph.op('fc/dense').op_kwargs,
                     {'features': 'K:out_features'})
    self.assertLen(blocks, 2)
    self.assertEqual(blocks[1].graph.op_names[0], 'conv_layer1/conv')

  def test_cifarnet_rebuilds_from_returned_blocks(self):
    graph, _, blocks = zoo.CifarNet()
    self.assertEqual(zoo.CifarNet(blocks=blocks)[0], graph)
    smaller = zoo.CifarNet(blocks=blocks[:1])[0]
    self.assertLen(smaller.ops, 8)

  def test_resnet18_op_order_matches_reference(self):
    graph, _, blocks = zoo.ResNet18(num_classes=10, input_resolution='small')
    names = graph.op_names
    self.assertLen(names, 69)
    self.assertEqual(graph.output_names, ('fc/dense',))
    self.assertEqual(names[:5], ('init/conv0', 'init/bn1', 'init/relu2',
                                 'init/maxpool3', 'proj4'))
    self.assertEqual(names[9:11], ('resnet11/bn', 'resnet11/skip/add0'))
    self.assertEqual(names[8:12], (
        'resnet_stride1_filtermul1_basic11/conv3', 'resnet11/bn',
        'resnet11/skip/add0', 'resnet11/skip/relu1'))
    self.assertEqual(names[12], 'resnet_stride1_filtermul1_basic12/conv0')
    self.assertEqual(names[14], 'resnet_stride1_filtermul1_basic12/relu2')
    # Layer index ranges 11: 5-11, 21: 19-27, 42: 60-66.
    self.assertEqual(names[19], 'resnet_stride2_filtermul2_basic21/conv0')
    self.assertEqual(names[24:27], ('resnet21/proj/conv0', 'resnet21/proj/bn1',
                                    'resnet21/skip/add0'))
    self.assertEqual(names[27], 'resnet21/skip/relu1')
    self.assertEqual(names[60], 'resnet_stride1_filtermul1_basic42/conv0')
    self.assertEqual(names[66], 'resnet42/skip/relu1')
    self.assertEqual(names[67:], ('fc/mean', 'fc/dense'))
    self.assertEqual(graph.op('resnet31/skip/add0').input_names,
                     ('resnet31/bn:0', 'resnet31/proj/bn1:0'))
    self.assertEqual(graph.op('resnet32/skip/add0').input_names,
                     ('resnet32/bn:0', 'resnet31/skip/relu1:0'))
    self.assertEqual(graph.op('resnet11/bn').op_kwargs['scale_init'], 'I:zeros')
    self.assertFalse(graph.op('init/conv0').op_kwargs['use_bias'])
    self.assertEqual([b.instance_id for b in blocks],
                     ['11', '12', '21', '22', '31', '32', '41', '42'])

  def test_resnet18_shapes_small_and_large(self):
    graph, constants, _ = zoo.ResNet18(input_resolution='small')
    shapes = model_lib.abstract_shapes(graph, constants, (2, 32, 32, 3))
    self.assertEqual(shapes['proj4:0'], (2, 16, 16, 64))
    self.assertEqual(shapes['resnet21/skip/relu1:0'], (2, 8, 8, 128))
    self.assertEqual(shapes['resnet42/skip/relu1:0'], (2, 2, 2, 512))
    self.assertEqual(shapes['fc/dense:0'], (2, 10))
    graph, constants, _ = zoo.ResNet18(num_classes=7, input_resolution='large')
    self.assertEqual(graph.op('init/conv0').op_kwargs['kernel_size'], 7)
    shapes = model_lib.abstract_shapes(graph, constants, (1, 64, 64, 3))
    self.assertEqual(shapes['proj4:0'], (1, 16, 16, 64))
    self.assertEqual(shapes['fc/dense:0'], (1, 7))

  def test_resnet18_rejects_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, "input_resolution 'medium'"):
      zoo.ResNet18(input_resolution='medium')
    with self.assertRaisesRegex(ValueError, 'takes 8 blocks, got 1'):
      zoo.ResNet18(blocks=[zoo.basic_block(1, 1)])


if __name__ == '__main__':
  tf.test.main()
