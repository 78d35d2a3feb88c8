"""Tests for search/random_search: the cost band over uniform draws."""

from absl.testing import absltest

from tunas_tf.cost_model import linear as cost_linear
from tunas_tf.cost_model import memory
from tunas_tf.search import random_search
from tunas_tf.search_space import mobile
from tunas_tf.search_space import sample
from tunas_tf.search_space import schema
from tunas_tf.tools import describe_space

SSD = 'digits_search'


class SampleArchitecturesTest(absltest.TestCase):

  def test_costs_match_the_cost_model_and_draws_are_seeded(self):
    kept = random_search.sample_architectures(SSD, 6, seed=4)
    self.assertLen(kept, 6)
    self.assertEqual(kept, random_search.sample_architectures(
        SSD, 6, seed=4))
    self.assertNotEqual(kept, random_search.sample_architectures(
        SSD, 6, seed=5))
    for entry in kept:
      self.assertEqual(set(entry), {'indices', 'estimated_cost'})
      # Default for digits_search (no released model) is macs.
      self.assertEqual(
          entry['estimated_cost'],
          cost_linear.estimate_cost_of_indices(
              entry['indices'], cost_linear.get_cost_model(SSD, 'macs')))
    # The first draw is the one describe_space picks for the same seed.
    self.assertEqual(kept[0]['indices'],
                     describe_space.describe(SSD, seed=4)['indices'])

  def test_released_model_is_the_default_where_it_exists(self):
    ssd = 'proxylessnas_search'
    kept = random_search.sample_architectures(ssd, 2, seed=0)
    for entry in kept:
      cost = entry['estimated_cost']
      self.assertEqual(cost, cost_linear.estimate_cost_of_indices(
          entry['indices'], cost_linear.get_cost_model(ssd, 'released')))
      self.assertBetween(cost, 25.0, 215.0)  # ms, not multiply-adds.

  def test_input_overrides_reach_the_macs_model(self):
    small = random_search.sample_architectures(SSD, 3, seed=2,
                                                      cost_model='macs')
    large = random_search.sample_architectures(
        SSD, 3, seed=2, cost_model='macs', image_size=16)
    self.assertEqual([e['indices'] for e in small],
                     [e['indices'] for e in large])
    for s, l in zip(small, large):
      self.assertGreater(l['estimated_cost'], 3 * s['estimated_cost'])

  def test_band_keeps_only_costs_inside_it(self):
    everything = random_search.sample_architectures(SSD, 200, seed=1)
    costs = sorted(e['estimated_cost'] for e in everything)
    low, high = costs[50], costs[150]
    kept = random_search.sample_architectures(
        SSD, 20, seed=1, min_cost=low, max_cost=high)
    self.assertLen(kept, 20)
    for entry in kept:
      self.assertBetween(entry['estimated_cost'], low, high)
    # The band's kept ones are the in-band subsequence of the same draws.
    in_band = [e for e in everything if low <= e['estimated_cost'] <= high]
    self.assertEqual(kept, in_band[:20])
    only_min = random_search.sample_architectures(SSD, 5, seed=1,
                                                         min_cost=high)
    self.assertTrue(all(e['estimated_cost'] >= high for e in only_min))

  def test_empty_band_gives_up_saying_how_many_were_kept(self):
    with self.assertRaisesRegex(ValueError, r'only 0 of 2 .* after 50 draws'):
      random_search.sample_architectures(
          SSD, 2, seed=0, min_cost=1.0, max_cost=2.0, max_draws=50)
    costs = [e['estimated_cost'] for e in
             random_search.sample_architectures(SSD, 30, seed=0)]
    # A band holding only the largest of the first draws: 1 kept, then stop.
    with self.assertRaisesRegex(ValueError, r'only 1 of 2 .* after 30 draws'):
      random_search.sample_architectures(
          SSD, 2, seed=0, min_cost=max(costs), max_draws=30)

  def test_limits_keep_only_architectures_within_them(self):
    everything = random_search.sample_architectures(SSD, 60, seed=3)
    kept = random_search.sample_architectures(SSD, 8, seed=3, sram_kb=12,
                                              flash_kb=40)
    shape = memory.Shape(8, 10, 1)  # digits_search's input.
    within = []
    for entry in everything:
      spec = schema.prune(mobile.get_search_space(SSD), entry['indices'])
      arena, flash = (memory.arena_bytes(spec, shape),
                      memory.flash_bytes(spec, shape))
      if arena <= 12 * 1024 and flash <= 40 * 1024:
        within.append(dict(entry, arena_bytes=arena, flash_bytes=flash))
    # The kept ones are the within-limits subsequence of the same draws,
    # their bytes recorded; the limits bind (some draws are over).
    self.assertEqual(kept, within[:8])
    self.assertLess(len(within), 50)
    with self.assertRaisesRegex(
        ValueError, r'^only 0 of 2 architectures fell in the cost band '
        r'\[-inf, inf\] within --flash_kb=15.6 after 40 draws \(costs drawn '
        r'ranged [\d.]+\.\.[\d.]+ multiply-adds, 40 in the band over the '
        r'limits\); the band is empty or too narrow$'):
      random_search.sample_architectures(SSD, 2, flash_kb=15.6, max_draws=40)
    with self.assertRaisesRegex(ValueError, '^--sram_kb must be > 0, got 0'):
      random_search.sample_architectures(SSD, 1, sram_kb=0)

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, 'Unknown search space'):
      random_search.sample_architectures('no_such_space', 1)
    for num in (0, -3):
      with self.assertRaisesRegex(ValueError, 'num must be a positive int'):
        random_search.sample_architectures(SSD, num)
    with self.assertRaisesRegex(ValueError, 'greater than max_cost'):
      random_search.sample_architectures(SSD, 1, min_cost=5,
                                                max_cost=4)
    with self.assertRaisesRegex(ValueError, 'No released cost model'):
      random_search.sample_architectures(SSD, 1,
                                                cost_model='released')


class SampleIndicesTest(absltest.TestCase):

  def test_same_draws_as_sample_architectures_without_a_band(self):
    self.assertEqual(sample.sample_indices(SSD, 4, seed=7),
                     [k['indices'] for k in
                      random_search.sample_architectures(SSD, 4, seed=7)])


if __name__ == '__main__':
  absltest.main()
