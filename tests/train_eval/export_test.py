"""Tests of `train_eval.export`: the exported networks predict like the run."""

import os
import re
import shutil
import sys
import tempfile
from unittest import mock

from absl.testing import absltest
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from tests.testing import tiny_tfds
from tests.testing import train_eval_runs as runs
from tunas_tf.cost_model import memory
from tunas_tf.io import lite
from tunas_tf.data import datasets
from tunas_tf.train_eval import __main__ as train_eval_main
from tunas_tf.train_eval import export as export_lib
from tunas_tf.train_eval import network
from tunas_tf.train_eval import runner


@pytest.mark.estimator
class ExportTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    trained = runs.trained()
    cls.config, cls.metrics = trained.config, trained.metrics

  def test_export_layout(self):
    export = self.metrics['export']
    self.assertEqual(export, {
        'saved_model': os.path.join(self.config.export_dir,
                                    export_lib.SAVED_MODEL_SUBDIR),
        'tflite': os.path.join(self.config.export_dir,
                               export_lib.TFLITE_FILE),
        'tflite_int8': os.path.join(self.config.export_dir,
                                    export_lib.TFLITE_INT8_FILE)})
    self.assertEqual(self.config.export_dir,
                     os.path.join(self.config.job.model_dir, 'export'))
    self.assertEqual(sorted(os.listdir(self.config.export_dir)),
                     ['model.tflite', 'model_int8.h', 'model_int8.tflite',
                      'saved_model'])

  def test_the_binary_logs_where_it_exported(self):
    # main's body on this run's metrics (the run itself is the shared one).
    values = runs.parse_flags(
        f'--model_dir={tempfile.mkdtemp()}/run', '--indices=' + ':'.join(
            ['0'] * 18))
    with mock.patch.object(runner, 'run', return_value=self.metrics), \
        self.assertLogs('absl', level='INFO') as logs:
      self.assertEqual(train_eval_main.main([], values), 0)
    export = self.metrics['export']
    self.assertIn(f"INFO:absl:Exported: SavedModel {export['saved_model']}, "
                  f"TFLite {export['tflite']}, int8 TFLite "
                  f"{export['tflite_int8']}, C header "
                  f"{self.metrics['micro']['header']}", logs.output)
    self.assertIsNone(train_eval_main.exported_line({'top1': 0.5}))

  def test_microcontroller_figures_and_header(self):
    micro = self.metrics['micro']
    with open(self.metrics['export']['tflite_int8'], 'rb') as f:
      content = f.read()
    self.assertEqual(micro['flash_measured'], len(content))
    self.assertEqual(micro['arena_measured'], lite.micro_arena(content))
    self.assertBetween(micro['arena_bytes'], micro['arena_measured'],
                       1.05 * micro['arena_measured'])
    self.assertBetween(micro['flash_bytes'], 0.98 * len(content),
                       1.02 * len(content))
    self.assertBetween(micro['max_difference'], 0, 8)  # Output steps.
    self.assertIsNone(micro['note'])
    with open(micro['header']) as f:
      header = f.read()
    self.assertIn(f"kTensorArenaSize = {micro['arena_measured']};", header)
    model = header.split('g_model[] = {')[1]
    self.assertEqual(bytes(int(v, 16) for v in re.findall(
        r'0x([0-9a-f]{2})', model)), content)
    self.assertIn(f"TFLite Micro arena {memory.kilobytes(micro['arena_measured'])}"
                  f" (est. {memory.kilobytes(micro['arena_bytes'])})",
                  runner.result_line(self.metrics))

  def test_without_tflite_micro_the_estimate_is_declared(self):
    directory = tempfile.mkdtemp()
    path = os.path.join(directory, export_lib.TFLITE_INT8_FILE)
    shutil.copy(self.metrics['export']['tflite_int8'], path)
    with mock.patch.dict(sys.modules, {'tflite_micro': None,
                                       lite.MICRO_MODULE: None}):
      micro = export_lib.micro(self.config,
                               network.build_architecture(self.config), path)
    self.assertRegex(micro['note'], '^TFLite Micro is not installed: pip '
                     'install tflite-micro ')
    self.assertIsNone(micro['arena_measured'])
    with open(os.path.join(directory, export_lib.MICRO_HEADER)) as f:
      self.assertIn(f"kTensorArenaSize = {micro['arena_bytes']};", f.read())


class Int8FailureTest(absltest.TestCase):

  def test_a_failing_int8_conversion_is_named_and_keeps_the_results(self):
    config = runs.config(*runs.PINNED, f'--model_dir={tempfile.mkdtemp()}',
                         '--max_steps=2', '--engine=distribute', *runs.TINY)
    convert = lite.convert

    def failing(function, trackable, precision=lite.FLOAT32, **kwargs):
      if precision == lite.INT8:
        raise ValueError('the int8 TFLite conversion left ops in float32 '
                         '(no int8 kernel): CUMSUM')
      return convert(function, trackable, precision, **kwargs)

    with mock.patch.object(lite, 'convert', side_effect=failing), \
        self.assertRaisesRegex(ValueError, '^int8 export of digits_search '
                               f'{runs.PINNED_INDICES}: the int8 TFLite '
                               'conversion left ops in float32'):
      runner.run(config)
    stored = runs.read_json(os.path.join(config.job.model_dir,
                                         runner.METRICS_FILE))
    self.assertBetween(stored['top1'], 0.0, 1.0)
    self.assertNotIn('int8_top1', stored)
    self.assertTrue(os.path.exists(os.path.join(config.export_dir,
                                                export_lib.TFLITE_FILE)))


@pytest.mark.estimator
class PixelExportTest(absltest.TestCase):
  """A TFDS run's exports take its uint8 pixels and preprocess them."""

  def test_uint8_pixels_give_the_runs_predictions(self):
    data_dir = tempfile.mkdtemp()
    tiny_tfds.TinyImages(data_dir=data_dir).download_and_prepare()
    for preprocessing in ('imagenet', 'cifar'):
      config = runs.config(
          f'--model_dir={tempfile.mkdtemp()}', '--dataset=tiny_images',
          f'--data_dir={data_dir}', '--nodownload',
          f'--indices={":".join(["0"] * 18)}', '--max_steps=2',
          '--train_batch_size=4', '--eval_batch_size=6',
          f'--preprocessing={preprocessing}')
      metrics = runner.run(config)
      # The evaluated network on the run's own evaluation input (6 test
      # images).
      [(images, _)] = datasets.eval_dataset(
          'tiny_images', 'test', 3, 6, data_dir=data_dir,
          validation_examples=1, image_size=8,
          preprocessing=config.job.preprocessing)
      expected = runs.evaluated_logits(config, images)
      pixels = np.stack([image for image, _ in tfds.as_numpy(
          tfds.builder('tiny_images', data_dir=data_dir).as_dataset(
              split='test', as_supervised=True, shuffle_files=False))])
      self.assertEqual(pixels.dtype, np.uint8)
      loaded = tf.saved_model.load(metrics['export']['saved_model'])
      served = loaded.signatures['serving_default'](
          images=tf.constant(pixels))['logits'].numpy()
      # The images are constant, so a crop and a bicubic resize leave them
      # as they are but for float rounding (weights summing to 1).
      np.testing.assert_allclose(served, expected, atol=1e-4,
                                 err_msg=preprocessing)
      # The int8 model takes pixels, calibrated on the training images as
      # pixels (0..19 here, whatever the preprocessing): uint8 steps of
      # 19 / 255 from 0.
      with open(metrics['export']['tflite_int8'], 'rb') as f:
        given = lite.interpreter(f.read()).get_input_details()[0]
      self.assertEqual(given['dtype'], np.uint8)
      scale, zero_point = given['quantization']
      self.assertAlmostEqual(scale, 19 / 255, places=6, msg=preprocessing)
      self.assertEqual(zero_point, 0)
      stored = runs.read_json(os.path.join(config.job.model_dir,
                                           runner.METRICS_FILE))
      self.assertEqual(stored['int8_top1'], metrics['int8_top1'])


if __name__ == '__main__':
  absltest.main()
