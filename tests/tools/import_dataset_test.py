"""Tests for tools/import_dataset: tiny IDX, npz and folder datasets built here,
imported, and read back through `data/datasets.py` (or TFDS itself, for
images of varying sizes, kept encoded); each bad input exits with one line
naming the problem and leaves data_dir as it was (data/importing's own:
tests/data/importing_test.py)."""

import contextlib
import gzip
import io
import os
import re
import struct
import sys
import tempfile

from absl import flags
from absl.testing import absltest
import numpy as np
from PIL import Image
import tensorflow as tf
import tensorflow_datasets as tfds

from tests.testing import jpeg_folder
from tests.testing import png_folder
from tunas_tf.data import datasets
from tunas_tf.data import tfds_builders
from tunas_tf.tools import import_dataset
from tests.testing import forked

# IDX images of 4 rows x 3 columns (not square, so rows and columns cannot be
# swapped unnoticed); pixel (r, c) of image k is 10 * k + 3 * r + c, unique
# per image through its first pixel.
_ROWS, _COLS = 4, 3
_TRAIN_LABELS = [2, 0, 1, 2, 1]
_TEST_LABELS = [1, 0, 2]


def _idx_images(first: int, count: int) -> np.ndarray:
  grid = 3 * np.arange(_ROWS)[:, None] + np.arange(_COLS)[None, :]
  return np.stack([10 * k + grid for k in range(first, first + count)]
                 ).astype(np.uint8)


def _idx_bytes(array: np.ndarray, magic: int) -> bytes:
  return struct.pack(f'>{1 + array.ndim}I', magic, *array.shape) + \
      array.astype(np.uint8).tobytes()


def _write(path: str, data: bytes) -> None:
  opener = gzip.open if path.endswith('.gz') else open
  with opener(path, 'wb') as f:
    f.write(data)


def _write_idx(directory: str, gz: bool = True, **override) -> str:
  """The four IDX files: train 5 images, t10k 3; `override` replaces a file's
  bytes by its stem (e.g. `t10k_labels=b'...'`, or None to leave it out)."""
  os.makedirs(directory, exist_ok=True)
  contents = {
      'train_images': _idx_bytes(_idx_images(0, 5), 2051),
      'train_labels': _idx_bytes(np.array(_TRAIN_LABELS), 2049),
      't10k_images': _idx_bytes(_idx_images(5, 3), 2051),
      't10k_labels': _idx_bytes(np.array(_TEST_LABELS), 2049)}
  contents.update(override)
  for stem, data in contents.items():
    if data is not None:
      split, kind = stem.split('_')
      ndim = 3 if kind == 'images' else 1
      name = f'{split}-{kind}-idx{ndim}-ubyte' + ('.gz' if gz else '')
      _write(os.path.join(directory, name), data)
  return directory


def _write_npz(path: str, **arrays) -> str:
  rng = np.random.RandomState(0)
  found = {'x_train': rng.randint(0, 256, (4, 2, 2, 3)).astype(np.uint8),
           'y_train': np.array([[1], [0], [1], [1]]),  # Keras' [N, 1].
           'x_test': rng.randint(0, 256, (2, 2, 2, 3)).astype(np.uint8),
           'y_test': np.array([[0], [1]])}
  found.update(arrays)
  np.savez(path, **{k: v for k, v in found.items() if v is not None})
  return path


class ImportDatasetTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.tmp = tempfile.mkdtemp()
    self.data_dir = os.path.join(self.tmp, 'tfds')

  def _main(self, *args):
    flag_values = flags.FlagValues()
    import_dataset.define_flags(flag_values)
    flag_values(['import_dataset', *args])
    import_dataset.main(['import_dataset'], flag_values)

  def _import(self, fmt, source, *args, name='local_set'):
    self._main(f'--format={fmt}', f'--source={source}', f'--name={name}',
               f'--data_dir={self.data_dir}', *args)

  def _load(self, split, num_classes, name='local_set'):
    """{first pixel as uint8: (uint8 image, label)} of one split."""
    dataset = datasets.eval_dataset(name, split, num_classes, 1,
                                    data_dir=self.data_dir,
                                    validation_examples=1,
                                    preprocessing='none').unbatch()
    loaded = {}
    for image, one_hot in dataset.as_numpy_iterator():
      self.assertEqual(image.dtype, np.float32)
      image = np.round(image * 255).astype(np.uint8)
      loaded[int(image.flat[0])] = (image, int(np.argmax(one_hot)))
    return loaded

  def _stored(self, split, name='local_set'):
    """(the image feature, [(image bytes as stored, label)]) of one split,
    read by TFDS without decoding."""
    builder = tfds.builder(name, data_dir=self.data_dir)
    dataset = builder.as_dataset(
        split=split, shuffle_files=False,
        decoders={'image': tfds.decode.SkipDecoding()})
    return builder.info.features['image'], [
        (example['image'].numpy(), int(example['label']))
        for example in dataset]

  def _files(self):
    """{path under data_dir: its bytes}."""
    found = {}
    for folder, _, names in os.walk(self.data_dir):
      for name in names:
        path = os.path.join(folder, name)
        with open(path, 'rb') as f:
          found[os.path.relpath(path, self.data_dir)] = f.read()
    return found

  def assertExitsNaming(self, message, *args):
    """`main` exits with one line `import_dataset: ...` holding `message`
    (sys.exit of a string: status 1, the string on stderr) and writes
    nothing into data_dir."""
    before = (sorted(os.listdir(self.data_dir))
              if os.path.isdir(self.data_dir) else None)
    with self.assertRaises(SystemExit) as raised:
      self._main(*args)
    line = raised.exception.code
    self.assertIsInstance(line, str)
    self.assertNotIn('\n', line)
    self.assertTrue(line.startswith('import_dataset: '), line)
    self.assertIn(message, line)
    after = (sorted(os.listdir(self.data_dir))
             if os.path.isdir(self.data_dir) else None)
    self.assertEqual(after, before)
    return line

  def _bad_import(self, message, fmt, source, *args, name='local_set'):
    return self.assertExitsNaming(
        message, f'--format={fmt}', f'--source={source}', f'--name={name}',
        f'--data_dir={self.data_dir}', *args)

  # What an import writes, read back through datasets.py.

  def test_idx_gzipped_reads_back_with_values_labels_and_sizes(self):
    self._import('idx', _write_idx(os.path.join(self.tmp, 'idx')))
    info = datasets.dataset_info('local_set', self.data_dir,
                                 validation_examples=2)
    # Not square: the run's side defaults to the shorter one.
    self.assertEqual((info.image_size, info.num_channels, info.num_classes),
                     (min(_ROWS, _COLS), 1, 3))
    self.assertEqual(info.split_sizes, {'search_train': 3,
                                        'search_validation': 2, 'test': 3})
    for split, first, labels in (('search_train', 0, _TRAIN_LABELS),
                                 ('test', 5, _TEST_LABELS)):
      loaded = self._load(split, 3)
      expected = _idx_images(first, len(labels))
      # search_train is train minus its first stored example (hold-out 1).
      self.assertLen(loaded, len(labels) - (split == 'search_train'))
      for pixel, (image, label) in loaded.items():
        k = pixel // 10 - first
        np.testing.assert_array_equal(image, expected[k][..., None])
        self.assertEqual(label, labels[k])
    self.assertEqual(os.listdir(self.data_dir), ['local_set'])

  def test_idx_plain_files_and_class_names(self):
    self._import('idx', _write_idx(os.path.join(self.tmp, 'idx'), gz=False),
                 '--class_names=shirt,shoe,bag')
    builder = tfds_builders.tfds_builder('local_set', self.data_dir, False)
    self.assertEqual(builder.info.features['label'].names,
                     ['shirt', 'shoe', 'bag'])
    self.assertEqual(builder.info.features['image'].shape, (_ROWS, _COLS, 1))
    self.assertEqual(builder.info.supervised_keys, ('image', 'label'))
    self.assertEqual(sorted(label for _, label in self._load('test', 3)
                            .values()), sorted(_TEST_LABELS))

  def test_npz_colour_images_and_keras_labels(self):
    path = _write_npz(os.path.join(self.tmp, 'data.npz'))
    self._import('npz', path)
    info = datasets.dataset_info('local_set', self.data_dir,
                                 validation_examples=1)
    self.assertEqual((info.image_size, info.num_channels, info.num_classes),
                     (2, 3, 2))
    self.assertEqual(info.split_sizes, {'search_train': 3,
                                        'search_validation': 1, 'test': 2})
    with np.load(path) as npz:
      expected = {int(x.flat[0]): (x, int(y[0]))
                  for x, y in zip(npz['x_test'], npz['y_test'])}
    loaded = self._load('test', 2)
    self.assertEqual(sorted(loaded), sorted(expected))
    for pixel, (image, label) in loaded.items():
      np.testing.assert_array_equal(image, expected[pixel][0])
      self.assertEqual(label, expected[pixel][1])

  def test_folder_sorted_class_names_give_the_labels(self):
    self._import('folder', png_folder.write_folder(
        os.path.join(self.tmp, 'images')))
    builder = tfds_builders.tfds_builder('local_set', self.data_dir, False)
    self.assertEqual(builder.info.features['label'].names, ['apple', 'zebra'])
    self.assertEqual(builder.info.features['image'].shape, (3, 5, 1))
    self.assertEqual(builder.info.features['image'].encoding_format, 'png')
    self.assertEqual({s: builder.info.splits[s].num_examples
                      for s in ('train', 'test')}, {'train': 3, 'test': 2})
    # Pixel value 20 * k names image k; apple is label 0, zebra 1.
    loaded = self._load('test', 2)
    self.assertEqual({p: label for p, (_, label) in loaded.items()},
                     {80: 0, 100: 1})
    self.assertEqual(loaded[80][0].shape, (3, 5, 1))
    self.assertTrue(np.all(loaded[80][0] == 80))

  def test_folder_with_one_colour_image_is_all_rgb(self):
    root = png_folder.write_folder(os.path.join(self.tmp, 'images'))
    colour = np.zeros((3, 5, 3), np.uint8)
    colour[..., 0] = 7
    png_folder.write_png(os.path.join(root, 'train', 'apple', '6.png'), colour)
    Image.fromarray(np.full((3, 5), 30, np.uint8)).save(
        os.path.join(root, 'test', 'zebra', '7.jpg'), quality=100)
    self._import('folder', root)
    feature = tfds_builders.tfds_builder('local_set', self.data_dir,
                                    False).info.features['image']
    self.assertEqual(feature.shape, (3, 5, 3))
    self.assertIsNone(feature.encoding_format)  # PNGs and a JPEG.
    loaded = self._load('test', 2)
    self.assertEqual(loaded[80][0].shape, (3, 5, 3))
    self.assertTrue(np.all(loaded[80][0] == 80))  # Gray -> equal channels.
    self.assertLen(loaded, 3)  # The .jpg too.

  def test_folder_of_mixed_size_jpegs_is_stored_byte_for_byte(self):
    sizes = {'train': {'cat': [(200, 300), (480, 120)],
                       'dog': [(64, 64, 1), (100, 80)]},  # 1: grayscale.
             'test': {'cat': [(90, 60)], 'dog': [(64, 64)]}}
    root = jpeg_folder.make_jpeg_folder(os.path.join(self.tmp, 'images'),
                                        sizes, seed=1)
    with contextlib.redirect_stdout(io.StringIO()) as out:
      self._import('folder', root)
    self.assertIn(': train 4, test 2 images of varying sizes, 3 channels '
                  '(stored as JPEG), 2 classes.', out.getvalue())
    self.assertIn('The images differ in size: pass --image_size',
                  out.getvalue())
    for split, classes in sizes.items():
      source = {}  # File bytes -> (label, size).
      for label, name in enumerate(sorted(classes)):
        for k, size in enumerate(classes[name]):
          with open(os.path.join(root, split, name, f'{k:03d}.jpg'),
                    'rb') as f:
            source[f.read()] = (label, size)
      feature, stored = self._stored(split)
      self.assertEqual(feature.shape, (None, None, 3))
      self.assertEqual(feature.encoding_format, 'jpeg')
      self.assertCountEqual([data for data, _ in stored], list(source))
      for data, label in stored:
        self.assertEqual(label, source[data][0])
        height, width = source[data][1][:2]
        image = feature.decode_example(tf.constant(data)).numpy()
        self.assertEqual((image.shape, image.dtype),
                         ((height, width, 3), np.uint8))
        if len(source[data][1]) == 3:  # Grayscale, decoded to 3 channels.
          np.testing.assert_array_equal(image[..., 0], image[..., 1])
          np.testing.assert_array_equal(image[..., 0], image[..., 2])
        with Image.open(io.BytesIO(data)) as pil:
          reference = np.asarray(pil.convert('RGB'), np.int32)
        # TensorFlow's default (fast integer) IDCT against PIL's (slow
        # integer) one: a few levels apart.
        self.assertLessEqual(np.abs(image - reference).max(), 8)
        # Stored as JPEG, so a window alone can be decoded. (Along the
        # window's edges the chroma is upsampled from the window's own rows
        # and columns: a few levels off the whole image's there.)
        top, left, rows, cols = height // 4, width // 4, height // 2, width // 2
        window = tf.image.decode_and_crop_jpeg(
            data, [top, left, rows, cols], channels=3).numpy()
        self.assertEqual(window.shape, (rows, cols, 3))
        crop = image[top:top + rows, left:left + cols].astype(np.int32)
        self.assertLessEqual(np.abs(window - crop).max(), 8)

  def test_folder_of_one_size_jpegs_has_a_fixed_shape(self):
    root = jpeg_folder.make_jpeg_folder(
        os.path.join(self.tmp, 'images'),
        {'train': {'a': [(24, 32)] * 3, 'b': [(24, 32)]},
         'test': {'a': [(24, 32)]}}, seed=2)
    with contextlib.redirect_stdout(io.StringIO()) as out:
      self._import('folder', root)
    self.assertIn('images of 24x32x3 (stored as JPEG)', out.getvalue())
    feature, stored = self._stored('test')
    self.assertEqual(feature.shape, (24, 32, 3))
    self.assertEqual(feature.encoding_format, 'jpeg')
    with open(os.path.join(root, 'test', 'a', '000.jpg'), 'rb') as f:
      self.assertEqual(stored, [(f.read(), 0)])
    info = datasets.dataset_info('local_set', self.data_dir,
                                 validation_examples=1)
    self.assertEqual((info.num_channels, info.num_classes), (3, 2))

  def test_jpeg_folder_fixture(self):
    data_dir, name = jpeg_folder.import_jpeg_dataset(self.tmp, 'jpeg_set')
    builder = tfds.builder(name, data_dir=data_dir)
    feature = builder.info.features['image']
    self.assertEqual((feature.shape, feature.encoding_format),
                     ((None, None, 3), 'jpeg'))
    self.assertEqual(builder.info.features['label'].names,
                     list(jpeg_folder.CLASSES))
    self.assertEqual(
        {s: builder.info.splits[s].num_examples for s in ('train', 'test')},
        {'train': 2 * jpeg_folder.TRAIN_PER_CLASS,
         'test': 2 * jpeg_folder.TEST_PER_CLASS})

  def test_overwrite_replaces_an_existing_dataset(self):
    self._import('idx', _write_idx(os.path.join(self.tmp, 'idx')))
    path = _write_npz(os.path.join(self.tmp, 'data.npz'))
    self._bad_import("dataset 'local_set' already exists", 'npz', path)
    self._import('npz', path, '--overwrite')
    self.assertEqual(datasets.dataset_info(
        'local_set', self.data_dir, validation_examples=1).num_channels, 3)
    self.assertEqual(os.listdir(self.data_dir), ['local_set'])

  # Bad input: one line, non-zero exit, data_dir as it was.

  def test_wrong_magic_number(self):
    source = _write_idx(os.path.join(self.tmp, 'idx'), train_labels=_idx_bytes(
        np.array(_TRAIN_LABELS), 2051))
    self._bad_import('wrong magic number 2051, expected 2049', 'idx', source)

  def test_idx_size_disagrees_with_header(self):
    source = _write_idx(os.path.join(self.tmp, 'idx'), t10k_images=_idx_bytes(
        _idx_images(5, 3), 2051)[:-1])
    self._bad_import('needs', 'idx', source)

  def test_image_and_label_counts_disagree(self):
    source = _write_idx(os.path.join(self.tmp, 'idx'), t10k_labels=_idx_bytes(
        np.array([0, 1]), 2049))
    line = self._bad_import('image and label counts disagree', 'idx', source)
    self.assertIn('3 images but t10k-labels-idx1-ubyte.gz holds 2', line)

  def test_npz_counts_disagree(self):
    path = _write_npz(os.path.join(self.tmp, 'data.npz'),
                      y_test=np.array([0, 1, 1]))
    self._bad_import('image and label counts disagree', 'npz', path)

  def test_labels_out_of_range(self):
    source = _write_idx(os.path.join(self.tmp, 'idx'))
    self._bad_import('label 2 of train-labels-idx1-ubyte.gz (index 0) is out '
                     'of range for 2 class names', 'idx', source,
                     '--class_names=a,b')

  def test_negative_labels(self):
    path = _write_npz(os.path.join(self.tmp, 'data.npz'),
                      y_train=np.array([1, -1, 0, 0]))
    self._bad_import('y_train holds a negative label (-1 at index 1)', 'npz',
                     path)

  def test_mixed_image_sizes_in_a_folder_have_a_variable_shape(self):
    root = png_folder.write_folder(os.path.join(self.tmp, 'images'))
    png_folder.write_png(os.path.join(root, 'test', 'zebra', '9.png'),
                         np.full((4, 5), 90, np.uint8))
    self._import('folder', root)
    feature, stored = self._stored('test')
    self.assertEqual(feature.shape, (None, None, 1))
    shapes = sorted(tuple(feature.decode_example(tf.constant(data)).shape)
                    for data, _ in stored)
    self.assertEqual(shapes, [(3, 5, 1), (3, 5, 1), (4, 5, 1)])

  def test_mixed_image_sizes_in_an_npz(self):
    path = _write_npz(os.path.join(self.tmp, 'data.npz'),
                      x_test=np.zeros((2, 3, 3), np.uint8))
    self._bad_import('mixed image sizes: x_train holds 2x2x3 images, x_test '
                     '3x3x1', 'npz', path)

  def test_empty_class_folder(self):
    root = png_folder.write_folder(os.path.join(self.tmp, 'images'))
    os.makedirs(os.path.join(root, 'train', 'mango'))
    self._bad_import('empty class folder: train/mango', 'folder', root)

  def test_missing_idx_file(self):
    source = _write_idx(os.path.join(self.tmp, 'idx'), t10k_labels=None)
    self._bad_import('missing IDX file: no *t10k-labels-idx1-ubyte[.gz]',
                     'idx', source)

  def test_missing_npz_keys(self):
    path = _write_npz(os.path.join(self.tmp, 'data.npz'), y_test=None)
    self._bad_import("missing arrays ['y_test']", 'npz', path)

  def test_missing_test_folder(self):
    root = os.path.join(self.tmp, 'images')
    png_folder.write_png(os.path.join(root, 'train', 'a', '1.png'),
                         np.zeros((2, 2), np.uint8))
    self._bad_import('has no test/ folder', 'folder', root)

  def test_missing_source(self):
    self._bad_import('is not a directory', 'idx',
                     os.path.join(self.tmp, 'nothing'))

  def test_existing_folder_that_is_not_a_dataset_is_kept(self):
    os.makedirs(os.path.join(self.data_dir, 'local_set'))
    source = _write_idx(os.path.join(self.tmp, 'idx'))
    self._bad_import('is not a prepared TFDS dataset', 'idx', source,
                     '--overwrite')

  def test_unknown_format(self):
    self._bad_import("Unknown format 'csv'; expected one of ('idx', 'npz', "
                     "'folder')", 'csv', self.tmp)

  def test_missing_flags(self):
    self.assertExitsNaming('--source, --data_dir are required', '--format=idx',
                           '--name=x')

  def test_bad_names(self):
    source = _write_idx(os.path.join(self.tmp, 'idx'))
    for name, message in (('fashion_mnist', 'is a registered TFDS dataset'),
                          (datasets.DIGITS, 'is the built-in offline dataset'),
                          ('My-Set', 'must be snake_case')):
      with self.subTest(name):
        self._bad_import(message, 'idx', source, name=name)

  def test_unusable_images_are_counted_in_one_line_before_writing(self):
    root = jpeg_folder.make_jpeg_folder(
        os.path.join(self.tmp, 'images'),
        {'train': {'cat': [(40, 30)] * 3, 'dog': [(30, 40)] * 3},
         'test': {'cat': [(32, 32)], 'dog': [(32, 32)]}}, seed=3)
    self._import('folder', root)
    before = self._files()
    with open(os.path.join(root, 'train', 'cat', 'x.jpg'), 'w') as f:
      f.write('not an image')
    path = os.path.join(root, 'train', 'dog', '001.jpg')
    with open(path, 'rb') as f:
      data = f.read()
    with open(path, 'wb') as f:
      f.write(data[:len(data) // 2])
    Image.fromarray(np.full((4, 4), 1000, np.uint16)).save(
        os.path.join(root, 'test', 'dog', 'deep.png'))
    line = self._bad_import(
        f'3 unusable image files under {root} (train/cat/x.jpg: cannot '
        'identify image file; train/dog/001.jpg: ', 'folder', root,
        '--overwrite')
    # PIL words a cut JPEG after what it reached ("image file is truncated
    # (N bytes not processed)", "Truncated File Read").
    rest = re.escape('; test/dog/deep.png: PIL mode I;16, not 8-bit '
                     'grayscale or colour)')
    self.assertRegex(line, f'001.jpg: [^;]*[Tt]runcated[^;]*{rest}$')
    self.assertEqual(self._files(), before)  # The old dataset, untouched.


class CommandLineTest(absltest.TestCase):

  def test_bad_input_exits_with_one_line_and_no_traceback(self):
    tmp = tempfile.mkdtemp()
    source = _write_idx(os.path.join(tmp, 'idx'), train_images=_idx_bytes(
        _idx_images(0, 5), 2049))
    data_dir = os.path.join(tmp, 'tfds')
    result = forked.run_one(
        [sys.executable, '-m', 'tunas_tf.tools.import_dataset', '--format=idx',
         f'--source={source}', '--name=local_set', f'--data_dir={data_dir}'],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
    self.assertNotEqual(result.returncode, 0)
    self.assertNotIn('Traceback', result.stderr)
    last = result.stderr.strip().splitlines()[-1]
    self.assertTrue(last.startswith('import_dataset: '), last)
    self.assertIn('wrong magic number 2049, expected 2051', last)
    self.assertFalse(os.path.exists(data_dir))


if __name__ == '__main__':
  absltest.main()
