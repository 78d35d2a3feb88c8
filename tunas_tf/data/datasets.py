"""Datasets of both binaries: `digits` (scikit-learn's 8x8, split 60/20/20
with a fixed seed) and TFDS image classification (`search_validation` the
first `validation_examples` of `train`, `search_train` the rest, `test` or
`validation`). Every split is an ordered `Source`."""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
from typing import Callable, Dict, NamedTuple, Optional, Tuple

import numpy as np
import tensorflow as tf

from tunas_tf.io import checks
from tunas_tf.data import preprocessing as preprocessing_lib
from tunas_tf.data import streams
from tunas_tf.data import tfds_builders
from tunas_tf.data import unreadable

DIGITS = 'digits'
SEARCH_TRAIN = 'search_train'
SEARCH_VALIDATION = 'search_validation'
TEST = 'test'
SPLITS = (SEARCH_TRAIN, SEARCH_VALIDATION, TEST)

# How stored images become the network's input (`--preprocessing`).
IMAGENET = 'imagenet'
CIFAR = 'cifar'
NONE = 'none'
PREPROCESSINGS = (IMAGENET, CIFAR, NONE)
# Square images of a fixed side up to this many pixels are "small" (CIFAR,
# Fashion-MNIST): CIFAR-style by default; larger or varying ones ImageNet's.
SMALL_IMAGE_SIDE = 64

_DIGITS_SEED = 20200614
_DIGITS_FRACTIONS = (0.6, 0.2)  # search-train, search-validation; rest test.


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
  """What the model and the schedules need to know about a dataset:
  `image_size` the pipeline's side, `split_sizes` by `SPLITS`, `stored_shape`
  (H, W) with None where they vary."""
  name: str
  image_size: int
  num_channels: int
  num_classes: int
  split_sizes: Dict[str, int]
  stored_shape: Tuple[Optional[int], Optional[int]] = (None, None)

  @property
  def default_preprocessing(self) -> str:
    return default_preprocessing(self.name, self.stored_shape)

  @property
  def train_examples(self) -> int:
    """The training data: the search's two splits together."""
    return self.split_sizes[SEARCH_TRAIN] + self.split_sizes[SEARCH_VALIDATION]

  def classifier_width(self, num_classes: Optional[int]) -> int:
    """`--num_classes` (default the dataset's own count; never fewer)."""
    if num_classes is None:
      return self.num_classes
    if num_classes < self.num_classes:
      raise ValueError(f'--num_classes={num_classes} is fewer than the '
                       f'{self.num_classes} labels of {self.name!r}')
    return num_classes


def default_preprocessing(name: str,
                          stored_shape: Tuple[Optional[int], Optional[int]]
                          ) -> str:
  """`none` for digits, `cifar` for small fixed square images, else
  `imagenet`."""
  if name == DIGITS:
    return NONE
  height, width = stored_shape
  if height is not None and height == width and height <= SMALL_IMAGE_SIDE:
    return CIFAR
  return IMAGENET


def check_preprocessing(name: str, preprocessing: str) -> None:
  """Raises ValueError for an unknown one, or `imagenet` on digits."""
  if preprocessing not in PREPROCESSINGS:
    raise ValueError(f'--preprocessing={preprocessing!r}: expected one of '
                     f'{", ".join(PREPROCESSINGS)}')
  if name == DIGITS and preprocessing == IMAGENET:
    raise ValueError('--preprocessing=imagenet decodes stored images; digits '
                     'are 8x8 arrays (use none or cifar)')


def _digits_file() -> str:
  """scikit-learn's digits CSV, found without importing scikit-learn (slow)."""
  package = importlib.util.find_spec('sklearn')
  path = os.path.join(package.submodule_search_locations[0], 'datasets',
                      'data', 'digits.csv.gz') if package else ''
  if not os.path.isfile(path):
    raise FileNotFoundError(
        "the digits dataset ships with scikit-learn, which is not installed "
        "(pip install scikit-learn)" if not package else
        f'the digits dataset is not where scikit-learn keeps it: {path}')
  return path


@functools.lru_cache(maxsize=1)
def digits_arrays() -> Dict[str, Tuple[np.ndarray, np.ndarray]]:
  """The digits splits: {split: (float32 [N, 8, 8, 1] in [0, 1], int64 [N])},
  N 1,078 / 359 / 360."""
  table = np.loadtxt(_digits_file(), delimiter=',')
  images = (table[:, :-1].reshape([-1, 8, 8]).astype(np.float32) /
            16.0)[..., None]
  labels = table[:, -1].astype(np.int64)
  order = np.random.RandomState(_DIGITS_SEED).permutation(len(labels))
  n_train, n_valid = (int(round(f * len(labels))) for f in _DIGITS_FRACTIONS)
  parts = np.split(order, [n_train, n_train + n_valid])
  return {split: (images[idx], labels[idx])
          for split, idx in zip(SPLITS, parts)}


def test_split(name: str, split_names) -> str:
  """`test`, or else `validation` of dataset `name` (imagenet2012's test
  labels are not public); ValueError for neither."""
  for split in ('test', 'validation'):
    if split in split_names:
      return split
  raise ValueError(f'Dataset {name!r} needs a "test" or "validation" split; '
                   f'it has {sorted(split_names)}')


def holdout_splits(num_train_examples: int,
                   validation_examples: int,
                   test: str = 'test') -> Dict[str, str]:
  """TFDS split strings: `search_train` 'train[v:]', `search_validation`
  'train[:v]', `test` `test`, v = `validation_examples`; ValueError unless
  0 < v < num_train_examples."""
  if not 0 < validation_examples < num_train_examples:
    raise ValueError(
        f'validation_examples must be in 1..{num_train_examples - 1} for a '
        f'train split of {num_train_examples} examples, got '
        f'{validation_examples}')
  return {SEARCH_TRAIN: f'train[{validation_examples}:]',
          SEARCH_VALIDATION: f'train[:{validation_examples}]',
          TEST: test}


def dataset_info(name: str, data_dir: Optional[str] = None,
                 download: bool = False, validation_examples: int = 0,
                 image_size: Optional[int] = None) -> DatasetInfo:
  """The `DatasetInfo` of `name` (metadata only, not the images).

  Args:
    name: `digits` or a TFDS image-classification dataset.
    download: let TFDS download and prepare a missing dataset.
    validation_examples: TFDS only: `train` images held out (0: none).
    image_size: the run's side; default the dataset's own (digits: 8 only).

  Raises:
    ValueError: naming the flag: unknown dataset, missing data, an unusable
      split, or an `image_size` or hold-out digits does not have.
  """
  if name == DIGITS:
    if image_size not in (None, 8):
      raise ValueError('--image_size: digits images are 8x8')
    if validation_examples:
      raise ValueError('--validation_examples: digits has a fixed split '
                       '(leave it unset)')
    arrays = digits_arrays()
    return DatasetInfo(DIGITS, 8, 1, 10,
                       {k: len(v[1]) for k, v in arrays.items()}, (8, 8))
  builder = tfds_builders.tfds_builder(name, data_dir, download)
  info = builder.info
  if 'image' not in info.features or 'label' not in info.features:
    raise ValueError(f'Dataset {name!r} is not an image-classification '
                     'dataset (needs "image" and "label" features)')
  splits = info.splits
  if 'train' not in splits:
    raise ValueError(f'Dataset {name!r} needs a "train" split; it has '
                     f'{sorted(splits.keys())}')
  test = test_split(name, splits.keys())
  num_train = splits['train'].num_examples
  if validation_examples:
    holdout_splits(num_train, validation_examples)  # Validates.
  shape = info.features['image'].shape
  stored = (shape[0], shape[1])
  return DatasetInfo(
      name, preprocessing_lib.run_image_size(name, stored, image_size),
      shape[-1],
      info.features['label'].num_classes,
      {SEARCH_TRAIN: num_train - validation_examples,
       SEARCH_VALIDATION: validation_examples,
       TEST: splits[test].num_examples}, stored)


class Source(NamedTuple):
  """One ordered split, before decoding: `examples` (image as stored, int64
  label); `decode` image as stored -> float32 [H, W, C] in [0, 1] at the run's
  size; `encoded` for TFDS's PNG/JPEG; `split` as messages name it."""
  examples: tf.data.Dataset
  size: int
  decode: Callable[[tf.Tensor], tf.Tensor]
  encoded: bool = False
  channels: int = 1
  stored_shape: Tuple[Optional[int], Optional[int]] = (None, None)
  image_size: Optional[int] = None
  name: str = DIGITS
  split: str = ''

  def preprocess_fn(self, preprocessing: Optional[str], training: bool
                    ) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """(image as stored, int64 [2] seed) -> the network's input, by
    `preprocessing` (None: `default_preprocessing`), augmented when `training`.
    ValueError for `IMAGENET` on images not encoded (digits)."""
    preprocessing = preprocessing or default_preprocessing(
        self.name, self.stored_shape)
    check_preprocessing(self.name, preprocessing)
    if preprocessing == IMAGENET:
      lib = preprocessing_lib
      size = lib.run_image_size(self.name, self.stored_shape, self.image_size)
      if training:
        return lambda image, seed: lib.imagenet_train(image, seed, size,
                                                      self.channels)
      return lambda image, seed: lib.imagenet_eval(image, size, self.channels)
    if preprocessing == CIFAR and training:
      return lambda image, seed: preprocessing_lib.cifar_augment(
          self.decode(image), seed)
    return lambda image, seed: self.decode(image)


def _array_source(images: np.ndarray, labels: np.ndarray) -> Source:
  return Source(tf.data.Dataset.from_tensor_slices((images, labels)),
                len(labels), lambda image: image, channels=images.shape[-1],
                stored_shape=images.shape[1:3], image_size=images.shape[1])


def tfds_split_source(name: str, tfds_split: str, data_dir: Optional[str],
                      download: bool, image_size: Optional[int],
                      split: Optional[str] = None) -> Source:
  """A TFDS split string's `Source` in stored order, images encoded; `split`
  names it in messages."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  builder = tfds_builders.tfds_builder(name, data_dir, download)
  feature = builder.info.features['image']
  examples = builder.as_dataset(
      split=tfds_split, as_supervised=True, shuffle_files=False,
      decoders={'image': tfds.decode.SkipDecoding()})
  size = builder.info.splits[tfds_split].num_examples

  def decode(encoded):
    image = tf.image.convert_image_dtype(feature.decode_example(encoded),
                                         tf.float32)
    if image_size is not None:  # (A run always gives one.)
      image = tf.image.resize(image, [image_size, image_size])
    return image

  shown = f'{split} ({tfds_split})' if split else tfds_split
  return Source(examples, size, decode, encoded=True,
                channels=feature.shape[-1],
                stored_shape=tuple(feature.shape[:2]), image_size=image_size,
                name=name, split=f'{shown} of {name!r}')


def split_source(name: str, split: str, *, data_dir: Optional[str] = None,
                 download: bool = False, validation_examples: int = 0,
                 image_size: Optional[int] = None) -> Source:
  """One split (of `SPLITS`) as a `Source`; arguments and ValueError as
  `dataset_info`."""
  checks.one_of('split', split, SPLITS)
  if name == DIGITS:
    return _array_source(*digits_arrays()[split])
  builder = tfds_builders.tfds_builder(name, data_dir, download)
  splits = builder.info.splits
  tfds_splits = holdout_splits(splits['train'].num_examples,
                               validation_examples,
                               test_split(name, splits.keys()))
  return tfds_split_source(name, tfds_splits[split], data_dir, download,
                           image_size, split)


def training_source(name: str, *, data_dir: Optional[str] = None,
                    download: bool = False,
                    image_size: Optional[int] = None) -> Source:
  """All the training data in a fixed order: digits' search-train then
  search-validation, or TFDS `train`."""
  if name == DIGITS:
    parts = [digits_arrays()[s] for s in (SEARCH_TRAIN, SEARCH_VALIDATION)]
    return _array_source(*(np.concatenate(p) for p in zip(*parts)))
  return tfds_split_source(name, 'train', data_dir, download, image_size)


def evaluation_examples(source: Source, num_classes: int,
                        preprocessing: Optional[str]) -> tf.data.Dataset:
  """`source` in order as (image, one-hot label), evaluation-side
  preprocessing; an undecodable image fails the iterator, naming it."""
  prepare = source.preprocess_fn(preprocessing, training=False)

  def example(image, label):
    return prepare(image, None), tf.one_hot(label, num_classes)

  if not source.encoded:
    return source.examples.map(example, num_parallel_calls=tf.data.AUTOTUNE)
  prepared = source.examples.enumerate().map(
      lambda i, pair: (i, example(*pair)),
      num_parallel_calls=tf.data.AUTOTUNE)
  expected = tf.data.Dataset.range(source.size).map(
      lambda i: (i, i, tf.constant(-1, tf.int64)))
  return unreadable.checked(prepared, expected, source.split, finite=True)


def training_batches(source: Source, num_classes: int, batch_size: int, *,
                     key: Tuple[int, int], training: bool,
                     preprocessing: Optional[str] = None,
                     start_step: int = 0,
                     pipeline: streams.Pipeline = streams.Pipeline(),
                     shuffle_buffer: Optional[int] = None
                     ) -> tf.data.Dataset:
  """`streams.keyed_batches` of `source` (arguments as there): an infinite
  dataset of (float32 [B, H, W, C], one-hot float32 [B, num_classes]),
  `training`-side preprocessing; an undecodable image fails the iterator,
  naming it. ValueError as `keyed_batches` and `Source.preprocess_fn`."""
  image_fn = source.preprocess_fn(preprocessing, training)

  def prepare(example, seed):
    image, label = example
    return image_fn(image, seed), tf.one_hot(label, num_classes)

  return streams.keyed_batches(
      source.examples, source.size, batch_size, key=key,
      start_step=start_step, pipeline=pipeline, prepare=prepare,
      shuffle_buffer=shuffle_buffer,
      checked=source.split if source.encoded else None)


def search_dataset(name: str, num_classes: int, train_batch_size: int,
                   validation_batch_size: int, *, seed: int = 0,
                   data_dir: Optional[str] = None, download: bool = False,
                   validation_examples: int = 0,
                   image_size: Optional[int] = None, start_step: int = 0,
                   pipeline: streams.Pipeline = streams.Pipeline(),
                   shuffle_buffer: int = 1024,
                   preprocessing: Optional[str] = None) -> tf.data.Dataset:
  """The search input, forever: ({'train': images, 'validation': images},
  {'train': labels, 'validation': labels}) per replica batch.

  Each side a `streams.keyed_batches` stream, so a search resumed at
  `start_step` reads what an uninterrupted one reads; validation is never
  augmented (the original's). Other arguments as `dataset_info` and
  `training_batches`; digits shuffles its whole split. ValueError when a
  split is smaller than its batch.
  """
  sides = {}
  for key, split, batch, stream in (
      ('train', SEARCH_TRAIN, train_batch_size, streams.SEARCH_TRAIN_STREAM),
      ('validation', SEARCH_VALIDATION, validation_batch_size,
       streams.SEARCH_VALIDATION_STREAM)):
    source = split_source(name, split, data_dir=data_dir, download=download,
                          validation_examples=validation_examples,
                          image_size=image_size)
    if source.size < batch:
      raise ValueError(f'{split} of {name!r} has {source.size} examples, '
                       f'fewer than one batch of {batch}')
    sides[key] = training_batches(
        source, num_classes, batch, key=(seed, stream),
        training=key == 'train', preprocessing=preprocessing,
        start_step=start_step, pipeline=pipeline,
        shuffle_buffer=None if name == DIGITS else shuffle_buffer)
  zipped = tf.data.Dataset.zip((sides['train'], sides['validation']))
  return zipped.map(
      lambda t, v: ({'train': t[0], 'validation': v[0]},
                    {'train': t[1], 'validation': v[1]})).prefetch(
                        tf.data.AUTOTUNE)


def eval_dataset(name: str, split: str, num_classes: int, batch_size: int, *,
                 data_dir: Optional[str] = None, download: bool = False,
                 validation_examples: int = 0,
                 image_size: Optional[int] = None,
                 preprocessing: Optional[str] = None) -> tf.data.Dataset:
  """One ordered pass over `split` (of `SPLITS`) in batches, the last one may
  be short: (float32 [B, H, W, C], one-hot float32 [B, num_classes]),
  evaluation-side preprocessing; ValueError as `dataset_info`."""
  source = split_source(name, split, data_dir=data_dir, download=download,
                        validation_examples=validation_examples,
                        image_size=image_size)
  return evaluation_examples(source, num_classes, preprocessing).batch(
      batch_size).prefetch(tf.data.AUTOTUNE)
