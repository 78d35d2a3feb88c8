"""Tests of `train_eval.export`: the exported networks predict like the run."""

import os

from absl.testing import absltest
import numpy as np
import pytest
import tensorflow as tf

from tests.testing import train_eval_runs as runs
from tunas_tf.data import datasets
from tunas_tf.train_eval import export as export_lib
from tunas_tf.train_eval import network
from tunas_tf.train_eval import runner


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
                               export_lib.TFLITE_FILE)})
    self.assertEqual(self.config.export_dir,
                     os.path.join(self.config.job.model_dir, 'export'))
    self.assertEqual(sorted(os.listdir(self.config.export_dir)),
                     ['model.tflite', 'saved_model'])

  @pytest.mark.numerics
  def test_exports_give_the_trained_networks_predictions(self):
    images = datasets.digits_arrays()['test'][0][:7]
    arch = network.build_architecture(self.config)
    estimator = runner.make_estimator(
        self.config, runner.make_model_fn(self.config, arch, {},
                                          initialize=False))
    expected = np.stack([p['logits'] for p in estimator.predict(
        lambda params: tf.data.Dataset.from_tensor_slices(images).batch(
            params.get('batch_size', 50)))])
    export = self.metrics['export']
    loaded = tf.saved_model.load(export['saved_model'])
    served = loaded.signatures['serving_default'](
        images=tf.constant(images))['logits'].numpy()
    # Inference-mode batch norm, no batch dependence: the SavedModel ran the
    # estimator's ops (measured equal) and TFLite its own kernels (measured
    # 9.5e-7 on logits of ~1, oneDNN's and Eigen's kernels).
    np.testing.assert_allclose(served, expected, atol=1e-4)
    with open(export['tflite'], 'rb') as f:
      interpreter = tf.lite.Interpreter(model_content=f.read())
    index = interpreter.get_input_details()[0]['index']
    interpreter.resize_tensor_input(index, list(images.shape))
    interpreter.allocate_tensors()
    interpreter.set_tensor(index, images)
    interpreter.invoke()
    lite = interpreter.get_tensor(interpreter.get_output_details()[0]['index'])
    np.testing.assert_allclose(lite, expected, atol=1e-4)


if __name__ == '__main__':
  absltest.main()
