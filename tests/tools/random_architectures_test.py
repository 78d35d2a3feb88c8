"""Tests for tools/random_architectures (the command line)."""

import json
import os
import sys
import tempfile

from absl.testing import absltest

from tunas_tf.search import random_search
from tests.testing import forked

SSD = 'digits_search'


def _env():
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')


class CommandLineTest(absltest.TestCase):

  def _run(self, *args):
    return forked.run_one(
        [sys.executable, '-m', 'tunas_tf.tools.random_architectures', *args],
        env=_env())

  def test_writes_the_json_list_within_the_limits(self):
    output = os.path.join(tempfile.mkdtemp(), 'sub', 'random.json')
    result = self._run(f'--ssd={SSD}', '--num=4', '--seed=7',
                       f'--output={output}', '--sram_kb=11', '--flash_kb=20')
    self.assertEqual(result.returncode, 0, result.stderr)
    with open(output) as f:
      written = json.load(f)
    self.assertEqual(written, random_search.sample_architectures(
        SSD, 4, seed=7, sram_kb=11, flash_kb=20))
    for entry in written:  # Within the limits, as recorded.
      self.assertLessEqual(entry['arena_bytes'], 11 * 1024)
      self.assertLessEqual(entry['flash_bytes'], 20 * 1024)
    self.assertFalse(os.path.exists(output + '.tmp'))

  def test_bad_input_exits_with_one_line(self):
    output = os.path.join(tempfile.mkdtemp(), 'random.json')
    cases = {
        ('--ssd=nope',): 'flag --ssd=nope: value should be one of',
        ('--min_cost=3', '--max_cost=2'): 'greater than max_cost',
        ('--flash_kb=-2',): '--flash_kb must be > 0, got -2',
    }
    for args, message in cases.items():
      result = self._run(*args, f'--output={output}')
      self.assertNotEqual(result.returncode, 0, args)
      last = result.stderr.strip().splitlines()[-1]
      self.assertTrue(last.startswith('random_architectures: '), last)
      self.assertIn(message, last)
      self.assertFalse(os.path.exists(output))


if __name__ == '__main__':
  absltest.main()
