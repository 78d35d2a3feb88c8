"""Export of a trained network under `export_dir`: a SavedModel, float32 and
int8 TFLite files and the int8 C header (docs/train_eval.md, 'Outputs'),
taking pixels as the run's data has them and preprocessing them itself."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, NamedTuple, Optional

import numpy as np
import tensorflow as tf

from tunas_tf.cost_model import macs
from tunas_tf.cost_model import memory
from tunas_tf.io import files
from tunas_tf.io import lite
from tunas_tf.data import datasets
from tunas_tf.data import preprocessing
from tunas_tf.graph import inherit
from tunas_tf.graph import model as model_lib
from tunas_tf.search_space import ops as spec_ops
from tunas_tf.train_eval import data
from tunas_tf.train_eval import network
from tunas_tf.train_eval.config import TrainEvalConfig

SAVED_MODEL_SUBDIR = 'saved_model'
TFLITE_FILE = 'model.tflite'
TFLITE_INT8_FILE = 'model_int8.tflite'
MICRO_HEADER = 'model_int8.h'
CALIBRATION_IMAGES = 256
MICRO_CHECK_IMAGES = 8  # Evaluation images run in TFLite Micro and TFLite.


class Contract(NamedTuple):
  """What the exports take: `dtype` images, `to_network` (exported images
  -> the network's input) and `from_network` (the network's input -> the
  exported images' values, float32)."""
  dtype: tf.DType
  to_network: Callable[[tf.Tensor], tf.Tensor]
  from_network: Callable[[tf.Tensor], tf.Tensor]


def input_contract(config: TrainEvalConfig) -> Contract:
  """uint8 pixels and `preprocessing.from_pixels`; digits' float32 in
  [0, 1] as they are."""
  job = config.job
  if job.dataset == datasets.DIGITS:
    return Contract(tf.float32, tf.identity, tf.identity)
  return Contract(
      tf.uint8,
      lambda images: preprocessing.from_pixels(images, job.preprocessing,
                                               job.num_channels),
      lambda images: tf.clip_by_value(preprocessing.to_pixels(
          images, job.preprocessing, job.num_channels), 0.0, 255.0))


def _network(config: TrainEvalConfig, arch: spec_ops.ConvTowerSpec,
             checkpoint: str) -> model_lib.Model:
  """The network holding the checkpoint's weights."""
  graph, constants = network.build_graph(config, arch)
  # Seeded: the initial values are overwritten, but unseeded random ops are
  # refused under --deterministic (op determinism).
  model = model_lib.Model(graph, constants, seed=config.job.seed)
  model(tf.zeros([1, *network.input_shape(config)]), training=False)
  model_lib.set_params(model, inherit.model_values(model, checkpoint))
  return model


def _serving_function(config: TrainEvalConfig, model: model_lib.Model,
                      dtype: tf.DType) -> tf.types.experimental.Function:
  """images [N, S, S, C] of `dtype` -> {'logits': ...} by the contract."""
  contract = input_contract(config)
  return tf.function(
      lambda images: {'logits': model(contract.to_network(images),
                                      training=False)},
      input_signature=[tf.TensorSpec([None, *network.input_shape(config)],
                                     dtype, name='images')])


def _write_saved_model(module: tf.Module, saved_dir: str) -> None:
  tmp_dir = saved_dir + '.tmp'
  if tf.io.gfile.exists(tmp_dir):
    tf.io.gfile.rmtree(tmp_dir)
  tf.saved_model.save(module, tmp_dir,
                      signatures={'serving_default':
                                  module.serve.get_concrete_function()})
  if tf.io.gfile.exists(saved_dir):
    tf.io.gfile.rmtree(saved_dir)
  tf.io.gfile.rename(tmp_dir, saved_dir)


def _int8_flatbuffer(config: TrainEvalConfig,
                     model: model_lib.Model) -> bytes:
  """The int8 model, calibrated on the first `CALIBRATION_IMAGES` training
  images as exported; ValueError naming the architecture if it fails."""
  contract = input_contract(config)
  calibration = [contract.from_network(image).numpy() for image in
                 data.calibration_images(config, CALIBRATION_IMAGES)]
  serve = _serving_function(config, model, tf.float32)
  try:
    return lite.convert(serve.get_concrete_function(), model, lite.INT8,
                        calibration=calibration, input_type='uint8',
                        signature=True)
  except ValueError as e:
    raise ValueError(f'int8 export of {config.ssd} {config.indices}: {e}'
                     ) from None


def export(config: TrainEvalConfig, arch: spec_ops.ConvTowerSpec,
           checkpoint: str) -> Dict[str, str]:
  """Writes the SavedModel and TFLite files of the checkpoint's (EMA)
  weights, batch norm on moving averages, each renamed into place; returns
  {'saved_model', 'tflite', 'tflite_int8'} paths. ValueError when the int8
  conversion fails (the float32 exports are written by then)."""
  model = _network(config, arch, checkpoint)
  module = tf.Module()
  module.model = model
  module.serve = _serving_function(config, model, input_contract(config).dtype)
  tf.io.gfile.makedirs(config.export_dir)
  paths = {'saved_model': os.path.join(config.export_dir, SAVED_MODEL_SUBDIR),
           'tflite': os.path.join(config.export_dir, TFLITE_FILE),
           'tflite_int8': os.path.join(config.export_dir, TFLITE_INT8_FILE)}
  _write_saved_model(module, paths['saved_model'])
  float32 = lite.convert(module.serve.get_concrete_function(), module,
                         signature=True)
  files.write_bytes(float32, paths['tflite'])
  files.write_bytes(_int8_flatbuffer(config, model), paths['tflite_int8'])
  return paths


def int8_top1(config: TrainEvalConfig, tflite_path: str) -> float:
  """Top-1 of the int8 model on `eval_split` in the TFLite interpreter, fed
  the images as the export takes them (`input_contract`), quantized."""
  with tf.io.gfile.GFile(tflite_path, 'rb') as f:
    # TFLite's own int8 kernels, its reference integer arithmetic: the same
    # top-1 on TF 2.15's and 2.21's stacks, where XNNPACK rounds otherwise
    # (0.13 points on Fashion-MNIST) and is 4x slower on 2.15's.
    interpreter = lite.interpreter(f.read(), num_threads=1, delegates=False)
  given = interpreter.get_input_details()[0]
  output = interpreter.get_output_details()[0]['index']
  from_network = input_contract(config).from_network
  correct = total = 0
  shape = None
  for images, labels in data.eval_dataset(config, config.eval_batch_size):
    values = lite.quantize(from_network(images).numpy(), given)
    if values.shape != shape:  # The first batch, and a short last one.
      shape = values.shape
      interpreter.resize_tensor_input(given['index'], list(shape))
      interpreter.allocate_tensors()
    interpreter.set_tensor(given['index'], values)
    interpreter.invoke()
    predicted = np.argmax(interpreter.get_tensor(output), axis=-1)
    correct += int(np.sum(predicted == np.argmax(labels.numpy(), axis=-1)))
    total += len(predicted)
  return correct / total


def micro(config: TrainEvalConfig, arch: spec_ops.ConvTowerSpec,
          tflite_path: str) -> Dict[str, Any]:
  """TFLite Micro's arena and flash for the int8 model, estimated (None where
  `cost_model.memory` cannot) and measured with tflite-micro installed;
  writes `MICRO_HEADER`. Returns 'arena_bytes', 'flash_bytes', '*_measured',
  'max_difference' (output steps), 'note' (why one is missing), 'header'."""
  with tf.io.gfile.GFile(tflite_path, 'rb') as f:
    content = f.read()
  job = config.job
  shape = macs.InputSpec(job.image_size, job.num_classes, job.num_channels)
  figures = {'arena_bytes': None, 'flash_bytes': None, 'arena_measured': None,
             'flash_measured': len(content), 'max_difference': None,
             'note': None}
  try:
    figures.update(memory.needs(arch, shape))
  except ValueError as e:
    figures['note'] = str(e)
  images = next(iter(data.eval_dataset(config, MICRO_CHECK_IMAGES)))[0]
  try:
    figures['arena_measured'], figures['max_difference'] = lite.micro_check(
        content, input_contract(config).from_network(images).numpy())
  except ValueError as e:
    figures['note'] = str(e)
  arena = figures['arena_measured'] or figures['arena_bytes']
  figures['header'] = os.path.join(os.path.dirname(tflite_path), MICRO_HEADER)
  files.write_text(c_header(content, arena, f'{config.ssd} {config.indices}'),
                   figures['header'])
  return figures


def c_header(content: bytes, arena: Optional[int], what: str) -> str:
  """A C/C++ header holding the model (`g_model`, `g_model_len`) and the
  tensor arena to declare (`kTensorArenaSize`, bytes; 0 when unknown)."""
  rows = [', '.join(f'0x{b:02x}' for b in content[i:i + 12])
          for i in range(0, len(content), 12)]
  return (f'// The int8 TFLite model of {what}, from tunas_tf.train_eval.\n'
          '// kTensorArenaSize: the arena TFLite Micro needs with its reference'
          '\n// kernels (docs/microcontrollers.md: other kernels, headroom).\n'
          '#pragma once\n\n'
          f'constexpr unsigned int kTensorArenaSize = {arena or 0};\n'
          f'constexpr unsigned int g_model_len = {len(content)};\n'
          'alignas(16) const unsigned char g_model[] = {\n    ' +
          ',\n    '.join(rows) + '};\n')
