"""A tiny TFDS image dataset built offline, for the data and search tests."""

import numpy as np
import tensorflow_datasets as tfds


class TinyImages(tfds.core.GeneratorBasedBuilder):
  """A 3-class dataset of 8x8 RGB images built here, offline.

  20 training and 6 test images; each image is filled with its index (plus
  100 in the test split), so splits can be checked from the pixels.
  """
  VERSION = tfds.core.Version('1.0.0')

  def _info(self):
    return tfds.core.DatasetInfo(
        builder=self,
        features=tfds.features.FeaturesDict({
            'image': tfds.features.Image(shape=(8, 8, 3)),
            'label': tfds.features.ClassLabel(num_classes=3),
        }),
        supervised_keys=('image', 'label'))

  def _split_generators(self, dl_manager):
    del dl_manager
    return {'train': self._generate_examples(20, 0),
            'test': self._generate_examples(6, 100)}

  def _generate_examples(self, count, offset):
    for i in range(count):
      # The pixel value encodes the example's index, so splits can be checked.
      image = np.full((8, 8, 3), offset + i, dtype=np.uint8)
      yield i, {'image': image, 'label': i % 3}


class TinyImagesNoTest(TinyImages):
  """`TinyImages` with a `validation` split instead of `test`, as
  `imagenet2012` has (its test labels are not public)."""

  def _split_generators(self, dl_manager):
    del dl_manager
    return {'train': self._generate_examples(20, 0),
            'validation': self._generate_examples(6, 100)}


class TinyWideImages(TinyImages):
  """`TinyImages` at 12x16 (non-square): the network sees 12x12."""

  SHAPE = (12, 16, 3)

  def _info(self):
    return tfds.core.DatasetInfo(
        builder=self,
        features=tfds.features.FeaturesDict({
            'image': tfds.features.Image(shape=self.SHAPE),
            'label': tfds.features.ClassLabel(num_classes=3),
        }),
        supervised_keys=('image', 'label'))

  def _generate_examples(self, count, offset):
    for i in range(count):
      yield i, {'image': np.full(self.SHAPE, offset + i, dtype=np.uint8),
                'label': i % 3}
