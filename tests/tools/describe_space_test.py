"""Tests for tools/describe_space (library function and command line)."""

import json
import os
import sys
import tempfile

from absl.testing import absltest

from tunas_tf import architecture
from tunas_tf.search_space import schema
from tunas_tf.search_space import spec_io
from tunas_tf.tools import describe_space
from tests.testing import forked


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

  def test_decision_table_names_choices_and_marks_moot_decisions(self):
    indices = '0:1:0:2:0:0:1:0:1:0:0:1:0:1:0:0:1:2'
    lines = describe_space.decision_table('digits_search', indices).split(
        '\n')
    self.assertEqual(lines[0].split(), ['decision', 'choices', 'chosen'])
    self.assertEqual(lines[1].split(), ['blocks/0/filters', '8', '16', '24',
                                        '32', '8'])
    self.assertLen(lines, 1 + 18 + 1)  # Header, decisions, the * legend.
    moot = [line for line in lines[1:-1] if line.endswith(' *')]
    self.assertLen(moot, 2)  # Under blocks/2/layers/1, which is skipped.
    self.assertTrue(all(line.startswith('blocks/2/layers/1/layer/choices')
                        for line in moot))
    self.assertIn('no decisions',
                  describe_space.decision_table('proxylessnas_mobile', ''))

  def test_says_which_names_train_search_can_search(self):
    self.assertTrue(describe_space.kind('digits_search').startswith(
        'a search space'))
    self.assertIn('train_search refuses it',
                  describe_space.kind('mobilenet_v2'))
    out = forked.run_one(
        [sys.executable, '-m', 'tunas_tf.tools.describe_space',
         '--ssd=mnasnet_b1'])
    self.assertEqual(out.returncode, 0, out.stderr)
    self.assertTrue(out.stdout.startswith(
        'mnasnet_b1: a reference model, a fixed architecture (nothing to '
        'search: train_search refuses it; train_eval trains it), 0 '
        'decisions, 1 architectures\n'), out.stdout)

  def test_command_line_writes_file_and_rejects_bad_indices(self):
    out = tempfile.mkdtemp()
    cmd = [sys.executable, '-m', 'tunas_tf.tools.describe_space',
           '--ssd=digits_search', f'--output_dir={out}']
    done = forked.run_one(cmd)
    self.assertEqual(done.returncode, 0, done.stderr)
    with open(os.path.join(out, 'architecture.json')) as f:
      self.assertEqual(json.load(f)['ssd'], 'digits_search')
    # The format of tools/extract_architecture, without the search's fields.
    written = architecture.read(os.path.join(out, 'architecture.json'))
    self.assertEqual(written.indices_string,
                     describe_space.describe('digits_search')['indices'])
    self.assertIsNone(written.estimated_cost)
    bad = forked.run_one(cmd + ['--indices=0:9'])
    self.assertNotEqual(bad.returncode, 0)
    self.assertIn('expected 18 indices', bad.stderr)


if __name__ == '__main__':
  absltest.main()
