"""TFLite: the one conversion (float32 or full-integer int8) and the
interpreter: LiteRT's (`ai_edge_litert`) where installed (with TF 2.16+,
whose own warns it is deprecated), else TF's.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional
import warnings

import numpy as np

from tunas_tf.io import checks
from tunas_tf.io import errors
from tunas_tf.io import native_output

FLOAT32, INT8 = 'float32', 'int8'
PRECISIONS = (FLOAT32, INT8)
# The first line of `tf.lite.Interpreter`'s deprecation warning (TF 2.16+).
_DELETION_WARNING = r'\s*Warning: tf\.lite\.Interpreter is deprecated'
_NO_STATISTICS = 'Statistics for quantized inputs were expected'


def interpreter(model_content: bytes, num_threads: Optional[int] = None,
                delegates: bool = True) -> Any:
  """An interpreter of the TFLite flatbuffer `model_content` (tensors not
  yet allocated), on `num_threads` threads (None: the interpreter's
  default); without `delegates`, TFLite's own kernels (no XNNPACK)."""
  try:
    from ai_edge_litert import interpreter as litert  # pylint: disable=g-import-not-at-top
    make, resolvers = litert.Interpreter, litert.OpResolverType
  except ImportError:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    make = tf.lite.Interpreter
    resolvers = tf.lite.experimental.OpResolverType
  with warnings.catch_warnings():
    warnings.filterwarnings('ignore', message=_DELETION_WARNING)
    return make(
        model_content=model_content, num_threads=num_threads,
        experimental_op_resolver_type=(
            resolvers.AUTO if delegates else
            resolvers.BUILTIN_WITHOUT_DEFAULT_DELEGATES))


def convert(function: Any, trackable: Any, precision: str = FLOAT32,
            calibration: Optional[Iterable[np.ndarray]] = None,
            input_type: str = INT8, signature: bool = False) -> bytes:
  """The TFLite flatbuffer of `function` (one input; variables frozen from
  `trackable`); `INT8`: full-integer (`input_type` input), calibrated on
  `calibration` (float32 arrays); `signature`: as `_with_signature`.

  Raises:
    ValueError: an unknown precision, or a conversion that fails or leaves an
      op in float32 (the message says which).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  checks.one_of('precision', precision, list(PRECISIONS))
  converter = tf.lite.TFLiteConverter.from_concrete_functions([function],
                                                              trackable)
  # Variables frozen to constants, no SavedModel: the same ops and outputs,
  # a quarter of the time (bench/DECISIONS.md).
  converter.experimental_lower_to_saved_model = False
  if precision == INT8:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([x] for x in calibration)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.as_dtype(input_type)
    converter.inference_output_type = tf.int8
  failure = None
  with native_output.captured(), warnings.catch_warnings():
    # The converter's op summary; its note that the input has no recorded
    # statistics (the calibration gives them).
    warnings.filterwarnings('ignore', message=_NO_STATISTICS)
    try:
      content = converter.convert()
    except Exception as e:  # pylint: disable=broad-except
      failure = errors.first_line(e)  # Its own lines: the note, the stack.
  if failure is not None:
    raise ValueError(f'the {precision} TFLite conversion failed: {failure}')
  if precision == INT8:
    _check_integer(content)
  return _with_signature(content, function) if signature else content


def _with_signature(content: bytes, function: Any) -> bytes:
  """`content` with the signature 'serving_default' a SavedModel's
  conversion gives it: `function`'s input names -> its output keys."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow.lite.python import schema_py_generated as schema  # pylint: disable=g-import-not-at-top
  from tensorflow.lite.tools import flatbuffer_utils  # pylint: disable=g-import-not-at-top
  model = flatbuffer_utils.convert_bytearray_to_object(content)
  graph = model.subgraphs[0]
  inputs = [s.name for s in tf.nest.flatten(
      function.structured_input_signature)]
  outputs = sorted(function.structured_outputs)  # Flattened in key order.

  def tensor_map(key, index):
    entry = schema.TensorMapT()
    entry.name, entry.tensorIndex = key, int(index)
    return entry

  signature = schema.SignatureDefT()
  signature.signatureKey, signature.subgraphIndex = 'serving_default', 0
  signature.inputs = list(map(tensor_map, inputs, graph.inputs))
  signature.outputs = list(map(tensor_map, outputs, graph.outputs))
  model.signatureDefs = [signature]
  return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def quantize(values: np.ndarray, details: Dict[str, Any]) -> np.ndarray:
  """`values` as the input of `details` (an interpreter's input details)
  takes them: rounded by its scale and zero point, clipped to its integer
  type; float32 inputs as they are."""
  if details['dtype'] == np.float32:
    return values.astype(np.float32)
  scale, zero_point = details['quantization']
  bounds = np.iinfo(details['dtype'])
  return np.clip(np.round(values / scale + zero_point), bounds.min,
                 bounds.max).astype(details['dtype'])


def _check_integer(content: bytes) -> None:
  """Refuses a model where an op left in float32 (no int8 kernel) sits
  between a dequantize and a quantize: the converter keeps such ops."""
  model = interpreter(content)
  tensors = model.get_tensor_details()
  ops = model._get_ops_details()  # pylint: disable=protected-access
  floats = sorted({op['op_name'] for op in ops
                   if op['op_name'] not in ('DELEGATE', 'DEQUANTIZE') and
                   any(tensors[i]['dtype'] == np.float32
                       for i in op['outputs'])})
  if floats:
    raise ValueError('the int8 TFLite conversion left ops in float32 (no '
                     f'int8 kernel): {", ".join(floats)}')
