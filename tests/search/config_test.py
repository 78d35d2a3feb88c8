"""Tests for SearchConfig derivation, the recipe flagfiles and resume checks."""

import dataclasses
import json
import os
import tempfile

from absl import flags
from absl.testing import absltest
from absl.testing import parameterized

from tests.testing import configs
from tunas_tf import train_search
from tunas_tf.cost_model import linear
from tunas_tf.data import datasets
from tunas_tf.search import config as config_lib

_CONFIGS = os.path.join(os.path.dirname(train_search.__file__), 'configs')
_IMAGENET = datasets.DatasetInfo(
    'imagenet2012', 224, 3, 1000,
    # l2l_train = 1,281,167 - 50,046 (original: tunas/fast_imagenet_input.py).
    {'search_train': 1231121, 'search_validation': 50046, 'test': 50000})
_FASHION = datasets.DatasetInfo(
    'fashion_mnist_local', 28, 1, 10,
    {'search_train': 50000, 'search_validation': 10000, 'test': 10000})
_DIGITS = datasets.DatasetInfo(
    'digits', 8, 1, 10,
    {'search_train': 1078, 'search_validation': 359, 'test': 360})


def _flags(*args):
  values = flags.FlagValues()
  train_search.define_flags(values)
  values(['train_search'] + list(args))
  return values


class RecipeTest(parameterized.TestCase):

  def test_fashion_mnist_recipe_is_the_benchmarks(self):
    # bench/search_vs_random.py runs the search with this flagfile.
    values = _flags(
        f'--flagfile={os.path.join(_CONFIGS, "fashion_mnist_search.cfg")}',
        '--model_dir=/tmp/unused', '--dataset=fashion_mnist_local')
    config = train_search.config_from_flags(values, _FASHION)
    self.assertEqual(
        (config.ssd, config.cost_model, config.max_global_step,
         config.train_batch_size, config.rl_learning_rate,
         config.rl_cost_model_exponent, config.rl_entropy_regularization,
         config.rl_entropy_schedule),
        ('digits_search', 'macs', 3000, 64, 0.04, -0.2, 2.0, 'linear'))

  def test_microcontroller_recipe_binds_both_limits(self):
    # bench/search_vs_random.py --ssd=mcu_search adds this flagfile.
    values = _flags(
        f'--flagfile={os.path.join(_CONFIGS, "fashion_mnist_search.cfg")}',
        '--ssd=mcu_search',
        f'--flagfile={os.path.join(_CONFIGS, "fashion_mnist_mcu.cfg")}',
        '--model_dir=/tmp/unused', '--dataset=fashion_mnist_local')
    config = train_search.config_from_flags(values, _FASHION)
    self.assertEqual((config.ssd, config.job.image_size, config.sram_kb,
                      config.flash_kb, config.rl_learning_rate),
                     ('mcu_search', 28, 64.0, 256.0, 0.08))

  @parameterized.named_parameters(
      ('proxylessnas', 'proxylessnas_search', 84.0, 4e-5, 'false'),
      ('enlarged', 'proxylessnas_enlarged_search', 84.0, 4e-5, 'false'),
      ('v3_like', 'mobilenet_v3_like_search', 57.0, 3e-5, 'ontpu'),
  )
  def test_recipe_derives_reference_numbers(self, ssd, target, wd, bf16):
    values = _flags(f'--flagfile={os.path.join(_CONFIGS, ssd + ".cfg")}',
                    '--model_dir=/tmp/unused', '--tpu=grpc://10.0.0.1:8470')
    config = train_search.config_from_flags(values, _IMAGENET)
    self.assertEqual(config.ssd, ssd)
    self.assertEqual(config.max_global_step, 27050)
    self.assertEqual(config.rl_delay_steps, 6762)
    self.assertEqual(config.increase_ops_warmup_steps, 6762)
    self.assertEqual(config.increase_filters_warmup_steps, 6762)
    self.assertEqual(config.model_warmup_steps, 676)
    self.assertAlmostEqual(config.model_learning_rate_scaled, 2.64)
    self.assertAlmostEqual(config.rl_learning_rate_scaled, 0.0048)
    self.assertEqual(config.rl_cost_model_target, target)
    self.assertEqual(config.model_weight_decay, wd)
    self.assertEqual(config.use_bfloat16, bf16)
    self.assertEqual(config.job.num_classes, 1001)
    self.assertEqual(config.validation_batch_size, 16384)
    self.assertEqual(config.supernet_mode, 'masked')
    self.assertEqual(config.job.preprocessing, 'imagenet')
    self.assertTrue(config.job.use_tpu)

  def test_max_steps_overrides_epochs(self):
    values = _flags('--model_dir=/tmp/x', '--max_steps=40',
                    '--rl_cost_model_target=100000.0')
    config = train_search.config_from_flags(values, _DIGITS)
    self.assertEqual(config.max_global_step, 40)
    self.assertEqual(config.rl_delay_steps, 10)
    self.assertEqual(config.supernet_mode, 'sampled')
    self.assertFalse(config.job.use_tpu)

  @parameterized.named_parameters(
      ('ops_warmup', ['--increase_ops_warmup_steps_fraction=0.5'],
       r'Op warm-up \(20 steps\) is longer than the RL delay \(10 steps\)'),
      ('filters_warmup', ['--increase_filters_warmup_steps_fraction=0.3'],
       r'Filter warm-up \(12 steps\) is longer than the RL delay'),
      ('fraction', ['--rl_delay_steps_fraction=1.5'],
       r'--rl_delay_steps_fraction must be in \[0, 1\], got 1.5'),
      ('classes', ['--num_classes=5'], r'--num_classes=5 is fewer than the 10'),
      ('use_tpu', ['--use_tpu'], '--use_tpu needs --tpu=NAME'),
      ('sram_kb', ['--sram_kb=0'], r'^--sram_kb must be > 0, got 0.0$'),
      # digits_search's smallest architecture needs 7,760 bytes at 8 px.
      ('sram_kb_none_fits', ['--sram_kb=7.5'],
       r'^--sram_kb=7.5: no architecture of digits_search fits; at 8x8 the '
       r'smallest needs a 7.6 KB tensor arena \(TFLite Micro, estimated\)$'),
      ('flash_kb', ['--flash_kb=-1'], r'^--flash_kb must be > 0, got -1.0$'),
      # Its smallest int8 model (`cost_range` of the flash model): 15,884 B.
      ('flash_kb_none_fits', ['--flash_kb=15.5'],
       r'^--flash_kb=15.5: no architecture of digits_search fits; at 8x8 the '
       r'smallest needs a 15.5 KB int8 model \(flash, estimated\)$'),
      ('target_unit', ['--rl_cost_model_target=0.15'],
       r'^--rl_cost_model_target=0.15 is outside what digits_search can cost '
       r'under --cost_model=macs: 39,968 \(cheapest\) to 1,212,416 '
       r'\(dearest\) MACs; give a target in that range, in MACs$'),
  )
  def test_guards(self, extra, message):
    values = _flags('--model_dir=/tmp/x', '--max_steps=40',
                    '--rl_cost_model_target=100000.0', *extra)
    with self.assertRaisesRegex(ValueError, message):
      train_search.config_from_flags(values, _DIGITS)

  def test_an_sram_limit_on_a_space_without_an_arena_is_refused(self):
    values = _flags('--ssd=mobilenet_v3_like_search', '--model_dir=/tmp/x',
                    '--dataset=imagenet2012', '--sram_kb=256')
    with self.assertRaisesRegex(ValueError, r'^--sram_kb: memory estimate: '
                                'Activation swish6 is not supported'):
      train_search.config_from_flags(values, _IMAGENET)
    values = _flags('--ssd=mobilenet_v3_like_search', '--model_dir=/tmp/x',
                    '--dataset=imagenet2012', '--flash_kb=256')
    with self.assertRaisesRegex(ValueError, r'^--flash_kb: memory estimate: '
                                'Activation swish6 is not supported'):
      train_search.config_from_flags(values, _IMAGENET)
    values = _flags('--model_dir=/tmp/x', '--max_steps=40', '--sram_kb=7.58',
                    '--flash_kb=15.52')
    config = train_search.config_from_flags(values, _DIGITS)
    # digits_search's smallest arena and int8 model fit.
    self.assertEqual((config.sram_kb, config.flash_kb), (7.58, 15.52))
    self.assertEqual(config.limits, {'estimated_arena': 7.58 * 1024,
                                     'estimated_flash': 15.52 * 1024})

  def test_a_target_in_another_unit_is_refused_naming_the_range(self):
    values = _flags('--ssd=proxylessnas_search', '--dataset=imagenet2012',
                    '--model_dir=/tmp/x',
                    '--rl_cost_model_target=300')
    with self.assertRaisesRegex(ValueError, r'outside what proxylessnas_search '
                                r'can cost under --cost_model=released: '
                                r'30.9361 \(cheapest\) to 219.091 \(dearest\) '
                                r'ms'):
      train_search.config_from_flags(values, _IMAGENET)
    values['rl_cost_model_target'].value = 84.0  # In range: accepted.
    self.assertEqual(train_search.config_from_flags(
        values, _IMAGENET).rl_cost_model_target, 84.0)

  def test_model_dir_required(self):
    with self.assertRaisesRegex(ValueError, '--model_dir is required'):
      train_search.config_from_flags(_flags(), _DIGITS)

  def test_aliases(self):
    values = _flags('--checkpoint_dir=/tmp/a', '--dataset_dir=/tmp/b')
    self.assertEqual((values.model_dir, values.data_dir), ('/tmp/a', '/tmp/b'))


# 60 images of 16 x 16 in two classes (an imported image folder), 10% of
# them held out for the controller by default.
_SIXTY = datasets.DatasetInfo(
    'sixty', 16, 3, 2, {'search_train': 54, 'search_validation': 6,
                        'test': 4}, (16, 16))
_THOUSAND = datasets.DatasetInfo(
    'thousand', 16, 3, 2, {'search_train': 900, 'search_validation': 100,
                           'test': 100}, (16, 16))


class BatchAdviceTest(absltest.TestCase):
  """A batch that does not fit its split is refused naming the flags to
  change and values that fit, every such batch in one line; the advised
  values are accepted."""

  def _config(self, info, *args):
    values = _flags('--model_dir=/tmp/unused', f'--dataset={info.name}',
                    '--rl_cost_model_target=400000.0', *args)
    return train_search.config_from_flags(values, info)

  def _refusal(self, info, *args):
    with self.assertRaises(ValueError) as caught:
      self._config(info, *args)
    return str(caught.exception)

  def test_both_batches_of_the_defaults_are_refused_in_one_line(self):
    self.assertEqual(
        self._refusal(_SIXTY),
        "--train_batch_size=64 is more than the 54 search-train examples of "
        "'sixty': use --train_batch_size=54 or less; and the validation "
        'batch (--train_batch_size x --rl_batch_size_multiplier = 64 x 4.0) '
        "is 256, more than the 6 search-validation examples of 'sixty': at "
        '--train_batch_size=54 use --rl_batch_size_multiplier=0.111 or less')
    # round(54 x 0.111) = 6 images per validation batch.
    config = self._config(_SIXTY, '--train_batch_size=54',
                          '--rl_batch_size_multiplier=0.111')
    self.assertEqual((config.train_batch_size, config.validation_batch_size),
                     (54, 6))

  def test_a_validation_batch_alone_gets_a_multiplier_or_a_hold_out(self):
    self.assertEqual(
        self._refusal(_THOUSAND),
        'the validation batch (--train_batch_size x '
        '--rl_batch_size_multiplier = 64 x 4.0) is 256, more than the 100 '
        "search-validation examples of 'thousand': use "
        '--rl_batch_size_multiplier=1.56 or less, or hold out '
        '--validation_examples=256')
    # round(64 x 1.56) = 100.
    self.assertEqual(self._config(
        _THOUSAND, '--rl_batch_size_multiplier=1.56').validation_batch_size,
                     100)
    held_out = datasets.DatasetInfo(
        'thousand', 16, 3, 2, {'search_train': 744, 'search_validation': 256,
                               'test': 100}, (16, 16))
    self.assertEqual(self._config(held_out).validation_batch_size, 256)
    # digits has a fixed split: no hold-out is advised.
    self.assertRegex(
        self._refusal(_DIGITS, '--train_batch_size=16',
                      '--rl_batch_size_multiplier=30', '--max_steps=40'),
        r"examples of 'digits': use --rl_batch_size_multiplier=22.4 or less$")

  def test_the_advised_train_batch_splits_across_the_replicas(self):
    self.assertRegex(
        self._refusal(_THOUSAND, '--train_batch_size=2000', '--replicas=8'),
        r'^--train_batch_size=2000 is more than the 900 search-train '
        r"examples of 'thousand': use --train_batch_size=896 or less \(a "
        r'multiple of --replicas=8\); and the validation batch .* at '
        r'--train_batch_size=896 use --rl_batch_size_multiplier=0.111 or '
        r'less$')
    config = self._config(_THOUSAND, '--train_batch_size=896', '--replicas=8',
                          '--rl_batch_size_multiplier=0.111')
    self.assertEqual((config.train_batch_size, config.replicas), (896, 8))

  def test_an_oversized_train_batch_whose_fix_fits_both_is_refused_once(self):
    # The validation batch, 1000 x 0.105 = 105, is more than the 100
    # held out, but at the advised 900 it is round(94.5) = 94: only the
    # train batch needs to change.
    self.assertEqual(
        self._refusal(_THOUSAND, '--train_batch_size=1000',
                      '--rl_batch_size_multiplier=0.105'),
        "--train_batch_size=1000 is more than the 900 search-train examples "
        "of 'thousand': use --train_batch_size=900 or less")
    self.assertEqual(self._config(
        _THOUSAND, '--train_batch_size=900',
        '--rl_batch_size_multiplier=0.105').validation_batch_size, 94)

  def test_an_empty_validation_batch_and_no_steps_get_a_value(self):
    self.assertEqual(
        self._refusal(_THOUSAND, '--rl_batch_size_multiplier=0.001'),
        '--rl_batch_size_multiplier=0.001 gives an empty validation batch '
        'at --train_batch_size=64: use --rl_batch_size_multiplier=0.0157 or '
        'more')
    self.assertEqual(self._config(
        _THOUSAND, '--rl_batch_size_multiplier=0.0157').validation_batch_size,
                     1)
    self.assertEqual(
        self._refusal(_SIXTY, '--train_batch_size=54',
                      '--rl_batch_size_multiplier=0.1', '--epochs=0.5'),
        'The search has no steps: 54 examples x 0.5 epochs / batch 54: use '
        '--epochs=1.0 or more, or give --max_steps')


class WriteOrCheckTest(absltest.TestCase):

  def _config(self, model_dir, *extra):
    values = _flags(f'--model_dir={model_dir}', '--max_steps=40',
                    '--rl_cost_model_target=200000.0', *extra)
    return train_search.config_from_flags(values, _DIGITS)

  def test_first_write_then_resume(self):
    model_dir = tempfile.mkdtemp()
    self.assertFalse(configs.write_or_check(config_lib,
                                            self._config(model_dir), '{}'))
    with open(os.path.join(model_dir, 'config.json')) as f:
      stored = json.load(f)
    self.assertEqual(stored['rl_delay_steps'], 10)
    self.assertEqual(stored['rl_cost_model_target'], 200000.0)
    # How often to save may change; the stored value follows the new run.
    self.assertTrue(configs.write_or_check(
        config_lib, self._config(model_dir, '--save_checkpoints_steps=50'),
        '{}'))
    stored = config_lib.read(model_dir)
    self.assertIsInstance(stored, config_lib.SearchConfig)
    self.assertEqual((stored.max_steps, stored.rl_delay_steps), (40, 10))
    self.assertEqual(stored.job.save_checkpoints_steps, 50)
    self.assertEqual(stored.rl_cost_model_target, 200000.0)
    self.assertEqual(stored,
                     self._config(model_dir, '--save_checkpoints_steps=50'))
    # How long the search runs may not: its schedules would change.
    with open(os.path.join(model_dir, 'config.json'), 'rb') as f:
      before = f.read()
    with self.assertRaisesRegex(ValueError, 'max_steps is 40 there and 80 '
                                'now'):
      configs.write_or_check(
          config_lib, self._config(model_dir, '--max_steps=80'), '{}')
    with open(os.path.join(model_dir, 'config.json'), 'rb') as f:
      self.assertEqual(f.read(), before)

  def _stored_without(self, field):
    """A search's model dir, its config.json path and values, the file
    written without `field`."""
    model_dir = tempfile.mkdtemp()
    configs.write_or_check(config_lib, self._config(model_dir), '{}')
    path = os.path.join(model_dir, 'config.json')
    with open(path) as f:
      stored = json.load(f)
    del stored[field]
    with open(path, 'w') as f:
      json.dump(stored, f)
    return model_dir, path, stored

  def test_a_search_without_a_field_is_refused_naming_it(self):
    model_dir, path, stored = self._stored_without('replicas')
    with self.assertRaisesRegex(ValueError, f"^{path} has no field "
                                "'replicas': written by another binary or "
                                'an earlier version; use a new --model_dir$'):
      configs.write_or_check(config_lib, self._config(model_dir), '{}')
    with self.assertRaisesRegex(ValueError, f"^{path} has no field "
                                "'replicas': not written by this version of "
                                'train_search$'):
      config_lib.read(model_dir)
    with open(path, 'w') as f:
      json.dump({**stored, 'replicas': 1, 'no_such_field': 3}, f)
    with self.assertRaisesRegex(ValueError, r"unknown fields \['no_such_fie"):
      config_lib.read(model_dir)
    with open(path, 'w') as f:
      json.dump({**stored, 'replicas': 1, 'validation_batch_size': 3}, f)
    with self.assertRaisesRegex(ValueError, 'validation_batch_size is 3, but '
                                r'the other fields give \d+$'):
      config_lib.read(model_dir)

  def test_a_search_from_before_latency_precision_reads_and_resumes(self):
    # Written before int8 latencies existed: it ran on float32 ones.
    model_dir, _, _ = self._stored_without('latency_precision')
    self.assertEqual(config_lib.read(model_dir), self._config(model_dir))
    self.assertTrue(configs.write_or_check(config_lib,
                                           self._config(model_dir), '{}'))
    self.assertEqual(config_lib.read(model_dir).latency_precision, 'float32')

  def test_a_search_from_before_pairs_reads_and_resumes_as_one_pair(self):
    model_dir, _, _ = self._stored_without('extra_pairs')
    self.assertEqual(config_lib.read(model_dir), self._config(model_dir))
    self.assertEqual(config_lib.read(model_dir).pairs, (('macs', 2e5),))
    self.assertTrue(configs.write_or_check(config_lib,
                                           self._config(model_dir), '{}'))
    # Resumed with other pairs: refused, naming them, nothing written.
    with self.assertRaisesRegex(ValueError, r"extra_pairs is \[\] there and "
                                r"\[\['macs', 300000.0\]\] now"):
      configs.write_or_check(config_lib, self._config(
          model_dir, '--rl_cost_model_target=2e5,3e5'), '{}')

  def test_limits_are_stored_and_a_search_from_before_them_resumes(self):
    for name in ('sram_kb', 'flash_kb'):
      model_dir = tempfile.mkdtemp()
      config = self._config(model_dir, f'--{name}=20')
      configs.write_or_check(config_lib, config, '{}')
      self.assertEqual(getattr(config_lib.read(model_dir), name), 20.0)
      with self.assertRaisesRegex(ValueError, f'{name} is 20.0 there and 30'):
        configs.write_or_check(config_lib,
                               self._config(model_dir, f'--{name}=30'), '{}')
      # Written before the limit: none.
      model_dir, _, _ = self._stored_without(name)
      self.assertIsNone(getattr(config_lib.read(model_dir), name))
      self.assertTrue(configs.write_or_check(config_lib,
                                             self._config(model_dir), '{}'))

  def test_pairs_are_stored_and_read_back(self):
    model_dir = tempfile.mkdtemp()
    config = self._config(model_dir, '--rl_cost_model_target=2e5,3e5,4e5')
    self.assertEqual(config.pairs, (('macs', 2e5), ('macs', 3e5),
                                    ('macs', 4e5)))
    configs.write_or_check(config_lib, config, '{}')
    self.assertEqual(config_lib.read(model_dir), config)
    self.assertTrue(configs.write_or_check(config_lib, config, '{}'))
    alone = config.for_pair(2)
    self.assertEqual(alone.pairs, (('macs', 4e5),))
    self.assertEqual(alone.resolved_cost_model.kernel.tolist(),
                     config.resolved_cost_models[2].kernel.tolist())

  def test_deterministic_is_stored_and_may_change_on_restart(self):
    model_dir = tempfile.mkdtemp()
    config = self._config(model_dir, '--deterministic')
    self.assertTrue(config.job.deterministic)
    configs.write_or_check(config_lib, config, '{}')
    self.assertTrue(config_lib.read(model_dir).job.deterministic)
    # It changes the kernels, not the search: a restart may turn it off.
    self.assertTrue(configs.write_or_check(config_lib,
                                           self._config(model_dir), '{}'))
    self.assertFalse(config_lib.read(model_dir).job.deterministic)

  def test_mismatch_is_refused_naming_the_field(self):
    model_dir = tempfile.mkdtemp()
    configs.write_or_check(config_lib, self._config(model_dir), '{}')
    with self.assertRaisesRegex(
        ValueError, r'was written by a different run: rl_reward_function '
        r"is 'abs' there and 'mnas' now"):
      configs.write_or_check(
          config_lib, self._config(model_dir, '--rl_reward_function=mnas'),
          '{}')

  def test_other_search_space_is_refused(self):
    model_dir = tempfile.mkdtemp()
    configs.write_or_check(config_lib, self._config(model_dir), '{"a": 1}')
    with self.assertRaisesRegex(ValueError, 'holds a different search space'):
      configs.write_or_check(config_lib, self._config(model_dir), '{"a": 2}')

  def test_another_space_on_a_restart_is_refused_naming_the_stored_one(self):
    model_dir = tempfile.mkdtemp()
    configs.write_or_check(config_lib, self._config(model_dir), '{"a": 1}')
    with self.assertRaises(ValueError) as raised:
      configs.write_or_check(
          config_lib, self._config(model_dir, '--ssd=cifar_search'),
          '{"a": 2}')
    self.assertEqual(
        str(raised.exception),
        f'{model_dir}/model_spec.json holds the search space of '
        '--ssd=digits_search, not --ssd=cifar_search: resume with '
        '--ssd=digits_search, or use a new --model_dir')

  def test_read_missing_and_corrupt(self):
    model_dir = tempfile.mkdtemp()
    with self.assertRaisesRegex(ValueError, 'No config.json in'):
      config_lib.read(model_dir)
    path = os.path.join(model_dir, 'config.json')
    with open(path, 'w') as f:
      f.write('{')
    with self.assertRaisesRegex(ValueError, 'is not valid JSON'):
      config_lib.read(model_dir)
    with open(path, 'w') as f:
      f.write('[1]')
    with self.assertRaisesRegex(ValueError, 'does not hold a JSON object'):
      config_lib.read(model_dir)
    stored = self._config(model_dir).to_json()
    del stored['seed']
    with open(path, 'w') as f:
      json.dump(stored, f)
    with self.assertRaisesRegex(ValueError, "has no field 'seed'"):
      config_lib.read(model_dir)
    stored = self._config(model_dir).to_json()
    stored['supernet_mode'] = 'fast'
    with open(path, 'w') as f:
      json.dump(stored, f)
    with self.assertRaisesRegex(ValueError, "Unknown --supernet_mode 'fast'"):
      config_lib.read(model_dir)


class PairsTest(parameterized.TestCase):

  def _pairs(self, *args):
    return train_search.config_from_flags(
        _flags('--model_dir=/tmp/x', *args), _DIGITS).pairs

  def test_targets_and_models_pair_one_to_one_or_one_for_all(self):
    macs = linear.get_cost_model('digits_search', 'macs', image_size=8,
                                 num_classes=10, input_channels=1)
    default = linear.default_target(macs)
    self.assertEqual(self._pairs(), (('macs', default),))
    self.assertEqual(self._pairs('--rl_cost_model_target=1e5,2e5'),
                     (('macs', 1e5), ('macs', 2e5)))
    self.assertEqual(self._pairs('--cost_model=macs,macs',
                                 '--rl_cost_model_target=5e5,7e5'),
                     (('macs', 5e5), ('macs', 7e5)))
    low, high = linear.cost_range(macs)
    self.assertLess(low, default)
    self.assertLess(default, high)
    self.assertAlmostEqual(default, (low * high) ** 0.5)

  @parameterized.parameters(
      (['--rl_cost_model_target=2e5,1e5'], r'^--rl_cost_model_target 100000 '
       r"\(pair 1\) is not above its predecessor 200000 on cost model 'macs'"),
      (['--rl_cost_model_target=1e5,1.1e5'], r'110000 \(pair 1\) has a band'),
      (['--rl_cost_model_target=1e5,2e5,0'], r'must be > 0, got 0.0$'),
      # Each pair's target within what the space costs on its own model.
      (['--rl_cost_model_target=1e5,2e6'], r'^--rl_cost_model_target=2e\+06 '
       r'\(pair 1\) is outside what digits_search can cost under '
       r'--cost_model=macs: 39,968 \(cheapest\) to 1,212,416'),
      (['--cost_model=macs,macs'], r'pair 1\) is not above its predecessor'),
      (['--cost_model=macs,released'], r'^--cost_model released \(pair 1\): '
       r"No released cost model for search space 'digits_search'"),
      (['--cost_model=macs,macs', '--rl_cost_model_target=1,2,3'],
       r'^2 --cost_model values and 3 --rl_cost_model_target values'),
      (['--rl_cost_model_target=1,2', '--noenable_cost_model'],
       r'need the cost model: drop --noenable_cost_model$'))
  def test_bad_pairs_are_refused_in_one_line(self, args, message):
    with self.assertRaisesRegex(ValueError, message):
      self._pairs(*args)


class SearchConfigTest(parameterized.TestCase):

  def _config(self):
    values = _flags('--model_dir=/tmp/x', '--max_steps=40',
                    '--rl_cost_model_target=100000.0')
    return train_search.config_from_flags(values, _DIGITS)

  def test_derived_values_follow_replaced_fields(self):
    config = dataclasses.replace(self._config(), max_steps=None, epochs=2.0)
    # floor(1078 * 2 / 64) steps; a quarter of them before the RL starts.
    self.assertEqual(config.max_global_step, 33)
    self.assertEqual(config.rl_delay_steps, 8)
    self.assertEqual(config.validation_batch_size, 256)
    self.assertAlmostEqual(config.model_learning_rate_scaled, 0.25)
    stored = config.to_json()
    self.assertEqual((stored['max_global_step'], stored['rl_delay_steps']),
                     (33, 8))

  @parameterized.named_parameters(
      ('batch', dict(train_batch_size=0),
       '--train_batch_size must be an integer >= 1'),
      ('mode', dict(supernet_mode='x'), "Unknown --supernet_mode 'x'"),
      ('sampling', dict(supernet_sampling='x'),
       "Unknown --supernet_sampling 'x'"),
      ('entropy_schedule', dict(rl_entropy_schedule='x'),
       "Unknown --rl_entropy_schedule 'x'"),
      ('latency_precision', dict(latency_precision='int4'),
       "Unknown --latency_precision 'int4'"),
      ('max_steps', dict(max_steps=0), '--max_steps must be an integer >= 1'),
      ('no_steps', dict(max_steps=None, epochs=0.01),
       'The search has no steps'),
      ('fraction', dict(model_warmup_steps_fraction=-0.1),
       r'--model_warmup_steps_fraction must be in \[0, 1\]'),
      ('model_warmup', dict(model_warmup_steps_fraction=1.0),
       r'Model LR warm-up \(40 steps\) must be shorter'),
      ('cost_model', dict(cost_model='/no/such.json'), 'no/such.json'),
      ('released', dict(cost_model='released'),
       "No released cost model for search space 'digits_search'"),
      ('replicas', dict(replicas=0),
       '--replicas must be an integer >= 1, got 0'),
      ('replicas_batch', dict(replicas=5),
       '--train_batch_size=64 does not split across --replicas=5'),
  )
  def test_replace_validates(self, changes, message):
    with self.assertRaisesRegex(ValueError, message):
      dataclasses.replace(self._config(), **changes)

  def test_replicas_split_the_batch_off_tpu(self):
    config = self._config()
    self.assertEqual(config.replicas, 1)
    config = dataclasses.replace(config, replicas=4)  # 64 splits in 4.
    self.assertEqual(config.to_json()['replicas'], 4)
    with self.assertRaisesRegex(ValueError, 'on TPU the replica count comes '
                                'from the topology'):
      dataclasses.replace(config, job=dataclasses.replace(
          config.job, use_tpu=True, tpu='my-tpu'))

  def test_cost_model_is_resolved_once_for_the_input(self):
    config = self._config()
    model = config.resolved_cost_model
    self.assertIs(model, config.resolved_cost_model)
    self.assertEqual((model.ssd, model.kind), ('digits_search', 'macs'))
    wider = dataclasses.replace(
        config, job=dataclasses.replace(config.job, num_classes=20))
    # A wider classifier costs more multiply-adds.
    self.assertGreater(linear.default_target(wider.resolved_cost_model),
                       linear.default_target(model))


if __name__ == '__main__':
  absltest.main()
