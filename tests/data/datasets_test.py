"""Tests for the datasets: the digits split and a real (tiny) TFDS dataset
(the streams' order: streams_test.py; a dataset not prepared or not
downloadable: tfds_builders_test.py)."""

import tempfile

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from tunas_tf.data import datasets
from tunas_tf.data import preprocessing
from tests.testing import elements
from tests.testing import jpeg_folder
from tests.testing import tiny_tfds


class DatasetsTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = tempfile.mkdtemp()
    tiny_tfds.TinyImages(data_dir=cls.data_dir).download_and_prepare()
    cls.jpeg_dir, _ = jpeg_folder.import_jpeg_dataset(tempfile.mkdtemp())

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
    # scikit-learn's digits, read without scikit-learn: the same images and
    # labels, all of them once.
    from sklearn import datasets as sk_datasets  # pylint: disable=g-import-not-at-top
    digits = sk_datasets.load_digits()
    images = np.concatenate([v[0] for v in arrays.values()])[..., 0] * 16
    labels = np.concatenate([v[1] for v in arrays.values()])
    order = np.lexsort(np.concatenate([images.reshape(len(labels), -1),
                                       labels[:, None]], axis=1).T)
    expected = np.lexsort(np.concatenate(
        [digits.images.reshape(len(labels), -1), digits.target[:, None]],
        axis=1).T)
    np.testing.assert_array_equal(images[order], digits.images[expected])
    np.testing.assert_array_equal(labels[order], digits.target[expected])

  def test_digits_info(self):
    info = datasets.dataset_info('digits')
    self.assertEqual((info.image_size, info.num_channels, info.num_classes),
                     (8, 1, 10))
    self.assertEqual(info.train_examples, 1797 - info.split_sizes['test'])
    self.assertEqual(datasets.dataset_info('digits', image_size=8), info)
    for kwargs, message in ((dict(image_size=16),
                             '^--image_size: digits images are 8x8$'),
                            (dict(validation_examples=5),
                             '^--validation_examples: digits has a fixed')):
      with self.assertRaisesRegex(ValueError, message):
        datasets.dataset_info('digits', **kwargs)

  def test_classifier_width_is_at_least_the_label_count(self):
    info = datasets.dataset_info('digits')
    self.assertEqual((info.classifier_width(None),
                      info.classifier_width(1001)), (10, 1001))
    with self.assertRaisesRegex(ValueError, "^--num_classes=9 is fewer than "
                                "the 10 labels of 'digits'$"):
      info.classifier_width(9)

  def test_holdout_splits(self):
    self.assertEqual(datasets.holdout_splits(100, 10),
                     {'search_train': 'train[10:]',
                      'search_validation': 'train[:10]', 'test': 'test'})
    with self.assertRaisesRegex(ValueError, r'must be in 1\.\.99 .* got 0'):
      datasets.holdout_splits(100, 0)
    with self.assertRaisesRegex(ValueError, r'got 100'):
      datasets.holdout_splits(100, 100)

  def _indices(self, split, **kwargs):
    dataset = datasets.eval_dataset('tiny_images', split, 3, 1,
                                    data_dir=self.data_dir,
                                    validation_examples=5, **kwargs).unbatch()
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

  def test_without_a_test_split_validation_is_held_out(self):
    data_dir = tempfile.mkdtemp()
    tiny_tfds.TinyImagesNoTest(data_dir=data_dir).download_and_prepare()
    info = datasets.dataset_info('tiny_images_no_test', data_dir=data_dir,
                                 validation_examples=5)
    self.assertEqual(info.split_sizes, {'search_train': 15,
                                        'search_validation': 5, 'test': 6})
    test = datasets.eval_dataset('tiny_images_no_test', 'test', 3, 1,
                                 data_dir=data_dir,
                                 validation_examples=5).unbatch()
    self.assertEqual(sorted(int(image[0, 0, 0] * 255 + 0.5)
                            for image, _ in test.as_numpy_iterator()),
                     list(range(100, 106)))

  def test_non_square_images_are_seen_at_the_size_the_cost_model_sees(self):
    # 12x16 images: the run's size is the shorter side, which the cost model
    # is given, and the network's input has it (ImageNet-style crops by
    # default, the images not being square).
    data_dir = tempfile.mkdtemp()
    tiny_tfds.TinyWideImages(data_dir=data_dir).download_and_prepare()
    info = datasets.dataset_info('tiny_wide_images', data_dir=data_dir,
                                 validation_examples=5)
    self.assertEqual((info.image_size, info.stored_shape,
                      info.default_preprocessing), (12, (12, 16), 'imagenet'))
    for preprocessing in datasets.PREPROCESSINGS[:2]:
      features, _ = next(iter(datasets.search_dataset(
          'tiny_wide_images', 3, 4, 2, data_dir=data_dir,
          validation_examples=5, image_size=info.image_size,
          preprocessing=preprocessing)))
      for side in ('train', 'validation'):
        self.assertEqual(features[side].shape[1:3], (12, 12), preprocessing)

  def test_tfds_info_and_search_batches(self):
    info = datasets.dataset_info('tiny_images', data_dir=self.data_dir,
                                 validation_examples=5)
    self.assertEqual(info.split_sizes, {'search_train': 15,
                                        'search_validation': 5, 'test': 6})
    whole = datasets.dataset_info('tiny_images', data_dir=self.data_dir)
    self.assertEqual((whole.split_sizes['search_validation'],
                      whole.train_examples), (0, 20))
    self.assertEqual((info.num_classes, info.num_channels), (3, 3))
    dataset = datasets.search_dataset(
        'tiny_images', 4, 3, 2, data_dir=self.data_dir, validation_examples=5,
        image_size=16)
    features, labels = next(iter(dataset))
    self.assertEqual(features['train'].shape, (3, 16, 16, 3))
    self.assertEqual(features['validation'].shape, (2, 16, 16, 3))
    self.assertEqual(labels['train'].shape, (3, 4))
    self.assertAllClose(tf.reduce_sum(labels['validation'], axis=1), [1, 1])

  def test_imagenet_preprocessing_normalises_each_side_of_its_split(self):
    # Each tiny image is filled with its index: after any crop and resize,
    # (value - mean) / std per channel gives the index back.
    dataset = datasets.search_dataset(
        'tiny_images', 4, 3, 2, data_dir=self.data_dir, validation_examples=5,
        image_size=12, preprocessing='imagenet')
    mean = np.array(preprocessing.MEAN_RGB, np.float32)
    std = np.array(preprocessing.STDDEV_RGB, np.float32)
    for features, _ in dataset.take(4).as_numpy_iterator():
      for side, indices in (('train', self._indices('search_train')),
                            ('validation',
                             self._indices('search_validation'))):
        images = features[side]
        self.assertEqual(images.shape[1:], (12, 12, 3))
        self.assertEqual(images.dtype, np.float32)
        pixels = images * std + mean  # Back to 0-255.
        for image in pixels:
          self.assertAllClose(image, np.full_like(image, image[0, 0, 0]),
                              atol=1e-3)
          self.assertIn(int(round(image[0, 0, 0])), indices)
    with self.assertRaisesRegex(ValueError, 'digits are 8x8 arrays'):
      datasets.search_dataset('digits', 10, 4, 3, preprocessing='imagenet')

  def _search_steps(self, start_step, count, name='tiny_images'):
    if name == 'digits':
      kwargs = {}
    elif name == 'jpeg_folder':  # Mixed-size JPEGs, ImageNet preprocessing.
      kwargs = dict(data_dir=self.jpeg_dir, validation_examples=6,
                    image_size=24, preprocessing='imagenet')
    else:
      kwargs = dict(data_dir=self.data_dir, validation_examples=5,
                    image_size=16)
    return elements.take(datasets.search_dataset(
        name, 10 if name == 'digits' else 4, 4, 3, seed=3,
        start_step=start_step, **kwargs), count)

  def test_search_dataset_resumed_equals_the_tail(self):
    # tiny_images: 15 train images in batches of 4 (augmented), 5 validation
    # images in batches of 3; jpeg_folder: 18 and 6 JPEGs of 64-160 px,
    # Inception-style crops; digits: batches of 4 and 3 from 1,078 and 359.
    for name, start in (('tiny_images', 5), ('jpeg_folder', 5),
                        ('digits', 130)):
      whole = self._search_steps(0, start + 3, name)
      tail = self._search_steps(start, 3, name)
      for side in ('train', 'validation'):
        for i in range(3):
          self.assertAllEqual(whole[start + i][0][side], tail[i][0][side])
          self.assertAllEqual(whole[start + i][1][side], tail[i][1][side])
      # The sides have their own orders (over 3 steps: tiny_images has 4
      # classes, and one step's 3 labels can agree by chance).
      first = lambda side: np.concatenate(
          [step_labels[side][:3] for _, step_labels in whole[:3]])
      self.assertNotAllEqual(first('train'), first('validation'))

  def test_imagenet_validation_side_is_never_augmented(self):
    # Every validation image is the eval preprocessing of one held-out JPEG
    # (of 6), to the bit, at every step; the train side's crops and flips
    # make images the eval preprocessing never gives.
    source = datasets.split_source('jpeg_folder', 'search_validation',
                                   data_dir=self.jpeg_dir,
                                   validation_examples=6, image_size=24)
    evaluated = {preprocessing.imagenet_eval(image, 24).numpy().tobytes()
                 for image, _ in source.examples}
    self.assertLen(evaluated, 6)
    steps = self._search_steps(0, 8, 'jpeg_folder')
    for features, _ in steps:
      for image in features['validation']:
        self.assertIn(image.tobytes(), evaluated)
    train = [image.tobytes() for features, _ in steps
             for image in features['train']]
    self.assertNotEmpty([t for t in train if t not in evaluated])

  def test_mock_data_loads(self):
    with tfds.testing.mock_data(num_examples=4):
      dataset = tfds.load('tiny_images', split='train', as_supervised=True,
                          data_dir=self.data_dir)
      image, _ = next(iter(dataset))
    self.assertEqual(image.shape, (8, 8, 3))

  def test_unknown_split(self):
    with self.assertRaisesRegex(ValueError, r"Unknown split 'val'"):
      datasets.eval_dataset('digits', 'val', 10, 1)

  def test_batch_larger_than_split(self):
    with self.assertRaisesRegex(ValueError, 'fewer than one batch of 5000'):
      datasets.search_dataset('digits', 10, 32, 5000)


if __name__ == '__main__':
  tf.test.main()
