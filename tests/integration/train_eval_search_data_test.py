"""train_eval on its search's data: `--architecture`'s data as defaults, a
contradiction refused, and the run's first line naming the data."""

import json
import os
import tempfile

from absl.testing import absltest
import pytest

from tests.testing import configs
from tests.testing import tiny_tfds
from tests.testing import train_eval_runs as runs
from tunas_tf import architecture as architecture_lib
from tunas_tf.cli import process
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.train_eval import __main__ as train_eval_main
from tunas_tf.train_eval import config as config_lib
from tunas_tf.train_eval import runner

_ZEROS = ':'.join(['0'] * 18)


def _searched(**data) -> architecture_lib.Architecture:
  """A digits_search architecture searched on tiny_images (3 labels, 8x8 RGB)
  with a wider classifier and no augmentation (the dataset's defaults are 3
  classes and cifar), so defaults taken from the file show."""
  values = dict(dataset='tiny_images', image_size=8, num_classes=5,
                num_channels=3, preprocessing='none', validation_examples=4)
  values.update(data)
  return architecture_lib.Architecture('digits_search', _ZEROS, **values)


class SearchDataTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.data_dir = tempfile.mkdtemp()
    tiny_tfds.TinyImages(data_dir=cls.data_dir).download_and_prepare()

  def setUp(self):
    super().setUp()
    self.root = tempfile.mkdtemp()
    self.path = os.path.join(self.root, 'architecture.json')
    architecture_lib.write(_searched(), self.path)

  def _config(self, *args):
    return runs.config(f'--model_dir={self.root}/run',
                       f'--architecture={self.path}',
                       f'--data_dir={self.data_dir}', '--nodownload',
                       '--train_batch_size=4', *args)

  def test_unset_data_flags_take_the_searchs(self):
    config = self._config()
    job = config.job
    self.assertEqual((job.dataset, job.image_size, job.num_classes,
                      job.num_channels, job.preprocessing),
                     ('tiny_images', 8, 5, 3, 'none'))
    # The hold-out is recorded, not taken: the recipe trains on all 20.
    self.assertEqual((config.validation_examples, config.train_examples),
                     (0, 20))
    configs.write_or_check(config_lib, config)
    with open(os.path.join(self.root, 'run', 'config.json')) as f:
      stored = json.load(f)
    self.assertEqual((stored['dataset'], stored['num_classes'],
                      stored['preprocessing']), ('tiny_images', 5, 'none'))
    # The search's own values, given again, agree.
    self.assertEqual(self._config('--dataset=tiny_images', '--num_classes=5',
                                  '--image_size=8', '--preprocessing=none'),
                     config)

  def test_a_contradiction_is_refused_in_one_line(self):
    for flag, value, searched in (('dataset', 'digits', "'tiny_images'"),
                                  ('image_size', 16, '8'),
                                  ('num_classes', 3, '5'),
                                  ('preprocessing', 'cifar', "'none'")):
      with self.assertRaises(ValueError) as raised:
        self._config(f'--{flag}={value}')
      self.assertEqual(
          str(raised.exception),
          f"--{flag}={value} contradicts the search's {flag} {searched} in "
          f'{self.path}; leave --{flag} unset, or pass --allow_other_data '
          'to train on other data')
    self.assertFalse(os.path.exists(os.path.join(self.root, 'run')))

  def test_another_size_of_digits_is_pointed_at_another_dataset(self):
    # digits has no 224x224 images: --allow_other_data alone would end in
    # '--image_size: digits images are 8x8'. What the hint says works.
    architecture_lib.write(_searched(dataset='digits', num_channels=1,
                                     num_classes=10), self.path)
    with self.assertRaises(ValueError) as raised:
      self._config('--image_size=224')
    self.assertEqual(
        str(raised.exception),
        f"--image_size=224 contradicts the search's image_size 8 in "
        f'{self.path}; leave --image_size unset, or train on another '
        'dataset at that size (--allow_other_data --dataset=NAME): digits '
        'images are 8x8 only')
    config = self._config('--image_size=16', '--allow_other_data',
                          '--dataset=tiny_images')
    self.assertEqual((config.job.dataset, config.job.image_size),
                     ('tiny_images', 16))

  def test_allow_other_data_lets_the_flags_differ(self):
    # Another dataset: its own defaults, none of the file's.
    config = self._config('--allow_other_data', '--dataset=digits')
    self.assertEqual((config.job.dataset, config.job.num_classes,
                      config.job.num_channels, config.job.preprocessing),
                     ('digits', 10, 1, 'none'))
    # The search's dataset: the flags set win, the file fills the others.
    config = self._config('--allow_other_data', '--num_classes=7',
                          '--preprocessing=cifar')
    self.assertEqual((config.job.dataset, config.job.num_classes,
                      config.job.preprocessing),
                     ('tiny_images', 7, 'cifar'))
    with self.assertRaisesRegex(ValueError,
                                '^--allow_other_data needs --architecture$'):
      runs.config(f'--model_dir={self.root}/run', f'--indices={_ZEROS}',
                  '--allow_other_data')

  def test_a_file_without_the_searchs_data_keeps_todays_defaults(self):
    # Written before the dataset was recorded (its sizes already were):
    # digits, as without --architecture, and no contradiction to refuse.
    document = _searched().to_json()
    for name in ('dataset', 'preprocessing', 'validation_examples'):
      del document[name]
    with open(self.path, 'w') as f:
      json.dump(document, f)
    config = runs.config(f'--model_dir={self.root}/run',
                         f'--architecture={self.path}')
    self.assertEqual((config.job.dataset, config.job.num_classes,
                      config.job.num_channels), ('digits', 10, 1))
    self.assertEqual(runs.config(f'--model_dir={self.root}/run',
                                 f'--architecture={self.path}',
                                 '--num_classes=12').job.num_classes, 12)

  @pytest.mark.estimator
  def test_a_run_trains_on_the_searchs_data_and_its_first_line_says_so(self):
    model_dir = os.path.join(self.root, 'run')
    values = runs.parse_flags(
        f'--model_dir={model_dir}', f'--architecture={self.path}',
        f'--data_dir={self.data_dir}', '--nodownload', '--max_steps=2',
        '--train_batch_size=4', '--eval_batch_size=6', '--noexport')
    with self.assertLogs('absl', level='INFO') as logs:
      self.assertEqual(train_eval_main.main(['train_eval'], values), 0)
    # The binary's log drops TFDS's INFO lines (`process.quiet_python_log`).
    shown = [r for r in logs.records if process.LibraryInfoFilter().filter(r)]
    self.assertEqual(
        shown[0].getMessage(),
        f'Starting digits_search {_ZEROS} in {model_dir}: 2 steps on '
        'tiny_images 8x8, preprocessing none (20 training images), '
        'evaluating test')
    self.assertEqual(config_lib.TrainEvalConfig.read(model_dir).job.dataset,
                     'tiny_images')


class StartLineTest(absltest.TestCase):

  def _line(self, *args, **kwargs):
    config = runs.config('--model_dir=/runs/x', f'--indices={_ZEROS}',
                         '--max_steps=40', *args)
    with self.assertLogs('absl', level='INFO') as logs:
      runner._log_start(config, **kwargs)  # pylint: disable=protected-access
    self.assertLen(logs.records, 1)
    return logs.records[0].getMessage()

  def test_start_resume_and_eval_only_lines_name_the_data(self):
    data = 'digits 8x8, preprocessing none'
    fresh = resume_lib.ResumePoint(None, 0, [], [], False)
    at_20 = resume_lib.ResumePoint('/runs/x/model.ckpt-20', 20, [], [], True)
    run = f'digits_search {_ZEROS} in /runs/x'
    self.assertEqual(
        self._line(stored=None, resume=fresh),
        f'Starting {run}: 40 steps on {data} (1437 training images), '
        'evaluating test')
    self.assertEqual(
        self._line(stored={}, resume=at_20),
        f'Resuming {run} from step 20 (model.ckpt-20): 40 steps on {data} '
        '(1437 training images), evaluating test')
    self.assertEqual(
        self._line('--eval_only', stored={}, resume=at_20),
        f'Evaluating {run} at step 20 (model.ckpt-20) on {data}, split test')


if __name__ == '__main__':
  absltest.main()
