"""Tests for cost_model/fit: the ridge fit and its held-out errors."""

import os
import tempfile

from absl.testing import absltest
import numpy as np

from tunas_tf.io import files
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
    self.assertNotIn('timing noise', summary)  # Not known here.
    # With it, what an exact model reaches: 2 sigma within +-10% (95.4%),
    # 1 sigma within +-5% (68.3%).
    noisy = dict(coefficients,
                 holdout=dict(holdout, timing_noise_percent=5.0))
    self.assertRegex(fit.summary(noisy), "; the rows' own timing noise 5% "
                     'lets an exact model reach 68.3% within \\+-5%, 95.4% '
                     'within \\+-10%$')
    self.assertEqual(fit.noise_reach(None, 5), 100.0)

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

  def test_held_out_figures_are_stored(self):
    holdout = self.result['coefficients']['holdout']
    self.assertEqual(holdout['within10_percent'], 100.0)  # MAPE < 2%.
    self.assertEqual(holdout['within5_percent'], 100.0)
    self.assertGreater(holdout['kendall_tau'], 0.9)
    self.assertLess(holdout['constant_within10_percent'], 50.0)
    self.assertEqual(holdout['constant_kendall_tau'], 0.0)  # Constant.
    counts = self.result['coefficients']['count_columns']
    self.assertEqual(list(counts['ms_per_count']),
                     ['macs', 'depthwise_macs', 'ops', 'activations'])
    # The latency is MACs / 1e4 ms: the MAC column carries it.
    self.assertAlmostEqual(counts['ms_per_count']['macs'] * 1e4, 1.0,
                           delta=0.05)

  def test_scores(self):
    actual = np.arange(1.0, 11.0)
    # Errors 0, 4, 6, 9, 20, 0, 0, 0, 5.6 (9.5 / 9) and 6% (9.4 / 10):
    # the last two swap ranks.
    predicted = np.array([1.0, 2.08, 3.18, 4.36, 6.0, 6.0, 7.0, 8.0, 9.5,
                          9.4])
    got = fit.scores(predicted, actual)
    self.assertAlmostEqual(got['mape_percent'],
                           (4 + 6 + 9 + 20 + 50 / 9 + 6) / 10)
    self.assertAlmostEqual(got['max_ape_percent'], 20.0)
    self.assertEqual(got['within5_percent'], 50.0)  # 0, 4, 0, 0, 0.
    self.assertEqual(got['within10_percent'], 90.0)  # And 6, 9, 5.6, 6.
    # 45 pairs: 2 tied in the predictions (5, 6), 1 discordant (9, 10).
    self.assertAlmostEqual(got['kendall_tau'], (43 - 1) / np.sqrt(44 * 45))
    self.assertAlmostEqual(fit.scores(actual[::-1], actual)['kendall_tau'],
                           -1.0)
    # No rank figure on fewer than MIN_RANK_ROWS rows.
    few = fit.scores(predicted[:9], actual[:9])
    self.assertIsNone(few['kendall_tau'])
    self.assertRegex(fit.figures(few, 9), r'within \+-10%, no rank figure on '
                     r'9 rows \(fewer than 10\)$')
    self.assertEqual(fit.figures(got, 10), "MAPE 5.06%, worst 20%, 50% "
                     "within +-5%, 90% within +-10%, Kendall's tau 0.944")

  def test_a_fit_no_better_than_a_constant_is_refused(self):
    # Latencies unrelated to the architectures: the fit has nothing to
    # find and says so, with how many rows to add.
    indices = self.indices[:60]
    noise = 1.0 + 0.1 * np.random.RandomState(0).rand(60)
    with self.assertRaisesRegex(fit.PoorFit, r'(top of its grid|no better '
                                r'than a constant).*measure about 60 more '
                                'architectures') as caught:
      fit.fit(SSD, indices, noise)
    self.assertIn('coefficients', caught.exception.result)
    allowed = fit.fit(SSD, indices, noise, allow_poor_fit=True)
    self.assertEqual(allowed['warning'], str(caught.exception))

  def test_check(self):
    good = self.result['coefficients']
    self.assertIsNone(fit.check(good))
    cases = [
        (dict(alpha=fit.ALPHAS[-1]), 'final fit chose alpha 1e\\+06, the top'),
        (dict(holdout=dict(good['holdout'], alpha=fit.ALPHAS[0],
                           within10_percent=80.0)),
         'held-out fit chose alpha 1e-06, the bottom'),
        (dict(holdout=dict(good['holdout'], mape_percent=80.0)),
         'no better than a constant'),
        (dict(holdout=dict(good['holdout'], within10_percent=79.0)),
         '^79% of the 80 held-out rows are within \\+-10%, under the bar of '
         '80%; measure about 400 more architectures .*, and '
         '--most_informative picks the ones the fit lacks\\) and fit again'),
    ]
    # Within the rows' own timing noise: the device's advice, not rows.
    noisy = dict(good['holdout'], within10_percent=79.0, mape_percent=9.0)
    for noise, message in ((9.5, "the device's timing is the limit, not the "
                            "rows: the held-out MAPE 9% is within the rows' "
                            'own timing noise 9.5% .* a quieter device .* a '
                            r'robust statistic .* more invocations \(--repeats'
                            r'\)$'), (5.0, 'measure about 400 more')):
      cases.append((dict(holdout=dict(noisy, timing_noise_percent=noise)),
                    message))
    # MAPE above the noise, but the noise alone keeps rows off the bar.
    cases.append((dict(holdout=dict(noisy, mape_percent=12.0,
                                    timing_noise_percent=9.0)),
                  "timing is the limit, not the rows: at the rows' own timing "
                  "noise 9% .*, where an exact model has 73.3% within"))
    for changes, message in cases:
      self.assertRegex(fit.check(dict(good, **changes)), message)
    # At the bottom edge but accurate on held-out rows: accepted.
    self.assertIsNone(fit.check(dict(good, alpha=fit.ALPHAS[0])))

  def test_timing_noise_is_the_standard_error_of_a_rows_median(self):
    # IQR 1.349 (one sigma) over 4 rounds of 10 ms: 1.2533 / 2 / 10.
    self.assertAlmostEqual(fit.timing_noise_percent(
        [10.0, 10.0, 20.0], [1.349, 1.349, 0.0], [4, 4, 9]), 6.2665, places=3)
    self.assertIsNone(fit.timing_noise_percent([], [], []))
    # Two rounds that agreed stopped early: their spread is no sample of
    # the device's; sigma (0.1) comes from the rows that took five.
    self.assertAlmostEqual(fit.timing_noise_percent(
        [10.0] * 3, [1.349, 1.349, 0.01], [5, 5, 2]), 5.605, places=3)
    # Most rows agreed after two rounds: sigma from the first two rounds'
    # differences (2 IQR / latency: 0.02, 0.04, 0.06 and one above them),
    # 0.05 / 0.9539; a two-round row's latency is their mean, sigma / sqrt 2.
    # (The one row past two rounds, by its IQR, would say 0.37.)
    self.assertAlmostEqual(fit.timing_noise_percent(
        [10.0] * 4, [0.1, 0.2, 0.3, 5.0], [2, 2, 2, 5]),
                           100 * 0.05 / 0.9539 / np.sqrt(2), places=6)

  def test_split_sizes(self):
    self.assertEqual(fit.split_sizes(12, 0.2), (10, 2))
    with self.assertRaisesRegex(ValueError, 'too few rows'):
      fit.split_sizes(9, 0.2)


if __name__ == '__main__':
  absltest.main()
