"""Tests for cost_model/fit: the ridge fit and its held-out errors."""

import os
import tempfile

from absl.testing import absltest
import numpy as np

from tunas_tf import files
from tunas_tf.cost_model import fit
from tunas_tf.cost_model import linear as cost_linear
from tests.testing import latency as testing_latency

SSD = testing_latency.SSD


class FitTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.indices, cls.latencies, cls.exact = testing_latency.synthetic(
        400, seed=0)
    cls.result = fit.fit(SSD, cls.indices, cls.latencies, seed=0)

  def test_recovers_a_linear_latency_and_beats_the_constant(self):
    coefficients = self.result['coefficients']
    holdout = coefficients['holdout']
    self.assertEqual(holdout['num_held_out'], 80)
    self.assertEqual(holdout['num_train'], 320)
    self.assertLess(holdout['mape_percent'], 2.0)
    self.assertGreater(holdout['constant_mape_percent'], 20.0)
    self.assertEqual(coefficients['num_features'], 744)
    self.assertEqual(coefficients['units'], 'ms')
    self.assertIn(coefficients['alpha'], fit.ALPHAS)
    predictions = self.result['predictions']
    self.assertLess(np.mean(np.abs(predictions - self.exact) / self.exact),
                    0.02)
    summary = fit.summary(coefficients)
    self.assertIn('held-out rows 80 (trained on 320)', summary)
    self.assertIn('constant predictor', summary)

  def test_coefficients_are_a_cost_model(self):
    path = os.path.join(tempfile.mkdtemp(), 'coefficients.json')
    files.write_json(self.result['coefficients'], path)
    fitted = cost_linear.get_cost_model(SSD, path)
    self.assertEqual(fitted.kind, cost_linear.FITTED)
    for row in range(0, 400, 50):
      self.assertAlmostEqual(
          cost_linear.estimate_cost_of_indices(self.indices[row], fitted),
          self.result['predictions'][row], places=9)

  def test_feature_matrix(self):
    x = fit.feature_matrix(SSD, self.indices[:3])
    self.assertEqual(x.shape, (3, 744))
    self.assertEqual(x.dtype, np.float64)

  def test_bad_input(self):
    cases = [
        (dict(indices=self.indices[:9], latencies=self.latencies[:9]),
         'too few rows: 9 measurements, need at least 10'),
        (dict(indices=self.indices[:12], latencies=self.latencies[:12],
              holdout_fraction=0.05), 'too few rows: 12.*holds out 1'),
        (dict(holdout_fraction=1.0), r'holdout_fraction must be in \(0, 1\)'),
        (dict(latencies=self.latencies[:5]), '400 architectures but 5'),
        (dict(latencies=-self.latencies), 'positive finite'),
    ]
    for overrides, message in cases:
      kwargs = dict(ssd=SSD, indices=self.indices, latencies=self.latencies)
      kwargs.update(overrides)
      with self.assertRaisesRegex(ValueError, message, msg=message):
        fit.fit(**kwargs)

  def test_split_sizes(self):
    self.assertEqual(fit.split_sizes(12, 0.2), (10, 2))
    with self.assertRaisesRegex(ValueError, 'too few rows'):
      fit.split_sizes(9, 0.2)


if __name__ == '__main__':
  absltest.main()
