"""Tests for tools/describe_space (library function and command line)."""

import json
import os
import subprocess
import sys
import tempfile

from absl.testing import absltest

from tunas_tf import architecture
from tunas_tf.search_space import schema
from tunas_tf.search_space import spec_io
from tunas_tf.tools import describe_space


class DescribeSpaceTest(absltest.TestCase):

  def test_describe_draw_is_seeded_and_prunes(self):
    first = describe_space.describe('digits_search', seed=3)
    self.assertEqual(first, describe_space.describe('digits_search', seed=3))
    self.assertEqual(first['num_decisions'], 18)
    self.assertLen(first['paths'], 18)
    pruned = spec_io.from_json(first['spec'])
    self.assertEqual(schema.flatten(pruned), [])

  def test_describe_given_indices(self):
    result = describe_space.describe('proxylessnas_mobile', indices='')
    self.assertEqual(result['size'], 1)
    self.assertEqual(result['indices'], '')

  def test_command_line_writes_file_and_rejects_bad_indices(self):
    out = tempfile.mkdtemp()
    cmd = [sys.executable, '-m', 'tunas_tf.tools.describe_space',
           '--ssd=digits_search', f'--output_dir={out}']
    subprocess.run(cmd, check=True, capture_output=True)
    with open(os.path.join(out, 'architecture.json')) as f:
      self.assertEqual(json.load(f)['ssd'], 'digits_search')
    # The format of tools/extract_architecture, without the search's fields.
    written = architecture.read(os.path.join(out, 'architecture.json'))
    self.assertEqual(written.indices_string,
                     describe_space.describe('digits_search')['indices'])
    self.assertIsNone(written.estimated_cost)
    bad = subprocess.run(cmd + ['--indices=0:9'], capture_output=True,
                         text=True)
    self.assertNotEqual(bad.returncode, 0)
    self.assertIn('expected 18 indices', bad.stderr)


if __name__ == '__main__':
  absltest.main()
