"""Tests for Model: eager, tf.function and TF1-graph execution, params I/O."""

import copy

import numpy as np
import pytest
import tensorflow as tf

from tunas_tf.graph import from_spec
from tunas_tf.graph import ir
from tunas_tf.graph import model as model_lib
from tunas_tf.graph import zoo
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema

OpType = ir.OpType


def _two_head_graph():
  # x -> bn -> relu -> {dense 'logits', 'feat' = relu}; plus second input y.
  ops = [
      ir.new_op('bn', OpType.BATCH_NORM, ['x'], op_kwargs={'epsilon': 0.0}),
      ir.new_op('relu', OpType.RELU, ['bn']),
      ir.new_op('sum', OpType.ADD, ['relu', 'y']),
      ir.new_op('logits', OpType.DENSE, ['sum'],
                op_kwargs={'features': 'S:-1*2', 'kernel_init': 'I:ones'}),
  ]
  return ir.new_graph(['x', 'y'], ['logits', 'relu:0'], ops)


class ModelTest(tf.test.TestCase):

  def test_model_cifarnet_eager_shapes_and_params(self):
    graph, constants, _ = zoo.CifarNet()
    model = model_lib.Model(graph, constants, seed=0)
    logits = model(tf.ones([2, 32, 32, 3]))
    self.assertEqual(logits.shape, (2, 10))
    self.assertEqual(logits.dtype, tf.float32)
    self.assertEqual(model_lib.count_params(model), 2192458)
    self.assertEqual(model.op_variables['conv_layer0/conv']['kernel'].shape,
                     (3, 3, 32, 64))
    self.assertLen(model.trainable_variables, 10)  # 5 ops x (kernel, bias)

  def test_model_returns_dict_for_several_outputs_and_takes_dict(self):
    model = model_lib.Model(_two_head_graph())
    x = np.array([[1.0, 3.0]], np.float32)
    out = model({'x': x, 'y:0': np.ones([1, 2], np.float32)})
    self.assertEqual(sorted(out), ['logits', 'relu:0'])
    # Inference bn is the identity; relu(x) + 1 = [2, 4]; ones kernel sums.
    self.assertAllClose(out['relu:0'], x)
    self.assertAllClose(out['logits'], [[6.0, 6.0, 6.0, 6.0]])

  def test_model_single_output_returns_tensor_for_dict_input(self):
    graph, constants, _ = zoo.CifarNet()
    out = model_lib.Model(graph, constants)({'input': tf.ones([1, 8, 8, 3])})
    self.assertIsInstance(out, tf.Tensor)
    self.assertEqual(out.shape, (1, 10))

  def test_model_rejects_missing_or_bare_inputs(self):
    model = model_lib.Model(_two_head_graph())
    with self.assertRaisesRegex(ValueError, "Missing graph input 'y'"):
      model({'x': np.ones([1, 2], np.float32)})
    with self.assertRaisesRegex(ValueError, 'Graph has 2 inputs'):
      model(np.ones([1, 2], np.float32))

  def test_model_casts_integer_inputs(self):
    graph, constants, _ = zoo.CifarNet()
    out = model_lib.Model(graph, constants)(np.ones([1, 4, 4, 3], np.uint8))
    self.assertEqual(out.dtype, tf.float32)

  @pytest.mark.numerics
  def test_model_in_tf_function_matches_eager(self):
    graph, constants, _ = zoo.CifarNet()
    model = model_lib.Model(graph, constants, seed=1)
    fn = tf.function(lambda x: model(x, training=False))
    x = tf.random.stateless_uniform([2, 8, 8, 3], [1, 2])
    traced = fn(x)  # first trace creates the variables
    # The same ops traced and eager: measured equal (oneDNN's and Eigen's
    # kernels); a graph optimiser's fusion may reorder sums by ~1e-7.
    self.assertAllClose(traced, model(x), atol=1e-5)
    self.assertAllClose(fn(x), traced)

  @pytest.mark.numerics
  def test_model_in_tf1_graph_session_matches_eager(self):
    graph, constants, _ = zoo.CifarNet()
    eager = model_lib.Model(graph, constants, seed=3)
    x = np.linspace(0, 1, 2 * 8 * 8 * 3, dtype=np.float32).reshape(2, 8, 8, 3)
    expected = eager(x).numpy()
    params = model_lib.get_params(eager)
    with tf.Graph().as_default():
      model = model_lib.Model(graph, constants)
      logits = model(tf.constant(x))
      self.assertIn('conv_layer0/conv/kernel:0',
                    [v.name for v in tf.compat.v1.global_variables()])
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        model_lib.set_params(model, params, session=sess)
        # Measured equal under oneDNN's and Eigen's kernels.
        self.assertAllClose(sess.run(logits), expected, atol=1e-4)
        got = model_lib.get_params(model, session=sess)
    self.assertAllClose(got['fc/logits']['kernel'],
                        params['fc/logits']['kernel'])

  def test_model_tf1_graph_batch_norm_update_runs_with_output(self):
    graph = ir.new_graph(['x'], ['bn'], [ir.new_op('bn', OpType.BATCH_NORM,
                                                   ['x'])])
    with tf.Graph().as_default():
      model = model_lib.Model(graph)
      out = model(tf.constant([[2.0], [4.0]]), training=True)
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(out)  # only the output is fetched
        params = model_lib.get_params(model, session=sess)
    # moving_mean <- 0.99 * 0 + 0.01 * 3.
    self.assertAllClose(params['bn']['moving_mean'], [0.03])

  def test_model_tf_function_training_updates_batch_norm(self):
    graph = ir.new_graph(['x'], ['bn'], [ir.new_op('bn', OpType.BATCH_NORM,
                                                   ['x'])])
    model = model_lib.Model(graph)
    step = tf.function(lambda x: model(x, training=True))
    step(tf.constant([[2.0], [4.0]]))
    step(tf.constant([[2.0], [4.0]]))
    # 0 -> 0.03 -> 0.99 * 0.03 + 0.03.
    self.assertAllClose(model.op_variables['bn']['moving_mean'], [0.0597])

  def test_model_build_creates_variables_without_data(self):
    graph, constants, _ = zoo.CifarNet()
    model = model_lib.Model(graph, constants)
    self.assertFalse(model.built)
    model.build((None, 32, 32, 3))
    self.assertTrue(model.built)
    self.assertEqual(model.op_variables['fc/dense']['kernel'].shape,
                     (8192, 256))

  def test_model_does_not_mutate_graph(self):
    graph, constants, _ = zoo.CifarNet()
    before = copy.deepcopy(graph)
    model_lib.Model(graph, constants)(tf.ones([1, 8, 8, 3]))
    self.assertEqual(graph, before)
    self.assertEqual(graph.op('conv_layer0/conv').op_kwargs['features'],
                     'S:-1*2')

  def test_model_call_all_returns_intermediates(self):
    graph, constants, _ = zoo.CifarNet()
    values = model_lib.Model(graph, constants).call_all(tf.ones([1, 8, 8, 3]))
    self.assertLen(values, 12)  # the input and 11 op outputs
    self.assertEqual(values['conv_layer1/conv:0'].shape, (1, 4, 4, 128))

  def test_model_share_variables_with(self):
    graph, constants, _ = zoo.CifarNet()
    full = model_lib.Model(graph, constants)
    full(tf.ones([1, 8, 8, 3]))
    sub = ir.new_graph(['flatten:0'], ['fc/dense'], [graph.op('fc/dense')])
    shared = model_lib.Model(sub, constants, share_variables_with=full)
    shared({'flatten:0': tf.ones([1, 512])})
    self.assertIs(shared.op_variables['fc/dense']['kernel'],
                  full.op_variables['fc/dense']['kernel'])
    wrong = model_lib.Model(sub, constants, share_variables_with=full)
    with self.assertRaisesRegex(ValueError, "Op 'fc/dense': shared variable"):
      wrong({'flatten:0': tf.ones([1, 7])})

  def test_set_params_roundtrip_and_errors(self):
    graph = ir.new_graph(['x'], ['d'], [ir.new_op('d', OpType.DENSE, ['x'],
                                                  op_kwargs={'features': 2})])
    model = model_lib.Model(graph)
    model.build((None, 3))
    kernel = np.arange(6, dtype=np.float32).reshape(3, 2)
    model_lib.set_params(model, {'d': {'kernel': kernel}})
    params = model_lib.get_params(model)
    self.assertAllClose(params['d']['kernel'], kernel)
    self.assertAllClose(params['d']['bias'], [0, 0])
    with self.assertRaisesRegex(ValueError, "no variables for op 'e'"):
      model_lib.set_params(model, {'e': {'kernel': kernel}})
    with self.assertRaisesRegex(ValueError, "op 'd' has no variable 'gamma'"):
      model_lib.set_params(model, {'d': {'gamma': kernel}})
    with self.assertRaisesRegex(ValueError,
                                r"op 'd' variable 'kernel' has shape \(3, 2\)"):
      model_lib.set_params(model, {'d': {'kernel': np.ones([2, 2])}})

  def test_abstract_shapes_without_variables(self):
    graph, constants, _ = zoo.CifarNet()
    shapes = model_lib.abstract_shapes(graph, constants, (None, 32, 32, 3))
    self.assertEqual(shapes['conv_layer0/avg_pool:0'], (None, 16, 16, 64))
    self.assertEqual(shapes['fc/logits:0'], (None, 10))
    self.assertEqual(shapes['input:0'], (None, 32, 32, 3))
    cut = model_lib.abstract_shapes(graph, constants, {'input': (5, 32, 32, 3)},
                                    output_names=['conv_layer0/conv'])
    self.assertEqual(sorted(cut), ['conv_layer0/conv:0', 'input:0', 'proj:0'])

  def test_model_rejects_non_graph(self):
    with self.assertRaisesRegex(ValueError, 'Model needs an ir.Graph'):
      model_lib.Model([])



@pytest.mark.numerics
@pytest.mark.bfloat16
class ModelBfloat16Test(tf.test.TestCase):
  """`compute_dtype=tf.bfloat16`: bfloat16 ops on float32 variables."""

  def _run(self, graph, constants, dtype, images, training):
    model = model_lib.Model(graph, constants, seed=1, compute_dtype=dtype)
    model.build(images.shape)
    with tf.GradientTape() as tape:
      logits = model(images, training=training)
      loss = tf.reduce_sum(tf.cast(logits, tf.float32) *
                           tf.range(1.0, 1.0 + logits.shape[-1]))
    grads = tape.gradient(loss, model.trainable_variables)
    return model, logits, grads

  def test_standalone_network_close_to_float32(self):
    space = mobile.get_search_space('digits_search')
    graph, constants = from_spec.graph_from_spec(
        schema.prune(space, ':'.join(['0'] * 18)), 10, input_channels=1)
    images = tf.random.stateless_uniform([8, 8, 8, 1], [0, 4])
    for training in (True, False):
      f32 = self._run(graph, constants, tf.float32, images, training)
      bf16 = self._run(graph, constants, tf.bfloat16, images, training)
      self.assertEqual(bf16[0].compute_dtype, tf.bfloat16)
      self.assertEqual(bf16[1].dtype, tf.bfloat16)
      logits = f32[1].numpy()
      difference = np.abs(tf.cast(bf16[1], tf.float32).numpy() - logits)
      # The supernet's bound (tests/models/supernet_bfloat16_test.py).
      self.assertLessEqual(difference.max(), 0.05 * np.abs(logits).max())
      self.assertGreater(difference.max(), 0.0)
      self.assertEqual({v.dtype for v in bf16[0].variables}, {tf.float32})
      self.assertEqual({g.dtype for g in bf16[2]}, {tf.float32})
      if training:  # The moving statistics were updated, in float32.
        bn = [group for group in bf16[0].op_variables.values()
              if 'moving_mean' in group][0]
        self.assertGreater(float(tf.reduce_max(tf.abs(bn['moving_mean']))),
                           0.0)

  def test_dense_and_stateful_batch_norm_in_bfloat16(self):
    graph = _two_head_graph()
    model = model_lib.Model(graph, compute_dtype='bfloat16')
    out = model({'x': tf.ones([2, 3]) * [[1.0], [3.0]],
                 'y': tf.zeros([2, 3])}, training=True)
    # bn(x) = +-1 per column, relu -> 0 or 1; dense kernel of ones: 0 or 3.
    self.assertEqual(out['logits'].dtype, tf.bfloat16)
    self.assertAllEqual(out['logits'], [[0] * 6, [3] * 6])
    moving_mean = model.op_variables['bn']['moving_mean']
    self.assertEqual(moving_mean.dtype, tf.float32)
    self.assertAllClose(moving_mean, [0.02] * 3)  # 0.99 * 0 + 0.01 * 2.

  def test_bad_compute_dtype(self):
    graph, constants, _ = zoo.CifarNet()
    for dtype in (tf.float16, 'int32', 'nonsense'):
      with self.assertRaisesRegex(ValueError, 'compute_dtype must be float32 '
                                  'or bfloat16'):
        model_lib.Model(graph, constants, compute_dtype=dtype)


if __name__ == '__main__':
  tf.test.main()
