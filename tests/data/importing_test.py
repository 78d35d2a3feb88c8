"""Tests of `data/importing.py`: its copy of the loader's built-in name, and
a write that fails half-way leaves no temporary folder in data_dir (the
tool's imports and refusals: tests/tools/import_dataset_test.py)."""

import os
import tempfile

from absl.testing import absltest

from tunas_tf.data import datasets
from tunas_tf.data import importing
from tunas_tf.data import local_data
from tests.testing import png_folder


class ImportingTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.tmp = tempfile.mkdtemp()
    self.data_dir = os.path.join(self.tmp, 'tfds')

  def test_builtin_name_is_the_loader_s(self):
    # importing keeps its own copy so that bad input is refused before
    # TensorFlow is imported.
    builtin = importing._BUILTIN  # pylint: disable=protected-access
    self.assertEqual(builtin, datasets.DIGITS)

  def test_file_gone_while_writing_leaves_no_temporary_folder(self):
    # Checked, then removed: the write fails half-way.
    root = png_folder.write_folder(os.path.join(self.tmp, 'images'))
    dataset = local_data.read_folder(root)
    os.remove(os.path.join(root, 'train', 'zebra', '2.png'))
    os.makedirs(self.data_dir)
    with self.assertRaisesRegex(OSError, '2.png'):
      importing.write_dataset(dataset, 'local_set', self.data_dir, 'test')
    self.assertEqual(os.listdir(self.data_dir), [])


if __name__ == '__main__':
  absltest.main()
