"""Tests for data/local_data.read_folder: image folders as they are (sizes,
channels, encodings) and every unusable file listed in one error. The
end-to-end import is tested in tests/tools/import_dataset_test.py."""

import io
import os
import re
import shutil
import tempfile

from absl.testing import absltest
import numpy as np
from PIL import Image

from tests.testing import jpeg_folder
from tunas_tf.data import local_data


def _write_image(path: str, array: np.ndarray, fmt: str = 'PNG') -> None:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  Image.fromarray(array).save(path, format=fmt)


def _encoded(array: np.ndarray, fmt: str) -> bytes:
  buffer = io.BytesIO()
  Image.fromarray(array).save(buffer, format=fmt)
  return buffer.getvalue()


def _write_bytes(path: str, data: bytes) -> None:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'wb') as f:
    f.write(data)


class ReadFolderTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.root = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, self.root)

  def _jpegs(self, train_sizes, test_sizes=((64, 64),)):
    """Classes a and b, each with the same train and test sizes."""
    return jpeg_folder.make_jpeg_folder(
        self.root, {'train': {'a': train_sizes, 'b': train_sizes},
                    'test': {'a': test_sizes, 'b': test_sizes}}, seed=0)

  def test_read_folder_mixed_sizes_have_no_fixed_height_or_width(self):
    self._jpegs([(200, 300), (480, 120), (64, 64, 1)])
    dataset = local_data.read_folder(self.root)
    self.assertEqual(dataset.image_shape, (None, None, 3))
    self.assertEqual(dataset.encoding_format, local_data.JPEG)
    self.assertEqual(dataset.class_names, ('a', 'b'))

  def test_read_folder_yields_each_file_s_bytes_and_label(self):
    self._jpegs([(40, 30), (30, 40)])
    dataset = local_data.read_folder(self.root)
    expected = []
    for label, name in enumerate(('a', 'b')):
      for k in range(2):
        with open(os.path.join(self.root, 'train', name, f'{k:03d}.jpg'),
                  'rb') as f:
          expected.append((f.read(), label))
    self.assertEqual(dataset.splits['train'].num_examples, 4)
    self.assertEqual(list(dataset.splits['train'].examples()), expected)

  def test_read_folder_one_size_keeps_a_fixed_shape(self):
    self._jpegs([(48, 64), (48, 64)], [(48, 64)])
    self.assertEqual(local_data.read_folder(self.root).image_shape,
                     (48, 64, 3))

  def test_read_folder_all_grayscale_is_one_channel(self):
    self._jpegs([(40, 30, 1), (30, 40, 1)], [(30, 30, 1)])
    self.assertEqual(local_data.read_folder(self.root).image_shape,
                     (None, None, 1))

  def test_read_folder_png_and_jpeg_keep_each_its_format(self):
    self._jpegs([(40, 30)])
    _write_image(os.path.join(self.root, 'test', 'b', 'z.png'),
                 np.zeros((8, 8), np.uint8))
    self.assertIsNone(local_data.read_folder(self.root).encoding_format)

  def test_read_folder_format_is_the_content_s_not_the_extension_s(self):
    # All PNG, one of them named .jpg.
    for split, name in (('train', 'a'), ('test', 'a')):
      _write_image(os.path.join(self.root, split, name, '1.png'),
                   np.zeros((4, 4, 3), np.uint8))
    _write_image(os.path.join(self.root, 'train', 'a', '2.jpg'),
                 np.zeros((4, 4, 3), np.uint8), fmt='PNG')
    dataset = local_data.read_folder(self.root)
    self.assertEqual(dataset.encoding_format, local_data.PNG)
    self.assertEqual(dataset.image_shape, (4, 4, 3))

  def test_read_folder_lists_every_unusable_file_in_one_line(self):
    self._jpegs([(40, 30), (30, 40)])
    jpeg = _encoded(np.zeros((40, 50, 3), np.uint8) + 90, 'JPEG')
    png = _encoded(np.arange(2000).reshape(40, 50).astype(np.uint8), 'PNG')
    bad = {
        'train/a/x.jpg': b'not an image',
        'train/b/cut.jpg': jpeg[:len(jpeg) // 2],
        'test/a/cut.png': png[:60],
        'test/a/deep.png': _encoded(np.full((4, 4), 1000, np.uint16), 'PNG'),
        'test/b/anim.png': _encoded(np.zeros((4, 4, 3), np.uint8), 'GIF'),
    }
    for path, data in bad.items():
      _write_bytes(os.path.join(self.root, path), data)
    with self.assertRaises(ValueError) as raised:
      local_data.read_folder(self.root)
    line = str(raised.exception)
    self.assertNotIn('\n', line)
    # Sorted by split (train first), class, then file; 3 named. (PIL words
    # a cut JPEG after what it reached: "image file is truncated (N bytes
    # not processed)", "Truncated File Read".)
    first = re.escape(f'5 unusable image files under {self.root} (first 3: '
                      'train/a/x.jpg: cannot identify image file; '
                      'train/b/cut.jpg: ')
    rest = re.escape('; test/a/cut.png: image file is truncated; ...)')
    self.assertRegex(line, f'^{first}[^;]*[Tt]runcated[^;]*{rest}$')

  def test_read_folder_names_each_kind_of_unusable_file(self):
    self._jpegs([(40, 30)])
    bad = {
        'test/a/deep.png': (_encoded(np.full((4, 4), 1000, np.uint16), 'PNG'),
                            'PIL mode I;16, not 8-bit grayscale or colour'),
        'test/b/anim.png': (_encoded(np.zeros((4, 4, 3), np.uint8), 'GIF'),
                            'a GIF image, not PNG or JPEG'),
        'train/b/empty.jpg': (b'', 'cannot identify image file'),
    }
    for path, (data, _) in bad.items():
      _write_bytes(os.path.join(self.root, path), data)
    with self.assertRaises(ValueError) as raised:
      local_data.read_folder(self.root)
    self.assertEqual(str(raised.exception), (
        f'3 unusable image files under {self.root} ('
        f'train/b/empty.jpg: {bad["train/b/empty.jpg"][1]}; '
        f'test/a/deep.png: {bad["test/a/deep.png"][1]}; '
        f'test/b/anim.png: {bad["test/b/anim.png"][1]})'))

  def test_read_folder_one_unusable_file(self):
    self._jpegs([(40, 30)])
    _write_bytes(os.path.join(self.root, 'test', 'a', 'x.png'), b'text')
    with self.assertRaisesRegex(ValueError, re.escape(
        f'1 unusable image file under {self.root} (test/a/x.png: cannot '
        'identify image file)')):
      local_data.read_folder(self.root)

  def test_read_folder_without_class_folders(self):
    self._jpegs([(40, 30)])
    for split in ('test', 'train'):
      shutil.rmtree(os.path.join(self.root, split))
      _write_bytes(os.path.join(self.root, split, 'a'), b'a file, no folder')
      with self.assertRaisesRegex(ValueError, re.escape(
          f'no class folders in {os.path.join(self.root, split)}')):
        local_data.read_folder(self.root)

  def test_read_folder_other_files_are_ignored(self):
    self._jpegs([(40, 30)])
    _write_bytes(os.path.join(self.root, 'train', 'a', 'notes.txt'), b'text')
    self.assertEqual(local_data.read_folder(self.root).splits[
        'train'].num_examples, 2)


class ArraysTest(absltest.TestCase):

  def test_read_npz_is_png_encoded_with_a_fixed_shape(self):
    tmp = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, tmp)
    path = os.path.join(tmp, 'data.npz')
    np.savez(path, x_train=np.zeros((2, 3, 4), np.uint8), y_train=[0, 1],
             x_test=np.zeros((1, 3, 4), np.uint8), y_test=[1])
    dataset = local_data.read_npz(path)
    self.assertEqual(dataset.image_shape, (3, 4, 1))
    self.assertEqual(dataset.encoding_format, local_data.PNG)


if __name__ == '__main__':
  absltest.main()
