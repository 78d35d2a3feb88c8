"""Tests for tunas_tf/lite: the TFLite interpreter, LiteRT's on the newest
TF (its `tf.lite.Interpreter` warns it is scheduled for deletion)."""

import warnings

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from tunas_tf import lite


def _flatbuffer() -> bytes:
  @tf.function(input_signature=[tf.TensorSpec([1, 3], tf.float32)])
  def double_relu(x):
    return tf.nn.relu(2.0 * x)
  converter = tf.lite.TFLiteConverter.from_concrete_functions(
      [double_relu.get_concrete_function()], double_relu)
  return converter.convert()


class InterpreterTest(absltest.TestCase):

  def test_runs_the_model_without_a_warning(self):
    content = _flatbuffer()
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter('always')
      interpreter = lite.interpreter(content, num_threads=1)
    self.assertEqual([str(w.message) for w in caught], [])
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]['index'],
                           np.array([[1.0, -1.0, 0.5]], np.float32))
    interpreter.invoke()
    np.testing.assert_array_equal(  # Exact: a doubling and a max with 0.
        interpreter.get_tensor(interpreter.get_output_details()[0]['index']),
        [[2.0, 0.0, 1.0]])
    # setup.py installs LiteRT with TF 2.16+; TF 2.15's stack keeps TF's.
    newest = tuple(int(p) for p in tf.__version__.split('.')[:2]) >= (2, 16)
    self.assertEqual(type(interpreter).__module__.split('.')[0],
                     'ai_edge_litert' if newest else 'tensorflow')


if __name__ == '__main__':
  absltest.main()
