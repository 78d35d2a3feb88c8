"""The images' dtype per mode: the training task's batches and its eval
pass (`task.TrainEvalTask.dataset`, `eval_dataset`)."""

import tempfile

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tests.testing import train_eval_runs as runs
from tunas_tf.data import datasets
from tunas_tf.data import streams
from tunas_tf.train_eval import data
from tunas_tf.train_eval import network
from tunas_tf.train_eval import task as task_lib

_ZEROS = ':'.join(['0'] * 18)


def _config(mode: str):
  return runs.config(f'--model_dir={tempfile.mkdtemp()}', '--ssd=digits_search',
                     f'--indices={_ZEROS}', f'--use_bfloat16={mode}',
                     '--train_batch_size=32', '--eval_batch_size=50')


def _input(config, training: bool, start_step: int = 0):
  """Training batches (the task's, one pipeline) or one eval pass."""
  task = task_lib.TrainEvalTask(config, network.build_architecture(config))
  if training:
    return task.dataset(config.train_batch_size, streams.Pipeline(0, 1, 1),
                        start_step)
  return task.eval_dataset(config.eval_batch_size, pad=False)


class InputFnTest(parameterized.TestCase):

  @parameterized.parameters(('true', tf.bfloat16), ('ontpu', tf.float32),
                            ('false', tf.float32))
  def test_images_come_in_the_input_dtype_and_labels_in_float32(
      self, mode, dtype):
    # Off TPU `ontpu` computes in float32; on TPU its model_fn casts.
    config = _config(mode)
    for training, batch in ((True, 32), (False, None)):
      images, labels = _input(config, training).element_spec
      self.assertEqual((images.dtype, images.shape.as_list()),
                       (dtype, [batch, 8, 8, 1]), training)
      self.assertEqual((labels.dtype, labels.shape.as_list()),
                       (tf.float32, [batch, 10]), training)

  def test_bfloat16_images_hold_the_float32_values(self):
    # Digits' pixels are multiples of 1/16, which bfloat16 holds exactly:
    # the cast loses nothing here (`precision_test` checks its rounding).
    # Training (resumed at step 2, as a restarted run reads it) and eval.
    for training, start_step in ((True, 2), (False, 0)):
      (float32, labels), (bfloat16, bfloat16_labels) = [
          next(_input(_config(mode), training, start_step)
               .as_numpy_iterator()) for mode in ('false', 'true')]
      self.assertEqual(bfloat16.dtype, tf.bfloat16.as_numpy_dtype)
      np.testing.assert_array_equal(bfloat16.astype(np.float32), float32)
      np.testing.assert_array_equal(bfloat16_labels, labels)


class CalibrationImagesTest(absltest.TestCase):

  def test_the_first_training_images_as_evaluated(self):
    config = _config('true')  # bfloat16 training: calibration in float32.
    images = list(data.calibration_images(config, 3).as_numpy_iterator())
    # Digits' training data: search-train, then search-validation.
    stored = datasets.digits_arrays()[datasets.SEARCH_TRAIN][0][:3]
    self.assertLen(images, 3)
    for image, expected in zip(images, stored):
      self.assertEqual(image.dtype, np.float32)
      np.testing.assert_array_equal(image, expected[np.newaxis])


if __name__ == '__main__':
  absltest.main()
