"""Export of a trained network: a SavedModel and a TFLite file.

Under `export_dir` (default MODEL_DIR/export): `saved_model/` (signature
`serving_default`, `images` [N, S, S, C] -> `logits`) and `model.tflite`, each
written beside its final path and renamed into place. The exports take uint8
pixels 0-255 at the run's side S and apply the run's `--preprocessing` value
transform themselves (`preprocessing.from_pixels`); `digits` is taken as
stored (float32 in [0, 1]). docs/train_eval.md, 'Outputs'.
"""

from __future__ import annotations

import os
from typing import Dict

import tensorflow as tf

from tunas_tf import native_output
from tunas_tf.data import datasets
from tunas_tf.data import preprocessing
from tunas_tf.graph import inherit
from tunas_tf.graph import model as model_lib
from tunas_tf.search_space import ops as spec_ops
from tunas_tf.train_eval import network
from tunas_tf.train_eval.config import TrainEvalConfig

SAVED_MODEL_SUBDIR = 'saved_model'
TFLITE_FILE = 'model.tflite'


def _serving_module(config: TrainEvalConfig, arch: spec_ops.ConvTowerSpec,
                    checkpoint: str) -> tf.Module:
  """A module holding the checkpoint's weights and a `serve` function."""
  graph, constants = network.build_graph(config, arch)
  shape = list(network.input_shape(config))
  # Seeded: the initial values are overwritten, but unseeded random ops are
  # refused under --deterministic (op determinism).
  model = model_lib.Model(graph, constants, seed=config.job.seed)
  model(tf.zeros([1] + shape), training=False)
  model_lib.set_params(model, inherit.model_values(model, checkpoint))
  module = tf.Module()
  module.model = model
  dtype, transform = input_contract(config)
  module.serve = tf.function(
      lambda images: {'logits': model(transform(images), training=False)},
      input_signature=[tf.TensorSpec([None] + shape, dtype, name='images')])
  return module


def input_contract(config: TrainEvalConfig):
  """(dtype of the exported `images`, their transform to the network's
  input): uint8 pixels and `preprocessing.from_pixels`; digits' float32 in
  [0, 1] as they are."""
  job = config.job
  if job.dataset == datasets.DIGITS:
    return tf.float32, lambda images: images
  return tf.uint8, lambda images: preprocessing.from_pixels(
      images, job.preprocessing, job.num_channels)


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


def _write_tflite(saved_dir: str, tflite_path: str) -> None:
  with native_output.captured():  # The converter's op summary.
    tflite = tf.lite.TFLiteConverter.from_saved_model(saved_dir).convert()
  with tf.io.gfile.GFile(tflite_path + '.tmp', 'wb') as f:
    f.write(tflite)
  tf.io.gfile.rename(tflite_path + '.tmp', tflite_path, overwrite=True)


def export(config: TrainEvalConfig, arch: spec_ops.ConvTowerSpec,
           checkpoint: str) -> Dict[str, str]:
  """Writes a SavedModel and a TFLite file of the checkpoint's weights.

  Batch norm uses its moving averages, and the weights are the EMA ones when
  the checkpoint has them.

  Returns:
    {'saved_model': dir, 'tflite': file}.
  """
  module = _serving_module(config, arch, checkpoint)
  tf.io.gfile.makedirs(config.export_dir)
  saved_dir = os.path.join(config.export_dir, SAVED_MODEL_SUBDIR)
  _write_saved_model(module, saved_dir)
  tflite_path = os.path.join(config.export_dir, TFLITE_FILE)
  _write_tflite(saved_dir, tflite_path)
  return {'saved_model': saved_dir, 'tflite': tflite_path}
