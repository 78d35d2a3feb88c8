"""Tests for latency/adaptive: the architectures to measure next."""

from absl.testing import absltest
import numpy as np

from tunas_tf.cost_model import fit
from tunas_tf.cost_model import macs
from tunas_tf.latency import adaptive
from tunas_tf.search_space import sample

SSD = 'digits_search'
SHAPE = macs.resolve_input(SSD)


def _covered(indices):
  """How many coupled-feature positions the architectures switch on."""
  return int(np.count_nonzero(fit.feature_matrix(SSD, indices).sum(0)))


class MostInformativeTest(absltest.TestCase):

  def test_picks_new_architectures_that_cover_more_than_uniform_draws(self):
    measured = sample.sample_indices(SSD, 20, seed=1)
    picks = adaptive.most_informative(SSD, measured, 20, seed=2)
    self.assertLen(picks, 20)
    self.assertLen(set(picks), 20)
    self.assertEmpty(set(picks) & set(measured))
    uniform = sample.sample_indices(SSD, 20, seed=2)
    # Greedy D-optimal picks switch on feature positions the measured rows
    # lack; uniform draws repeat the common ones.
    self.assertGreater(_covered(measured + picks),
                       _covered(measured + uniform))

  def test_the_first_pick_has_the_largest_leverage(self):
    measured = sample.sample_indices(SSD, 10, seed=1)
    pool = 50
    first = adaptive.most_informative(SSD, measured, 1, pool=pool, seed=3)[0]
    candidates = [i for i in dict.fromkeys(
        sample.sample_indices(SSD, pool, 3)) if i not in measured]
    rows, scales = fit.design_matrix(SSD, measured, SHAPE)
    x, _ = fit.design_matrix(SSD, candidates, SHAPE, scales)
    inverse = np.linalg.inv(rows.T @ rows + np.eye(x.shape[1]))
    leverage = np.einsum('ij,jk,ik->i', x, inverse, x)
    self.assertEqual(first, candidates[int(np.argmax(leverage))])
    # The greedy updates agree with recomputing from scratch.
    second = adaptive.most_informative(SSD, measured, 2, pool=pool, seed=3)[1]
    rows2, _ = fit.design_matrix(SSD, measured + [first], SHAPE, scales)
    inverse2 = np.linalg.inv(rows2.T @ rows2 + np.eye(x.shape[1]))
    leverage2 = np.einsum('ij,jk,ik->i', x, inverse2, x)
    leverage2[candidates.index(first)] = -np.inf
    self.assertEqual(second, candidates[int(np.argmax(leverage2))])

  def test_too_small_a_pool(self):
    with self.assertRaisesRegex(ValueError, 'only 3 new architectures'):
      adaptive.most_informative(SSD, [], 5, pool=3)


if __name__ == '__main__':
  absltest.main()
