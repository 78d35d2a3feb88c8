"""Tests for tunas_tf/lite: the one TFLite conversion (float32 or int8) and
the interpreter, LiteRT's on the newest TF (its `tf.lite.Interpreter` warns
it is scheduled for deletion)."""

import sys
from unittest import mock
import warnings

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from tunas_tf.io import lite


def _function(body, width=3):
  """(concrete function of one [1, width] float32 input, its holder)."""
  holder = tf.Module()
  holder.scale = tf.Variable(2.0)
  function = tf.function(lambda x: body(holder.scale, x), input_signature=[
      tf.TensorSpec([1, width], tf.float32)])
  return function.get_concrete_function(), holder


def _double_relu():
  return _function(lambda scale, x: tf.nn.relu(scale * x))


def _run(content, values):
  interpreter = lite.interpreter(content, num_threads=1)
  interpreter.allocate_tensors()
  interpreter.set_tensor(interpreter.get_input_details()[0]['index'], values)
  interpreter.invoke()
  return interpreter, interpreter.get_tensor(
      interpreter.get_output_details()[0]['index'])


class InterpreterTest(absltest.TestCase):

  def test_runs_the_model_without_a_warning(self):
    content = lite.convert(*_double_relu())
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter('always')
      interpreter, output = _run(content, np.array([[1.0, -1.0, 0.5]],
                                                   np.float32))
    self.assertEqual([str(w.message) for w in caught], [])
    # Exact: a doubling and a max with 0.
    np.testing.assert_array_equal(output, [[2.0, 0.0, 1.0]])
    # setup.py installs LiteRT with TF 2.16+; TF 2.15's stack keeps TF's.
    newest = tuple(int(p) for p in tf.__version__.split('.')[:2]) >= (2, 16)
    self.assertEqual(type(interpreter).__module__.split('.')[0],
                     'ai_edge_litert' if newest else 'tensorflow')


  def test_without_delegates_tflites_own_kernels_run(self):
    content = lite.convert(*_double_relu())
    for delegates in (True, False):
      interpreter = lite.interpreter(content, delegates=delegates)
      interpreter.allocate_tensors()
      names = [op['op_name'] for op in interpreter._get_ops_details()]  # pylint: disable=protected-access
      # XNNPACK takes the graph over as one DELEGATE node.
      self.assertEqual('DELEGATE' in names, delegates, names)


class ConvertTest(absltest.TestCase):

  def test_int8_is_full_integer_on_the_calibrated_range(self):
    # Calibrated on inputs in [-1, 1]: the input's int8 steps are 2 / 255,
    # the output's (relu of 2x: [0, 2]) 2 / 255 too.
    calibration = [np.array([[-1.0, 0.0, 1.0]], np.float32)] * 2
    for input_type, dtype in (('int8', np.int8), ('uint8', np.uint8)):
      content = lite.convert(*_double_relu(), lite.INT8,
                             calibration=calibration, input_type=input_type)
      interpreter = lite.interpreter(content)
      given = interpreter.get_input_details()[0]
      output = interpreter.get_output_details()[0]
      self.assertEqual((given['dtype'], output['dtype']), (dtype, np.int8))
      self.assertAlmostEqual(given['quantization'][0], 2 / 255, places=6)
      self.assertAlmostEqual(output['quantization'][0], 2 / 255, places=6)
      scale, zero_point = given['quantization']
      values = np.array([[0.5, -0.25, 1.0]])
      _, result = _run(content, np.round(values / scale + zero_point).astype(
          dtype))
      scale, zero_point = output['quantization']
      # Two roundings of half a step each: within a step of 2x's relu.
      dequantized = (result.astype(np.float32) - zero_point) * scale
      np.testing.assert_allclose(dequantized, [[1.0, 0.0, 2.0]],
                                 atol=2 / 255)

  def test_a_signature_maps_the_functions_names_to_its_tensors(self):
    holder = tf.Module()
    holder.scale = tf.Variable(2.0)
    # Keys whose sorted order is not the order the outputs are made in.
    function = tf.function(
        lambda x: {'negated': -x, 'doubled': holder.scale * x},
        input_signature=[tf.TensorSpec([1, 2], tf.float32, name='values')])
    concrete = function.get_concrete_function()
    self.assertEqual(lite.interpreter(lite.convert(
        concrete, holder)).get_signature_list(), {})
    interpreter = lite.interpreter(lite.convert(concrete, holder,
                                                signature=True))
    self.assertEqual(interpreter.get_signature_list(), {'serving_default': {
        'inputs': ['values'], 'outputs': ['doubled', 'negated']}})
    outputs = interpreter.get_signature_runner('serving_default')(
        values=np.array([[1.0, -3.0]], np.float32))
    np.testing.assert_array_equal(outputs['doubled'], [[2.0, -6.0]])
    np.testing.assert_array_equal(outputs['negated'], [[-1.0, 3.0]])

  def test_quantize_by_the_inputs_scale_and_zero_point(self):
    details = {'dtype': np.int8, 'quantization': (0.5, -128)}
    # 0 / 0.5 - 128, 0.26 / 0.5 - 128 = -127.48, 200 / 0.5 - 128 = 272.
    quantized = lite.quantize(np.array([0.0, 0.26, 200.0]), details)
    self.assertEqual(quantized.dtype, np.int8)
    np.testing.assert_array_equal(quantized, [-128, -127, 127])
    values = np.array([0.25, 2.0])
    np.testing.assert_array_equal(lite.quantize(values, {
        'dtype': np.float32, 'quantization': (0.0, 0)}), values)

  def test_unknown_precision(self):
    with self.assertRaisesRegex(ValueError, r"Unknown precision 'int4'; "
                                r"expected one of \['float32', 'int8'\]"):
      lite.convert(*_double_relu(), 'int4')

  def test_an_op_without_an_int8_kernel_is_refused(self):
    # The converter keeps CUMSUM in float32 between a dequantize and a
    # quantize: not what an integer-only device runs.
    cumsum = _function(lambda scale, x: tf.math.cumsum(scale * x, axis=1))
    with self.assertRaisesRegex(ValueError, r'^the int8 TFLite conversion '
                                r'left ops in float32 \(no int8 kernel\): '
                                r'CUMSUM$'):
      lite.convert(*cumsum, lite.INT8,
                   calibration=[np.ones([1, 3], np.float32)])

  def test_a_failed_conversion_is_one_line(self):
    erf = _function(lambda scale, x: tf.math.erf(scale * x))
    for precision in lite.PRECISIONS:
      with self.assertRaisesRegex(
          ValueError, f'^the {precision} TFLite conversion failed: '
          "'tf.Erf' op is neither a custom op nor a flex op$"):
        lite.convert(*erf, precision,
                     calibration=[np.ones([1, 3], np.float32)])


class MicroTest(absltest.TestCase):
  """TFLite Micro (the tflite-micro wheel) on the host."""

  def test_the_smallest_arena_runs_and_outputs_match_tflites(self):
    content = lite.convert(*_function(lambda scale, x: tf.nn.relu(scale * x),
                                      width=64), lite.INT8, calibration=[
        np.linspace(-1, 1, 64, dtype=np.float32)[None]])
    images = np.random.RandomState(0).uniform(-1, 1, [3, 64]).astype(
        np.float32)
    arena, difference = lite.micro_check(content, images)
    self.assertTrue(lite._fits(content, arena)[0])  # pylint: disable=protected-access
    self.assertFalse(lite._fits(content, arena - 1)[0])  # pylint: disable=protected-access
    self.assertLessEqual(difference, 1)

  def test_an_op_without_a_kernel_is_named(self):
    gelu = _function(lambda scale, x: tf.nn.gelu(scale * x))
    with self.assertRaisesRegex(ValueError, r'^TFLite Micro cannot run the '
                                r'model: no kernel for op GELU$'):
      lite.micro_arena(lite.convert(*gelu))

  def test_a_missing_package_is_named(self):
    with mock.patch.dict(sys.modules, {'tflite_micro': None,
                                       lite.MICRO_MODULE: None}):
      with self.assertRaisesRegex(ValueError, r'^TFLite Micro is not '
                                  r'installed: pip install tflite-micro '):
        lite.micro_arena(b'')


if __name__ == '__main__':
  absltest.main()
