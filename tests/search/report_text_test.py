"""Tests for search/report_text, the report's words: decision labels,
wrapping, how settled a decision is, the phase marks and the run's facts (plain
Python; the report of a finished search: tests/search/report_test.py)."""

import json
import os
import tempfile
import types

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

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
      increase_filters_warmup_steps=filters_warmup,
      latency_precision='float32')
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


def _history(n, rows):
  """[steps, n] probabilities: each (steps, first, p) row puts `p` on
  choice `first` at those steps and the rest evenly on the others."""
  steps = sorted({step for row in rows for step in row[0]})
  probs = np.full([len(steps), n], np.nan)
  for row_steps, first, p in rows:
    for step in row_steps:
      probs[steps.index(step)] = (1.0 - p) / (n - 1)
      probs[steps.index(step), first] = p
  return steps, probs


class LeadTest(absltest.TestCase):
  # A 100-step search with an RL delay of 25: 75 learning steps, a bar of
  # 0.25 * 75 = 18.75 steps led by 0.1 or more.

  def test_the_bar(self):
    self.assertEqual((report_text.SETTLED_SHARE, report_text.SETTLED_MARGIN),
                     (0.25, 0.1))

  def test_a_lead_through_the_last_quarter_is_settled(self):
    # Choice 2 leads 0.5 vs 0.25 from step 40: 60 of 75 learning steps.
    steps, probs = _history(3, [(range(0, 40, 10), 0, 1 / 3),
                                (range(40, 101, 10), 2, 0.5)])
    lead = report_text.lead(steps, probs, 25)
    self.assertEqual(lead, report_text.Lead(0.5, 0.25, 60, 75))
    self.assertTrue(lead.settled)
    self.assertEqual(lead.text, 'settled: 0.50 vs 0.25, led 60 of 75 RL steps')

  def test_a_flip_in_the_last_tenth_is_still_moving(self):
    # Choice 0 led at 0.9 to step 90; at 95 and 100 choice 1 leads.
    steps, probs = _history(4, [(range(30, 91, 10), 0, 0.9),
                                ([95, 100], 1, 0.96)])
    lead = report_text.lead(steps, probs, 25)
    self.assertEqual((lead.led_steps, lead.learning_steps), (5, 75))
    self.assertFalse(lead.settled)
    self.assertEqual(lead.text,
                     'still moving: 0.96 vs 0.01, led 5 of 75 RL steps')

  def test_fewer_steps_than_the_bar_are_still_moving(self):
    for since, settled in ((82, False), (81, True)):  # 18 and 19 steps.
      steps, probs = _history(2, [([25, 50], 0, 0.8),
                                  ([since, 90, 100], 1, 0.8)])
      lead = report_text.lead(steps, probs, 25)
      self.assertEqual(lead.led_steps, 100 - since)
      self.assertEqual(lead.settled, settled, since)

  def test_the_margin_counts_at_every_logged_step(self):
    # Choice 0 leads from step 30, but by 0.08 only at step 80 (0.54 vs
    # 0.46): led from step 90.
    steps, probs = _history(2, [([30, 40, 50, 60, 70, 90, 100], 0, 0.9),
                                ([80], 0, 0.54)])
    self.assertEqual(report_text.lead(steps, probs, 25).led_steps, 10)
    # Ahead by less than 0.1 at the end: led for none.
    steps, probs = _history(2, [(range(30, 101, 10), 0, 0.54)])
    lead = report_text.lead(steps, probs, 25)
    self.assertEqual((lead.led_steps, lead.settled), (0, False))
    steps, probs = _history(3, [(range(30, 101, 10), 0, 0.9)])
    probs[-1] = [0.45, 0.45, 0.1]  # A tie.
    self.assertEqual(report_text.lead(steps, probs, 25).led_steps, 0)

  def test_only_learning_steps_count(self):
    # Ahead from step 0 (never before the delay in a search: the logits
    # start equal): 75 learning steps, no more.
    steps, probs = _history(2, [(range(0, 101, 10), 1, 0.75)])
    self.assertEqual(report_text.lead(steps, probs, 25),
                     report_text.Lead(0.75, 0.25, 75, 75))
    # A report before the delay's end: nothing learned, nothing settled.
    lead = report_text.lead(steps[:2], probs[:2], 25)
    self.assertEqual((lead.led_steps, lead.learning_steps, lead.settled),
                     (0, 0, False))


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
    self.assertEqual(report_text.run_facts(_config()), [
        ('search space', 'digits_search'),
        ('dataset', 'digits 8x8, preprocessing none'),
        ('steps', '8 of 16 images'), ('cost model', 'macs'),
        ('cost target', '300,000 MACs'), ('reward', 'abs, beta -0.5'),
        ('RL delay', '4 steps'), ('op warm-up', '2 steps'),
        ('filter warm-up', '4 steps')])

  def test_a_fitted_model_and_a_reward_without_cost(self):
    facts = dict(report_text.run_facts(_config(
        cost_model='/tmp/fits/pixel.json', rl_cost_model_target=12.5,
        enable_cost_model=False)))
    # The file cannot be read here: its units and device are not known.
    self.assertEqual((facts['cost model'], facts['cost target']),
                     ('pixel.json, float32', '12.5'))
    self.assertEqual(facts['reward'], 'accuracy alone (--noenable_cost_model)')


class CostModelTextTest(absltest.TestCase):

  def test_a_fitted_model_by_name_with_its_precision_and_device(self):
    path = os.path.join(tempfile.mkdtemp(), 'phone.json')
    with open(path, 'w') as f:
      json.dump({'units': 'ms', 'measured_with': {'device': 'Pixel 7'}}, f)
    config = _config(cost_model=path, latency_precision='int8')
    self.assertEqual(report_text.cost_model_text(config),
                     'phone.json, int8 on Pixel 7')
    self.assertEqual(dict(report_text.run_facts(config))['cost model'],
                     'phone.json, int8 on Pixel 7')
    self.assertEqual(report_text.cost_model_text(_config()), 'macs')


if __name__ == '__main__':
  absltest.main()
