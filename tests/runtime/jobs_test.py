"""Tests of `runtime.jobs`: which binary wrote a model directory, and the
refusal of the other kind in its own words by both binaries' configs."""

import os
import tempfile

from absl import flags
from absl.testing import absltest

from tests.testing import configs
from tests.testing import train_eval_runs
from tunas_tf import train_search
from tunas_tf.data import datasets
from tunas_tf.runtime import jobs
from tunas_tf.search import config as search_config
from tunas_tf.search.config import SearchConfig
from tunas_tf.train_eval import config as train_eval_config
from tunas_tf.train_eval.config import TrainEvalConfig

_ZEROS = ':'.join(['0'] * 18)
_DIGITS = datasets.DatasetInfo(
    'digits', 8, 1, 10,
    {'search_train': 1078, 'search_validation': 359, 'test': 360})


def _search(model_dir: str) -> SearchConfig:
  values = flags.FlagValues()
  train_search.define_flags(values)
  values(['train_search', f'--model_dir={model_dir}', '--max_steps=40',
          '--rl_cost_model_target=100000'])
  return train_search.config_from_flags(values, _DIGITS)


def _train_eval(model_dir: str) -> TrainEvalConfig:
  return train_eval_runs.config(f'--model_dir={model_dir}',
                                f'--indices={_ZEROS}', '--max_steps=30')


class WrittenByTest(absltest.TestCase):

  def test_each_binarys_config_json_is_told_apart(self):
    self.assertEqual(jobs.written_by(_search('/x').to_json()), 'train_search')
    self.assertEqual(jobs.written_by(_train_eval('/x').to_json()),
                     'train_eval')
    self.assertIsNone(jobs.written_by({'ssd': 'digits_search'}))
    # The field that tells them apart is in one kind's config.json only.
    search_keys = set(jobs.flat_keys(SearchConfig))
    train_eval_keys = set(jobs.flat_keys(TrainEvalConfig))
    self.assertIn('search_train_examples', search_keys - train_eval_keys)
    self.assertIn('train_examples', train_eval_keys - search_keys)

  def test_a_search_directory_is_refused_as_a_train_eval_one(self):
    model_dir = tempfile.mkdtemp()
    configs.write_or_check(search_config, _search(model_dir), '{}')
    config_path = os.path.join(model_dir, 'config.json')
    with open(config_path, 'rb') as f:
      before = f.read()
    with self.assertRaisesRegex(
        ValueError, f'^--model_dir={model_dir} is a search directory, not a '
        'train_eval directory$'):
      configs.write_or_check(train_eval_config, _train_eval(model_dir))
    with self.assertRaisesRegex(
        ValueError, f'^{model_dir} is a search directory, not a train_eval '
        'directory$'):
      TrainEvalConfig.read(model_dir)
    with open(config_path, 'rb') as f:
      self.assertEqual(f.read(), before)

  def test_a_train_eval_directory_is_refused_as_a_search(self):
    model_dir = tempfile.mkdtemp()
    configs.write_or_check(train_eval_config, _train_eval(model_dir))
    with self.assertRaisesRegex(
        ValueError, f'^--model_dir={model_dir} is a train_eval directory, '
        'not a search directory$'):
      configs.write_or_check(search_config, _search(model_dir), '{}')
    # What extract_architecture, report and compare_random read.
    with self.assertRaisesRegex(
        ValueError, f'^{model_dir} is a train_eval directory, not a search '
        'directory$'):
      search_config.read(model_dir)
    self.assertFalse(os.path.exists(os.path.join(model_dir,
                                                 'model_spec.json')))


if __name__ == '__main__':
  absltest.main()
