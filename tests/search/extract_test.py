"""Tests for search.extract.most_likely_in_band (plain NumPy), the line
saying a searched architecture misses its target (plain numbers), a
directory without a config or checkpoint, the record of the shared finished
search, and which architecture `pick` takes (band or argmax) and says."""

import dataclasses
import itertools
import os
import tempfile

from absl.testing import absltest
import numpy as np

from tunas_tf import architecture
from tunas_tf.io import files
from tunas_tf.cost_model import linear as cost_linear
from tunas_tf.cost_model import macs
from tunas_tf.cost_model import memory
from tunas_tf.search import config as config_lib
from tunas_tf.search import extract
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema
from tunas_tf.search_space import spec_io
from tests.testing import configs
from tests.testing import searches


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


def _costs(batch):
  return [_cost(v) for v in batch]


def _space(seed):
  """Random logits of four decisions (3, 2, 4, 3 choices), every vector."""
  rng = np.random.RandomState(seed)
  logits = [rng.normal(size=n) * 2 for n in (3, 2, 4, 3)]
  return logits, list(itertools.product(*[range(len(v)) for v in logits]))


class MostLikelyInBandTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.logits, self.all = _space(0)

  def test_argmax_in_band_is_rank_one(self):
    argmax = tuple(int(np.argmax(v)) for v in self.logits)
    cost = _cost(argmax)
    indices, rank = extract.most_likely_in_band(self.logits, _costs, cost,
                                                cost)
    self.assertEqual((indices, rank), (argmax, 1))

  def test_matches_brute_force_for_every_band(self):
    costs = sorted({_cost(v) for v in self.all})
    order = sorted(self.all, key=lambda v: -_log_likelihood(self.logits, v))
    for low, high in zip(costs, costs[2:]):
      indices, rank = extract.most_likely_in_band(self.logits, _costs, low,
                                                  high)
      best = max(_log_likelihood(self.logits, v) for v in self.all
                 if low <= _cost(v) <= high)
      self.assertTrue(low <= _cost(indices) <= high)
      self.assertAlmostEqual(_log_likelihood(self.logits, indices), best)
      # Its rank: one more than the vectors strictly more likely.
      self.assertEqual(rank, 1 + sum(
          _log_likelihood(self.logits, v) > best + 1e-12 for v in order))

  def test_visits_every_vector_once_most_likely_first(self):
    batches = []

    def record(batch):
      batches.append(batch)
      return [0.0] * len(batch)

    self.assertIsNone(extract.most_likely_in_band(
        self.logits, record, 1.0, 2.0, max_candidates=1000))
    # The argmax alone, then as many as were costed before: 1, 1, 2, 4, ...
    self.assertEqual([len(b) for b in batches], [1, 1, 2, 4, 8, 16, 32, 8])
    seen = [v for b in batches for v in b]
    self.assertCountEqual(seen, self.all)
    scores = [_log_likelihood(self.logits, v) for v in seen]
    self.assertTrue(all(a >= b - 1e-12 for a, b in zip(scores, scores[1:])))

  def test_gives_up_after_max_candidates(self):
    calls = []
    self.assertIsNone(extract.most_likely_in_band(
        self.logits, lambda b: calls.extend(b) or [0.0] * len(b), 1.0, 2.0,
        max_candidates=5))
    self.assertLen(calls, 5)

  def test_ties_break_to_the_lower_index(self):
    indices, rank = extract.most_likely_in_band(
        [np.zeros(3), np.zeros(2)], lambda b: [0.0] * len(b), 0.0, 0.0)
    self.assertEqual((indices, rank), ((0, 0), 1))

  def test_bad_arguments(self):
    with self.assertRaisesRegex(ValueError, r'empty band \[2.0, 1.0\]'):
      extract.most_likely_in_band(self.logits, _costs, 2.0, 1.0)
    with self.assertRaisesRegex(ValueError, 'max_candidates must be >= 1'):
      extract.most_likely_in_band(self.logits, _costs, 0.0, 1.0,
                                  max_candidates=0)


class SamplesInBandTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.logits, self.all = _space(1)

  def test_distinct_in_band_and_seeded(self):
    costs = sorted(_cost(v) for v in self.all)
    low, high = costs[len(costs) // 4], costs[3 * len(costs) // 4]
    drawn = extract.samples_in_band(self.logits, _costs, low, high, 10)
    self.assertLen(drawn, 10)
    self.assertLen(set(drawn), 10)
    self.assertTrue(all(low <= _cost(v) <= high for v in drawn))
    self.assertEqual(drawn, extract.samples_in_band(self.logits, _costs, low,
                                                    high, 10))
    self.assertNotEqual(drawn, extract.samples_in_band(
        self.logits, _costs, low, high, 10, seed=1))

  def test_draws_as_the_controller_samples(self):
    # Over every cost (one band), the first draw of many seeds: each vector
    # about as often as its probability (1,000 seeds: +-4 standard errors).
    first = [extract.samples_in_band(self.logits, _costs, -np.inf, np.inf, 1,
                                     seed=s)[0] for s in range(1000)]
    top = max(self.all, key=lambda v: _log_likelihood(self.logits, v))
    p = np.exp(_log_likelihood(self.logits, top))
    self.assertAlmostEqual(first.count(top) / 1000, p,
                           delta=4 * np.sqrt(p * (1 - p) / 1000))

  def test_the_draws_of_random_state_choice(self):
    # Decision after decision, vector after vector: the draws of the
    # experiment bench/README's one-shot figures come from.
    rng = np.random.RandomState(3)
    probs = [np.exp(v - v.max()) / np.exp(v - v.max()).sum()
             for v in self.logits]
    expected = {}
    while len(expected) < 6:
      expected.setdefault(tuple(int(rng.choice(len(p), p=p)) for p in probs))
    self.assertEqual(extract.samples_in_band(self.logits, _costs, -np.inf,
                                             np.inf, 6, seed=3),
                     list(expected))

  def test_fewer_when_the_band_holds_fewer(self):
    # Uniform logits: 20,000 draws of 72 vectors reach each of them.
    uniform = [np.zeros(len(v)) for v in self.logits]
    cost = _cost(self.all[5])
    held = [v for v in self.all if _cost(v) == cost]
    drawn = extract.samples_in_band(uniform, _costs, cost, cost,
                                    len(held) + 3, max_draws=20000)
    self.assertCountEqual(drawn, held)


_REMEDIES = ('search longer (--max_steps) or pull harder towards the target '
             '(a more negative --rl_cost_model_exponent)')
_ARGMAX = ('extract without --argmax (the most likely architecture within 5% '
           'of it)')


class CostMissLineTest(absltest.TestCase):

  def test_names_the_miss_and_the_remedies(self):
    # 171,000 / 220,131 - 1 = -0.2232.
    self.assertEqual(
        extract.cost_miss_line(171000.0, 220131.0, 'MACs'),
        'the searched architecture costs 171,000 MACs, 22.3% under its '
        f'target 220,131 MACs: {_REMEDIES}')
    # 92.4 / 84 - 1 = +0.1.
    self.assertEqual(
        extract.cost_miss_line(92.4, 84.0, 'ms'),
        f'the searched architecture costs 92.4 ms, 10% over its target 84 '
        f'ms: {_REMEDIES}')
    self.assertEqual(
        extract.cost_miss_line(50.0, 100.0),
        f'the searched architecture costs 50, 50% under its target 100: '
        f'{_REMEDIES}')

  def test_silent_within_five_percent(self):
    for cost in (95.0, 96.5, 100.0, 104.99, 105.0):
      self.assertIsNone(extract.cost_miss_line(cost, 100.0, 'MACs'), cost)
    # 220,131 * 1.05 is 1.05 times it up to rounding: it prints as 5%, so
    # it is not more than 5% off.
    self.assertIsNone(extract.cost_miss_line(220131.0 * 1.05, 220131.0))
    self.assertIn('5.01% over', extract.cost_miss_line(105.01, 100.0))
    self.assertIn('5.1% under', extract.cost_miss_line(94.9, 100.0))

  def test_follows_the_reward(self):
    # mnas_hard does not penalise a cheaper architecture.
    self.assertIsNone(extract.cost_miss_line(50.0, 100.0, reward='mnas_hard'))
    self.assertEqual(extract.cost_miss_line(150.0, 100.0, reward='mnas_hard'),
                     extract.cost_miss_line(150.0, 100.0))
    # mnas pays for being under: a more negative exponent would push
    # further under, so it is not offered then.
    self.assertEqual(
        extract.cost_miss_line(50.0, 100.0, reward='mnas'),
        'the searched architecture costs 50, 50% under its target 100: '
        'search longer (--max_steps)')
    self.assertEqual(extract.cost_miss_line(150.0, 100.0, reward='mnas'),
                     extract.cost_miss_line(150.0, 100.0))

  def test_the_argmax_is_offered_the_band(self):
    self.assertEqual(
        extract.cost_miss_line(150.0, 100.0, argmax=True),
        'the searched architecture costs 150, 50% over its target 100: '
        'search longer (--max_steps), pull harder towards the target (a more '
        f'negative --rl_cost_model_exponent), or {_ARGMAX}')
    self.assertEqual(
        extract.cost_miss_line(50.0, 100.0, reward='mnas', argmax=True),
        'the searched architecture costs 50, 50% under its target 100: '
        f'search longer (--max_steps) or {_ARGMAX}')

  def test_off_target_line_of_a_search(self):
    config = searches.search_config(tempfile.mkdtemp())
    target = config.rl_cost_model_target
    self.assertEqual(config.cost_model, 'macs')
    far = architecture.Architecture(
        config.ssd, [0] * 18, estimated_cost=0.5 * target, cost_model='macs')
    self.assertEqual(extract.off_target_line(far, config),
                     extract.cost_miss_line(0.5 * target, target, 'MACs'))
    self.assertIn('50% under', extract.off_target_line(far, config))
    self.assertNotIn(_ARGMAX, extract.off_target_line(far, config))
    self.assertIn(_ARGMAX, extract.off_target_line(far, config, argmax=True))
    near = dataclasses.replace(far, estimated_cost=1.04 * target)
    self.assertIsNone(extract.off_target_line(near, config))
    # No cost term in the reward, no cost known: nothing to say.
    self.assertIsNone(extract.off_target_line(
        far, dataclasses.replace(config, enable_cost_model=False)))
    self.assertIsNone(extract.off_target_line(
        dataclasses.replace(far, estimated_cost=None), config))
    # A fitted model's unit is not known: the figures alone.
    fitted = dataclasses.replace(far, cost_model='/models/phone.json')
    self.assertEqual(extract.off_target_line(fitted, config),
                     extract.cost_miss_line(0.5 * target, target))
    # A target no architecture reaches (an older search): no remedy that
    # cannot help, the range.
    unreachable = dataclasses.replace(config, rl_cost_model_target=0.15)
    self.assertEqual(
        extract.off_target_line(far, unreachable),
        'its target 0.15 is outside what digits_search can cost (39,968 to '
        '1,212,416 MACs): no search or extraction reaches it; search again '
        'with a target in that range')


class OneshotLineTest(absltest.TestCase):

  def test_says_which_rule_took_it_and_the_margin_against_the_noise(self):
    candidates = [(0, 1), (1, 1), (0, 0)]
    where = ('the best of 3 in the band (the most likely and 2 drawn from the '
             "controller) on the search's hold-out of 359 images")
    self.assertEqual(
        extract.oneshot_line(candidates, [0.9, 0.9, 0.8], 359, (0, 1)),
        (0, f'One-shot accuracy kept it, {where}: 90.00%'))
    # One image of 359 more: within the noise (standard error 2.3 points).
    best, line = extract.oneshot_line(
        candidates, [0.9 - 1 / 359, 0.9, 0.8], 359, (0, 1))
    self.assertEqual(best, 1)
    self.assertEqual(line, f'Took 1:1 by one-shot accuracy, {where}: 90.00% '
                     'against 89.72% for the most likely 0:1 (the argmax), +1 '
                     'images, within the sampling noise (standard error of the '
                     'difference 2.3 points, the bar twice that)')
    # 54 images more: beyond it; the argmax elsewhere is not named here.
    _, line = extract.oneshot_line(candidates, [0.8, 0.95, 0.8], 359, (1, 0))
    self.assertIn('for the most likely 0:1, +54 images, beyond the sampling '
                  'noise (standard error of the difference 2.4 points', line)


class ExtractTest(absltest.TestCase):

  def test_directory_errors(self):
    empty = tempfile.mkdtemp()
    with self.assertRaisesRegex(ValueError, 'No config.json in'):
      extract.pick(empty)
    config = searches.search_config(empty)
    configs.write_or_check(
        config_lib, config,
        spec_io.dumps(mobile.get_search_space('digits_search')))
    with self.assertRaisesRegex(ValueError, 'No checkpoint in'):
      extract.pick(empty)
    with self.assertRaisesRegex(ValueError, 'Cannot read checkpoint'):
      extract.pick(empty, os.path.join(empty, 'model.ckpt-9'))


class SearchRecordTest(absltest.TestCase):
  """The record of the shared finished search."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.search_dir = searches.finished_search()
    cls.searched = searches.finished_architecture()

  def test_extract_is_the_json_of_the_record(self):
    search_dir, searched = self.search_dir, self.searched
    self.assertEqual(extract.pick(search_dir)[0].to_json(),
                     searched.to_json())
    config = config_lib.read(search_dir)
    self.assertEqual(searched.global_step, config.max_global_step)
    self.assertEqual(searched.max_global_step, config.max_global_step)
    self.assertEqual(searched.cost_model, 'macs')
    job = config.job
    self.assertEqual(searched.data, {
        'dataset': job.dataset, 'image_size': job.image_size,
        'num_classes': job.num_classes, 'num_channels': job.num_channels,
        'preprocessing': job.preprocessing,
        'validation_examples': config.validation_examples})
    self.assertEqual(searched.data['dataset'], 'digits')
    self.assertLen(searched.probabilities, len(searched.indices))
    self.assertEqual(architecture.read(
        os.path.join(search_dir, 'architecture.json')), searched)



class ExtractionTest(absltest.TestCase):
  """Which architecture `pick` takes from copies of the shared finished
  search whose config.json is changed, and the line saying so."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.search_dir = searches.finished_search()
    cls.argmax, cls.argmax_line = extract.pick(cls.search_dir,
                                                  cost_tolerance=None)
    spec = mobile.get_search_space(cls.argmax.ssd)
    logits = extract.read_logits(cls.argmax.checkpoint, spec)
    cls.scores = [logits[path] - np.log(np.exp(logits[path]).sum())
                  for path, _ in schema.flatten_with_paths(spec)]
    cls.cost = cls.argmax.estimated_cost

  def _extract(self, **changes):
    """`pick` of a copy of the shared search, config.json changed."""
    run = searches.copy_finished_search()
    path = os.path.join(run, 'config.json')
    stored = files.read_json(path)
    stored.update(changes)
    files.write_json(stored, path)
    return extract.pick(run)

  def test_the_argmax_is_the_controllers(self):
    self.assertEqual(list(self.argmax.indices),
                     [int(np.argmax(s)) for s in self.scores])
    self.assertEqual(self.argmax_line,
                     'Took the argmax of each decision (--argmax)')
    self.assertIsNone(self.argmax.cost_tolerance)
    self.assertIsNone(self.argmax.argmax_indices)

  def test_the_most_likely_within_five_percent_of_a_missed_target(self):
    # The argmax 33.3% under the target: the band (+-5%) takes another.
    target = self.cost * 1.5
    arch, line = self._extract(rl_cost_model_target=target)
    self.assertBetween(arch.estimated_cost, 0.95 * target, 1.05 * target)
    self.assertEqual((arch.cost_tolerance, arch.argmax_indices),
                     (0.05, self.argmax.indices_string))
    log_ratio = sum(s[j] - s[i] for s, i, j in zip(
        self.scores, arch.indices, self.argmax.indices))
    self.assertGreater(log_ratio, 0.0)
    self.assertEqual(
        line, 'Took the most likely architecture within 5% of the target '
        f'({cost_linear.cost_text(0.95 * target)} to '
        f'{cost_linear.cost_text(1.05 * target)} MACs); the argmax '
        f'{self.argmax.indices_string} costs '
        f'{cost_linear.cost_text(self.cost)} MACs, 33.3% under the target, '
        f'and is {np.exp(log_ratio):#.3g} times as likely (--argmax takes it)')

  def test_an_argmax_in_the_band_is_taken(self):
    arch, line = self._extract(rl_cost_model_target=self.cost * 1.04)
    self.assertEqual(arch.indices, self.argmax.indices)
    self.assertEqual(arch.argmax_indices, self.argmax.indices_string)
    self.assertRegex(line, r'^Took the argmax of each decision, which costs '
                     r'within 5% of the target \([\d,]+ to [\d,]+ MACs\)$')

  def test_the_pick_skips_what_is_over_the_limits(self):
    # The argmax is in the band; 1 byte under its arena, the likeliest that
    # fits is taken instead (extraction never writes one over).
    shape = macs.resolve_input(self.argmax.ssd, self.argmax.image_size,
                               self.argmax.num_classes,
                               self.argmax.num_channels)
    arena = memory.needs(self.argmax.spec, shape)['arena_bytes']
    limit = (arena - 1) / 1024
    arch, _ = self._extract(rl_cost_model_target=self.cost * 1.04,
                            sram_kb=limit)
    self.assertNotEqual(arch.indices, self.argmax.indices)
    self.assertBetween(arch.estimated_cost, 0.988 * self.cost,
                       1.092 * self.cost)
    self.assertIsNone(memory.over_limits(memory.needs(arch.spec, shape),
                                         sram_kb=limit))

  def test_mnas_hard_takes_any_cheaper_architecture(self):
    # mnas_hard does not penalise being under: the argmax 33% under is in.
    arch, line = self._extract(rl_cost_model_target=self.cost * 1.5,
                               rl_reward_function='mnas_hard')
    self.assertEqual(arch.indices, self.argmax.indices)
    self.assertEqual(
        line, 'Took the argmax of each decision, which costs at most 5% '
        f'over the target (up to {cost_linear.cost_text(self.cost * 1.575)} '
        'MACs)')

  def test_no_cost_term_no_band(self):
    arch, line = self._extract(rl_cost_model_target=self.cost * 1.5,
                               enable_cost_model=False)
    self.assertEqual(arch.indices, self.argmax.indices)
    self.assertIsNone(arch.cost_tolerance)
    self.assertEqual(line, 'Took the argmax of each decision (no cost band: '
                     'the search had no cost term, --noenable_cost_model)')

  def test_a_space_of_more_than_2_to_the_63_counts_the_candidates(self):
    # 2^64 architectures: the count is the candidates costed, not the
    # decisions' sizes multiplied in int64 (2^64 wraps to 0).
    config = config_lib.read(self.search_dir)
    line = extract._pick_line(config, 0.05, extract.cost_band(config, 0.05),
                              None, [np.zeros(2)] * 64, (0,) * 64,
                              lambda indices: 0.0)
    self.assertRegex(line, r'^Took the argmax of each decision: none of the '
                     r'20,000 most likely architectures costs within 5% of ')

  def test_nothing_in_the_band_takes_the_argmax_and_says_so(self):
    arch, line = self._extract(rl_cost_model_target=self.cost * 1e6)
    self.assertEqual(arch.indices, self.argmax.indices)
    self.assertIsNone(arch.cost_tolerance)
    self.assertIsNone(arch.argmax_indices)
    self.assertRegex(line, r'^Took the argmax of each decision: none of the '
                     r'20,000 most likely architectures costs within 5% of '
                     r'the target \(')


if __name__ == '__main__':
  absltest.main()
