"""Tests for search/runner's progress line (the search itself: search_test)."""

import tempfile

from absl.testing import absltest

from tunas_tf.search import runner
from tests.testing import searches


class ProgressLineTest(absltest.TestCase):

  def test_cost_has_units_target_and_deviation(self):
    config = searches.search_config(tempfile.mkdtemp())
    target = config.rl_cost_model_target
    self.assertEqual(config.cost_model, 'macs')
    text = runner._cost_text(target * 0.97, config)  # pylint: disable=protected-access
    self.assertEqual(text, f'cost {target * 0.97:,.0f} MACs (target '
                           f'{target:,.0f}, -3%)')

  def test_large_costs_are_written_out_in_thousands(self):
    config = searches.search_config(tempfile.mkdtemp(),
                                    '--rl_cost_model_target=2685375')
    self.assertEqual(runner._cost_text(2248370.4, config),  # pylint: disable=protected-access
                     'cost 2,248,370 MACs (target 2,685,375, -16%)')


class CostTextTest(absltest.TestCase):

  def test_thousands_are_grouped_and_small_values_keep_digits(self):
    from tunas_tf.search import report  # pylint: disable=g-import-not-at-top
    self.assertEqual(report.cost_text(2248370.4), '2,248,370')
    self.assertEqual(report.cost_text(84.25), '84.25')
    self.assertEqual(report.cost_text(999.5), '999.5')


if __name__ == '__main__':
  absltest.main()
