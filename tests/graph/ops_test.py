"""Tests for op semantics: hand-computed outputs on tiny inputs."""

import re

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tunas_tf.graph import ir
from tunas_tf.graph import model as model_lib
from tunas_tf.graph import ops

OpType = ir.OpType


def _run(op_type, x, training=False, inputs=None, model_stateless=False,
         **kwargs):
  """Runs one op named 'op' on x (or on `inputs`, a list) and returns it."""
  inputs = [x] if inputs is None else inputs
  names = [f'in{i}' for i in range(len(inputs))]
  graph = ir.new_graph(names, ['op'],
                       [ir.new_op('op', op_type, names, op_kwargs=kwargs)])
  model = model_lib.Model(graph, stateless_batch_norm=model_stateless)
  out = model(dict(zip(names, inputs)), training=training)
  return out.numpy(), model


class OpsTest(parameterized.TestCase, tf.test.TestCase):

  def test_conv_ones_kernel_same_padding(self):
    x = np.ones([1, 3, 3, 1], np.float32)
    y, model = _run(OpType.CONV, x, features=2, kernel_size=3,
                    kernel_init='I:ones', bias_init='I:ones')
    # Each output sums its in-bounds 3x3 neighbours (+1 bias): corner 4+1,
    # edge 6+1, centre 9+1.
    expected = np.array([[5, 7, 5], [7, 10, 7], [5, 7, 5]], np.float32)
    self.assertAllClose(y[0, :, :, 0], expected)
    self.assertAllClose(y[0, :, :, 1], expected)
    kernel = model.op_variables['op']['kernel']
    self.assertEqual(kernel.shape, (3, 3, 1, 2))  # HWIO
    self.assertEqual(kernel.name, 'op/kernel:0')

  def test_conv_strides_valid_and_no_bias(self):
    x = np.arange(16, dtype=np.float32).reshape([1, 4, 4, 1])
    y, model = _run(OpType.CONV, x, features=1, kernel_size=[1, 1], strides=2,
                    padding='valid', use_bias=False, kernel_init='I:ones')
    self.assertAllClose(y[0, :, :, 0], [[0, 2], [8, 10]])
    self.assertEqual(sorted(model.op_variables['op']), ['kernel'])

  def test_conv_rejects_groups_and_rank(self):
    with self.assertRaisesRegex(ValueError, "Op 'op'.*feature_group_count"):
      _run(OpType.CONV, np.ones([1, 2, 2, 2], np.float32), features=2,
           kernel_size=1, feature_group_count=2)
    with self.assertRaisesRegex(ValueError, "Op 'op'.*rank-4"):
      _run(OpType.CONV, np.ones([2, 3], np.float32), features=2,
           kernel_size=1)

  def test_depthwise_conv_kernel_shape_and_values(self):
    x = np.ones([1, 3, 3, 2], np.float32)
    x[..., 1] = 2.0
    y, model = _run(OpType.DEPTHWISE_CONV, x, kernel_size=3,
                    kernel_init='I:ones', use_bias=False)
    self.assertEqual(model.op_variables['op']['kernel'].shape, (3, 3, 2, 1))
    self.assertAllClose(y[0, 1, 1], [9.0, 18.0])  # per-channel 3x3 sums
    self.assertAllClose(y[0, 0, 0], [4.0, 8.0])

  def test_dilated_conv_same_padding_keeps_the_size(self):
    x = np.ones([1, 5, 5, 1], np.float32)
    y, _ = _run(OpType.DEPTHWISE_CONV, x, kernel_size=3, dilations=2,
                kernel_init='I:ones', use_bias=False)
    # Taps at offsets -2, 0, 2: the centre sees 9 pixels, a corner 4.
    self.assertEqual(y.shape, (1, 5, 5, 1))
    self.assertAllClose([y[0, 2, 2, 0], y[0, 0, 0, 0]], [9.0, 4.0])

  @parameterized.parameters(
      (OpType.CONV, {'features': 1}, 2, 2),
      (OpType.DEPTHWISE_CONV, {}, 2, 2),
      (OpType.DEPTHWISE_CONV, {}, [1, 2], [2, 1]))
  def test_strides_and_dilations_both_above_one_are_refused(
      self, op_type, extra, strides, dilations):
    # Keras refuses it; `tf.nn.depthwise_conv2d` turned a 6x6 input into
    # 4x4 here, where every other stride-2 SAME op gives 3x3.
    graph = ir.new_graph(['x'], ['op'], [ir.new_op(
        'op', op_type, ['x'], op_kwargs=dict(
            kernel_size=3, strides=strides, dilations=dilations, **extra))])
    message = (rf"Op 'op' \({op_type.name}\): strides .* and dilations .* "
               'cannot both be above 1')
    with self.assertRaisesRegex(ValueError, message):  # Building.
      model_lib.Model(graph).build([1, 6, 6, 1])
    with self.assertRaisesRegex(ValueError, message):  # Shape inference.
      model_lib.abstract_shapes(graph, None, [1, 6, 6, 1])

  def test_dense_on_last_axis_of_rank3(self):
    x = np.ones([2, 3, 4], np.float32)
    y, model = _run(OpType.DENSE, x, features=5, kernel_init='I:ones',
                    bias_init='I:constant:value:0.5')
    self.assertEqual(y.shape, (2, 3, 5))
    self.assertAllClose(y, np.full([2, 3, 5], 4.5))
    self.assertEqual(model.op_variables['op']['kernel'].shape, (4, 5))

  def test_batch_norm_training_updates_moving_averages(self):
    x = np.array([[1.0, 2.0], [3.0, 6.0]], np.float32)  # mean [2, 4]
    y, model = _run(OpType.BATCH_NORM, x, training=True, epsilon=0.0)
    # Batch stats: mean [2, 4], variance [1, 4]; normalized to -1 / +1.
    self.assertAllClose(y, [[-1, -1], [1, 1]], atol=1e-5)
    v = model.op_variables['op']
    # m <- 0.99 m + 0.01 batch, from m=0, var=1.
    self.assertAllClose(v['moving_mean'].numpy(), [0.02, 0.04])
    self.assertAllClose(v['moving_variance'].numpy(), [1.0, 1.03])
    self.assertFalse(v['moving_mean'].trainable)
    self.assertTrue(v['gamma'].trainable)

  def test_batch_norm_inference_uses_moving_averages(self):
    x = np.array([[1.0, 2.0], [3.0, 6.0]], np.float32)
    y, _ = _run(OpType.BATCH_NORM, x, training=False, epsilon=0.0)
    self.assertAllClose(y, x)  # mean 0, variance 1, gamma 1, beta 0

  @parameterized.named_parameters(('model_flag', True, {}),
                                  ('op_kwarg', False, {'stateless': True}))
  def test_batch_norm_stateless_always_batch_statistics(self, flag, kwargs):
    x = np.array([[1.0], [3.0]], np.float32)
    y, model = _run(OpType.BATCH_NORM, x, training=False,
                    model_stateless=flag, epsilon=0.0, **kwargs)
    self.assertAllClose(y, [[-1.0], [1.0]], atol=1e-5)
    self.assertEqual(sorted(model.op_variables['op']), ['beta', 'gamma'])

  @parameterized.parameters(([4, 3, 5],), ([2, 3, 2, 5],))
  def test_fused_batch_norm_any_rank_without_scale_or_bias(self, shape):
    # Rank 3 is reshaped to 4-D for the fused op; rank 4 goes straight in.
    x = np.random.default_rng(0).normal(size=shape).astype(np.float32) * 3
    y, model = _run(OpType.BATCH_NORM, x, training=True, use_scale=False,
                    use_bias=False)
    axes = tuple(range(len(shape) - 1))
    mean, variance = x.mean(axes), x.var(axes)  # biased variance
    self.assertEqual(y.shape, tuple(shape))
    self.assertAllClose(y, (x - mean) / np.sqrt(variance + 1e-3), atol=1e-5)
    v = model.op_variables['op']
    self.assertEqual(sorted(v), ['moving_mean', 'moving_variance'])
    self.assertAllClose(v['moving_mean'].numpy(), 0.01 * mean, atol=1e-6)
    self.assertAllClose(v['moving_variance'].numpy(), 0.99 + 0.01 * variance)
    y = model({'in0': x}, training=False).numpy()  # the moving statistics
    moving_variance = v['moving_variance'].numpy()
    self.assertAllClose(y, (x - v['moving_mean'].numpy()) /
                        np.sqrt(moving_variance + 1e-3), atol=1e-5)

  def test_layer_norm_normalizes_last_axis(self):
    x = np.array([[1.0, 3.0]], np.float32)
    y, model = _run(OpType.LAYER_NORM, x, epsilon=0.0)
    self.assertAllClose(y, [[-1.0, 1.0]], atol=1e-5)
    self.assertEqual(sorted(model.op_variables['op']), ['beta', 'gamma'])

  @parameterized.named_parameters(
      ('relu', OpType.RELU, [0.0, 0.0, 1.0, 7.0]),
      ('relu6', OpType.RELU6, [0.0, 0.0, 1.0, 6.0]),
      ('h_sigmoid', OpType.H_SIGMOID, [0.0, 0.5, 4 / 6, 1.0]),
      ('h_swish', OpType.H_SWISH, [0.0, 0.0, 4 / 6, 7.0]),
      ('sigmoid', OpType.SIGMOID, 1 / (1 + np.exp(-np.array([-4, 0, 1, 7.])))),
      ('swish', OpType.SWISH,
       np.array([-4, 0, 1, 7.]) / (1 + np.exp(-np.array([-4, 0, 1, 7.])))),
      ('identity', OpType.IDENTITY, [-4.0, 0.0, 1.0, 7.0]))
  def test_activation_values(self, op_type, expected):
    y, _ = _run(op_type, np.array([-4.0, 0.0, 1.0, 7.0], np.float32))
    self.assertAllClose(y, expected, atol=1e-6)

  def test_gelu_and_softmax(self):
    y, _ = _run(OpType.GELU, np.array([0.0], np.float32))
    self.assertAllClose(y, [0.0])
    y, _ = _run(OpType.SOFTMAX, np.log(np.array([[1.0, 3.0]], np.float32)))
    self.assertAllClose(y, [[0.25, 0.75]])

  def test_add_mul_concat(self):
    a = np.array([[1.0, 2.0]], np.float32)
    b = np.array([[3.0], [4.0]], np.float32)
    y, _ = _run(OpType.ADD, None, inputs=[a, b])
    self.assertAllClose(y, [[4, 5], [5, 6]])  # broadcast
    y, _ = _run(OpType.MUL, None, inputs=[a, a, a])
    self.assertAllClose(y, [[1, 8]])
    y, _ = _run(OpType.CONCAT, None, inputs=[a, a], axis=0)
    self.assertAllClose(y, [[1, 2], [1, 2]])

  def test_pools(self):
    x = np.arange(16, dtype=np.float32).reshape([1, 4, 4, 1])
    y, _ = _run(OpType.AVG_POOL, x, window_shape=2, strides=2)
    self.assertAllClose(y[0, :, :, 0], [[2.5, 4.5], [10.5, 12.5]])
    y, _ = _run(OpType.MAX_POOL, x, window_shape=2, strides=2)
    self.assertAllClose(y[0, :, :, 0], [[5, 7], [13, 15]])
    y, _ = _run(OpType.AVG_POOL, x, window_shape=0)  # 0: the whole dim
    self.assertAllClose(y.reshape(-1), [7.5])
    y, _ = _run(OpType.GLOBAL_AVG_POOL, x)
    self.assertAllClose(y, [[7.5]])
    y, _ = _run(OpType.MEAN, x, axis=(1, 2), keepdims=True)
    self.assertEqual(y.shape, (1, 1, 1, 1))

  def test_pool_window_0_needs_a_static_size(self):
    op = ir.new_op('pool', OpType.AVG_POOL, ['x'],
                   op_kwargs={'window_shape': [2, 0]})
    for shape, ok in (([1, None, 4, 1], True), ([1, 4, None, 1], False)):
      pool = tf.function(lambda x: ops.apply(op, op.kwargs, [x], {})[0],
                         input_signature=[tf.TensorSpec(shape)])
      if ok:  # 0 stands for the known width, 4.
        self.assertEqual(pool.get_concrete_function().output_shapes[2], 1)
        continue
      with self.assertRaisesRegex(ValueError, re.escape(
          "Op 'pool' (AVG_POOL): window_shape 0 needs a static spatial "
          'size')):
        pool.get_concrete_function()

  def test_shape_ops(self):
    x = np.arange(12, dtype=np.float32).reshape([2, 3, 2])
    self.assertEqual(_run(OpType.FLATTEN, x)[0].shape, (2, 6))
    self.assertEqual(_run(OpType.RESHAPE, x, new_shape=['B', 2, 3])[0].shape,
                     (2, 2, 3))
    self.assertEqual(_run(OpType.TRANSPOSE, x, axes=[0, 2, 1])[0].shape,
                     (2, 2, 3))
    with self.assertRaisesRegex(ValueError, "Op 'op'.*new_shape"):
      _run(OpType.RESHAPE, x, new_shape=[2, 'X'])

  def test_dropout_only_when_training(self):
    x = np.ones([4, 100], np.float32)
    y, _ = _run(OpType.DROPOUT, x, rate=0.5)
    self.assertAllClose(y, x)
    y, _ = _run(OpType.DROPOUT, x, rate=0.5, training=True)
    self.assertTrue(set(np.unique(y)) <= {0.0, 2.0})
    self.assertGreater((y == 0).sum(), 0)

  def test_dropout_with_a_seed_is_keyed_on_it_and_the_op_name(self):
    x = np.ones([4, 100], np.float32)
    graph = ir.new_graph(['in0'], ['b'], [
        ir.new_op('a', OpType.DROPOUT, ['in0'], op_kwargs={'rate': 0.5}),
        ir.new_op('b', OpType.DROPOUT, ['in0'], op_kwargs={'rate': 0.5})])
    model = model_lib.Model(graph)
    seed = tf.constant([1, 2], tf.int64)
    first = model.call_all(x, training=True, dropout_seed=seed)
    again = model.call_all(x, training=True, dropout_seed=seed)
    self.assertAllEqual(first['a:0'], again['a:0'])
    self.assertNotAllEqual(first['a:0'], first['b:0'])
    self.assertAllEqual(
        model(x, training=True, dropout_seed=seed), first['b:0'])
    self.assertNotAllEqual(first['b:0'], model(
        x, training=True, dropout_seed=tf.constant([1, 3], tf.int64)))

  def test_whole_tensor_dropout_is_one_scalar_mask(self):
    x = np.arange(1, 33, dtype=np.float32).reshape([2, 2, 2, 4])
    graph = ir.new_graph(['in0'], ['op'], [ir.new_op(
        'op', OpType.DROPOUT, ['in0'],
        op_kwargs={'rate': 0.25, 'whole_tensor': True})])
    model = model_lib.Model(graph)
    self.assertAllEqual(model(x, training=False), x)
    kept = []
    for step in range(12):
      seed = tf.constant([5, step], tf.int64)
      y = model(x, training=True, dropout_seed=seed).numpy()
      self.assertAllEqual(model(x, training=True, dropout_seed=seed), y)
      # All zeros, or all of x / (1 - 0.25).
      kept.append(bool(y.any()))
      self.assertAllClose(y, x / 0.75 if kept[-1] else np.zeros_like(x))
    # 12 draws at keep odds 3/4: both outcomes (all kept: 0.75 ** 12 ~ 3%;
    # the seeds are fixed, so this never flakes).
    self.assertEqual(set(kept), {False, True})
    with self.assertRaisesRegex(ValueError,
                                "Op 'op' .DROPOUT.: whole_tensor must be a "
                                "bool, got 'yes'"):
      _run(OpType.DROPOUT, x, training=True, rate=0.5, whole_tensor='yes')

  def test_check_kwargs_rejects_unknown_kwarg(self):
    with self.assertRaisesRegex(ValueError,
                                r"Op 'op' \(RELU\): unknown kwargs "
                                r"\['alpha'\]"):
      _run(OpType.RELU, np.ones([1], np.float32), alpha=0.1)

  def test_initial_value_seeded_is_deterministic(self):
    spec = ops.VariableSpec((3, 4), 'I:he_normal', fan_in=3, fan_out=4)
    a = ops.initial_value(spec, 7, 'x/kernel', 'op')
    b = ops.initial_value(spec, 7, 'x/kernel', 'op')
    c = ops.initial_value(spec, 7, 'y/kernel', 'op')
    self.assertAllEqual(a, b)
    self.assertNotAllClose(a, c)
    # Truncated at 2 stddev of sqrt(2 / fan_in) / 0.8796.
    self.assertLess(np.abs(a).max(), 2 * np.sqrt(2 / 3) / 0.8796 + 1e-6)

  def test_initial_value_constant_forms(self):
    spec = ops.VariableSpec((2,), 'I:constant:value:3')
    self.assertAllClose(ops.initial_value(spec, None, 'v', 'op'), [3, 3])
    spec = ops.VariableSpec((2,), 0.5)
    self.assertAllClose(ops.initial_value(spec, None, 'v', 'op'), [0.5, 0.5])

  def test_initial_value_rejects_bad_initializers(self):
    for init, regex in (('I:nope', 'unknown initializer'),
                        ('I:normal:stddev', 'key:value'),
                        ('I:zeros:scale:2', 'takes no argument'),
                        ('zeros', 'must be an "I:<fn>"')):
      with self.assertRaisesRegex(ValueError, f"Op 'c'.*{regex}"):
        ops.initial_value(ops.VariableSpec((1,), init), None, 'v', "Op 'c'")


if __name__ == '__main__':
  tf.test.main()
