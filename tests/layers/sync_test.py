"""Tests for the data-dependency barrier: silent in value, real as an edge."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tunas_tf.layers import sync

# Includes signed zeros and the smallest normal, which a non-zero added term
# would change. (No subnormals: TF's CPU kernels flush them to zero in any
# arithmetic op, so no barrier built from an add could keep them.)
_VALUES = [0.0, -0.0, 1.0, -2.5, 3e5, 1e-3, 1.1754944e-38, -3.4e38]


def _bits(x):
  """Bit pattern of a float array, so that -0.0 != 0.0 and NaN == NaN."""
  x = np.asarray(x)
  return x.view(np.uint16 if x.dtype.itemsize == 2 else np.uint32)


def _transitive_inputs(tensor):
  """Names of all ops the tensor's op reads from, through data edges."""
  seen, stack = set(), [tensor.op]
  while stack:
    op = stack.pop()
    for t in op.inputs:
      if t.op.name not in seen:
        seen.add(t.op.name)
        stack.append(t.op)
  return seen


class WithDataDependenciesTest(parameterized.TestCase, tf.test.TestCase):

  @parameterized.named_parameters(
      ('float32_small_dep', tf.float32, 0.25),
      ('float32_large_dep', tf.float32, 1e30),
      ('float32_negative_dep', tf.float32, -7.0),
      ('float32_nan_dep', tf.float32, np.nan),
      ('float32_inf_dep', tf.float32, np.inf),
      ('bfloat16_small_dep', tf.bfloat16, 0.25),
      ('bfloat16_large_dep', tf.bfloat16, 1e30),
      ('bfloat16_nan_dep', tf.bfloat16, np.nan),
  )
  def test_with_data_dependencies_values_unchanged(self, dtype, dep_value):
    outputs = [tf.constant(_VALUES, dtype), tf.constant(5.0, dtype)]
    deps = [tf.fill([2, 3], dep_value), tf.constant([[1, 2]], tf.int32)]
    results = sync.with_data_dependencies(deps, outputs)
    self.assertLen(results, 2)
    for output, result in zip(outputs, results):
      self.assertEqual(result.dtype, dtype)
      self.assertEqual(result.shape, output.shape)
      self.assertAllEqual(_bits(result.numpy()), _bits(output.numpy()))

  def test_with_data_dependencies_values_unchanged_in_tf_function(self):
    output = tf.constant(_VALUES)
    # Compiled too, since XLA is what the edge must survive.
    fn = tf.function(
        lambda dep: sync.with_data_dependencies([dep], [output])[0],
        jit_compile=True)
    dep = tf.constant([1e30, 2.0])
    self.assertAllEqual(_bits(fn(dep)), _bits(output.numpy()))
    # XLA's optimiser keeps the read of the dependency (a slice of it).
    hlo = fn.experimental_get_compiler_ir(dep)(stage='optimized_hlo')
    self.assertIn('slice', hlo)

  def test_with_data_dependencies_adds_edge_in_v1_graph(self):
    with tf.Graph().as_default():
      dep = tf.compat.v1.placeholder(tf.float32, [2, 3], name='dep')
      output = tf.constant([1.0, 0.0, -2.0])
      (result,) = sync.with_data_dependencies([dep], [output])
      self.assertIn('dep', _transitive_inputs(result))
      with self.session() as sess:
        # The output cannot be computed without the dependency.
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, 'dep'):
          sess.run(result)
        fed = sess.run(result, {dep: np.full([2, 3], 3.0, np.float32)})
        self.assertAllEqual(_bits(fed), _bits(np.float32([1.0, 0.0, -2.0])))

  def test_with_data_dependencies_adds_edge_in_tf_function(self):
    output = tf.constant([1.0, 2.0])
    fn = tf.function(lambda dep: sync.with_data_dependencies([dep], [output]))
    graph = fn.get_concrete_function(
        tf.TensorSpec([4], tf.float32, name='dep')).graph
    result = graph.outputs[0]
    placeholder = graph.inputs[0].op.name
    self.assertIn(placeholder, _transitive_inputs(result))

  def test_with_data_dependencies_every_output_depends_on_every_dep(self):
    with tf.Graph().as_default():
      deps = [tf.compat.v1.placeholder(tf.float32, [], name=f'dep{i}')
              for i in range(3)]
      outputs = [tf.constant(1.0), tf.constant([2.0, 3.0])]
      for result in sync.with_data_dependencies(deps, outputs):
        self.assertContainsSubset({'dep0', 'dep1', 'dep2'},
                                  _transitive_inputs(result))

  def test_with_data_dependencies_gradients(self):
    x = tf.Variable([1.0, -2.0])
    y = tf.Variable(3.0)
    with tf.GradientTape() as tape:
      output = 3.0 * x
      dep = y * y
      (result,) = sync.with_data_dependencies([dep], [output])
      loss = tf.reduce_sum(result * result)
    grad_x, grad_y = tape.gradient(loss, [x, y])
    # d/dx sum((3x)^2) = 18x; nothing reaches y through the barrier.
    self.assertAllClose(grad_x, [18.0, -36.0])
    self.assertIsNone(grad_y)

  def test_with_data_dependencies_empty_dependencies(self):
    outputs = [tf.constant([1.0, 2.0])]
    results = sync.with_data_dependencies([], outputs)
    self.assertIsInstance(results, list)
    self.assertIs(results[0], outputs[0])

  def test_with_data_dependencies_none_output_passes_through(self):
    results = sync.with_data_dependencies(
        [tf.constant(1.0)], [None, tf.constant(2.0)])
    self.assertIsNone(results[0])
    self.assertAllEqual(results[1], 2.0)

  @parameterized.named_parameters(('int32', tf.int32), ('bool', tf.bool))
  def test_with_data_dependencies_non_float_output_raises(self, dtype):
    outputs = [tf.constant(1.0), tf.zeros([2], dtype)]
    with self.assertRaisesRegex(ValueError,
                                rf'floating.*{dtype.name} for output 1'):
      sync.with_data_dependencies([tf.constant(1.0)], outputs)

  @parameterized.named_parameters(
      ('float16', tf.float16, np.float16),
      ('float32', tf.float32, np.float32),
      ('float64', tf.float64, np.float64))
  def test_smallest_normal_matches_numpy(self, dtype, np_dtype):
    self.assertEqual(sync.smallest_normal(dtype), np.finfo(np_dtype).tiny)

  def test_smallest_normal_bfloat16(self):
    self.assertEqual(sync.smallest_normal(tf.bfloat16), 1.1754943508222875e-38)

  def test_smallest_normal_non_float_raises(self):
    with self.assertRaisesRegex(ValueError, 'floating dtype, got int64'):
      sync.smallest_normal(tf.int64)


if __name__ == '__main__':
  tf.test.main()
