"""The bad-input table of tests/integration/bad_input_test.py: its rows.

Rows (name, binary, args, pattern of the one line the binary must exit
with, prepare) for each binary, the flag parser's rows, and what a row's
`prepare` may put under the row's fresh directory `root`.
"""

import hashlib
import json
import os
import shutil
import socket
from typing import Callable, Dict, List, Optional, Tuple
from unittest import mock

from absl import flags

from tests.testing import configs
from tests.testing import searches
from tests.testing import train_eval_runs
from tunas_tf import train_search
from tunas_tf.tools import compare_random
from tunas_tf.tools import describe_space
from tunas_tf.tools import extract_architecture
from tunas_tf.tools import fit_cost_model
from tunas_tf.tools import measure_latency
from tunas_tf.tools import random_architectures
from tunas_tf.tools import report
from tunas_tf.train_eval import __main__ as train_eval_main
from tunas_tf.train_eval import config as train_eval_config

BINARIES = {
    'train_search': train_search,
    'train_eval': train_eval_main,
    'extract_architecture': extract_architecture,
    'describe_space': describe_space,
    'random_architectures': random_architectures,
    'compare_random': compare_random,
    'fit_cost_model': fit_cost_model,
    'measure_latency': measure_latency,
    'report': report,
}
MODULES = {
    'train_search': 'tunas_tf.train_search',
    'train_eval': 'tunas_tf.train_eval',
    'extract_architecture': 'tunas_tf.tools.extract_architecture',
}
ZEROS = ':'.join(['0'] * 18)
SHORT = searches.SHORT_SEARCH_FLAGS
_RUN = '--model_dir={root}/run'
_UNSET = 'unset:'  # A row's `unset:--flag` drops the base rows' --flag.
_SEARCH = '--model_dir={root}/search'
_ARCHITECTURE = '--architecture={root}/search/architecture.json'


def snapshot(path: str) -> Optional[Dict[str, str]]:
  """{relative path: sha256 or 'dir'} of everything under `path`."""
  if not os.path.lexists(path):
    return None
  if not os.path.isdir(path):
    with open(path, 'rb') as f:
      return {'.': hashlib.sha256(f.read()).hexdigest()}
  out = {}
  for directory, names, file_names in os.walk(path):
    for name in names:
      out[os.path.relpath(os.path.join(directory, name), path)] = 'dir'
    for name in file_names:
      full = os.path.join(directory, name)
      with open(full, 'rb') as f:
        out[os.path.relpath(full, path)] = hashlib.sha256(f.read()).hexdigest()
  return out


# What a row's `prepare` may put under `root`.


def file_in_place(root: str) -> None:
  with open(os.path.join(root, 'afile'), 'w') as f:
    f.write('not a directory\n')


def finished_search(root: str) -> None:
  shutil.copytree(searches.finished_search(), os.path.join(root, 'search'))


def _truncate(path: str) -> None:
  with open(path, 'r+b') as f:
    f.truncate(100)


def _broken_search(root: str) -> None:
  """The finished search with every checkpoint truncated."""
  finished_search(root)
  for step in (0, 4, 8):
    _truncate(os.path.join(root, 'search',
                           f'model.ckpt-{step}.data-00000-of-00001'))


def _newest_truncated(root: str) -> None:
  finished_search(root)
  _truncate(os.path.join(root, 'search', 'model.ckpt-8.data-00000-of-00001'))


def _no_architecture(root: str) -> None:
  finished_search(root)
  os.remove(os.path.join(root, 'search', 'architecture.json'))


def _garbled_config(root: str) -> None:
  finished_search(root)
  with open(os.path.join(root, 'search', 'config.json'), 'w') as f:
    f.write('{"ssd": ')


def _train_eval_dir(root: str) -> None:
  """A train_eval directory: its config.json and an unreadable checkpoint."""
  model_dir = os.path.join(root, 'run')
  configs.write_or_check(train_eval_config, train_eval_runs.config(
      f'--model_dir={model_dir}', f'--indices={ZEROS}', '--max_steps=30'))
  with open(os.path.join(model_dir, 'checkpoint'), 'w') as f:
    f.write('model_checkpoint_path: "model.ckpt-5"\n')
  for suffix in ('index', 'data-00000-of-00001'):
    with open(os.path.join(model_dir, f'model.ckpt-5.{suffix}'), 'wb') as f:
      f.write(b'garbage')


def _latency_csv(root: str) -> None:
  """few.csv: one row; unmeasured.csv: 12 rows, no settings beside it."""
  for name, rows in (('few', 1), ('unmeasured', 12)):
    with open(os.path.join(root, f'{name}.csv'), 'w') as f:
      f.write('indices,latency_ms,spread_ms\n' + f'{ZEROS},1.0,0.1\n' * rows)


def _cost_models(root: str) -> None:
  """A fit that learned a constant (digits_search: 744 features), and
  fitted models measured at 28 px, in float32 and int8 at 8 px, and not
  saying how they were measured."""
  model = {'ssd': 'digits_search', 'units': 'ms', 'num_features': 744,
           'kernel': [0.0] * 744, 'bias': 0.0316}
  measured = {'ssd': 'digits_search', 'image_size': 8, 'num_classes': 10,
              'input_channels': 1, 'backend': 'tflite', 'device': 'a CPU'}
  varied = dict(model, kernel=[0.0] + [0.01] * 743)
  for name, document in (
      ('flat', dict(model, measured_with=measured)),
      ('at28', dict(varied, measured_with=dict(measured, image_size=28))),
      ('float32', dict(varied, measured_with=measured)),
      ('int8', dict(varied, measured_with=dict(measured, precision='int8'))),
      ('unmeasured', varied)):
    with open(os.path.join(root, f'{name}.json'), 'w') as f:
      json.dump(document, f)


def _int8_model_search(root: str) -> None:
  """The finished search (float32 latencies asked) with its cost model
  replaced by one measured in int8."""
  finished_search(root)
  _cost_models(root)
  path = os.path.join(root, 'search', 'config.json')
  with open(path) as f:
    config = json.load(f)
  config['cost_model'] = os.path.join(root, 'int8.json')
  with open(path, 'w') as f:
    json.dump(config, f)


def _both(*prepares: Callable[[str], None]) -> Callable[[str], None]:
  def prepare(root: str) -> None:
    for p in prepares:
      p(root)
  return prepare


# TPU refusals, the same for both binaries (`cloud_tpu`): the rows run
# offline (no network), so a name cannot be looked up.
_TPU_ROWS = [
    ('tpu_local', ['--tpu=local'], r'--tpu=local: this machine has no TPU '
     r'\(no /dev/accel\* or /dev/vfio device\)'),
    ('tpu_name_offline', ['--tpu=no-such-tpu'],
     r'--tpu=no-such-tpu: cannot find its project and zone \(.*\); give '
     r'--gcp_project and --tpu_zone$'),
    # No credentials here; with some, the API cannot be reached offline.
    ('tpu_name_no_api', ['--tpu=no-such-tpu', '--gcp_project=p',
                         '--tpu_zone=z'],
     r'--tpu=no-such-tpu: (no Google Cloud credentials|the Cloud TPU API '
     r'cannot look it up in project p, zone z)'),
    ('tpu_silent_address', ['--tpu=grpc://127.0.0.1:1'],
     r'--tpu=grpc://127.0.0.1:1: no TPU answers there \(.*\); check the '
     r'address'),
    ('tpu_malformed_address', ['--tpu=grpc://10.0.0.2'],
     r'--tpu=grpc://10.0.0.2 is not an address grpc://HOST:PORT'),
]


# (name, binary, args, pattern of the last line, prepare). Args may hold
# {root}. train_search rows run the short search's flags unless they give
# --max_steps or a model dir of their own.
_SEARCH_ROWS = [
    ('rl_lr', ['--rl_learning_rate=-1'], r'--rl_learning_rate must be >= 0, '
     r'got -1.0$'),
    ('target', ['--rl_cost_model_target=-1'],
     r'--rl_cost_model_target must be > 0, got -1.0$'),
    ('target_nan', ['--rl_cost_model_target=nan'],
     r'--rl_cost_model_target must be a finite number, got nan$'),
    ('exponent', ['--rl_cost_model_exponent=0.5'],
     r'--rl_cost_model_exponent must be <= 0, got 0.5$'),
    ('model_lr', ['--model_learning_rate=0'],
     r'--model_learning_rate must be > 0, got 0.0$'),
    ('momentum', ['--model_momentum=1.5'],
     r'--model_momentum must be in \[0, 1\), got 1.5$'),
    ('baseline_momentum', ['--rl_baseline_momentum=1'],
     r'--rl_baseline_momentum must be in \[0, 1\), got 1.0$'),
    ('weight_decay', ['--model_weight_decay=-1e-5'],
     r'--model_weight_decay must be >= 0'),
    ('entropy', ['--rl_entropy_regularization=-0.1'],
     r'--rl_entropy_regularization must be >= 0'),
    ('multiplier', ['--rl_batch_size_multiplier=0'],
     r'--rl_batch_size_multiplier must be > 0'),
    ('tiny_multiplier', ['--rl_batch_size_multiplier=0.001'],
     r'gives an empty validation batch at --train_batch_size=16: use '
     r'--rl_batch_size_multiplier=0.0625 or more$'),
    ('fraction', ['--rl_delay_steps_fraction=1.5'],
     r'--rl_delay_steps_fraction must be in \[0, 1\], got 1.5$'),
    ('fraction_nan', ['--model_warmup_steps_fraction=nan'],
     r'--model_warmup_steps_fraction must be a finite number'),
    ('warmup', ['--increase_ops_warmup_steps_fraction=0.75'],
     r'Op warm-up \(6 steps\) is longer than the RL delay \(4 steps\)'),
    ('epochs', ['--epochs=0', _UNSET + '--max_steps'],
     r'--epochs must be > 0, got 0.0$'),
    ('max_steps', ['--max_steps=0'],
     r'--max_steps must be an integer >= 1, got 0$'),
    ('batch', ['--train_batch_size=0'],
     r'--train_batch_size must be an integer >= 1'),
    # Both batches are too big: one line says so, with values that fit.
    ('batch_too_big', ['--train_batch_size=5000'],
     r"--train_batch_size=5000 is more than the 1078 search-train examples "
     r"of 'digits': use --train_batch_size=1078 or less; and the validation "
     r'batch .* is 20000, more than the 359 search-validation examples of '
     r"'digits': at --train_batch_size=1078 use --rl_batch_size_multiplier="
     r'0.333 or less$'),
    ('validation_too_big', ['--rl_batch_size_multiplier=30'],
     r'the validation batch .* is 480, more than the 359 search-validation '
     r"examples of 'digits': use --rl_batch_size_multiplier=22.4 or less$"),
    ('seed', ['--seed=-1'],
     r'--seed must be an integer in \[0, 2147483647\], got -1$'),
    ('cadence', ['--save_checkpoints_steps=0'],
     r'--save_checkpoints_steps must be an integer >= 1, got 0$'),
    ('keep', ['--keep_checkpoint_max=0'], r'--keep_checkpoint_max must be'),
    ('log_every', ['--log_every_steps=-5'], r'--log_every_steps must be'),
    ('loop', ['--tpu_iterations_per_loop=0'], r'--tpu_iterations_per_loop'),
    ('classes_zero', ['--num_classes=0'],
     r'--num_classes must be an integer >= 1, got 0$'),
    ('classes_few', ['--num_classes=5'], r'--num_classes=5 is fewer than'),
    ('image_size', ['--image_size=32'], r'--image_size: digits images are '
     r'8x8$'),
    ('image_size_zero', ['--image_size=0'], r'--image_size must be an integer'),
    ('validation_examples', ['--validation_examples=10'],
     r'--validation_examples: digits has a fixed split'),
    ('use_tpu', ['--use_tpu'], r'--use_tpu needs --tpu=NAME$'),
    ('replicas_zero', ['--replicas=0'],
     r'--replicas must be an integer >= 1, got 0$'),
    ('replicas_tpu', ['--replicas=2', '--tpu=my-tpu'],
     r'--replicas is for CPU/GPU'),
    ('cost_model', ['--cost_model={root}/no/such.json'], r'no/such.json'),
    ('flat_cost_model', ['--cost_model={root}/flat.json'],
     r'flat.json hardly varies over .digits_search.: 0.0316..0.0316 ms',
     _cost_models),
    ('cost_model_other_input', ['--cost_model={root}/at28.json'],
     r'at28.json was measured with image_size=28, not 8: measure and fit '
     r'one at this input \(tools/measure_latency --image_size=8\)$',
     _cost_models),
    ('cost_model_unmeasured', ['--cost_model={root}/unmeasured.json'],
     r'unmeasured.json does not say how its latencies were measured .*'
     r'\(image_size=8, num_classes=10, input_channels=1, precision=float32\)$',
     _cost_models),
    ('cost_model_int8', ['--cost_model={root}/int8.json'],
     r'int8.json was measured in int8, not float32: search int8 latencies '
     r'with --latency_precision=int8, or measure and fit one in float32 '
     r'\(tools/measure_latency --precision=float32\)$', _cost_models),
    ('cost_model_float32_for_int8', ['--cost_model={root}/float32.json',
                                     '--latency_precision=int8'],
     r'float32.json was measured in float32, not int8: search float32 ',
     _cost_models),
    ('released_for_int8', ['--ssd=proxylessnas_search', '--cost_model=released',
                           '--latency_precision=int8'],
     r"Cost model 'released' is not of int8 latencies: give a fitted one "
     r'measured in int8 \(tools/measure_latency --precision=int8\)$'),
    ('pairs_unordered', ['--rl_cost_model_target=300000,200000'],
     r'--rl_cost_model_target 200000 \(pair 1\) is not above its predecessor '
     r"300000 on cost model 'macs': give increasing targets at least 1.105x"),
    ('pairs_overlapping', ['--rl_cost_model_target=200000,205000'],
     r'--rl_cost_model_target 205000 \(pair 1\) has a band \(-/\+5%\) '
     r'overlapping its predecessor 200000'),
    ('pairs_uneven', ['--cost_model=macs,macs', '--rl_cost_model_target=1,2,3'],
     r'2 --cost_model values and 3 --rl_cost_model_target values: give as '
     r'many of each, or one of either for all$'),
    ('pair_other_input', ['--cost_model=macs,{root}/at28.json'],
     r'--cost_model .*at28.json \(pair 1\): .* image_size=28, not 8: ',
     _cost_models),
    ('no_model_dir', ['--model_dir='], r'--model_dir is required$'),
    ('model_dir_file', ['--model_dir={root}/afile'],
     r'--model_dir=.*/afile is a file, not a directory$', file_in_place),
    ('model_dir_under_file', ['--model_dir={root}/afile/run'],
     r'--model_dir=.*/afile/run cannot be created: .*/afile is a file$',
     file_in_place),
    ('unknown_dataset', ['--dataset=no_such_data', '--data_dir={root}/tfds'],
     r"Unknown dataset 'no_such_data'"),
    ('nodownload', ['--dataset=mnist', '--data_dir={root}/tfds',
                    '--nodownload'],
     r"'mnist' is not prepared .* downloads are off .*tfds build mnist"),
    ('offline', ['--dataset=mnist', '--data_dir={root}/tfds'],
     r"'mnist' is not prepared .* cannot be downloaded \(storage.googleapis"
     r'.com: .*\); prepare it where there is network with `tfds build mnist'),
    ('extra_argument', ['stray'], r"unexpected arguments \['stray'\]$"),
    # Restarts of the finished search.
    ('restart_max_steps', [_SEARCH, '--max_steps=10'],
     r'config.json was written by a different run: max_steps is 8 there and '
     r'10 now', finished_search),
    ('restart_epochs', [_SEARCH, '--epochs=3'],
     r'epochs is 48.0 there and 3.0 now', finished_search),
    ('restart_rl_lr', [_SEARCH, '--rl_learning_rate=0.5'],
     r'rl_learning_rate is 1.0 there and 0.5 now', finished_search),
    ('restart_seed', [_SEARCH, '--seed=1'], r'seed is 0 there and 1 now',
     finished_search),
    ('restart_other_pairs', [_SEARCH, '--rl_cost_model_target=220131,300000'],
     r"extra_pairs is \[\] there and \[\['macs', 300000.0\]\] now",
     finished_search),
    ('restart_space', [_SEARCH, '--ssd=cifar_search'],
     r'model_spec.json holds the search space of --ssd=digits_search, not '
     r'--ssd=cifar_search: resume with --ssd=digits_search, or use a new '
     r'--model_dir$', finished_search),
    ('restart_unreadable', [_SEARCH],
     r'No readable checkpoint in .*search \(model.ckpt-8: Read less bytes '
     r'.*model.ckpt-0: .*\); nothing was changed', _broken_search),
    ('restart_garbled_config', [_SEARCH], r'config.json is not valid JSON',
     _garbled_config),
    ('restart_preprocessing', [_SEARCH, '--preprocessing=cifar'],
     r"preprocessing is 'none' there and 'cifar' now", finished_search),
    ('preprocessing_digits', ['--preprocessing=imagenet'],
     r'--preprocessing=imagenet decodes stored images; digits are 8x8 arrays '
     r'\(use none or cifar\)$'),
    ('train_eval_dir', [], r'--model_dir=.*/run is a train_eval directory, '
     r'not a search directory$', _train_eval_dir),
]
_TRAIN_EVAL_ROWS = [
    ('momentum', ['--momentum=-3'], r'--momentum must be in \[0, 1\), got '
     r'-3.0$'),
    ('lr', ['--base_learning_rate=-1'],
     r'--base_learning_rate must be > 0, got -1.0$'),
    ('weight_decay', ['--weight_decay=nan'],
     r'--weight_decay must be a finite number, got nan$'),
    ('smoothing', ['--label_smoothing=1'], r'--label_smoothing must be in'),
    ('dropout', ['--dropout_rate=1'], r'--dropout_rate must be in'),
    ('path_dropout', ['--path_dropout_rate=1'],
     r'--path_dropout_rate must be in \[0, 1\), got 1.0$'),
    ('path_dropout_fixed', ['--ssd=mobilenet_v2', '--indices=',
                            '--path_dropout_rate=0.1'],
     r'--path_dropout_rate=0.1: --ssd=mobilenet_v2 has no skippable layer'),
    ('ema', ['--moving_average_decay=1'], r'--moving_average_decay must be'),
    ('warmup', ['--warmup_steps_fraction=1'], r'--warmup_steps_fraction'),
    ('epochs', ['--epochs=0'], r'--epochs must be > 0, got 0.0$'),
    ('max_steps', ['--max_steps=0'],
     r'--max_steps must be an integer >= 1, got 0$'),
    ('eval_batch', ['--eval_batch_size=0'], r'--eval_batch_size must be'),
    ('batch_too_big', ['--train_batch_size=5000'],
     r"--train_batch_size=5000 is more than the 1437 training examples of "
     r"'digits': use --train_batch_size=1437 or less$"),
    ('multiplier', ['--filters_multiplier=0'], r'--filters_multiplier must'),
    ('classes', ['--num_classes=0'], r'--num_classes must be an integer'),
    ('image_size', ['--image_size=32'], r'digits images are 8x8$'),
    ('seed', ['--seed=-1'], r'--seed must be an integer in'),
    ('indices', ['--indices=0:1'], r'expected 18 indices'),
    ('ssd', ['--ssd=no_such_space'], r"Unknown search space 'no_such_space'"),
    ('architecture', ['--architecture={root}/missing.json'], r'Cannot read'),
    # The searched architecture's data (digits, 10 classes) against others.
    ('architecture_dataset', [_ARCHITECTURE, '--dataset=mnist'],
     r"--dataset=mnist contradicts the search's dataset 'digits' in "
     r'.*/search/architecture.json; leave --dataset unset, or pass '
     r'--allow_other_data to train on other data$', finished_search),
    ('architecture_classes', [_ARCHITECTURE, '--num_classes=12'],
     r"--num_classes=12 contradicts the search's num_classes 10 in ",
     finished_search),
    ('allow_other_data', ['--allow_other_data'],
     r'--allow_other_data needs --architecture$'),
    ('split', ['--eval_split=nope'], r"--eval_split='nope': digits has"),
    ('freeze', ['--freeze_inherited'], r'--freeze_inherited needs'),
    ('eval_only', ['--eval_only'], r'no checkpoint to evaluate'),
    ('init_empty', ['--init_from_search={root}'], r'holds no checkpoint'),
    ('init_unreadable', ['--init_from_search={root}/search'],
     r'--init_from_search: .*model.ckpt-8 cannot be read \(Read less bytes',
     _newest_truncated),
    ('model_dir_file', ['--model_dir={root}/afile'], r'is a file, not a '
     'directory$', file_in_place),
    ('export_dir_file', ['--export_dir={root}/afile'],
     r'--export_dir=.*/afile is a file, not a directory$', file_in_place),
    ('offline', ['--dataset=mnist', '--data_dir={root}/tfds'],
     r"'mnist' is not prepared .* cannot be downloaded"),
    ('extra_argument', ['stray'], r"unexpected arguments \['stray'\]$"),
    ('preprocessing_digits', ['--preprocessing=imagenet'],
     r'--preprocessing=imagenet decodes stored images; digits are 8x8 arrays'),
    ('validation_examples', ['--validation_examples=5'],
     r'--validation_examples: digits has a fixed split \(leave it unset\)$'),
    ('restart_changed', ['--max_steps=30', '--base_learning_rate=0.5'],
     r'base_learning_rate is 0.165 there and 0.5 now', _train_eval_dir),
    ('restart_path_dropout', ['--max_steps=30', '--path_dropout_rate=0.2'],
     r'path_dropout_rate is 0.0 there and 0.2 now', _train_eval_dir),
    ('restart_unreadable', ['--max_steps=30'], r'No readable checkpoint in '
     r'.*run \(model.ckpt-5: .*sstable.*\); nothing was changed',
     _train_eval_dir),
    ('search_dir', [_SEARCH], r'--model_dir=.*/search is a search directory, '
     r'not a train_eval directory$', finished_search),
    ('init_train_eval_dir', ['--model_dir={root}/other',
                             '--init_from_search={root}/run'],
     r'--init_from_search=.*/run is a train_eval directory, not a search '
     r'directory$', _train_eval_dir),
]
_TOOL_ROWS = [
    ('extract_architecture', 'no_dir', [], r'--model_dir is required$'),
    ('extract_architecture', 'empty', ['--model_dir={root}'],
     r'No config.json in'),
    ('extract_architecture', 'checkpoint', [_SEARCH,
                                            '--checkpoint={root}/nothing'],
     r'Cannot read checkpoint', finished_search),
    ('extract_architecture', 'unreadable', [_SEARCH],
     r'model.ckpt-8 is unreadable \(Read less bytes .*\); pass '
     r'--checkpoint=.*model.ckpt-4', _newest_truncated),
    ('extract_architecture', 'output_dir', [_SEARCH, '--output={root}'],
     r'--output=.* is a directory, not a file$', finished_search),
    ('extract_architecture', 'train_eval_dir', ['--model_dir={root}/run'],
     r'/run is a train_eval directory, not a search directory$',
     _train_eval_dir),
    ('report', 'train_eval_dir', ['--model_dir={root}/run'],
     r'/run is a train_eval directory, not a search directory$',
     _train_eval_dir),
    ('compare_random', 'train_eval_dir', ['--search_dir={root}/run'],
     r'/run is a train_eval directory, not a search directory$',
     _train_eval_dir),
    ('extract_architecture', 'int8_model', [_SEARCH, '--measure_latency'],
     r'int8.json was measured in int8, not float32: ', _int8_model_search),
    ('extract_architecture', 'sram_kb', [_SEARCH, '--sram_kb=0'],
     r'--sram_kb must be > 0, got 0.0$', finished_search),
    ('extract_architecture', 'under_smallest_sram', [_SEARCH, '--sram_kb=1'],
     r'--sram_kb=1: no architecture of digits_search fits; at 8x8 the '
     r'smallest needs a [\d.]+ KB tensor arena \(TFLite Micro, estimated\)$',
     finished_search),
    ('extract_architecture', 'cost_tolerance', [_SEARCH,
                                                '--cost_tolerance=1.5'],
     r'--cost_tolerance must be in \(0, 1\), got 1.5$', finished_search),
    ('extract_architecture', 'argmax_band', [_SEARCH, '--argmax',
                                             '--cost_tolerance=0.1'],
     r'--argmax takes no cost band: drop --cost_tolerance$', finished_search),
    ('extract_architecture', 'oneshot', [_SEARCH, '--oneshot=-1'],
     r'--oneshot must be an integer >= 0, got -1$', finished_search),
    ('extract_architecture', 'argmax_oneshot', [_SEARCH, '--argmax',
                                                '--oneshot=5'],
     r'--oneshot draws in the cost band: drop --argmax$', finished_search),
    ('extract_architecture', 'target_outside', [_SEARCH, '--target=1000'],
     r'--target=1000 is outside the targets searched on cost model macs: '
     r'220,131 to 220,131$', finished_search),
    ('extract_architecture', 'target_new_model', [
        _SEARCH, '--target=1', '--cost_model={root}/float32.json'],
     r"--target=1 is outside the space's costs \(no policy searched on it\) "
     r'on cost model .*float32.json: ', _both(finished_search, _cost_models)),
    ('extract_architecture', 'target_other_input', [
        _SEARCH, '--target=1', '--cost_model={root}/at28.json'],
     r'--cost_model .*at28.json: .*measured with image_size=28, not 8',
     _both(finished_search, _cost_models)),
    ('extract_architecture', 'front_and_target', [
        _SEARCH, '--front', '--target=1'],
     r'--front and --target do not go together$', finished_search),
    ('extract_architecture', 'pair', [_SEARCH, '--pair=1'],
     r'--pair=1: the search has pairs 0 to 0$', finished_search),
    ('describe_space', 'indices', ['--indices=0:9'], r'expected 18 indices'),
    ('describe_space', 'output_file', ['--output_dir={root}/afile'],
     r'--output_dir=.*afile is a file, not a directory$', file_in_place),
    ('describe_space', 'seed', ['--seed=-1'],
     r'--seed must be an integer in \[0, 2147483647\], got -1$'),
    ('random_architectures', 'num', ['--num=0', '--output={root}/a.json'],
     r'num must be a positive int, got 0$'),
    ('random_architectures', 'band', ['--min_cost=3', '--max_cost=2',
                                      '--output={root}/a.json'],
     r'greater than max_cost'),
    ('random_architectures', 'cost_nan', ['--min_cost=nan',
                                          '--output={root}/a.json'],
     r'min_cost must be a finite number'),
    ('random_architectures', 'no_output', [], r'--output is required$'),
    ('random_architectures', 'seed', ['--seed=-2', '--output={root}/a.json'],
     r'--seed must be an integer in'),
    ('random_architectures', 'output_dir', ['--output={root}'],
     r'is a directory, not a file$'),
    ('random_architectures', 'cost_model', ['--cost_model={root}/x.json',
                                            '--output={root}/a.json'],
     r'x.json'),
    ('compare_random', 'no_dir', [], r'--search_dir is required$'),
    ('compare_random', 'empty', ['--search_dir={root}'], r'No config.json in'),
    ('compare_random', 'num', ['--search_dir={root}/search',
                               '--num_random=0'],
     r'--num_random must be > 0', finished_search),
    ('compare_random', 'tolerance', ['--search_dir={root}/search',
                                     '--cost_tolerance=2'],
     r'--cost_tolerance must be in \(0, 1\)', finished_search),
    ('compare_random', 'no_architecture', ['--search_dir={root}/search'],
     r'No architecture.json in .*run tunas_tf.tools.extract_architecture',
     _no_architecture),
    ('compare_random', 'output_file', ['--search_dir={root}/search',
                                       '--output_dir={root}/afile'],
     r'--output_dir=.*afile is a file', _both(finished_search, file_in_place)),
    ('fit_cost_model', 'no_csv', ['--output={root}/c.json'],
     r'--csv is required$'),
    ('fit_cost_model', 'missing_csv', ['--csv={root}/none.csv',
                                       '--output={root}/c.json'],
     r'none.csv'),
    ('fit_cost_model', 'few_rows', ['--csv={root}/few.csv',
                                    '--output={root}/c.json'],
     r'too few rows', _latency_csv),
    ('fit_cost_model', 'no_settings', ['--csv={root}/unmeasured.csv',
                                       '--output={root}/c.json'],
     r'unmeasured.csv has no unmeasured.csv.settings.json beside it: nothing '
     r'says how its rows were measured', _latency_csv),
    ('fit_cost_model', 'holdout', ['--csv={root}/few.csv',
                                   '--holdout_fraction=1.5',
                                   '--output={root}/c.json'],
     r'holdout_fraction must be in \(0, 1\)', _latency_csv),
    ('fit_cost_model', 'output_dir', ['--csv={root}/few.csv',
                                      '--output={root}'],
     r'is a directory, not a file$', _latency_csv),
    ('measure_latency', 'no_output', ['--num=1'], r'--output is required$'),
    ('measure_latency', 'neither', ['--output={root}/l.csv'],
     r'give one of --indices_file and --num \(or --block_table: every unit of the space\)$'),
    ('measure_latency', 'num', ['--num=0', '--output={root}/l.csv'],
     r'num must be a positive int'),
    ('measure_latency', 'backend', ['--num=1', '--backend=onnx',
                                    '--output={root}/l.csv'],
     r"Unknown backend 'onnx'"),
    ('measure_latency', 'runs', ['--num=1', '--runs=0',
                                 '--output={root}/l.csv'],
     r'runs must be an integer >= 1, got 0$'),
    ('measure_latency', 'indices_file', ['--indices_file={root}/none.json',
                                         '--output={root}/l.csv'],
     r'cannot read .*none.json'),
    ('measure_latency', 'output_dir', ['--num=1', '--output={root}'],
     r'is a directory, not a file$'),
]
# Rows the flag parser refuses (absl's two-line form names the flag).
FLAG_ROWS = [
    ('train_search', ['--ssd=no_such_space'], 'ssd'),
    ('train_search', ['--rl_reward_function=best'], 'rl_reward_function'),
    ('train_search', ['--model_learning_rate=fast'], 'model_learning_rate'),
    ('train_search', ['--no_such_flag=1'], 'no_such_flag'),
    ('train_eval', ['--max_steps=1.5'], 'max_steps'),
    ('train_search', ['--use_bfloat16=maybe'], 'use_bfloat16'),
    ('train_eval', ['--use_bfloat16=maybe'], 'use_bfloat16'),
    ('train_search', ['--preprocessing=jpeg'], 'preprocessing'),
    ('train_search', ['--latency_precision=int4'],
     '--latency_precision=int4: value should be one of'),
    ('measure_latency', ['--precision=int4'],
     '--precision=int4: value should be one of'),
    ('train_eval', ['--preprocessing=jpeg'], 'preprocessing'),
    ('describe_space', ['--ssd=no_such_space'], 'ssd'),
]


def _name(arg: str) -> str:
  return arg.split('=')[0].lstrip('-')


def _merge(base: List[str], args: List[str]) -> List[str]:
  """`base` without the flags `args` sets (or unsets with _UNSET), then args."""
  names = {_name(a.replace(_UNSET, '')) for a in args}
  return ([a for a in base if _name(a) not in names] +
          [a for a in args if not a.startswith(_UNSET)])


def rows() -> List[Tuple]:
  """The table as named_parameters: (name, binary, args, pattern, prepare)."""
  rows = []
  for name, args, pattern, *prepare in _SEARCH_ROWS + _TPU_ROWS:
    rows.append((f'train_search_{name}', 'train_search',
                 _merge([_RUN, *SHORT], args), pattern,
                 prepare[0] if prepare else None))
  for name, args, pattern, *prepare in _TRAIN_EVAL_ROWS + _TPU_ROWS:
    base = [_RUN]
    if not any(_name(a) in ('architecture', 'ssd') for a in args):
      base.append(f'--indices={ZEROS}')
    rows.append((f'train_eval_{name}', 'train_eval', _merge(base, args),
                 pattern, prepare[0] if prepare else None))
  for binary, name, args, pattern, *prepare in _TOOL_ROWS:
    rows.append((f'{binary}_{name}', binary, args, pattern,
                 prepare[0] if prepare else None))
  return rows


def parse(binary: str, args: List[str]):
  values = flags.FlagValues()
  BINARIES[binary].define_flags(values)
  return values, values([binary] + list(args))


OFFLINE = mock.patch.object(
    socket, 'create_connection',
    side_effect=OSError(101, 'Network is unreachable'))
