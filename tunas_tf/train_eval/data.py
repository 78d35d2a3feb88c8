"""The input of a standalone run: the full training data and one eval pass."""

from __future__ import annotations

import tensorflow as tf

from tunas_tf.data import datasets
from tunas_tf.train_eval.config import TrainEvalConfig


def train_dataset(config: TrainEvalConfig, batch_size: int) -> tf.data.Dataset:
  """Full training data (digits: all but test), shuffled, repeated, batched.

  Raises:
    ValueError: if the training data holds less than one batch.
  """
  # search_train + search_validation is the whole training data; for TFDS a
  # hold-out of 1 example makes them train[1:] and train[:1].
  job = config.job
  holdout = 0 if job.dataset == datasets.DIGITS else 1
  parts = [datasets.load_split(
      job.dataset, split, job.num_classes, data_dir=job.data_dir,
      download=job.download, validation_examples=holdout,
      image_size=job.image_size, augment=job.dataset != datasets.DIGITS,
      shuffle_files=True)
           for split in (datasets.SEARCH_TRAIN, datasets.SEARCH_VALIDATION)]
  dataset = parts[0].concatenate(parts[1])
  if config.train_examples < batch_size:
    raise ValueError(f'The training data has {config.train_examples} '
                     f'examples, fewer than one batch of {batch_size}')
  dataset = dataset.repeat().shuffle(
      min(16384, max(1024, config.train_examples)), seed=config.job.seed)
  return dataset.batch(batch_size, drop_remainder=True).prefetch(
      tf.data.AUTOTUNE)


def _tfds_split(config: TrainEvalConfig) -> tf.data.Dataset:
  """Any TFDS split string, decoded, resized and one-hot (unbatched)."""
  builder = datasets.tfds_builder(config.job.dataset, config.job.data_dir,
                                   config.job.download)
  try:
    dataset = builder.as_dataset(split=config.eval_split,
                                 as_supervised=True, shuffle_files=False)
  except Exception as e:  # TFDS raises several kinds for a bad split.
    raise ValueError(f'--eval_split={config.eval_split!r} of '
                     f'{config.job.dataset!r}: {str(e).splitlines()[0]}'
                    ) from None
  size, classes = config.job.image_size, config.job.num_classes

  def prepare(image, label):
    image = tf.image.convert_image_dtype(image, tf.float32)
    image = tf.image.resize(image, [size, size])
    return image, tf.one_hot(label, classes)

  return dataset.map(prepare, num_parallel_calls=tf.data.AUTOTUNE)


def eval_dataset(config: TrainEvalConfig, batch_size: int,
                 drop_remainder: bool = False) -> tf.data.Dataset:
  """One ordered pass over `eval_split` (the last batch may be short).

  Raises:
    ValueError: for a split TFDS cannot read.
  """
  job = config.job
  if job.dataset == datasets.DIGITS or config.eval_split in datasets.SPLITS:
    dataset = datasets.load_split(
        job.dataset, config.eval_split, job.num_classes,
        data_dir=job.data_dir, download=job.download,
        validation_examples=0 if job.dataset == datasets.DIGITS else 1,
        image_size=job.image_size)
  else:
    dataset = _tfds_split(config)
  return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(
      tf.data.AUTOTUNE)


def make_input_fn(config: TrainEvalConfig, training: bool):
  """The TPUEstimator input_fn: training batches or one eval pass."""
  def input_fn(params):
    if training:
      return train_dataset(config, params.get('batch_size',
                                              config.train_batch_size))
    # TPU needs static shapes: the last partial batch is dropped there (the
    # original pads it with zero weights).
    return eval_dataset(config, params.get('batch_size',
                                           config.eval_batch_size),
                        drop_remainder=config.job.use_tpu)
  return input_fn
