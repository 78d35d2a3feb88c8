"""An image that cannot be decoded stops a run in one line naming it."""

import os
import re
import tempfile

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from tests.testing import jpeg_folder
from tests.testing import searches
from tunas_tf.data import datasets
from tunas_tf.data import streams
from tunas_tf.data import unreadable
from tests.testing import forked

_BAD = 'train/dog/005.jpg'  # Corrupted after the import checked it.
_HELD_OUT = 8  # --validation_examples: the first 8 of `train`.


def _garbage_at(count, bad):
  """(position, decoded 2x2 PNG) for `count` images; those at `bad` are not
  images."""
  good = tf.io.encode_png(tf.zeros([2, 2, 1], tf.uint8)).numpy()
  images = [b'not an image' if i in bad else good for i in range(count)]
  return tf.data.Dataset.from_tensor_slices(images).enumerate().map(
      lambda i, image: (i, tf.io.decode_png(image)))


def _failure(test, dataset):
  """`unreadable.failure` of the error iterating `dataset` raises."""
  with test.assertRaises(tf.errors.InvalidArgumentError) as raised:
    for _ in dataset:
      pass
  return unreadable.failure(raised.exception)


class CheckedTest(tf.test.TestCase):

  def test_the_first_undecodable_position_is_named_first_middle_or_last(self):
    for bad in ({0}, {3, 5}, {6}):
      expected = tf.data.Dataset.range(7).map(lambda i: (i, 10 + i, i // 2))
      found = _failure(self, unreadable.checked(
          _garbage_at(7, bad), expected, "test of 'café'", finite=True))
      first = min(bad)
      self.assertEqual(found, ("test of 'café'", 10 + first, first // 2),
                       bad)

  def test_every_element_passes_through_unchanged(self):
    expected = tf.data.Dataset.range(5).map(lambda i: (i, i, i))
    values = [tuple(t.numpy() for t in x) for x in unreadable.checked(
        tf.data.Dataset.range(5).map(lambda i: (i, (i * 3, -i))),
        expected, 'x', finite=True)]
    self.assertAllEqual(values, [(3 * i, -i) for i in range(5)])

  def test_checked_streams_read_what_unchecked_ones_read(self):
    examples = tf.data.Dataset.range(10)

    def take(checked, **kwargs):
      dataset = streams.keyed_batches(
          examples, 10, 3, key=(4, 1), checked=checked,
          prepare=lambda e, seed: e * 100 + seed[1] % 7, **kwargs)
      return [b.numpy() for b in dataset.take(8)]

    for kwargs in ({}, {'start_step': 3},
                   {'pipeline': streams.Pipeline(1, 2, 2)}):
      self.assertAllEqual(take(None, **kwargs), take('x', **kwargs))

  def test_stop_line(self):
    error = tf.errors.InvalidArgumentError(
        None, None, 'assertion failed: [tunas_tf: unreadable example] '
        "[search_train (train[8:]) of 'cats'] [12] [3]\n\t [[{{node x}}]]")
    model_dir = tempfile.mkdtemp()
    line = unreadable.stop_line(error, 'the search', model_dir)
    self.assertEqual(
        line, "example 12 of search_train (train[8:]) of 'cats' (counting "
        'from 0 in its stored order), read for step 3, cannot be read or '
        "decoded as an image (TF_CPP_MIN_LOG_LEVEL=1 logs TF's reason): the "
        'search stopped there without saving the steps since its last checkpoint '
        '(none was saved); repair the image (or re-prepare the dataset), '
        'then run the same command to resume')
    self.assertIsNone(unreadable.stop_line(ValueError('other'), 'x'))


class UndecodableDatasetTest(tf.test.TestCase):
  """A dataset storing a JPEG that cannot be decoded (`_BAD`)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = tempfile.mkdtemp()
    cls.data_dir, cls.name = jpeg_folder.import_jpeg_dataset(
        cls.tmp, corrupted=[_BAD])
    with open(os.path.join(cls.tmp, 'jpeg_folder', _BAD), 'rb') as f:
      bad = f.read()
    builder = tfds.builder(cls.name, data_dir=cls.data_dir)
    stored = builder.as_dataset(
        split='train', shuffle_files=False,
        decoders={'image': tfds.decode.SkipDecoding()})
    cls.stored_index = [i for i, e in enumerate(stored)
                        if e['image'].numpy() == bad][0]

  def test_an_evaluation_pass_names_the_example(self):
    source = datasets.tfds_split_source(self.name, 'train', self.data_dir,
                                        False, 32)
    for preprocessing in (datasets.IMAGENET, datasets.CIFAR):
      found = _failure(self, datasets.evaluation_examples(source, 2,
                                                          preprocessing))
      self.assertEqual(found, ("train of 'jpeg_folder'", self.stored_index,
                               -1))

  def test_a_training_stream_names_the_example_and_its_step(self):
    split = (datasets.SEARCH_TRAIN if self.stored_index >= _HELD_OUT
             else datasets.SEARCH_VALIDATION)
    index = self.stored_index - (_HELD_OUT if split == datasets.SEARCH_TRAIN
                                 else 0)
    source = datasets.split_source(self.name, split, data_dir=self.data_dir,
                                   validation_examples=_HELD_OUT,
                                   image_size=32)
    key = (3, streams.SEARCH_TRAIN_STREAM)
    found = _failure(self, datasets.training_batches(
        source, 2, 4, key=key, training=True,
        preprocessing=datasets.IMAGENET).take(source.size))  # 4 epochs.
    # Where the stream reads that example first: the same shuffles of the
    # indices.
    order = np.concatenate([b.numpy() for b in streams.keyed_batches(
        tf.data.Dataset.range(source.size), source.size, 4,
        key=key).take(2 * source.size // 4)])
    step = int(np.flatnonzero(order == index)[0]) // 4
    tfds_split = 'train[8:]' if split == datasets.SEARCH_TRAIN else 'train[:8]'
    self.assertEqual(found, (f"{split} ({tfds_split}) of 'jpeg_folder'",
                             index, step))

  @pytest.mark.estimator
  def test_a_search_stops_in_one_line_keeping_its_last_checkpoint(self):
    model_dir = os.path.join(self.tmp, 'search')
    data = [f'--dataset={self.name}', f'--data_dir={self.data_dir}',
            '--nodownload', '--image_size=16', '--ssd=digits_search',
            f'--validation_examples={_HELD_OUT}', '--train_batch_size=4',
            '--rl_batch_size_multiplier=1', '--max_steps=8',
            '--save_checkpoints_steps=1', '--tpu_iterations_per_loop=1']
    command = searches.search_command(model_dir, *data)
    done = forked.run_one(command, env=searches.QUIET, timeout=600)
    self.assertEqual(done.returncode, 1, done.stderr[-3000:])
    last = done.stderr.strip().splitlines()[-1]
    self.assertNotIn('Traceback', done.stderr)
    self.assertRegex(last, r"^train_search: example \d+ of search_\w+ "
                     r"\(train\[[0-9:]+\]\) of 'jpeg_folder' .* cannot be "
                     r'read or decoded as an image .* last checkpoint '
                     r'\(.*model\.ckpt-\d+\).*resume$')
    step = int(re.search(r'read for step (\d+)', last).group(1))
    saved = tf.train.latest_checkpoint(model_dir)
    self.assertIn(saved, last)
    # The newest checkpoint is whole (nothing was written after the error).
    saved_step = int(saved.rsplit('-', 1)[1])
    self.assertLessEqual(saved_step, step)
    self.assertEqual(
        tf.train.load_checkpoint(saved).get_tensor('global_step'), saved_step)


if __name__ == '__main__':
  tf.test.main()
