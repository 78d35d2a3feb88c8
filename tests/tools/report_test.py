"""Tests for tools/report and search/report on the shared finished search."""

import os
import re
import tempfile

from absl import flags
from absl.testing import absltest
import numpy as np
import pytest
import tensorflow as tf

from tunas_tf.search import report
from tunas_tf.search import extract
from tunas_tf.tools import report as report_tool
from tests.testing import searches


def _run(*args):
  values = flags.FlagValues()
  report_tool.define_flags(values)
  values(['report'] + list(args))
  report_tool.main(['report'], values)


class ReportTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.search_dir = searches.finished_search()
    cls.arch = extract.search_architecture(cls.search_dir)
    cls.scalars = report.read_scalars(cls.search_dir)

  def test_writes_picture_and_page_with_the_table(self):
    out = tempfile.mkdtemp()
    _run(f'--model_dir={self.search_dir}', f'--output_dir={out}')
    image = tf.io.decode_png(tf.io.read_file(os.path.join(
        out, report.PNG_NAME))).numpy()
    # Wide enough for four decision charts a row, and not blank.
    self.assertGreater(image.shape[1], 800)
    self.assertGreater(image.shape[0], image.shape[1])
    self.assertGreater(np.std(image), 10.0)
    with open(os.path.join(out, report.HTML_NAME)) as f:
      page = f.read()
    self.assertIn(f'src="{report.PNG_NAME}"', page)
    rows = report.layer_table(self.arch)
    # Two tables: the layers (+ header) and the decisions (+ header).
    self.assertEqual(page.count('<tr>'),
                     len(rows) + 1 + len(self.arch.decisions) + 1)
    self.assertIn(self.arch.indices_string, page)
    self.assertIn('MACs (target', page)

  def test_layer_table_shares_add_up_to_the_estimated_macs(self):
    rows = report.layer_table(self.arch)
    self.assertEqual(rows[-1]['op'], 'classifier')
    total = sum(row['MACs'] for row in rows)
    # The search's cost model is the exact MACs model of the space.
    self.assertEqual(self.arch.cost_model, 'macs')
    self.assertAlmostEqual(total, self.arch.estimated_cost, delta=0.5)
    shares = sum(float(row['MACs share'].rstrip('%')) for row in rows)
    self.assertAlmostEqual(shares, 100.0, delta=0.1 * len(rows))

  def test_probabilities_over_time_from_summaries_or_logits(self):
    decision = self.arch.decisions[0]
    steps, probs = report.probabilities_over_time(
        self.scalars, decision['path'], decision['choices'])
    self.assertEqual(steps, sorted(self.scalars['rlcontroller/reward']))
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    # Searches from before the rlprobs/ summaries: the logits' softmax.
    old = {k: v for k, v in self.scalars.items()
           if not k.startswith('rlprobs/')}
    old_steps, old_probs = report.probabilities_over_time(
        old, decision['path'], decision['choices'])
    self.assertEqual(old_steps, steps)
    np.testing.assert_allclose(old_probs, probs, atol=1e-5)

  def test_summary_line_names_units_and_target(self):
    line = report.summary_line(self.scalars, self.arch)
    self.assertRegex(line, r'cost [\d,]+ MACs \(target [\d,.]+, [+-]\d+\.\d%\)')
    self.assertEqual(report.cost_units('released'), 'ms')

  def test_bad_input_exits_with_one_line(self):
    with self.assertRaisesRegex(SystemExit, '^report: --model_dir is required$'):
      _run()
    empty = tempfile.mkdtemp()
    with self.assertRaises(SystemExit) as e:
      _run(f'--model_dir={empty}')
    self.assertTrue(re.match(r'^report: .*config\.json', str(e.exception)),
                    str(e.exception))
    self.assertNotIn('\n', str(e.exception))
    self.assertEqual(os.listdir(empty), [])
    a_file = os.path.join(empty, 'f')
    open(a_file, 'w').close()
    with self.assertRaisesRegex(
        SystemExit, '^report: --output_dir=.* is a file, not a directory$'):
      _run(f'--model_dir={self.search_dir}', f'--output_dir={a_file}')


if __name__ == '__main__':
  absltest.main()
