"""Tests of `files`' primitives: the atomic write, exclusive create, replace."""

import os
import shutil
import tempfile
import time

from absl.testing import absltest

from tunas_tf.io import files


class FilesTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.root = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, self.root)
    self.path = os.path.join(self.root, 'a', 'f.txt')

  def test_write_read_age_remove(self):
    self.assertIsNone(files.read_or_none(self.path))
    self.assertIsNone(files.age(self.path))
    files.write_text('one', self.path)
    files.write_text('two', self.path)  # Replaced, no temporary left.
    self.assertEqual(os.listdir(os.path.dirname(self.path)), ['f.txt'])
    self.assertEqual(files.read_or_none(self.path), 'two')
    old = time.time() - 400
    os.utime(self.path, (old, old))
    self.assertBetween(files.age(self.path), 399, 460)
    files.remove(self.path)
    files.remove(self.path)  # Missing: nothing to do.
    self.assertFalse(os.path.exists(self.path))

  def test_create_new_is_exclusive(self):
    self.assertTrue(files.create_new(self.path, 'mine'))
    self.assertFalse(files.create_new(self.path, 'theirs'))
    self.assertEqual(files.read_or_none(self.path), 'mine')

  def test_replace_unchanged_only_what_was_read(self):
    self.assertTrue(files.replace_unchanged(self.path, None, 'first'))
    self.assertFalse(files.replace_unchanged(self.path, None, 'x'))
    self.assertFalse(files.replace_unchanged(self.path, 'other', 'x'))
    self.assertEqual(files.read_or_none(self.path), 'first')  # Put back.
    self.assertTrue(files.replace_unchanged(self.path, 'first', 'second'))
    self.assertEqual(files.read_or_none(self.path), 'second')
    self.assertEqual(os.listdir(os.path.dirname(self.path)), ['f.txt'])


if __name__ == '__main__':
  absltest.main()
