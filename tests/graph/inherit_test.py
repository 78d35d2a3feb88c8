"""Tests of `graph.inherit`: params (equal shapes, leading slices,
mismatches) and a search checkpoint's supernet values."""

import copy
import json
import os
import tempfile

import numpy as np
import tensorflow as tf

from tunas_tf.graph import inherit
from tunas_tf.graph import ir
from tunas_tf.graph import model as model_lib
from tunas_tf.graph import rewrite
from tunas_tf.graph import zoo


def _write_checkpoint(directory, values):
  """A TF1-style checkpoint of `values` ({name: array}) in `directory`."""
  with tf.Graph().as_default():
    variables = [tf.compat.v1.get_variable(name, initializer=value)
                 for name, value in values.items()]
    saver = tf.compat.v1.train.Saver(variables)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      return saver.save(session, os.path.join(directory, 'model.ckpt'),
                        global_step=3)


class InheritParamsTest(tf.test.TestCase):

  def test_inherit_params_equal_shapes_reuse_old_value(self):
    new = {'conv': {'kernel': np.zeros([1, 1, 2, 3]), 'bias': np.zeros([3])}}
    old = {'conv': {'kernel': np.ones([1, 1, 2, 3]), 'bias': np.full([3], 2.)}}
    inherited, fresh = inherit.inherit_params(new, old)
    self.assertEqual(fresh, {})
    self.assertAllClose(inherited['conv']['kernel'], np.ones([1, 1, 2, 3]))
    self.assertAllClose(inherited['conv']['bias'], [2, 2, 2])

  def test_inherit_params_leading_slice_of_larger_old_value(self):
    old_kernel = np.arange(3 * 3 * 32 * 64, dtype=np.float32).reshape(
        3, 3, 32, 64)
    old = {'conv': {'kernel': old_kernel}}
    old_copy = copy.deepcopy(old)
    new = {'conv': {'kernel': np.zeros([3, 3, 16, 24], np.float32)}}
    inherited, fresh = inherit.inherit_params(new, old)
    self.assertEqual(fresh, {})
    self.assertAllEqual(inherited['conv']['kernel'],
                        old_kernel[:, :, :16, :24])
    inherited['conv']['kernel'][...] = -1  # a copy, not a view
    self.assertAllEqual(old['conv']['kernel'], old_copy['conv']['kernel'])

  def test_inherit_params_mismatch_stays_fresh_and_is_reported(self):
    new = {'fc': {'kernel': np.zeros([8, 4]), 'bias': np.zeros([4])},
           'extra': {'kernel': np.full([2], 5.0)}}
    old = {'fc': {'kernel': np.ones([4, 8]), 'bias': np.ones([4])},
           'unused': {'kernel': np.ones([1])}}
    with self.assertLogs(level='WARNING') as logs:
      inherited, fresh = inherit.inherit_params(new, old)
    self.assertEqual(sorted(inherited), ['fc'])
    self.assertEqual(sorted(inherited['fc']), ['bias'])
    self.assertEqual(sorted(fresh), ['extra', 'fc'])
    self.assertAllClose(fresh['fc']['kernel'], np.zeros([8, 4]))
    self.assertAllClose(fresh['extra']['kernel'], [5.0, 5.0])
    self.assertLen(logs.output, 1)
    self.assertRegex(logs.output[0], r"op 'fc' variable 'kernel': new shape "
                     r'\(8, 4\), old shape \(4, 8\)')
    self.assertEqual(inherit.find_mismatches(new, old),
                     [inherit.Mismatch('fc', 'kernel', (8, 4), (4, 8))])

  def test_inherit_params_rank_change_is_a_mismatch(self):
    new = {'d': {'kernel': np.zeros([2, 2])}}
    old = {'d': {'kernel': np.zeros([2, 2, 1])}}
    inherited, fresh = inherit.inherit_params(new, old)
    self.assertEqual(inherited, {})
    self.assertEqual(sorted(fresh), ['d'])

  def test_inherit_params_cifarnet_spec_weight_inheritance(self):
    # abstract_nas's subgraph_test.test_weight_inheritance, shape-aware.
    graph, constants, _ = zoo.CifarNet()
    spec = [
        rewrite.SubgraphNode(ir.new_op(
            'conv_layer1/conv/1', ir.OpType.CONV, ['conv_layer0/avg_pool'],
            op_kwargs={'features': 64, 'kernel_size': [1, 1]})),
        rewrite.SubgraphNode(ir.new_op(
            'conv_layer1/gelu/1', ir.OpType.GELU, ['conv_layer1/conv/1']),
                             output_names=['conv_layer1/relu'])]
    old_model = model_lib.Model(graph, constants)
    old_model.build((1, 32, 32, 3))
    new_model = model_lib.Model(rewrite.replace_subgraph(graph, spec),
                                constants)
    new_model.build((1, 32, 32, 3))
    new_params = model_lib.get_params(new_model)
    old_params = model_lib.get_params(old_model)
    inherited, fresh = inherit.inherit_params(new_params, old_params)
    self.assertEqual(sorted(inherited), ['conv_layer0/conv', 'fc/dense',
                                         'fc/logits', 'proj'])
    self.assertEqual(sorted(fresh), ['conv_layer1/conv/1'])
    self.assertLen(new_params, len(inherited) + len(fresh))
    # fc/dense shrinks from (8192, 256) to (4096, 256): the leading rows.
    self.assertAllEqual(inherited['fc/dense']['kernel'],
                        old_params['fc/dense']['kernel'][:4096])

  def test_inherit_into_assigns_model_variables(self):
    graph = ir.new_graph(['x'], ['d'], [ir.new_op(
        'd', ir.OpType.DENSE, ['x'], op_kwargs={'features': 2})])
    model = model_lib.Model(graph)
    model.build((None, 3))
    old = {'d': {'kernel': np.arange(8.0).reshape(4, 2)},
           'gone': {'kernel': np.ones(1)}}
    inherited, fresh = inherit.inherit_into(model, old)
    self.assertEqual(sorted(fresh['d']), ['bias'])  # no old bias
    self.assertEqual(sorted(inherited['d']), ['kernel'])
    self.assertAllClose(model.op_variables['d']['kernel'],
                        [[0, 1], [2, 3], [4, 5]])


class SearchCheckpointTest(tf.test.TestCase):

  def test_search_checkpoint_and_supernet_values(self):
    search_dir = tempfile.mkdtemp()
    with self.assertRaisesRegex(ValueError, 'holds no checkpoint'):
      inherit.search_checkpoint(search_dir)
    with self.assertRaisesRegex(ValueError, 'no such directory'):
      inherit.search_checkpoint(os.path.join(search_dir, 'missing'))
    path = _write_checkpoint(search_dir, {
        'blocks/0/layers/0/conv/kernel': np.ones([1, 1, 2, 3], np.float32),
        'blocks/0/layers/0/conv/kernel/RMSProp': np.ones([1, 1, 2, 3],
                                                          np.float32),
        'classifier/bias': np.zeros([4], np.float32),
        'rl_controller/logits': np.zeros([2], np.float32),
    })
    self.assertEqual(inherit.search_checkpoint(search_dir), path)
    with open(os.path.join(search_dir, 'config.json'), 'w') as f:
      json.dump({'ssd': 'cifar_search'}, f)
    self.assertEqual(inherit.search_checkpoint(search_dir,
                                                   'cifar_search'), path)
    with self.assertRaisesRegex(ValueError, "searched 'cifar_search', not "
                                '--ssd=digits_search'):
      inherit.search_checkpoint(search_dir, 'digits_search')
    values = inherit.read_supernet_values(path)
    self.assertEqual(sorted(values), ['blocks/0/layers/0/conv/kernel',
                                      'classifier/bias'])
    with self.assertRaisesRegex(ValueError, 'Cannot read checkpoint'):
      inherit.read_supernet_values(os.path.join(search_dir, 'nothing'))


if __name__ == '__main__':
  tf.test.main()
