"""Tests of `train_eval.config`: derivation, checks, config.json."""

import dataclasses
import json
import os
import tempfile
from unittest import mock

from absl.testing import absltest

from tests.testing import configs
from tests.testing import tiny_tfds
from tests.testing import train_eval_runs as runs
from tunas_tf.data import datasets
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema
from tunas_tf.train_eval import config as config_lib
from tunas_tf.train_eval import data
from tunas_tf.train_eval import runner

_ZEROS = ':'.join(['0'] * 18)


_CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'tunas_tf', 'configs')


def _imagenet_info(name, data_dir=None, download=False,
                   validation_examples=0, image_size=None):
  """imagenet2012 as TFDS prepares it: images of varying sizes, 3 channels,
  1,000 labels, 1,281,167 training images, 50,000 validation images."""
  del data_dir, download  # Unused.
  return datasets.DatasetInfo(
      name, image_size, 3, 1000,
      {datasets.SEARCH_TRAIN: 1281167 - validation_examples,
       datasets.SEARCH_VALIDATION: validation_examples,
       datasets.TEST: 50000}, (None, None))


class RecipeTest(absltest.TestCase):

  def _recipe(self, name):
    indices = ':'.join(['0'] * len(schema.flatten_with_paths(
        mobile.get_search_space('proxylessnas_search'))))
    with mock.patch.object(datasets, 'dataset_info',
                           side_effect=_imagenet_info), \
        mock.patch.object(data, 'eval_examples', return_value=50000):
      return runs.config(f'--flagfile={_CONFIGS}/{name}.cfg',
                         '--model_dir=/tmp/unused', '--ssd=proxylessnas_search',
                         f'--indices={indices}', '--tpu=grpc://10.0.0.1:8470')

  def test_held_out_recipe_is_the_originals_90_epochs(self):
    config = self._recipe('imagenet_train_eval_90_epochs')
    # 1,231,121 l2l_train images x 90 epochs / 4096.
    self.assertEqual((config.train_examples, config.max_global_step),
                     (1231121, 27050))
    self.assertEqual((config.validation_examples, config.eval_split),
                     (50046, 'search_validation'))
    self.assertEqual(config.dropout_rate, 0.0)
    self.assertAlmostEqual(config.learning_rate_scaled, 2.64)
    self.assertEqual((config.job.preprocessing, config.job.image_size,
                      config.job.num_classes), ('imagenet', 224, 1001))

  def test_test_set_recipe_is_the_originals_360_epochs(self):
    config = self._recipe('imagenet_train_eval_360_epochs')
    self.assertEqual((config.train_examples, config.max_global_step),
                     (1281167, 112602))
    self.assertEqual((config.validation_examples, config.eval_split),
                     (0, 'test'))
    self.assertEqual(config.dropout_rate, 0.15)
    self.assertEqual(config.eval_batch_size, 256)

  def test_fashion_mnist_recipe_is_the_benchmarks(self):
    # bench/search_vs_random.py trains every architecture with it.
    config = runs.config(f'--flagfile={_CONFIGS}/fashion_mnist_train_eval.cfg',
                         '--model_dir=/tmp/unused', f'--indices={_ZEROS}')
    self.assertEqual((config.epochs, config.train_batch_size,
                      config.base_learning_rate), (2, 128, 0.5))


class ValidationExamplesTest(absltest.TestCase):

  def test_trains_on_the_search_split_and_evaluates_its_hold_out(self):
    data_dir = tempfile.mkdtemp()
    tiny_tfds.TinyImages(data_dir=data_dir).download_and_prepare()
    config = runs.config('--model_dir=/tmp/unused', f'--indices={_ZEROS}',
                         '--dataset=tiny_images', f'--data_dir={data_dir}',
                         '--nodownload', '--validation_examples=5',
                         '--eval_split=search_validation',
                         '--train_batch_size=15', '--preprocessing=none')
    self.assertEqual(config.train_examples, 15)
    index = lambda images: sorted(int(round(i[0, 0, 0] * 255)) for i in images)
    expected = {
        split: index(image for image, _ in datasets.eval_dataset(
            'tiny_images', split, 3, 1, data_dir=data_dir,
            validation_examples=5,
            preprocessing='none').unbatch().as_numpy_iterator())
        for split in (datasets.SEARCH_TRAIN, datasets.SEARCH_VALIDATION)}
    # One batch of 15 is one epoch of the training data.
    images, _ = next(iter(data.train_dataset(config, 15)))
    self.assertEqual(index(images.numpy()), expected[datasets.SEARCH_TRAIN])
    evaluated = [i for images, _ in data.eval_dataset(config, 4)
                 for i in images.numpy()]
    self.assertEqual(index(evaluated), expected[datasets.SEARCH_VALIDATION])
    with self.assertRaisesRegex(ValueError, 'digits has a fixed split'):
      runs.config('--model_dir=/tmp/unused', f'--indices={_ZEROS}',
                  '--validation_examples=5')
    # A train batch the 15 images cannot hold names the hold-out and the
    # largest batch they hold.
    with self.assertRaisesRegex(
        ValueError, r"^--train_batch_size=16 is more than the 15 training "
        r"examples of 'tiny_images' \(the train split less "
        r'--validation_examples=5\): use --train_batch_size=15 or less$'):
      dataclasses.replace(config, train_batch_size=16)


class ConfigTest(absltest.TestCase):

  def test_derived_fields(self):
    config = runs.config('--model_dir=x', f'--indices={_ZEROS}',
                         '--epochs=10',
                         '--train_batch_size=64')
    # digits: 1,078 + 359 training images; floor(1437 * 10 / 64) = 224.
    self.assertEqual(config.train_examples, 1437)
    self.assertEqual(config.max_global_step, 224)
    self.assertEqual(config.warmup_steps, int(0.025 * 224))
    self.assertAlmostEqual(config.learning_rate_scaled, 0.165 * 64 / 256)
    self.assertEqual(config.ssd, 'digits_search')
    self.assertEqual(config.indices, _ZEROS)
    self.assertEqual(config.export_dir, os.path.join('x', 'export'))
    self.assertEqual(config.dropout_rate, 0.0)
    self.assertEqual(config.path_dropout_rate, 0.0)

  def test_replace_recomputes_and_checks(self):
    config = runs.config('--model_dir=x', f'--indices={_ZEROS}',
                         '--max_steps=100')
    longer = dataclasses.replace(config, max_steps=200)
    self.assertEqual(longer.max_global_step, 200)
    self.assertEqual(longer.warmup_steps, 5)
    for field, value, message in (
        ('train_batch_size', 0,
         '--train_batch_size must be an integer >= 1, got 0'),
        ('label_smoothing', 1.0, r'--label_smoothing must be in \[0, 1\)'),
        ('indices', '0:1', 'expected 18 indices'),
        ('freeze_inherited', True, '--freeze_inherited needs'),
        ('job', dataclasses.replace(config.job, model_dir='x'),
         None),
        ('eval_split', 'nope', '--eval_split=.nope.: digits has the splits')):
      if message is None:  # A valid change.
        self.assertEqual(dataclasses.replace(config, **{field: value}).job,
                         value)
        continue
      with self.assertRaisesRegex(ValueError, message):
        dataclasses.replace(config, **{field: value})
    # The job checks itself the same way.
    for field, value, message in (
        ('model_dir', '', '--model_dir is required'),
        ('log_every_steps', 0, '--log_every_steps must be an integer >= 1'),
        ('use_tpu', True, '--use_tpu needs --tpu=NAME')):
      with self.assertRaisesRegex(ValueError, message):
        dataclasses.replace(config.job, **{field: value})

  def test_a_batch_or_length_that_gives_no_step_is_refused_with_one_that_does(
      self):
    config = runs.config('--model_dir=x', f'--indices={_ZEROS}',
                         '--max_steps=100')
    with self.assertRaisesRegex(
        ValueError, r"^--train_batch_size=2000 is more than the 1437 "
        r"training examples of 'digits': use --train_batch_size=1437 or "
        r'less$'):
      dataclasses.replace(config, train_batch_size=2000)
    self.assertEqual(
        dataclasses.replace(config, train_batch_size=1437).max_global_step,
        100)
    # 64 / 1437 = 0.04454 epochs make the first step.
    with self.assertRaisesRegex(
        ValueError, r'^--epochs=0.01 gives no training step at batch 64: use '
        r'--epochs=0.0446 or more, or give --max_steps$'):
      dataclasses.replace(config, max_steps=None, epochs=0.01)
    self.assertEqual(dataclasses.replace(config, max_steps=None,
                                         epochs=0.0446).max_global_step, 1)

  def test_bfloat16_modes_and_weight_decay_defaults(self):
    v3_like = ['--ssd=mobilenet_v3_large', '--indices=']
    for args, mode, weight_decay in (
        ([], 'false', 4e-5),  # The original mobile_train_eval's default.
        (['--use_bfloat16=true'], 'true', 3e-5),
        (['--use_bfloat16=ontpu', '--weight_decay=1e-4'], 'ontpu', 1e-4),
        (['--use_bfloat16=auto'], 'false', 4e-5),
        (['--use_bfloat16=auto'] + v3_like, 'ontpu', 3e-5)):
      if '--ssd=mobilenet_v3_large' not in args:
        args = args + [f'--indices={_ZEROS}']
      config = runs.config('--model_dir=x', *args)
      self.assertEqual((config.use_bfloat16, config.weight_decay),
                       (mode, weight_decay), args)
    with self.assertRaisesRegex(ValueError, 'use_bfloat16 must be one of'):
      dataclasses.replace(config, use_bfloat16='auto')

  def test_json_keys_are_flat_and_read_returns_the_config(self):
    model_dir = tempfile.mkdtemp()
    config = runs.config(f'--model_dir={model_dir}', f'--indices={_ZEROS}',
                         '--max_steps=30')
    self.assertFalse(configs.write_or_check(config_lib, config))
    stored = runs.read_json(os.path.join(model_dir, 'config.json'))
    self.assertEqual(set(stored),
                     {f.name for f in dataclasses.fields(config)} - {'job'} |
                     {f.name for f in dataclasses.fields(config.job)} |
                     set(config_lib.DERIVED_FIELDS))
    self.assertTrue(all(not isinstance(v, (dict, list))
                        for v in stored.values()))
    self.assertEqual(config_lib.TrainEvalConfig.read(model_dir), config)
    self.assertTrue(configs.write_or_check(
        config_lib, dataclasses.replace(config, max_steps=60)))
    self.assertEqual(
        config_lib.TrainEvalConfig.read(model_dir).max_global_step, 60)

  def test_a_run_without_a_field_is_refused_naming_it(self):
    model_dir = tempfile.mkdtemp()
    config = runs.config(f'--model_dir={model_dir}', f'--indices={_ZEROS}',
                         '--max_steps=30')
    configs.write_or_check(config_lib, config)
    path = os.path.join(model_dir, 'config.json')
    stored = runs.read_json(path)
    del stored['use_bfloat16']
    with open(path, 'w') as f:
      json.dump(stored, f)
    with self.assertRaisesRegex(ValueError, f"^{path} has no field "
                                "'use_bfloat16': written by another binary "
                                'or an earlier version; use a new '
                                '--model_dir$'):
      configs.write_or_check(config_lib, config)
    with self.assertRaisesRegex(ValueError, "has no field 'use_bfloat16'"):
      config_lib.TrainEvalConfig.read(model_dir)

  def test_deterministic_may_change_on_restart(self):
    model_dir = tempfile.mkdtemp()
    args = (f'--model_dir={model_dir}', f'--indices={_ZEROS}',
            '--max_steps=30')
    config = runs.config(*args)
    self.assertFalse(configs.write_or_check(config_lib, config))
    self.assertTrue(configs.write_or_check(
        config_lib, runs.config(*args, '--deterministic')))
    self.assertTrue(
        config_lib.TrainEvalConfig.read(model_dir).job.deterministic)
    with self.assertRaisesRegex(ValueError, "use_bfloat16 is 'false' there "
                                "and 'true' now"):
      configs.write_or_check(
          config_lib, dataclasses.replace(config, use_bfloat16='true'))

  def test_path_dropout_is_stored_and_checked_on_restart(self):
    model_dir = tempfile.mkdtemp()
    args = (f'--model_dir={model_dir}', f'--indices={_ZEROS}',
            '--max_steps=30')
    config = runs.config(*args, '--path_dropout_rate=0.2')
    self.assertEqual(config.path_dropout_rate, 0.2)
    configs.write_or_check(config_lib, config)
    path = os.path.join(model_dir, 'config.json')
    self.assertEqual(runs.read_json(path)['path_dropout_rate'], 0.2)
    self.assertEqual(config_lib.TrainEvalConfig.read(model_dir), config)
    self.assertTrue(configs.write_or_check(config_lib, config))
    with self.assertRaisesRegex(ValueError, 'path_dropout_rate is 0.2 there '
                                'and 0.0 now'):
      configs.write_or_check(config_lib, runs.config(*args))
    for value, message in (
        (1.0, r'--path_dropout_rate must be in \[0, 1\), got 1.0'),
        (float('nan'), '--path_dropout_rate must be a finite number')):
      with self.assertRaisesRegex(ValueError, message):
        dataclasses.replace(config, path_dropout_rate=value)
    # A reference model has no skippable layer: a positive rate is refused.
    with self.assertRaisesRegex(ValueError, '--ssd=mobilenet_v2 has no '
                                'skippable layer'):
      runs.config('--model_dir=x', '--ssd=mobilenet_v2', '--indices=',
                  '--path_dropout_rate=0.1')

  def test_read_refuses_a_bad_file(self):
    model_dir = tempfile.mkdtemp()
    with self.assertRaisesRegex(ValueError, 'No config.json'):
      config_lib.TrainEvalConfig.read(model_dir)
    config = runs.config(f'--model_dir={model_dir}', f'--indices={_ZEROS}',
                         '--max_steps=30')
    stored = {**config.to_json(), 'warmup_steps': 7}
    with open(os.path.join(model_dir, 'config.json'), 'w') as f:
      json.dump(stored, f)
    with self.assertRaisesRegex(ValueError, 'warmup_steps is 7'):
      config_lib.TrainEvalConfig.read(model_dir)
    del stored['seed']
    with open(os.path.join(model_dir, 'config.json'), 'w') as f:
      json.dump(stored, f)
    with self.assertRaisesRegex(ValueError, "has no field 'seed': not "
                                'written by this version of train_eval$'):
      config_lib.TrainEvalConfig.read(model_dir)

  def test_bad_input_is_refused(self):
    search = runs.search()
    root, indices = search.root, search.indices
    model_dir = os.path.join(root, 'bad')
    cases = [
        (['--ssd=no_such_space'], 'no_such_space'),
        (['--indices=1:x:2'], 'not a non-negative integer'),
        (['--indices=0:1'], 'expected 18 indices'),
        ([f'--architecture={root}/missing.json'], 'Cannot read'),
        ([f'--init_from_search={root}', f'--indices={indices}'],
         'holds no checkpoint'),
        (['--eval_only', f'--indices={indices}'], 'no checkpoint to'),
    ]
    bad_json = os.path.join(root, 'bad.json')
    with open(bad_json, 'w') as f:
      f.write('{"ssd": "digits_search", ')
    cases.append(([f'--architecture={bad_json}'], 'not valid JSON'))
    no_indices = os.path.join(root, 'no_indices.json')
    with open(no_indices, 'w') as f:
      json.dump({'ssd': 'digits_search'}, f)
    cases.append(([f'--architecture={no_indices}'], "has no field 'indices'"))
    for args, message in cases:
      with self.assertRaisesRegex(ValueError, message):
        runner.run(runs.config(f'--model_dir={model_dir}', *args))
    self.assertFalse(os.path.exists(os.path.join(model_dir, 'config.json')))


if __name__ == '__main__':
  absltest.main()
