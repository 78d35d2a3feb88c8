"""Tests of `data/tfds_builders.py`, through `datasets.dataset_info` (its
caller): a dataset not prepared, not downloadable or unknown is refused in
one line saying how to prepare it, leaving no directory behind."""

import os
import socket
import tempfile
from unittest import mock

import tensorflow as tf
import tensorflow_datasets as tfds

from tunas_tf.data import datasets
from tunas_tf.data import tfds_builders
# Registers 'tiny_images' with TFDS (not prepared here).
from tests.testing import tiny_tfds  # pylint: disable=unused-import


class TfdsBuilderTest(tf.test.TestCase):

  def test_unprepared_without_download_fails_naming_it(self):
    with self.assertRaisesRegex(ValueError, r"Dataset 'tiny_images' is not "
                                r"prepared in data_dir='/nonexistent'"):
      datasets.dataset_info('tiny_images', data_dir='/nonexistent',
                            validation_examples=5)

  def test_an_unprepared_dataset_is_refused_without_tfds_warnings(self):
    # TFDS warned 'Variant folder /nonexistent/tiny_images/1.0.0 has no
    # dataset_info.json' (through absl) beside the one line.
    with self.assertNoLogs('absl', level='WARNING'):
      with self.assertRaisesRegex(ValueError, "'tiny_images' is not prepared"):
        datasets.dataset_info('tiny_images', data_dir='/nonexistent',
                              validation_examples=5)

  def test_unreachable_download_fails_at_once_writing_nothing(self):
    root = tempfile.mkdtemp()
    data_dir = os.path.join(root, 'tfds')
    offline = mock.patch.object(socket, 'create_connection',
                                side_effect=OSError(101, 'Network is '
                                                    'unreachable'))
    with offline, mock.patch.dict(os.environ, {'https_proxy': '',
                                               'HTTPS_PROXY': ''}):
      with self.assertRaisesRegex(
          ValueError, r"^Dataset 'mnist' is not prepared in data_dir='.*tfds'"
          r' and cannot be downloaded \(storage.googleapis.com: Network is '
          r'unreachable\); prepare it where there is network with `tfds '
          r'build mnist --data_dir=DIR`'):
        datasets.dataset_info('mnist', data_dir, download=True,
                              validation_examples=5)
    self.assertEqual(os.listdir(root), [])

  def test_a_failed_download_removes_the_directories_it_made(self):
    root = tempfile.mkdtemp()
    data_dir = os.path.join(root, 'tfds')

    def fail(builder, *args, **kwargs):
      del args, kwargs
      os.makedirs(os.path.join(data_dir, 'downloads', 'partial'))
      os.makedirs(builder.data_dir + '.incomplete')
      raise ConnectionError('Max retries exceeded\nsecond line')

    with mock.patch.object(tfds_builders, '_unreachable_host',
                           return_value=None), \
        mock.patch.object(tfds.core.DatasetBuilder, 'download_and_prepare',
                          fail):
      with self.assertRaisesRegex(
          ValueError, r"^Dataset 'mnist' could not be downloaded and prepared"
          r" in data_dir='.*' \(ConnectionError: Max retries exceeded\); "
          'prepare it where there is network'):
        datasets.dataset_info('mnist', data_dir, download=True,
                              validation_examples=5)
    self.assertEqual(os.listdir(root), [])

  def test_unknown_dataset(self):
    with self.assertRaisesRegex(ValueError, r"Unknown dataset 'no_such_set': "
                                r".* not prepared in data_dir='/nonexistent'.*"
                                'import_dataset'):
      datasets.dataset_info('no_such_set', data_dir='/nonexistent')


if __name__ == '__main__':
  tf.test.main()
