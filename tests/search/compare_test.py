"""Tests for search/compare, the random-search comparison's library, on the
shared finished search: the searched and random architectures trained and
ranked, resumed, summarised, plotted, and its refusals (the tool's flags
and bad input: tests/integration/bad_input_test.py)."""

import json
import os
import shutil
import tempfile

from absl.testing import absltest

from tunas_tf import architecture
from tunas_tf.io import files
from tunas_tf.cost_model import linear
from tunas_tf.search import compare
from tunas_tf.search import config as config_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import spec_io
from tests.testing import searches
from tests.testing import tiny_tfds


class CompareTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.search_dir = searches.finished_search()
    cls.searched = searches.finished_architecture()

  def test_end_to_end_and_resume(self):
    output_dir = tempfile.mkdtemp()
    train_flags = ['--max_steps=3', '--train_batch_size=16',
                   '--eval_batch_size=120', '--noexport']
    results = compare.compare(self.search_dir, output_dir, 1,
                                     cost_tolerance=0.3, seed=1,
                                     train_eval_flags=train_flags)
    # One random architecture: every run is trained alike, each a train_eval
    # run of its own.
    self.assertEqual([r['name'] for r in results], ['searched', 'random_0'])
    with open(os.path.join(self.search_dir, 'architecture.json')) as f:
      searched = json.load(f)
    self.assertEqual(results[0]['indices'], searched['indices'])
    # The random architectures are costed with the search's own cost model.
    config = config_lib.read(self.search_dir)
    self.assertEqual(config.cost_model, 'macs')
    macs_model = config.resolved_cost_model
    self.assertEqual(macs_model.kind, linear.MACS)
    for r in results:
      self.assertBetween(r['top1'], 0.0, 1.0)
      self.assertBetween(r['estimated_cost'],
                         searched['estimated_cost'] * 0.7 - 1e-6,
                         searched['estimated_cost'] * 1.3 + 1e-6)
      self.assertAlmostEqual(r['estimated_cost'],
                             linear.estimate_cost_of_indices(
                                 r['indices'], macs_model),
                             places=3)
      self.assertEqual(r['macs'], round(r['estimated_cost']), r)
      with open(os.path.join(r['run_dir'], 'metrics.json')) as f:
        self.assertEqual(json.load(f)['global_step'], 3)
    self.assertEqual(files.read_json(os.path.join(output_dir,
                                                  'results.json')), results)
    self.assertIn('searched top-1', compare.summary(results))
    plot = os.path.join(output_dir, 'compare_random.png')
    compare.plot(results, plot,
                        **compare.plot_context(self.search_dir))
    self.assertGreater(os.path.getsize(plot), 1000)
    self.assertEqual(compare.plot_context(self.search_dir),
                     {'cost_model': 'macs', 'num_test': 360,
                      'target': config_lib.read(
                          self.search_dir).rl_cost_model_target})
    # Started again, it trains nothing (a failing train_eval would show).
    again = compare.compare(self.search_dir, output_dir, 1,
                                   cost_tolerance=0.3, seed=1,
                                   train_eval_flags=['--no_such_flag'])
    self.assertEqual(again, results)
    # A finished run of another architecture under a run's name is refused,
    # not reused (an output directory kept after the search changed).
    config_path = os.path.join(results[1]['run_dir'], 'config.json')
    stored = files.read_json(config_path)
    stored['indices'] = results[0]['indices']
    files.write_json(stored, config_path)
    with self.assertRaisesRegex(
        ValueError, r"random_0 holds a finished training with indices "
        r"'[0-9:]+', not random_0's '[0-9:]+': remove it"):
      compare.compare(self.search_dir, output_dir, 1,
                             cost_tolerance=0.3, seed=1,
                             train_eval_flags=['--no_such_flag'])

  def test_summary_line(self):
    results = [{'name': n, 'estimated_cost': 1e6, 'top1': t, 'indices': '0:1'}
               for n, t in [('searched', 0.87), ('random_0', 0.80),
                            ('random_1', 0.90), ('random_2', 0.85)]]
    last = compare.summary(results).splitlines()[-1]
    # Mean 0.85, sample std 0.05 (the population std would be 0.0408).
    self.assertEqual(last, 'searched top-1 0.8700; random 0.8500 +- 0.0500 '
                     '(n=3); the searched architecture beats 2 of 3')
    one = compare.summary(results[:2]).splitlines()[-1]
    self.assertIn('random 0.8000 +- 0.0000 (n=1)', one)

  def test_bad_input(self):
    with self.assertRaisesRegex(ValueError, '--num_random must be > 0'):
      compare.compare(self.search_dir, tempfile.mkdtemp(), 0)
    empty = tempfile.mkdtemp()
    with self.assertRaisesRegex(ValueError, 'No config.json in'):
      compare.compare(empty, tempfile.mkdtemp(), 1)
    no_cost = tempfile.mkdtemp()
    for name in ('config.json', 'model_spec.json'):
      shutil.copy(os.path.join(self.search_dir, name), no_cost)
    uncosted = architecture.Architecture(self.searched.ssd,
                                         self.searched.indices)
    architecture.write(uncosted, os.path.join(no_cost, 'architecture.json'))
    with self.assertRaisesRegex(ValueError, "has no 'estimated_cost'"):
      compare.compare(no_cost, tempfile.mkdtemp(), 1)
    failing = compare.compare
    with self.assertRaisesRegex(ValueError,
                                r'train_eval failed for searched in .*'
                                r'no_such_flag'):
      failing(self.search_dir, tempfile.mkdtemp(), 1, cost_tolerance=0.3,
              train_eval_flags=['--no_such_flag'])


class PlotContextTest(absltest.TestCase):

  def test_a_tfds_search_gives_its_test_split_size(self):
    # A TFDS dataset needs the search's hold-out to be described at all.
    data_dir = tempfile.mkdtemp()
    tiny_tfds.TinyImages(data_dir=data_dir).download_and_prepare()
    search_dir = tempfile.mkdtemp()
    config = searches.search_config(
        search_dir, '--dataset=tiny_images', f'--data_dir={data_dir}',
        '--nodownload', '--validation_examples=8', '--train_batch_size=4',
        '--rl_batch_size_multiplier=1', '--max_steps=3')
    config_lib.write(config, spec_io.dumps(mobile.get_search_space(
        config.ssd)), None)
    self.assertEqual(compare.plot_context(search_dir),
                     {'cost_model': 'macs', 'num_test': 6,
                      'target': config.rl_cost_model_target})


if __name__ == '__main__':
  absltest.main()
