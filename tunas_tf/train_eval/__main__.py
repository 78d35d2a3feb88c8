r"""Trains, evaluates and exports one architecture standalone.

Any architecture of a search space or a reference model (docs/train_eval.md),
e.g. the searched one, on the search's data that architecture.json records.
Every flag is checked before anything is written; a killed run resumes
(docs/restarting.md):

  python -m tunas_tf.train_eval --architecture=runs/demo/architecture.json \
      --model_dir=runs/demo_train --epochs=150
"""

from __future__ import annotations

if __name__ == '__main__':  # A binary: before anything imports TensorFlow.
  from tunas_tf.cli import process as _process  # pylint: disable=g-import-not-at-top
  _process.at_start()

import json
import os
from typing import Any, Dict, Optional

from absl import flags
from absl import logging

from tunas_tf.io import files
from tunas_tf.cli import flags as common_flags
from tunas_tf.data import datasets
from tunas_tf.graph import inherit
from tunas_tf.runtime import lifecycle
from tunas_tf.runtime import precision
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.search_space import mobile
from tunas_tf.train_eval import config as config_lib
from tunas_tf.train_eval import data as data_lib
from tunas_tf.train_eval import runner
from tunas_tf.train_eval.config import TrainEvalConfig

FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
  """Defines the train_eval flags (called by `__main__` and by tests only)."""
  f = flag_values
  # What to train.
  flags.DEFINE_string('architecture', None, 'An architecture.json of '
                      'tools/extract_architecture; gives --ssd and --indices '
                      "and, as defaults, its search's --dataset, "
                      '--image_size, --num_classes and --preprocessing: one '
                      'set to another value is refused (see '
                      '--allow_other_data).', flag_values=f)
  flags.DEFINE_boolean('allow_other_data', False, 'With --architecture: '
                       'train on other data than its search\'s (transfer): '
                       '--dataset, --image_size, --num_classes and '
                       '--preprocessing may differ from the file\'s, which '
                       'then gives defaults only for the search\'s own '
                       'dataset.', flag_values=f)
  common_flags.define_space_flags(
      f, "What to train; default the architecture file's, else "
      'digits_search.', default=None, indices_note='.')
  flags.DEFINE_float('filters_multiplier', 1.0, 'Scales every absolute '
                     'filter count (rounded to the space\'s filters_base).',
                     flag_values=f)
  # Where and on what.
  common_flags.define_data_flags(
      f, 'Output directory: checkpoints, events, config.json, metrics.json, '
      'export/. Required.', dataset_note=" With --architecture, default its "
      "search's (digits for a file that does not record it).")
  flags.DEFINE_string('eval_split', 'test', 'Evaluation split: for digits '
                      'one of search_train, search_validation, test; for '
                      'TFDS any split string (test, validation, '
                      'train[:10%], ...).', flag_values=f)
  flags.DEFINE_integer('validation_examples', None, 'TFDS datasets: train on '
                       'the train split less its first this many images (the '
                       "search's hold-out, which --eval_split=search_"
                       'validation then evaluates); default: all of it.',
                       flag_values=f)
  common_flags.define_seed_flag(f, 'the data order, dropout and the initial '
                                'weights')
  # Backend.
  common_flags.define_run_flags(f, iterations_per_loop=100,
                                save_checkpoints_steps=500, log_every_steps=100)
  _define_recipe_flags(f)
  # Inheritance and modes.
  flags.DEFINE_string('init_from_search', None, 'A search directory: start '
                      'from its latest checkpoint\'s supernet weights (the '
                      'chosen ops\' leading slices). Used only while '
                      '--model_dir has no checkpoint.', flag_values=f)
  flags.DEFINE_boolean('freeze_inherited', False, 'With --init_from_search, '
                       'train only the variables that were not inherited.',
                       flag_values=f)
  flags.DEFINE_boolean('eval_only', False, 'Evaluate without training: the '
                       'latest checkpoint or, without one and with '
                       '--init_from_search, the inherited weights with batch '
                       'norm on batch statistics (one-shot accuracy).',
                       flag_values=f)
  flags.DEFINE_boolean('export', True, 'Export a SavedModel, a TFLite and '
                       'an int8 TFLite file of the evaluated weights (the '
                       "int8 one's top-1 in metrics.json). They take uint8 "
                       'images of 0-255 pixels at --image_size (digits: '
                       'float32 in [0, 1]) and apply --preprocessing\'s value '
                       'transform themselves; resize or crop first.',
                       flag_values=f)
  flags.DEFINE_string('export_dir', None, 'Export directory; default '
                      'MODEL_DIR/export.', flag_values=f)


def _define_recipe_flags(f: flags.FlagValues) -> None:
  """The recipe's flags (batch, length, LR, L2, bfloat16); ImageNet's is the
  original's (`tunas/mobile_train_eval.py`)."""
  flags.DEFINE_integer('train_batch_size', 64, 'Global train batch (the '
                       'ImageNet recipe: 4096).', flag_values=f)
  flags.DEFINE_integer('eval_batch_size', 64, 'Eval batch (the ImageNet '
                       'recipe: 256).', flag_values=f)
  flags.DEFINE_float('epochs', 90.0, 'Training length in epochs of the full '
                     'training data (the schedules use --max_steps instead '
                     'when given).', flag_values=f)
  flags.DEFINE_integer('max_steps', None, 'Stop after this many steps; may '
                       'grow on restart (the schedule stretches).',
                       flag_values=f)
  flags.DEFINE_float('base_learning_rate', 0.165, 'Peak LR per 256 images; '
                     'the actual peak is this x train_batch_size / 256.',
                     flag_values=f)
  flags.DEFINE_float('warmup_steps_fraction', 0.025, 'Fraction of the steps '
                     'with a linear LR warm-up.', flag_values=f)
  flags.DEFINE_float('momentum', 0.9, 'RMSProp momentum.', flag_values=f)
  flags.DEFINE_float('weight_decay', None, 'L2 strength on the kernels '
                     '(classifier excluded), applied as wd/2 * sum(w^2); '
                     'default 4e-5, or 3e-5 with bfloat16.', flag_values=f)
  flags.DEFINE_enum('use_bfloat16', precision.FALSE, precision.BFLOAT16_MODES,
                    'bfloat16 compute (float32 variables, batch-norm '
                    'statistics, loss and export), as --use_bfloat16 of '
                    'train_search: ontpu on TPU only, true on every device '
                    'with bfloat16 images from the input pipeline, auto '
                    'ontpu for MobileNetV3-like spaces. Default false, as '
                    'the original mobile_train_eval.', flag_values=f)
  flags.DEFINE_float('dropout_rate', None, 'Dropout before the classifier; '
                     'default 0 below 150 epochs, else 0.25 for '
                     'MobileNetV3-like spaces and 0.15 for the others.',
                     flag_values=f)
  flags.DEFINE_float('path_dropout_rate', 0.0, 'Probability of dropping '
                     'each skippable layer (one whose OneOf in --ssd offers '
                     'Zero) that the architecture kept, per training step: '
                     'its residual branch is zeroed for the whole batch, or '
                     'scaled by 1 / (1 - rate) when kept. 0: off.',
                     flag_values=f)
  flags.DEFINE_float('label_smoothing', 0.1, 'Label smoothing of the '
                     'training cross-entropy.', flag_values=f)
  flags.DEFINE_float('moving_average_decay', 0.0, 'Decay of an exponential '
                     'moving average of the trained weights, evaluated and '
                     'exported in their place (0: off; e.g. 0.9999).',
                     flag_values=f)


def config_from_flags(flag_values: flags.FlagValues = FLAGS
                      ) -> TrainEvalConfig:
  """The `TrainEvalConfig` of the flags, defaults that depend on flags, a file
  or the data resolved; ValueError naming the flag for a bad setting."""
  f = flag_values
  common_flags.check_data_flags(f)  # Before reading any data.
  if f.export and f.export_dir:
    files.check_output_dir(f.export_dir, '--export_dir')
  ssd, indices, recorded = config_lib.resolve_architecture(
      f.architecture, f.ssd, f.indices)
  data = config_lib.use_search_data(
      config_lib.SearchData(f.dataset if f['dataset'].present else None,
                            f.image_size, f.num_classes, f.preprocessing),
      recorded, f.architecture, f.allow_other_data)
  validation_examples = f.validation_examples or 0
  info = datasets.dataset_info(data.dataset, f.data_dir, f.download,
                               validation_examples=validation_examples,
                               image_size=data.image_size)
  use_bfloat16 = precision.resolve(
      f.use_bfloat16, mobile.space_info(ssd).mobilenet_v3_like)
  init_from_search = f.init_from_search and files.abspath(f.init_from_search)
  if init_from_search:
    inherited = inherit.search_checkpoint(init_from_search, ssd)
    reason = resume_lib.unreadable_reason(inherited)
    if reason:
      raise ValueError(f'--init_from_search: {inherited} cannot be read '
                       f'({reason})')
  config = TrainEvalConfig(**common_flags.config_values(
      f, TrainEvalConfig, job=common_flags.job_config(
          f, dataset=data.dataset,
          num_classes=info.classifier_width(data.num_classes),
          image_size=info.image_size, num_channels=info.num_channels,
          preprocessing=data.preprocessing or info.default_preprocessing),
      ssd=ssd, indices=indices, use_bfloat16=use_bfloat16,
      weight_decay=(precision.default_weight_decay(use_bfloat16)
                    if f.weight_decay is None else f.weight_decay),
      dropout_rate=(config_lib.default_dropout_rate(ssd, f.epochs)
                    if f.dropout_rate is None else f.dropout_rate),
      init_from_search=init_from_search,
      export_dir=f.export_dir or os.path.join(f.model_dir,
                                              config_lib.EXPORT_SUBDIR),
      train_examples=info.split_sizes[datasets.SEARCH_TRAIN] if
      validation_examples else info.train_examples,
      validation_examples=validation_examples))
  data_lib.eval_examples(config)  # A split TFDS cannot read is refused.
  return config


def exported_line(metrics: Dict[str, Any]) -> Optional[str]:
  """'Exported: SavedModel DIR, TFLite FILE, int8 TFLite FILE, C header
  FILE' for a run that exported, else None."""
  export = metrics.get('export')
  if not export:
    return None
  return (f"Exported: SavedModel {export['saved_model']}, TFLite "
          f"{export['tflite']}, int8 TFLite {export['tflite_int8']}" + (
              f", C header {metrics['micro']['header']}"
              if 'micro' in metrics else ''))


def main(argv, flag_values: flags.FlagValues = FLAGS) -> int:
  """Trains, evaluates and exports (logging where), then prints the
  metrics; bad input exits with one line. Everything is checked before
  anything is written."""
  def body():
    metrics = runner.run(config_from_flags(flag_values))
    line = exported_line(metrics)
    if line:
      logging.info('%s', line)
    print(json.dumps(runner.printed_metrics(metrics)))
  return lifecycle.main('train_eval', argv, body)


if __name__ == '__main__':
  common_flags.run(main, define_flags)
