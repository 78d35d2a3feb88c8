"""Tests for the datasets: the digits split and a real (tiny) TFDS dataset."""

import os
import socket
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from tunas_tf.data import datasets
from tests.testing import tiny_tfds


class DatasetsTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = tempfile.mkdtemp()
    tiny_tfds.TinyImages(data_dir=cls.data_dir).download_and_prepare()

  def test_digits_split_is_deterministic_and_disjoint(self):
    arrays = datasets.digits_arrays()
    sizes = {k: len(v[1]) for k, v in arrays.items()}
    self.assertEqual(sizes, {'search_train': 1078, 'search_validation': 359,
                             'test': 360})
    flat = [v[0].reshape(len(v[0]), -1) for v in arrays.values()]
    self.assertEqual(flat[0].dtype, np.float32)
    self.assertAllInRange(flat[0], 0.0, 1.0)
    # No image of the test split is in search-train (digits has a few
    # duplicate images, so compare by identity of rows within the split).
    rows = {r.tobytes() for r in flat[0]}
    overlap = sum(r.tobytes() in rows for r in flat[2])
    self.assertLess(overlap, 5)

  def test_digits_info(self):
    info = datasets.dataset_info('digits')
    self.assertEqual((info.image_size, info.num_channels, info.num_classes),
                     (8, 1, 10))

  def test_holdout_splits(self):
    self.assertEqual(datasets.holdout_splits(100, 10),
                     {'search_train': 'train[10:]',
                      'search_validation': 'train[:10]', 'test': 'test'})
    with self.assertRaisesRegex(ValueError, r'must be in 1\.\.99 .* got 0'):
      datasets.holdout_splits(100, 0)
    with self.assertRaisesRegex(ValueError, r'got 100'):
      datasets.holdout_splits(100, 100)

  def _indices(self, split, **kwargs):
    dataset = datasets.load_split('tiny_images', split, 3,
                                  data_dir=self.data_dir,
                                  validation_examples=5, **kwargs)
    return sorted(int(image[0, 0, 0] * 255 + 0.5)
                  for image, _ in dataset.as_numpy_iterator())

  def test_tfds_holdout_comes_from_train_never_test(self):
    # TFDS stores examples in a hashed order; the hold-out is the first 5
    # stored, disjoint from the 15 others and drawn from train only.
    validation = self._indices('search_validation')
    train = self._indices('search_train')
    self.assertLen(validation, 5)
    self.assertEqual(sorted(validation + train), list(range(20)))
    self.assertEqual(self._indices('test'), list(range(100, 106)))

  def test_tfds_info_and_search_batches(self):
    info = datasets.dataset_info('tiny_images', data_dir=self.data_dir,
                                 validation_examples=5)
    self.assertEqual(info.split_sizes, {'search_train': 15,
                                        'search_validation': 5, 'test': 6})
    self.assertEqual((info.num_classes, info.num_channels), (3, 3))
    dataset = datasets.search_dataset(
        'tiny_images', 4, 3, 2, data_dir=self.data_dir, validation_examples=5,
        image_size=16)
    features, labels = next(iter(dataset))
    self.assertEqual(features['train'].shape, (3, 16, 16, 3))
    self.assertEqual(features['validation'].shape, (2, 16, 16, 3))
    self.assertEqual(labels['train'].shape, (3, 4))
    self.assertAllClose(tf.reduce_sum(labels['validation'], axis=1), [1, 1])

  def test_mock_data_loads(self):
    with tfds.testing.mock_data(num_examples=4):
      dataset = tfds.load('tiny_images', split='train', as_supervised=True,
                          data_dir=self.data_dir)
      image, _ = next(iter(dataset))
    self.assertEqual(image.shape, (8, 8, 3))

  def test_unprepared_without_download_fails_naming_it(self):
    with self.assertRaisesRegex(ValueError, r"Dataset 'tiny_images' is not "
                                r"prepared in data_dir='/nonexistent'"):
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

    with mock.patch.object(datasets, '_unreachable_host', return_value=None), \
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

  def test_unknown_split(self):
    with self.assertRaisesRegex(ValueError, r"Unknown split 'val'"):
      datasets.load_split('digits', 'val', 10)

  def test_batch_larger_than_split(self):
    with self.assertRaisesRegex(ValueError, 'fewer than one batch of 5000'):
      datasets.search_dataset('digits', 10, 32, 5000)


if __name__ == '__main__':
  tf.test.main()
