"""Tests for search.extract.most_likely_in_band (plain NumPy)."""

import itertools

from absl.testing import absltest
import numpy as np

from tunas_tf.search import extract


def _log_likelihood(logits, indices):
  total = 0.0
  for values, i in zip(logits, indices):
    values = np.asarray(values, np.float64)
    total += values[i] - np.log(np.exp(values).sum())
  return total


def _cost(indices):
  # Not monotonic in any one index, with an interaction term.
  a, b, c, d = indices
  return 3.0 * a + 5.0 * b - 2.0 * c + a * d + 7.0 * (b == 1)


class MostLikelyInBandTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.RandomState(0)
    self.logits = [rng.normal(size=n) * 2 for n in (3, 2, 4, 3)]
    self.all = list(itertools.product(*[range(len(v)) for v in self.logits]))

  def test_argmax_in_band_is_rank_one(self):
    argmax = tuple(int(np.argmax(v)) for v in self.logits)
    cost = _cost(argmax)
    indices, rank = extract.most_likely_in_band(self.logits, _cost, cost,
                                                cost)
    self.assertEqual((indices, rank), (argmax, 1))

  def test_matches_brute_force_for_every_band(self):
    costs = sorted({_cost(v) for v in self.all})
    order = sorted(self.all, key=lambda v: -_log_likelihood(self.logits, v))
    for low, high in zip(costs, costs[2:]):
      indices, rank = extract.most_likely_in_band(self.logits, _cost, low,
                                                  high)
      best = max(_log_likelihood(self.logits, v) for v in self.all
                 if low <= _cost(v) <= high)
      self.assertTrue(low <= _cost(indices) <= high)
      self.assertAlmostEqual(_log_likelihood(self.logits, indices), best)
      # Its rank: one more than the vectors strictly more likely.
      self.assertEqual(rank, 1 + sum(
          _log_likelihood(self.logits, v) > best + 1e-12 for v in order))

  def test_visits_every_vector_once_most_likely_first(self):
    seen = []

    def record(indices):
      seen.append(indices)
      return 0.0

    with self.assertRaisesRegex(ValueError, r'none of the 72 most likely '
                                r'architectures costs within \[1, 2\] '
                                r'\(the argmax costs 0\)'):
      extract.most_likely_in_band(self.logits, record, 1.0, 2.0,
                                  max_candidates=1000)
    self.assertLen(seen, len(self.all))
    self.assertCountEqual(seen, self.all)
    scores = [_log_likelihood(self.logits, v) for v in seen]
    self.assertTrue(all(a >= b - 1e-12 for a, b in zip(scores, scores[1:])))

  def test_gives_up_after_max_candidates(self):
    calls = []
    with self.assertRaisesRegex(ValueError, 'none of the 5 most likely'):
      extract.most_likely_in_band(
          self.logits, lambda v: calls.append(v) or 0.0, 1.0, 2.0,
          max_candidates=5)
    self.assertLen(calls, 5)

  def test_ties_break_to_the_lower_index(self):
    indices, rank = extract.most_likely_in_band(
        [np.zeros(3), np.zeros(2)], lambda v: 0.0, 0.0, 0.0)
    self.assertEqual((indices, rank), ((0, 0), 1))

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, r'empty band \[2.0, 1.0\]'):
      extract.most_likely_in_band(self.logits, _cost, 2.0, 1.0)
    with self.assertRaisesRegex(ValueError, 'max_candidates must be >= 1'):
      extract.most_likely_in_band(self.logits, _cost, 0.0, 1.0,
                                  max_candidates=0)


if __name__ == '__main__':
  absltest.main()
