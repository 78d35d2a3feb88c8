"""TFLite: the one conversion (float32 or int8), the interpreter (LiteRT's
where installed: TF 2.16+'s own is deprecated) and TFLite Micro's arena."""

from __future__ import annotations

import faulthandler
import importlib
import os
import re
import sys
from typing import Any, Dict, Iterable, List, Optional, Tuple
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
    make, resolvers = tf.lite.Interpreter, tf.lite.experimental.OpResolverType
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
  if precision == INT8:  # An op left in float32 (no int8 kernel) sits
    # between a dequantize and a quantize: the converter keeps such ops.
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


# ------------------------------------------------------- TFLite Micro

MICRO_MODULE = 'tflite_micro.python.tflite_micro.runtime'
# TFLite Micro's line for an op it has no kernel for.
_NO_KERNEL = re.compile(r"Didn't find op for builtin opcode '([A-Z0-9_]+)'")


def _micro_runtime() -> Any:
  """tflite_micro's runtime module; ValueError naming it if not installed."""
  try:
    return importlib.import_module(MICRO_MODULE)
  except ImportError:
    raise ValueError('TFLite Micro is not installed: pip install tflite-micro '
                     '(setup.py installs it where a wheel exists)') from None


def _micro_invoke(content: bytes, arena_size: int,
                  images: Optional[np.ndarray]) -> List[np.ndarray]:
  """Outputs of TFLite Micro on each of `images` (zeros if None) with an
  arena of `arena_size` bytes; raises what the interpreter raises."""
  runtime = _micro_runtime()
  model = runtime.Interpreter.from_bytes(content, arena_size=arena_size)
  given = model.get_input_details(0)
  if images is None:
    images = np.zeros([1, *given['shape'][1:]], given['dtype'])
  outputs = []
  for image in images:
    model.set_input(image[None].astype(given['dtype']), 0)
    model.invoke()
    outputs.append(model.get_output(0)[0])
  return outputs


def _fits(content: bytes, arena_size: int) -> Tuple[bool, str]:
  """Whether the model allocates and invokes in `arena_size` bytes, and what
  TFLite Micro printed. In a child process: under a tight arena TFLite Micro
  can crash the process, which counts as not fitting."""
  read, write = os.pipe()
  pid = os.fork()
  if pid == 0:  # The child: its own native lines go to the pipe.
    faulthandler.disable()  # A crash is an answer here, not a report.
    os.dup2(write, 1)
    os.dup2(write, 2)
    try:
      _micro_invoke(content, arena_size, None)
      code = 0
    except BaseException:  # pylint: disable=broad-except
      code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # pylint: disable=protected-access
  os.close(write)
  with os.fdopen(read, 'rb') as pipe:
    printed = pipe.read().decode('utf-8', 'replace')
  _, status = os.waitpid(pid, 0)
  return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, printed


def micro_arena(content: bytes) -> int:
  """The smallest tensor arena (bytes) in which TFLite Micro runs the model
  (bisection, each trial in a child process).

  Raises:
    ValueError: when tflite-micro is missing, or the model runs in no arena
      (naming the op without a kernel, else TFLite Micro's last line).
  """
  _micro_runtime()
  high = 1 << 16
  while True:
    fits, printed = _fits(content, high)
    if fits:
      break
    missing = _NO_KERNEL.findall(printed)
    if missing or high >= 1 << 30:
      lines = [line.strip() for line in printed.splitlines() if line.strip()]
      raise ValueError('TFLite Micro cannot run the model: ' + (
          f'no kernel for op {missing[0]}' if missing else
          (lines or ['no message'])[-1][:200]))
    high *= 4
  low = high // 4 if high > 1 << 16 else 0
  while high - low > 1:
    middle = (low + high) // 2
    low, high = (low, middle) if _fits(content, middle)[0] else (middle, high)
  return high


def micro_check(content: bytes, images: np.ndarray) -> Tuple[int, int]:
  """(the arena TFLite Micro needs for the model, `micro_arena`; the largest
  difference of its outputs from the TFLite interpreter's own kernels', in
  the output's integer steps) on `images`, float values `quantize`d to the
  model's input (`micro_arena`'s errors)."""
  arena = micro_arena(content)
  reference = interpreter(content, num_threads=1, delegates=False)
  given = reference.get_input_details()[0]
  values = quantize(images, given)
  reference.resize_tensor_input(given['index'], list(values.shape))
  reference.allocate_tensors()
  reference.set_tensor(given['index'], values)
  reference.invoke()
  expected = reference.get_tensor(reference.get_output_details()[0]['index'])
  with native_output.captured():
    micro = np.stack(_micro_invoke(content, arena, values))
  return arena, int(np.max(np.abs(micro.astype(np.int64) - expected)))
