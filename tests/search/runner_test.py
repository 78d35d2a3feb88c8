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
    self.assertEqual(text, f'cost {target * 0.97:,.6g} MACs (target '
                           f'{target:,.6g}, -3%)')


if __name__ == '__main__':
  absltest.main()
