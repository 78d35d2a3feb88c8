"""The input of a standalone run: the full training data and one eval pass."""

from __future__ import annotations

import tensorflow as tf

from tunas_tf.data import datasets
from tunas_tf.data import streams
from tunas_tf.train_eval.config import TrainEvalConfig


def train_dataset(config: TrainEvalConfig, batch_size: int,
                  start_step: int = 0,
                  pipeline: streams.Pipeline = streams.Pipeline()
                  ) -> tf.data.Dataset:
  """The training data (less the search's hold-out with
  `validation_examples`) in per-replica batches forever: a
  `streams.keyed_batches` stream keyed (seed, `TRAIN_EVAL_STREAM`), so from
  `start_step` it goes on as if never interrupted; `pipeline` picks this
  call's batches. ValueError for less than one batch of data."""
  job = config.job
  source = _train_source(config)
  if source.size < batch_size:
    raise ValueError(f'The training data has {source.size} examples, fewer '
                     f'than one batch of {batch_size}')
  digits = job.dataset == datasets.DIGITS
  return datasets.training_batches(
      source, job.num_classes, batch_size,
      key=(job.seed, streams.TRAIN_EVAL_STREAM), training=True,
      preprocessing=job.preprocessing, start_step=start_step,
      pipeline=pipeline,
      shuffle_buffer=None if digits else min(16384, source.size)).prefetch(
          tf.data.AUTOTUNE)


def _train_source(config: TrainEvalConfig) -> datasets.Source:
  job = config.job
  if config.validation_examples:  # The search's own training split.
    return datasets.split_source(
        job.dataset, datasets.SEARCH_TRAIN, data_dir=job.data_dir,
        download=job.download, image_size=job.image_size,
        validation_examples=config.validation_examples)
  return datasets.training_source(job.dataset, data_dir=job.data_dir,
                                  download=job.download,
                                  image_size=job.image_size)


def calibration_images(config: TrainEvalConfig,
                       count: int) -> tf.data.Dataset:
  """The first `count` training images in their stored order, as the
  evaluation sees an image (not augmented), in batches of one."""
  job = config.job
  return datasets.evaluation_examples(
      _train_source(config), job.num_classes, job.preprocessing).map(
          lambda image, label: image[tf.newaxis]).take(count)


def _eval_source(config: TrainEvalConfig) -> datasets.Source:
  """`eval_split` as an ordered `datasets.Source`; ValueError for a split
  TFDS cannot read."""
  job = config.job
  if job.dataset == datasets.DIGITS or config.eval_split in datasets.SPLITS:
    return datasets.split_source(
        job.dataset, config.eval_split, data_dir=job.data_dir,
        download=job.download, image_size=job.image_size,
        validation_examples=(0 if job.dataset == datasets.DIGITS else
                             config.validation_examples or 1))
  try:
    return datasets.tfds_split_source(job.dataset, config.eval_split,
                                      job.data_dir, job.download,
                                      job.image_size)
  except Exception as e:  # TFDS raises several kinds for a bad split.
    raise ValueError(f'--eval_split={config.eval_split!r} of '
                     f'{job.dataset!r}: {str(e).splitlines()[0]}') from None


def eval_examples(config: TrainEvalConfig) -> int:
  """The number of examples in `eval_split`."""
  return _eval_source(config).size


def eval_dataset(config: TrainEvalConfig, batch_size: int,
                 pad: bool = False) -> tf.data.Dataset:
  """One ordered pass over `eval_split`, labels one-hot (an example weighs
  its label's sum); with `pad` the last batch is filled with zero images
  of weight 0 (static shapes, for TPU). ValueError as `_eval_source`."""
  job = config.job
  dataset = datasets.evaluation_examples(_eval_source(config),
                                         job.num_classes, job.preprocessing)
  if pad:  # N + B - 1 examples make ceil(N / B) full batches.
    image_spec, label_spec = dataset.element_spec
    filler = (tf.zeros([job.image_size, job.image_size, job.num_channels],
                       image_spec.dtype), tf.zeros([job.num_classes],
                                                   label_spec.dtype))
    dataset = dataset.concatenate(
        tf.data.Dataset.from_tensors(filler).repeat(batch_size - 1))
  return dataset.batch(batch_size, drop_remainder=pad).prefetch(
      tf.data.AUTOTUNE)
