"""Tests for search/report_text, the report's words: decision labels,
wrapping, the unsettled flag, the phase marks and the run's facts (plain
Python; the report of a finished search: tests/search/report_test.py)."""

import types

from absl.testing import absltest
from absl.testing import parameterized

from tunas_tf.search import report_text
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema


def _config(ops_warmup=2, filters_warmup=4, rl_delay=4, **changes):
  """The fields of a `SearchConfig` that `phase_marks` and `run_facts`
  read."""
  values = dict(
      ssd='digits_search',
      job=types.SimpleNamespace(
          dataset='digits', data_text='digits 8x8, preprocessing none'),
      max_global_step=8, train_batch_size=16, cost_model='macs',
      rl_cost_model_target=300000.0, enable_cost_model=True,
      rl_reward_function='abs', rl_cost_model_exponent=-0.5,
      rl_delay_steps=rl_delay, increase_ops_warmup_steps=ops_warmup,
      increase_filters_warmup_steps=filters_warmup)
  values.update(changes)
  return types.SimpleNamespace(**values)


class DecisionLabelTest(parameterized.TestCase):

  @parameterized.parameters(
      ('blocks/0/filters', 'block 0: filters'),
      ('blocks/1/layers/0/kernel_size', 'block 1 layer 0: kernel size'),
      ('blocks/3/layers/1/layer/choices/0/expansion_filters',
       'block 3 layer 1: expansion filters'),
      ('blocks/2/layers/1/layer', 'block 2 layer 1: op'),
      ('blocks/2/layers/0', 'block 2 layer 0: op'),
      ('blocks/1/layers/2/layer/choices/0/use_squeeze_and_excite',
       'block 1 layer 2: squeeze-excite'),
      ('blocks/0/layers/2/layer/choices/1/kernel_size',
       'block 0 layer 2: kernel size (choice 1)'),
      ('some_field', 'some field'),
  )
  def test_decision_label(self, path, label):
    self.assertEqual(report_text.decision_label(path), label)

  def test_labels_name_one_decision_each_in_every_space(self):
    for name in mobile.SEARCH_SPACES:
      paths = [p for p, _ in schema.flatten_with_paths(
          mobile.get_search_space(name))]
      labels = report_text.decision_labels(paths)
      # No fallback to a path was needed: the labels alone are unique.
      self.assertLen(set(labels.values()), len(paths), name)
      for path in paths:
        self.assertEqual(labels[path], report_text.decision_label(path), name)

  def test_a_shared_label_falls_back_to_the_paths(self):
    # 'blocks/0/layers/0/layer' and 'blocks/0/layers/0' both read 'op'.
    self.assertEqual(
        report_text.decision_labels(['blocks/0/layers/0/layer',
                                'blocks/0/layers/0', 'blocks/0/filters']),
        {'blocks/0/layers/0/layer': 'blocks/0/layers/0/layer',
         'blocks/0/layers/0': 'blocks/0/layers/0',
         'blocks/0/filters': 'block 0: filters'})


class WrapWordsTest(absltest.TestCase):

  def test_breaks_between_words_only(self):
    text = ('block 3 layer 1: expansion filters (no effect) - unsettled: '
            '0.34 vs 0.27')
    wrapped = report_text.wrap_words(text, 20)
    self.assertEqual(wrapped, 'block 3 layer 1:\nexpansion filters\n'
                              '(no effect) -\nunsettled: 0.34 vs\n0.27')

  def test_a_word_longer_than_a_line_stays_whole(self):
    path = 'blocks/3/layers/1/layer/choices/0/expansion_filters'
    self.assertEqual(report_text.wrap_words(f'{path} (no effect)', 20),
                     f'{path}\n(no effect)')


class UnsettledTest(absltest.TestCase):

  def test_margin_is_a_tenth(self):
    self.assertEqual(report_text.UNSETTLED_MARGIN, 0.1)

  def test_top_two_close_is_unsettled_wherever_they_are(self):
    # The walk-through's blocks/4/filters: 0.34 vs 0.27, 0.07 apart.
    self.assertEqual(report_text.top_two([0.19, 0.34, 0.2, 0.27]), (0.34, 0.27))
    self.assertTrue(report_text.is_unsettled([0.19, 0.34, 0.2, 0.27]))
    self.assertTrue(report_text.is_unsettled([0.41, 0.18, 0.41]))
    self.assertTrue(report_text.is_unsettled([0.5, 0.5]))

  def test_top_two_apart_is_settled(self):
    self.assertFalse(report_text.is_unsettled([0.2, 0.5, 0.3]))  # 0.2 apart.
    self.assertFalse(report_text.is_unsettled([0.01, 0.98, 0.01]))
    self.assertFalse(report_text.is_unsettled([0.31, 0.42, 0.27]))  # 0.11.
    self.assertTrue(report_text.is_unsettled([0.33, 0.42, 0.25]))  # 0.09.

  def test_the_margin_is_a_parameter(self):
    self.assertTrue(report_text.is_unsettled([0.2, 0.5, 0.3], margin=0.25))
    self.assertFalse(report_text.is_unsettled([0.34, 0.27], margin=0.05))

  def test_a_decision_without_effect_is_never_unsettled(self):
    # The demo's block 2 layer 1 kernel size under a skipped layer: 0.37 vs
    # 0.33 was flagged red beside its '(no effect)'.
    self.assertTrue(report_text.is_unsettled([0.37, 0.33, 0.30]))
    self.assertFalse(report_text.is_unsettled([0.37, 0.33, 0.30],
                                              active=False))
    self.assertFalse(report_text.is_unsettled([0.5, 0.5], active=False))

  def test_one_choice_is_never_unsettled(self):
    self.assertFalse(report_text.is_unsettled([1.0]))
    with self.assertRaisesRegex(ValueError, 'two or more probabilities'):
      report_text.top_two([1.0])


class PhaseMarksTest(absltest.TestCase):

  def test_phases_ending_at_one_step_share_a_mark(self):
    self.assertEqual(report_text.phase_marks(_config(2, 4, 4)),
                     [(2, ['op warm-up ends']),
                      (4, ['filter warm-up ends', 'RL delay ends'])])

  def test_the_defaults_end_all_three_at_once(self):
    self.assertEqual(
        report_text.phase_marks(_config(202, 202, 202)),
        [(202, ['op warm-up ends', 'filter warm-up ends', 'RL delay ends'])])

  def test_phases_of_no_steps_are_not_marked(self):
    self.assertEqual(report_text.phase_marks(_config(0, 0, 10)),
                     [(10, ['RL delay ends'])])
    self.assertEqual(report_text.phase_marks(_config(0, 0, 0)), [])


class RunFactsTest(absltest.TestCase):

  def test_names_space_data_steps_cost_model_and_target(self):
    self.assertEqual(
        report_text.run_facts(_config()),
        'search space digits_search; dataset digits 8x8, preprocessing '
        'none; 8 steps of 16 images; cost model macs, target 300,000 MACs '
        '(reward abs, beta -0.5); RL delay 4 steps, op warm-up 2, filter '
        'warm-up 4')

  def test_a_fitted_model_by_file_name_and_a_reward_without_cost(self):
    facts = report_text.run_facts(_config(
        cost_model='/tmp/fits/pixel.json', rl_cost_model_target=12.5,
        enable_cost_model=False))
    self.assertIn('cost model pixel.json, target 12.5 cost (not in the '
                  'reward: --noenable_cost_model)', facts)


if __name__ == '__main__':
  absltest.main()
