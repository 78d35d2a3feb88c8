"""Tests for graph/inference: the network a device runs, as TF and TFLite."""

import tempfile

from absl.testing import absltest
import numpy as np
import pytest

from tunas_tf.cost_model import latency
from tunas_tf.cost_model import macs
from tunas_tf.cost_model import random_search
from tunas_tf.graph import inference

SSD = 'digits_search'
SHAPE = macs.resolve_input(SSD)
BUILD = inference.builder(SSD, SHAPE)


class InferenceTest(absltest.TestCase):

  @pytest.mark.numerics
  def test_tflite_and_tf_compute_the_same_network(self):
    indices = random_search.sample_indices(SSD, 1, seed=5)[0]
    cache = latency.ModelCache(tempfile.mkdtemp(), SSD, SHAPE, BUILD)
    tflite = latency.tflite_runner(cache.get(indices))
    tf_run = latency.tf_runner(BUILD, indices)
    tflite_logits, tf_logits = tflite(), tf_run()
    self.assertEqual(tflite_logits.shape, (1, 10))
    self.assertGreater(np.abs(tf_logits).max(), 0.0)
    # One image, inference-mode batch norm; TFLite's kernels sum in their
    # own order: measured 3.4e-8 (oneDNN's and Eigen's kernels for TF).
    np.testing.assert_allclose(tflite_logits, tf_logits, atol=1e-4)

  def test_bad_indices(self):
    with self.assertRaisesRegex(ValueError, 'expected 18'):
      inference.inference_function(SSD, '0:1', SHAPE)


if __name__ == '__main__':
  absltest.main()
