"""Tests for search/runner's lines and the search's input_fn (the search
itself: search_test)."""

import dataclasses
import tempfile
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tunas_tf.runtime import estimator
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.search import runner
from tunas_tf.search import task as task_lib
from tests.testing import searches


def _cost_text(cost, config):
  return task_lib.progress_formats(config)['rlcontroller/estimated_cost'](cost)


class ProgressLineTest(absltest.TestCase):

  def test_cost_has_units_target_and_deviation(self):
    config = searches.search_config(tempfile.mkdtemp())
    target = config.rl_cost_model_target
    self.assertEqual(config.cost_model, 'macs')
    text = _cost_text(target * 0.97, config)
    self.assertEqual(text, f'cost {target * 0.97:,.0f} MACs (target '
                           f'{target:,.0f} MACs, -3%)')

  def test_large_costs_are_written_out_in_thousands(self):
    config = searches.search_config(tempfile.mkdtemp(),
                                    '--rl_cost_model_target=1085375')
    self.assertEqual(_cost_text(848370.4, config),
                     'cost 848,370 MACs (target 1,085,375 MACs, -22%)')


class StartLineTest(absltest.TestCase):

  def _line(self, log, *args):
    with self.assertLogs('absl', level='INFO') as logs:
      log(*args)
    self.assertLen(logs.records, 1)
    return logs.records[0].getMessage()

  def test_start_resume_and_finished_lines_name_the_data(self):
    model_dir = tempfile.mkdtemp()
    config = searches.search_config(model_dir, *searches.SHORT_SEARCH_FLAGS)
    data = 'digits 8x8, preprocessing none, 1078 + 359 held-out images'
    fresh = resume_lib.ResumePoint(None, 0, [], [], False)
    line = self._line(runner._log_start, config,  # pylint: disable=protected-access
                      runner.Plan('{}', None, fresh))
    self.assertEqual(line, f'Starting search digits_search in {model_dir}: 8 '
                     f'steps on {data} (RL delay 4, warm-up 2/4); building '
                     'the search graph ...')
    resumed = resume_lib.ResumePoint(f'{model_dir}/model.ckpt-4', 4, [], [],
                                     True)
    line = self._line(runner._log_start, config,  # pylint: disable=protected-access
                      runner.Plan('{}', {}, resumed))
    self.assertTrue(line.startswith(
        f'Resuming search digits_search in {model_dir} from step 4 '
        f'(model.ckpt-4): 8 steps on {data} '), line)
    line = self._line(runner._log_finished, config,  # pylint: disable=protected-access
                      runner.Plan('{}', {}, resumed._replace(global_step=8)))
    self.assertTrue(line.endswith(f'nothing to do ({data})'), line)


class DistributeGrapplerTest(absltest.TestCase):

  def test_the_memory_optimiser_stays_on_where_a_gpu_is(self):
    self.assertEqual(runner.distribute_grappler_off(),
                     runner.DISTRIBUTE_GRAPPLER_OFF)  # No GPU here.
    self.assertIn('memory_optimization', runner.DISTRIBUTE_GRAPPLER_OFF)
    gpu = tf.config.PhysicalDevice('/physical_device:GPU:0', 'GPU')
    with mock.patch.object(tf.config, 'list_physical_devices',
                           lambda kind=None: [gpu] if kind == 'GPU' else []):
      with_gpu = runner.distribute_grappler_off()
    self.assertEqual(
        with_gpu, tuple(p for p in runner.DISTRIBUTE_GRAPPLER_OFF
                        if p != 'memory_optimization'))


def _input_fn(config, start_step=0):
  """The search's input_fn on the Estimator."""
  return estimator.task_input_fn(task_lib.SearchTask(config), config.job,
                                 config.replicas, start_step)


class InputFnTest(parameterized.TestCase):

  @parameterized.parameters(('true', tf.bfloat16), ('ontpu', tf.float32),
                            ('false', tf.float32))
  def test_images_come_in_the_input_dtype_and_labels_in_float32(
      self, mode, dtype):
    # Off TPU `ontpu` computes in float32; on TPU its model_fn casts.
    config = searches.search_config(tempfile.mkdtemp(), '--train_batch_size=4',
                                    f'--use_bfloat16={mode}')
    features, labels = _input_fn(config)({}).element_spec
    for side, batch in (('train', 4), ('validation', 16)):
      self.assertEqual((features[side].dtype, features[side].shape),
                       (dtype, [batch, 8, 8, 1]), side)
      self.assertEqual((labels[side].dtype, labels[side].shape),
                       (tf.float32, [batch, 10]), side)

  def test_bfloat16_images_hold_the_float32_values_and_resume(self):
    # The same stream in both modes, cast at its end (digits' pixels,
    # multiples of 1/16, are exact in bfloat16); resumed at step 3, the
    # bfloat16 one goes on with the 4th batch.
    streams = {}
    for mode in ('false', 'true'):
      config = searches.search_config(tempfile.mkdtemp(),
                                      '--train_batch_size=4',
                                      f'--use_bfloat16={mode}')
      streams[mode] = list(_input_fn(config)({}).take(4)
                           .as_numpy_iterator())
    resumed = list(_input_fn(config, start_step=3)({}).take(1)
                   .as_numpy_iterator())
    for float32, bfloat16 in zip(streams['false'], streams['true']):
      for side in ('train', 'validation'):
        self.assertEqual(bfloat16[0][side].dtype, tf.bfloat16.as_numpy_dtype)
        np.testing.assert_array_equal(bfloat16[0][side].astype(np.float32),
                                      float32[0][side])
        np.testing.assert_array_equal(bfloat16[1][side], float32[1][side])
    for side in ('train', 'validation'):
      np.testing.assert_array_equal(resumed[0][0][side],
                                    streams['true'][3][0][side])

  def test_on_tpu_the_bfloat16_images_are_sent_hwcn(self):
    config = searches.search_config(tempfile.mkdtemp(), '--train_batch_size=4',
                                    '--use_bfloat16=true')
    config = dataclasses.replace(
        config, job=dataclasses.replace(config.job, use_tpu=True, tpu='local'))
    features, _ = _input_fn(config)(
        {'batch_size': 2}).element_spec
    self.assertEqual((features['train'].dtype, features['train'].shape),
                     (tf.bfloat16, [8, 8, 1, 2]))
    self.assertEqual(features['validation'].shape, [8, 8, 1, 8])


if __name__ == '__main__':
  absltest.main()
