"""Tests for graph/inference: the network a device runs, as TF and TFLite."""

import tempfile

from absl.testing import absltest
import numpy as np
import pytest
import tensorflow as tf

from tunas_tf.cost_model import block_table
from tunas_tf.cost_model import macs
from tunas_tf.graph import from_spec
from tunas_tf.graph import inference
from tunas_tf.latency import device as device_lib
from tunas_tf.search_space import ops
from tunas_tf.search_space import sample

SSD = 'digits_search'
SHAPE = macs.resolve_input(SSD)
BUILD = inference.builder(SSD, SHAPE)


class InferenceTest(absltest.TestCase):

  @pytest.mark.numerics
  def test_tflite_and_tf_compute_the_same_network(self):
    indices = sample.sample_indices(SSD, 1, seed=5)[0]
    cache = device_lib.ModelCache(tempfile.mkdtemp(), SSD, SHAPE, BUILD)
    tflite = device_lib.tflite_runner(cache.get(indices))
    tf_run = device_lib.tf_runner(BUILD, indices)
    tflite_logits, tf_logits = tflite(), tf_run()
    self.assertEqual(tflite_logits.shape, (1, 10))
    self.assertGreater(np.abs(tf_logits).max(), 0.0)
    # One image, inference-mode batch norm; TFLite's kernels sum in their
    # own order: measured 3.4e-8 (oneDNN's and Eigen's kernels for TF).
    np.testing.assert_allclose(tflite_logits, tf_logits, atol=1e-4)

  def test_a_unit_alone_ends_at_its_last_layer(self):
    indices = sample.sample_indices(SSD, 1, seed=5)
    units = list(block_table.units_of(SSD, SHAPE, indices).items())
    for key, unit in (units[1], units[-1]):  # A body unit; the head.
      concrete, _ = inference.unit_builder(dict(units))(key)
      s = unit.image_size
      self.assertEqual(concrete.inputs[0].shape.as_list(),
                       [1, s, s, unit.input_channels])
      output = concrete(tf.ones([1, s, s, unit.input_channels])).shape
      if unit.num_classes is None:  # Stride 1 or 2, the block's width.
        self.assertEqual(output[-1], unit.spec.blocks[0].filters)
      else:
        self.assertEqual(output.as_list(), [1, 10])
    skipped = ops.ConvTowerSpec(
        (ops.Block((ops.ResidualSpec(ops.ZeroSpec()),), 8),), 8)
    with self.assertRaisesRegex(ValueError, 'computes nothing'):
      from_spec.graph_from_spec(skipped, 1, input_channels=8,
                                classifier=False)

  def test_bad_indices(self):
    with self.assertRaisesRegex(ValueError, 'expected 18'):
      inference.inference_function(SSD, '0:1', SHAPE)


if __name__ == '__main__':
  absltest.main()
