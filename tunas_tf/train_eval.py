r"""Trains and evaluates one architecture standalone (DESIGN "After the search").

The network is a pruned architecture of a search space (`--ssd` and
`--indices`, or `--architecture=.../architecture.json` as written by
`tools/extract_architecture`), built with `graph.from_spec.graph_from_spec`
and run by `graph.model.Model` inside a TPUEstimator (`--tpu` on Cloud TPU,
`use_tpu=False` on CPU/GPU). The recipe is the original's
`mobile_train_eval` (reference/tunas.md §8.3): RMSProp (decay 0.9, momentum
0.9, epsilon 1.0, TF1 semantics), cosine decay with linear warm-up, softmax
cross-entropy with label smoothing 0.1, L2 (wd / 2) on the kernels, stateful
batch norm, dropout before the classifier, and optionally an exponential
moving average of the weights that is evaluated and exported in their place.

Train the searched architecture of a demo search on digits:

  python -m tunas_tf.train_search --model_dir=runs/demo
  python -m tunas_tf.tools.extract_architecture --model_dir=runs/demo
  python -m tunas_tf.train_eval --architecture=runs/demo/architecture.json \
      --model_dir=runs/demo_train --epochs=150

Score it without training (one-shot accuracy: the supernet's weights, batch
norm on batch statistics, as during the search):

  python -m tunas_tf.train_eval --architecture=runs/demo/architecture.json \
      --model_dir=runs/demo_oneshot --init_from_search=runs/demo --eval_only

A reference model on a TFDS dataset:

  python -m tunas_tf.train_eval --ssd=mobilenet_v2 --indices= \
      --dataset=imagenet2012 --data_dir=gs://bucket/tfds --tpu=my-tpu \
      --model_dir=gs://bucket/mnv2 --train_batch_size=4096 --epochs=360 \
      --eval_split=validation --num_classes=1001 --image_size=224

The model directory receives `config.json` (checked on restart: a killed run
started again with the same flags resumes from its last checkpoint;
`--max_steps`, `--eval_only`, `--tpu` and other settings that only say how
long or where to run may change), checkpoints, TensorBoard events (training
scalars; the eval summaries under `eval/`), `metrics.json` (`top1`, `top5`,
`loss`, `params`, `macs`, `train_images_per_sec`, `eval_images_per_sec`,
`global_step`) and, unless `--noexport`, `export/saved_model/` (serving
signature: float32 [N, H, W, C] images -> `logits`) and `export/model.tflite`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from absl import app
from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from tunas_tf import backend
from tunas_tf import flags as common_flags
from tunas_tf import files
from tunas_tf.cost_model import macs
from tunas_tf.data import datasets
from tunas_tf.graph import from_spec
from tunas_tf.graph import inherit
from tunas_tf.graph import model as model_lib
from tunas_tf.layers import schedules
from tunas_tf.search import steps
from tunas_tf.search_space import filters as filters_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops as spec_ops
from tunas_tf.search_space import schema

FLAGS = flags.FLAGS

CONFIG_FILE = 'config.json'
METRICS_FILE = 'metrics.json'
EXPORT_SUBDIR = 'export'
SAVED_MODEL_SUBDIR = 'saved_model'
TFLITE_FILE = 'model.tflite'
EMA_SUFFIX = 'ExponentialMovingAverage'
METRIC_KEYS = ('top1', 'top5', 'loss', 'params', 'macs',
               'train_images_per_sec', 'eval_images_per_sec', 'global_step')

# Fields that only say how long, where or how to report a run: they may change
# on restart. The warm-up length follows the run length, as in the search.
RUN_ONLY_FIELDS = frozenset({
    'model_dir', 'tpu', 'tpu_zone', 'gcp_project', 'use_tpu', 'max_steps',
    'max_global_step', 'warmup_steps', 'eval_only', 'data_dir', 'download',
    'save_checkpoints_steps', 'keep_checkpoint_max', 'log_every_steps',
    'tpu_iterations_per_loop', 'eval_split', 'eval_batch_size', 'export',
    'export_dir',
})
DERIVED_FIELDS = frozenset({'train_examples', 'max_global_step',
                            'warmup_steps', 'learning_rate_scaled',
                            'num_channels'})


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
  """Defines the train_eval flags (called by `__main__` and by tests only)."""
  f = flag_values
  # What to train.
  flags.DEFINE_string('architecture', None, 'An architecture.json of '
                      'tools/extract_architecture; gives --ssd and --indices.',
                      flag_values=f)
  flags.DEFINE_string('ssd', None, 'Search space or reference model; default '
                      'digits_search (or the architecture file\'s).',
                      flag_values=f)
  flags.DEFINE_string('indices', None, 'Colon-separated choice per OneOf of '
                      '--ssd, in traversal order (empty for a reference '
                      'model).', flag_values=f)
  flags.DEFINE_float('filters_multiplier', 1.0, 'Scales every absolute '
                     'filter count (rounded to the space\'s filters_base).',
                     flag_values=f)
  # Where and on what.
  common_flags.define_data_flags(f, 'Output directory: checkpoints, events, '
                            'config.json, metrics.json, export/. Required.')
  flags.DEFINE_string('eval_split', 'test', 'Evaluation split: for digits '
                      'one of search_train, search_validation, test; for '
                      'TFDS any split string (test, validation, '
                      'train[:10%], ...).', flag_values=f)
  flags.DEFINE_integer('seed', 0, 'Seed of the data order, dropout and the '
                       'initial weights.', flag_values=f)
  # Backend.
  common_flags.define_tpu_flags(f, iterations_per_loop=100)
  # Recipe (reference/tunas.md §8.3).
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
  flags.DEFINE_float('weight_decay', 4e-5, 'L2 strength on the kernels '
                     '(classifier excluded), applied as wd/2 * sum(w^2).',
                     flag_values=f)
  flags.DEFINE_float('dropout_rate', None, 'Dropout before the classifier; '
                     'default 0 below 150 epochs, else 0.25 for '
                     'MobileNetV3-like spaces and 0.15 for the others.',
                     flag_values=f)
  flags.DEFINE_float('label_smoothing', 0.1, 'Label smoothing of the '
                     'training cross-entropy.', flag_values=f)
  flags.DEFINE_float('moving_average_decay', 0.0, 'Decay of an exponential '
                     'moving average of the trained weights, evaluated and '
                     'exported in their place (0: off; e.g. 0.9999).',
                     flag_values=f)
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
  flags.DEFINE_boolean('export', True, 'Export a SavedModel and a TFLite '
                       'file of the evaluated weights.', flag_values=f)
  flags.DEFINE_string('export_dir', None, 'Export directory; default '
                      'MODEL_DIR/export.', flag_values=f)
  flags.DEFINE_integer('save_checkpoints_steps', 500, 'Checkpoint cadence.',
                       flag_values=f)
  flags.DEFINE_integer('keep_checkpoint_max', 3, 'Checkpoints kept.',
                       flag_values=f)
  flags.DEFINE_integer('log_every_steps', 100, 'Progress log cadence.',
                       flag_values=f)


# -----------------------------------------------------------------------------
# Config.


@dataclasses.dataclass(frozen=True)
class TrainEvalConfig:
  """All settings of one standalone run (flag names; see `define_flags`).

  Derived fields: `num_channels` (of the dataset), `train_examples` (size of
  the full training data), `max_global_step` (`max_steps`, or
  floor(train_examples * epochs / train_batch_size)), `warmup_steps`
  (int(warmup_steps_fraction * max_global_step)), `learning_rate_scaled`
  (base_learning_rate * train_batch_size / 256).
  """
  model_dir: str
  ssd: str
  indices: str
  filters_multiplier: float
  dataset: str
  data_dir: Optional[str]
  download: bool
  num_classes: int
  image_size: int
  num_channels: int
  eval_split: str
  seed: int
  use_tpu: bool
  tpu: str
  tpu_zone: Optional[str]
  gcp_project: Optional[str]
  tpu_iterations_per_loop: int
  train_batch_size: int
  eval_batch_size: int
  epochs: float
  max_steps: Optional[int]
  base_learning_rate: float
  warmup_steps_fraction: float
  momentum: float
  weight_decay: float
  dropout_rate: float
  label_smoothing: float
  moving_average_decay: float
  init_from_search: Optional[str]
  freeze_inherited: bool
  eval_only: bool
  export: bool
  export_dir: str
  save_checkpoints_steps: int
  keep_checkpoint_max: int
  log_every_steps: int
  train_examples: int
  max_global_step: int
  warmup_steps: int
  learning_rate_scaled: float

  def to_json(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)


def read_architecture_file(path: str) -> Tuple[str, str]:
  """(ssd, indices) of an `architecture.json`.

  Raises:
    ValueError: for a missing, unreadable or malformed file.
  """
  try:
    with tf.io.gfile.GFile(path) as f:
      document = json.loads(f.read())
  except tf.errors.NotFoundError:
    raise ValueError(f'Cannot read --architecture={path}: no such '
                     'file') from None
  except (tf.errors.OpError, UnicodeDecodeError) as e:
    raise ValueError(f'Cannot read --architecture={path}: '
                     f'{str(e).splitlines()[0]}') from None
  except json.JSONDecodeError as e:
    raise ValueError(f'--architecture={path} is not valid JSON: {e}') from None
  if not isinstance(document, dict):
    raise ValueError(f'--architecture={path} is not a JSON object')
  for key in ('ssd', 'indices'):
    if not isinstance(document.get(key), str):
      raise ValueError(f'--architecture={path} has no string {key!r}')
  return document['ssd'], document['indices']


def scale_architecture(spec: spec_ops.ConvTowerSpec,
                       multiplier: float) -> spec_ops.ConvTowerSpec:
  """Scales every absolute width of a pruned spec (reference §8.3).

  Block widths and absolute expansion widths become
  `filters.scale_filters(n, multiplier, spec.filters_base)`; relative widths
  (`FilterMultiplier`) follow their inputs.
  """
  if multiplier == 1.0:
    return spec
  base = spec.filters_base

  def scale(value):
    if isinstance(value, bool) or not isinstance(value, int):
      return value
    return filters_lib.scale_filters(value, multiplier, base)

  def layer(value):
    if isinstance(value, spec_ops.ResidualSpec):
      return dataclasses.replace(value, layer=layer(value.layer))
    if isinstance(value, spec_ops.DepthwiseBottleneckSpec):
      return dataclasses.replace(
          value, expansion_filters=scale(value.expansion_filters))
    return value

  blocks = tuple(dataclasses.replace(b, filters=scale(b.filters),
                                     layers=tuple(layer(l) for l in b.layers))
                 for b in spec.blocks)
  return dataclasses.replace(spec, blocks=blocks)


def build_architecture(config: TrainEvalConfig) -> spec_ops.ConvTowerSpec:
  """The pruned (and scaled) architecture of `config`."""
  space = mobile.get_search_space(config.ssd)
  try:
    arch = schema.prune(space, config.indices)
  except ValueError as e:
    raise ValueError(f'--indices={config.indices!r} for --ssd={config.ssd}: '
                     f'{e}') from None
  return scale_architecture(arch, config.filters_multiplier)


def _dataset_facts(name: str, data_dir: Optional[str], download: bool
                   ) -> Tuple[int, int, int, int]:
  """(image_size, num_channels, num_classes, train_examples) of a dataset."""
  if name == datasets.DIGITS:
    info = datasets.dataset_info(name)
    sizes = info.split_sizes
    return (info.image_size, info.num_channels, info.num_classes,
            sizes[datasets.SEARCH_TRAIN] + sizes[datasets.SEARCH_VALIDATION])
  builder = datasets.tfds_builder(name, data_dir, download)
  info = builder.info
  if 'image' not in info.features or 'label' not in info.features:
    raise ValueError(f'Dataset {name!r} is not an image-classification '
                     'dataset (needs "image" and "label" features)')
  if 'train' not in info.splits:
    raise ValueError(f'Dataset {name!r} has no "train" split; it has '
                     f'{sorted(info.splits.keys())}')
  shape = info.features['image'].shape
  return (shape[0], shape[-1], info.features['label'].num_classes,
          info.splits['train'].num_examples)


def _positive(value, name):
  if value is None or value <= 0:
    raise ValueError(f'--{name} must be positive, got {value!r}')
  return value


def config_from_flags(flag_values: flags.FlagValues = FLAGS
                      ) -> TrainEvalConfig:
  """Resolves the flags into a frozen `TrainEvalConfig`.

  Raises:
    ValueError: for missing, malformed or inconsistent settings (the message
      names the flag).
  """
  f = flag_values
  if not f.model_dir:
    raise ValueError('--model_dir is required')
  ssd, indices = f.ssd, f.indices
  if f.architecture:
    file_ssd, file_indices = read_architecture_file(f.architecture)
    if ssd is not None and ssd != file_ssd:
      raise ValueError(f'--ssd={ssd} disagrees with --architecture '
                       f'({file_ssd}); give one of them')
    if indices is not None and indices != file_indices:
      raise ValueError('--indices disagrees with --architecture; give one '
                       'of them')
    ssd, indices = file_ssd, file_indices
  ssd = ssd or 'digits_search'
  space = mobile.get_search_space(ssd)  # Unknown names raise.
  try:
    parsed = schema.parse_indices(indices or '')
    schema.prune(space, parsed)
  except ValueError as e:
    raise ValueError(f'--indices={indices or ""!r} for --ssd={ssd}: '
                     f'{e}') from None
  indices = ':'.join(str(i) for i in parsed)
  use_tpu = common_flags.resolve_use_tpu(f.tpu, f.use_tpu)
  if f.filters_multiplier <= 0:
    raise ValueError('--filters_multiplier must be positive, got '
                     f'{f.filters_multiplier}')
  for name in ('train_batch_size', 'eval_batch_size', 'save_checkpoints_steps',
               'keep_checkpoint_max', 'tpu_iterations_per_loop',
               'log_every_steps'):
    _positive(getattr(f, name), name)
  if f.max_steps is not None:
    _positive(f.max_steps, 'max_steps')
  else:
    _positive(f.epochs, 'epochs')
  if not 0.0 <= f.warmup_steps_fraction < 1.0:
    raise ValueError('--warmup_steps_fraction must be in [0, 1), got '
                     f'{f.warmup_steps_fraction}')
  if not 0.0 <= f.moving_average_decay < 1.0:
    raise ValueError('--moving_average_decay must be in [0, 1), got '
                     f'{f.moving_average_decay}')
  if not 0.0 <= f.label_smoothing < 1.0:
    raise ValueError(f'--label_smoothing must be in [0, 1), got '
                     f'{f.label_smoothing}')
  if f.weight_decay < 0:
    raise ValueError(f'--weight_decay must be >= 0, got {f.weight_decay}')
  dropout = f.dropout_rate
  if dropout is None:
    if f.epochs < 150:
      dropout = 0.0
    else:
      dropout = 0.25 if ssd in mobile.MOBILENET_V3_LIKE_SPACES else 0.15
  if not 0.0 <= dropout < 1.0:
    raise ValueError(f'--dropout_rate must be in [0, 1), got {dropout}')
  if f.freeze_inherited and not f.init_from_search:
    raise ValueError('--freeze_inherited needs --init_from_search')
  init_from_search = None
  if f.init_from_search:
    init_from_search = os.path.abspath(f.init_from_search)
    search_checkpoint(init_from_search, ssd)  # Validates.
  if f.dataset == datasets.DIGITS and f.eval_split not in datasets.SPLITS:
    raise ValueError(f'--eval_split={f.eval_split!r}: digits has the splits '
                     f'{datasets.SPLITS}')
  image_size, channels, classes, train_examples = _dataset_facts(
      f.dataset, f.data_dir, f.download)
  num_classes = f.num_classes or classes
  if num_classes < classes:
    raise ValueError(f'--num_classes={num_classes} is fewer than the '
                     f'{classes} labels of {f.dataset!r}')
  if f.image_size is not None:
    if f.dataset == datasets.DIGITS and f.image_size != image_size:
      raise ValueError(f'--image_size: digits images are {image_size}x'
                       f'{image_size}')
    image_size = _positive(f.image_size, 'image_size')
  max_global_step = (f.max_steps if f.max_steps is not None else
                     int(math.floor(train_examples * f.epochs /
                                    f.train_batch_size)))
  if max_global_step <= 0:
    raise ValueError(f'--epochs={f.epochs} gives no training step at batch '
                     f'{f.train_batch_size}')
  warmup_steps = int(f.warmup_steps_fraction * max_global_step)
  model_dir = f.model_dir
  return TrainEvalConfig(
      model_dir=model_dir, ssd=ssd, indices=indices,
      filters_multiplier=float(f.filters_multiplier), dataset=f.dataset,
      data_dir=f.data_dir, download=f.download, num_classes=num_classes,
      image_size=image_size, num_channels=channels, eval_split=f.eval_split,
      seed=f.seed, use_tpu=use_tpu, tpu=f.tpu, tpu_zone=f.tpu_zone,
      gcp_project=f.gcp_project,
      tpu_iterations_per_loop=f.tpu_iterations_per_loop,
      train_batch_size=f.train_batch_size, eval_batch_size=f.eval_batch_size,
      epochs=float(f.epochs), max_steps=f.max_steps,
      base_learning_rate=float(f.base_learning_rate),
      warmup_steps_fraction=float(f.warmup_steps_fraction),
      momentum=float(f.momentum), weight_decay=float(f.weight_decay),
      dropout_rate=float(dropout), label_smoothing=float(f.label_smoothing),
      moving_average_decay=float(f.moving_average_decay),
      init_from_search=init_from_search,
      freeze_inherited=bool(f.freeze_inherited), eval_only=bool(f.eval_only),
      export=bool(f.export),
      export_dir=f.export_dir or os.path.join(model_dir, EXPORT_SUBDIR),
      save_checkpoints_steps=f.save_checkpoints_steps,
      keep_checkpoint_max=f.keep_checkpoint_max,
      log_every_steps=f.log_every_steps, train_examples=train_examples,
      max_global_step=max_global_step, warmup_steps=warmup_steps,
      learning_rate_scaled=(float(f.base_learning_rate) *
                            f.train_batch_size / 256.0))


def write_or_check_config(config: TrainEvalConfig) -> bool:
  """Writes `config.json`, or checks it against the stored one on restart.

  Returns:
    True when the directory already held a run's config.

  Raises:
    ValueError: naming the first field that differs outside
      `RUN_ONLY_FIELDS` (flag-backed fields before derived ones).
  """
  return files.write_or_check_config(
      os.path.join(config.model_dir, CONFIG_FILE), config.to_json(),
      RUN_ONLY_FIELDS, DERIVED_FIELDS)


# -----------------------------------------------------------------------------
# Inheritance from a search.


def search_checkpoint(search_dir: str, ssd: Optional[str] = None) -> str:
  """The latest checkpoint of a search directory.

  Raises:
    ValueError: if there is none, or the search's config.json names another
      search space than `ssd`.
  """
  if not tf.io.gfile.isdir(search_dir):
    raise ValueError(f'--init_from_search={search_dir}: no such directory')
  checkpoint = tf.train.latest_checkpoint(search_dir)
  if checkpoint is None:
    raise ValueError(f'--init_from_search={search_dir} holds no checkpoint')
  config_path = os.path.join(search_dir, CONFIG_FILE)
  if ssd is not None and tf.io.gfile.exists(config_path):
    with tf.io.gfile.GFile(config_path) as f:
      try:
        search_ssd = json.load(f).get('ssd')
      except (json.JSONDecodeError, AttributeError):
        search_ssd = None
    if search_ssd is not None and search_ssd != ssd:
      raise ValueError(f'--init_from_search={search_dir} searched '
                       f'{search_ssd!r}, not --ssd={ssd}')
  return checkpoint


def read_supernet_values(checkpoint: str) -> Dict[str, np.ndarray]:
  """The supernet's weights in a search checkpoint, by variable name.

  Keeps `blocks/...` and `classifier/...`; leaves out optimizer slots
  (`.../RMSProp*`), the controller (`rl_controller/...`) and the rest.
  """
  try:
    reader = tf.train.load_checkpoint(checkpoint)
  except (tf.errors.OpError, ValueError) as e:
    raise ValueError(f'Cannot read checkpoint {checkpoint!r}: '
                     f'{str(e).splitlines()[0]}') from None
  values = {}
  for name in reader.get_variable_to_shape_map():
    if not name.startswith(('blocks/', 'classifier/')):
      continue
    last = name.rsplit('/', 1)[-1]
    if last.startswith(('RMSProp', 'Momentum', 'Adam', EMA_SUFFIX)):
      continue
    values[name] = reader.get_tensor(name)
  return values


class _Inheritance:
  """Which variables of a `Model` inherit which values from a search."""

  def __init__(self, search_dir: str):
    self.checkpoint = search_checkpoint(search_dir)
    self._old = from_spec.supernet_params(
        read_supernet_values(self.checkpoint))

  def split(self, model) -> Tuple[List[Tuple[Any, np.ndarray]], List[Any]]:
    """([(variable, inherited value)], [fresh trainable variables])."""
    shapes = {op: {name: np.zeros(v.shape.as_list(), np.float32)
                   for name, v in group.items()}
              for op, group in model.op_variables.items() if group}
    inherited, fresh = inherit.inherit_params(shapes, self._old)
    pairs = [(model.op_variables[op][name], value)
             for op, group in inherited.items()
             for name, value in group.items()]
    fresh_trainable = [model.op_variables[op][name]
                       for op, group in fresh.items() for name in group
                       if model.op_variables[op][name].trainable]
    if not any(v.trainable for v, _ in pairs):
      raise ValueError(f'Nothing to inherit from {self.checkpoint}: no '
                       'variable of the architecture matches the supernet')
    return pairs, fresh_trainable


# -----------------------------------------------------------------------------
# Input.


def _train_dataset(config: TrainEvalConfig, batch_size: int):
  """Full training data (digits: all but test), shuffled, repeated, batched."""
  # search_train + search_validation is the whole training data; for TFDS a
  # hold-out of 1 example makes them train[1:] and train[:1].
  holdout = 0 if config.dataset == datasets.DIGITS else 1
  parts = [datasets.load_split(
      config.dataset, split, config.num_classes, data_dir=config.data_dir,
      download=config.download, validation_examples=holdout,
      image_size=config.image_size,
      augment=config.dataset != datasets.DIGITS, shuffle_files=True)
           for split in (datasets.SEARCH_TRAIN, datasets.SEARCH_VALIDATION)]
  dataset = parts[0].concatenate(parts[1])
  if config.train_examples < batch_size:
    raise ValueError(f'The training data has {config.train_examples} '
                     f'examples, fewer than one batch of {batch_size}')
  dataset = dataset.repeat().shuffle(
      min(16384, max(1024, config.train_examples)), seed=config.seed)
  return dataset.batch(batch_size, drop_remainder=True).prefetch(
      tf.data.AUTOTUNE)


def eval_dataset(config: TrainEvalConfig, batch_size: int,
                 drop_remainder: bool = False):
  """One ordered pass over `--eval_split` (the last batch may be short)."""
  if config.dataset == datasets.DIGITS or config.eval_split in datasets.SPLITS:
    dataset = datasets.load_split(
        config.dataset, config.eval_split, config.num_classes,
        data_dir=config.data_dir, download=config.download,
        validation_examples=0 if config.dataset == datasets.DIGITS else 1,
        image_size=config.image_size)
  else:
    builder = datasets.tfds_builder(config.dataset, config.data_dir,
                                     config.download)
    try:
      dataset = builder.as_dataset(split=config.eval_split,
                                   as_supervised=True, shuffle_files=False)
    except Exception as e:  # TFDS raises several kinds for a bad split.
      raise ValueError(f'--eval_split={config.eval_split!r} of '
                       f'{config.dataset!r}: {str(e).splitlines()[0]}'
                      ) from None
    size, classes = config.image_size, config.num_classes

    def prepare(image, label):
      image = tf.image.convert_image_dtype(image, tf.float32)
      image = tf.image.resize(image, [size, size])
      return image, tf.one_hot(label, classes)

    dataset = dataset.map(prepare, num_parallel_calls=tf.data.AUTOTUNE)
  return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(
      tf.data.AUTOTUNE)


def make_input_fn(config: TrainEvalConfig, training: bool):
  """The TPUEstimator input_fn: training batches or one eval pass."""
  def input_fn(params):
    if training:
      return _train_dataset(config, params.get('batch_size',
                                               config.train_batch_size))
    # TPU needs static shapes: the last partial batch is dropped there (the
    # original pads it with zero weights).
    return eval_dataset(config, params.get('batch_size',
                                           config.eval_batch_size),
                        drop_remainder=config.use_tpu)
  return input_fn


# -----------------------------------------------------------------------------
# Model.


def regularization_loss(model, weight_decay: float):
  """(weight_decay / 2) * sum of squared kernels, classifier excluded."""
  kernels = [group['kernel'] for op, group in model.op_variables.items()
             if 'kernel' in group and op != from_spec.CLASSIFIER_NAME]
  if not kernels or weight_decay == 0:
    return tf.constant(0.0, tf.float32)
  return (weight_decay / 2.0) * tf.add_n(
      [tf.reduce_sum(tf.square(k)) for k in kernels])


class ThroughputHook(tf.compat.v1.train.SessionRunHook):
  """Images per second of wall time, per core, and a progress log.

  Training counts `images_per_step` per global step; evaluation counts the
  `batch` fetch. The first session run pays for graph warm-up, so the rate
  runs from its end to the end of the last run (from the start of the only
  run when there is one).

  Args:
    fetches: dict with `step` (the global step; training) or `batch` (the
      images of the run; evaluation), plus scalars to log.
    record: dict that receives `key` (images/s per core) at the end, and
      `train_start_step` (the global step when the session started) when
      training.
    key: the key written into `record`.
    num_cores: replicas the images were spread over.
    images_per_step: the global train batch (training only).
    log_every: log every this many steps (0: never).
    max_step: the last step, for the log.
  """

  def __init__(self, fetches: Dict[str, Any], record: Dict[str, Any],
               key: str, num_cores: int = 1, images_per_step: int = 0,
               log_every: int = 0, max_step: int = 0):
    self._fetches = fetches
    self._record, self._key = record, key
    self._cores = max(1, int(num_cores))
    self._per_step = images_per_step
    self._log_every, self._max_step = log_every, max_step

  def begin(self):
    self._start = self._first = self._last = None
    self._images = self._first_images = 0
    self._prev_step = None

  def after_create_session(self, session, coord):
    del coord
    if 'step' in self._fetches:
      step = int(session.run(self._fetches['step']))
      self._record.setdefault('train_start_step', step)
      self._prev_step = step

  def before_run(self, run_context):
    del run_context
    if self._first is None:
      self._start = time.time()
    return tf.compat.v1.train.SessionRunArgs(self._fetches)

  def after_run(self, run_context, run_values):
    del run_context
    now = time.time()
    results = run_values.results
    if 'batch' in results:
      count = int(results['batch'])
    else:
      step = int(results['step'])
      count = max(0, step - self._prev_step) * self._per_step
      self._prev_step = step
    if self._first is None:
      self._first, self._first_images = now, count
    else:
      self._images += count
    self._last = now
    if self._log_every and 'step' in results:
      step = int(results['step'])
      if step % self._log_every == 0 or step >= self._max_step:
        rate = self.rate()
        extra = ' '.join(f'{k}={float(v):.4g}' for k, v in results.items()
                         if k != 'step')
        logging.info('step %d/%d  %s  %s images/s', step, self._max_step,
                     extra, f'{rate:.1f}' if rate else '?')

  def rate(self) -> Optional[float]:
    """Images/s per core so far (None before the first run)."""
    if self._first is None:
      return None
    if self._images and self._last > self._first:
      return self._images / (self._last - self._first) / self._cores
    if self._first_images and self._first > self._start:
      return self._first_images / (self._first - self._start) / self._cores
    return None

  def end(self, session):
    del session
    rate = self.rate()
    if rate is not None:
      self._record[self._key] = rate


def make_model_fn(config: TrainEvalConfig, arch: spec_ops.ConvTowerSpec,
                  record: Dict[str, Any], one_shot: bool = False,
                  initialize: bool = True):
  """The TPUEstimator model_fn of the standalone network.

  Args:
    config: the run's config.
    arch: the pruned, scaled architecture.
    record: a dict the hooks write `train_images_per_sec`,
      `eval_images_per_sec` and `train_start_step` into.
    one_shot: batch norm on batch statistics (no moving averages); with
      `--init_from_search` this scores the supernet's weights.
    initialize: assign the inherited values at session creation (only
      happens when no checkpoint is restored; pass False once one exists).
  """

  graph, constants = from_spec.graph_from_spec(
      arch, config.num_classes, input_channels=config.num_channels,
      dropout_rate=config.dropout_rate)
  inheritance = (_Inheritance(config.init_from_search)
                 if config.init_from_search else None)

  def model_fn(features, labels, mode, params):
    images = features['images'] if isinstance(features, dict) else features
    model = model_lib.Model(graph, constants, stateless_batch_norm=one_shot,
                            seed=config.seed)
    training = mode == tf.estimator.ModeKeys.TRAIN
    logits = tf.cast(model(images, training=training), tf.float32)
    pairs, fresh = ([], None)
    if inheritance is not None:
      pairs, fresh = inheritance.split(model)
    trainable = [v for group in model.op_variables.values()
                 for v in group.values() if v.trainable]
    if config.freeze_inherited:
      var_list = fresh
      if not var_list and training:
        raise ValueError('--freeze_inherited: every trainable variable is '
                         'inherited, nothing would train')
    else:
      var_list = trainable
    ema = None
    if config.moving_average_decay > 0 and not one_shot:
      ema = tf.compat.v1.train.ExponentialMovingAverage(
          config.moving_average_decay,
          num_updates=tf.compat.v1.train.get_or_create_global_step())
    cores = 1
    if config.use_tpu and params and 'context' in params:
      cores = params['context'].num_replicas

    def scaffold_fn():
      saver = None
      if ema is not None and not training:
        saver = tf.compat.v1.train.Saver(
            ema.variables_to_restore(moving_avg_variables=var_list))
      init_fn = None
      if initialize and pairs:
        assignments, feed = [], {}
        for variable, value in pairs:
          targets = [variable]
          if ema is not None and training and ema.average(variable) is not None:
            targets.append(ema.average(variable))
          placeholder = tf.compat.v1.placeholder(tf.float32, value.shape)
          feed[placeholder] = value
          assignments += [t.assign(placeholder) for t in targets]
        init_op = tf.group(*assignments)

        def init_fn(scaffold, session):
          del scaffold
          session.run(init_op, feed_dict=feed)
      return tf.compat.v1.train.Scaffold(saver=saver, init_fn=init_fn)

    if mode == tf.estimator.ModeKeys.PREDICT:
      return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
          mode=mode, predictions={'logits': logits,
                                  'classes': tf.argmax(logits, axis=-1)},
          scaffold_fn=scaffold_fn)

    empirical_loss = tf.compat.v1.losses.softmax_cross_entropy(
        labels, logits, label_smoothing=config.label_smoothing)
    reg_loss = regularization_loss(model, config.weight_decay)
    loss = empirical_loss + reg_loss

    if mode == tf.estimator.ModeKeys.EVAL:
      k = min(5, config.num_classes)

      def metric_fn(labels, logits):
        target = tf.argmax(labels, axis=-1)
        in_top = tf.cast(tf.nn.in_top_k(targets=target, predictions=logits, k=k), tf.float32)
        cross_entropy = tf.nn.softmax_cross_entropy_with_logits(
            labels=labels, logits=logits)
        return {
            'top1': tf.compat.v1.metrics.accuracy(
                target, tf.argmax(logits, axis=-1)),
            'top5': tf.compat.v1.metrics.mean(in_top),  # top-k, k <= 5.
            'cross_entropy': tf.compat.v1.metrics.mean(cross_entropy),
        }

      # On TPU the batch lives inside the TPU computation and cannot be
      # fetched by a hook: no eval rate there.
      hooks = [] if config.use_tpu else [ThroughputHook(
          {'batch': tf.shape(images)[0]}, record, 'eval_images_per_sec')]
      return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
          mode=mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]),
          scaffold_fn=scaffold_fn, evaluation_hooks=hooks)

    global_step = tf.compat.v1.train.get_or_create_global_step()
    learning_rate = schedules.cosine_decay_with_linear_warmup(
        config.learning_rate_scaled, global_step, config.max_global_step,
        config.warmup_steps)
    opt = tf.compat.v1.train.RMSPropOptimizer(
        learning_rate, decay=0.9, momentum=config.momentum, epsilon=1.0)
    if config.use_tpu:
      opt = tf.compat.v1.tpu.CrossShardOptimizer(opt)
    train_op = opt.minimize(loss, global_step=global_step, var_list=var_list)
    if ema is not None:
      with tf.control_dependencies([train_op]):
        train_op = ema.apply(var_list)
    scalars = {'model/loss': loss, 'model/empirical_loss': empirical_loss,
               'model/regularization_loss': reg_loss,
               'model/learning_rate': learning_rate}
    # On TPU only the global step (a host variable) can be fetched.
    fetches = ({'step': global_step} if config.use_tpu else
               {'step': global_step, 'loss': loss, 'lr': learning_rate})
    hooks = [ThroughputHook(fetches, record, 'train_images_per_sec', cores,
                            config.train_batch_size, config.log_every_steps,
                            config.max_global_step)]
    return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
        mode=mode, loss=loss, train_op=train_op,
        host_call=steps.host_call(
            {k: tf.cast(tf.reshape(v, []), tf.float32)
             for k, v in scalars.items()}, global_step, config.model_dir,
            config.tpu_iterations_per_loop),
        scaffold_fn=scaffold_fn, training_hooks=hooks)

  return model_fn


def make_estimator(config: TrainEvalConfig, model_fn):
  """TPUEstimator on TPU (`--tpu`) or on CPU/GPU (`use_tpu=False`)."""
  return backend.make_estimator(model_fn, config,
                                eval_batch_size=config.eval_batch_size)


# -----------------------------------------------------------------------------
# Measurements and export.


def count_params(config: TrainEvalConfig, arch) -> int:
  """Trainable weights of the standalone network (batch-norm stats excluded)."""
  graph, constants = from_spec.graph_from_spec(
      arch, config.num_classes, input_channels=config.num_channels,
      dropout_rate=config.dropout_rate)
  with tf.Graph().as_default():
    model = model_lib.Model(graph, constants)
    model(tf.compat.v1.placeholder(
        tf.float32, [1, config.image_size, config.image_size,
                     config.num_channels]))
    return model_lib.count_params(model)


def count_macs(config: TrainEvalConfig, arch) -> int:
  """Multiply-adds of the standalone network, classifier included."""
  return int(macs.count_macs(arch, config.image_size, config.num_classes,
                             config.num_channels))


def checkpoint_values(model, checkpoint: str) -> Dict[str, Dict[str, Any]]:
  """A `Model`'s values in an Estimator checkpoint, EMA shadows preferred."""
  reader = tf.train.load_checkpoint(checkpoint)
  names = reader.get_variable_to_shape_map()
  params = {}
  for op, group in model.op_variables.items():
    for name, variable in group.items():
      key = f'{op}/{name}'
      shadow = f'{key}/{EMA_SUFFIX}'
      if variable.trainable and shadow in names:
        key = shadow
      if key not in names:
        raise ValueError(f'Checkpoint {checkpoint} has no variable {key!r}: '
                         'not a checkpoint of this architecture')
      params.setdefault(op, {})[name] = reader.get_tensor(key)
  return params


def export(config: TrainEvalConfig, arch, checkpoint: str) -> Dict[str, str]:
  """Writes a SavedModel and a TFLite file of the checkpoint's weights.

  The serving signature (`serving_default`) takes `images` float32
  [N, H, W, C] and returns `logits` [N, num_classes]; batch norm uses its
  moving averages and the weights are the EMA ones when there are.

  Returns:
    {'saved_model': dir, 'tflite': file}.
  """
  graph, constants = from_spec.graph_from_spec(
      arch, config.num_classes, input_channels=config.num_channels,
      dropout_rate=config.dropout_rate)
  shape = [config.image_size, config.image_size, config.num_channels]
  model = model_lib.Model(graph, constants)
  model(tf.zeros([1] + shape), training=False)
  model_lib.set_params(model, checkpoint_values(model, checkpoint))
  module = tf.Module()
  module.model = model
  serve = tf.function(
      lambda images: {'logits': model(images, training=False)},
      input_signature=[tf.TensorSpec([None] + shape, tf.float32,
                                     name='images')])
  module.serve = serve
  tf.io.gfile.makedirs(config.export_dir)
  saved_dir = os.path.join(config.export_dir, SAVED_MODEL_SUBDIR)
  tmp_dir = saved_dir + '.tmp'
  if tf.io.gfile.exists(tmp_dir):
    tf.io.gfile.rmtree(tmp_dir)
  tf.saved_model.save(module, tmp_dir,
                      signatures={'serving_default':
                                  serve.get_concrete_function()})
  if tf.io.gfile.exists(saved_dir):
    tf.io.gfile.rmtree(saved_dir)
  tf.io.gfile.rename(tmp_dir, saved_dir)
  converter = tf.lite.TFLiteConverter.from_saved_model(saved_dir)
  tflite = converter.convert()
  tflite_path = os.path.join(config.export_dir, TFLITE_FILE)
  with tf.io.gfile.GFile(tflite_path + '.tmp', 'wb') as f:
    f.write(tflite)
  tf.io.gfile.rename(tflite_path + '.tmp', tflite_path, overwrite=True)
  return {'saved_model': saved_dir, 'tflite': tflite_path}


def _write_extra_summaries(directory: str, step: int,
                           values: Dict[str, Any]) -> None:
  writer = tf.summary.create_file_writer(directory)
  with writer.as_default():
    for name, value in values.items():
      if value is not None:
        tf.summary.scalar(name, float(value), step=step)
  writer.close()


def run(config: TrainEvalConfig) -> Dict[str, Any]:
  """Trains (unless `eval_only`), evaluates and exports; returns the metrics.

  Writes/checks `config.json` first; a directory with a checkpoint resumes
  from it (Estimator behaviour), one without one starts fresh or, with
  `init_from_search`, from the search's weights.

  Raises:
    ValueError: for an inconsistent directory or settings.
  """
  arch = build_architecture(config)
  has_checkpoint = (tf.io.gfile.isdir(config.model_dir) and
                    tf.train.latest_checkpoint(config.model_dir) is not None)
  one_shot = config.eval_only and not has_checkpoint
  if one_shot and not config.init_from_search:
    raise ValueError(f'--eval_only: {config.model_dir} holds no checkpoint to '
                     'evaluate (train first, or give --init_from_search for '
                     'one-shot accuracy)')
  resumed = write_or_check_config(config)
  logging.info('%s %s %s in %s: %d steps', 'Resuming' if resumed else
               'Starting', config.ssd, config.indices, config.model_dir,
               config.max_global_step)
  record: Dict[str, Any] = {}
  if not config.eval_only:
    model_fn = make_model_fn(config, arch, record,
                             initialize=not has_checkpoint)
    estimator = make_estimator(config, model_fn)
    estimator.train(make_input_fn(config, True),
                    max_steps=config.max_global_step)
  model_fn = make_model_fn(config, arch, record, one_shot=one_shot,
                           initialize=one_shot)
  estimator = make_estimator(config, model_fn)
  results = estimator.evaluate(make_input_fn(config, False), steps=None,
                               name=None)
  metrics_path = os.path.join(config.model_dir, METRICS_FILE)
  previous = {}
  if tf.io.gfile.exists(metrics_path):
    try:
      previous = files.read_json(metrics_path)
    except ValueError:
      previous = {}
  global_step = int(results.get('global_step', 0))
  train_rate = record.get('train_images_per_sec')
  if train_rate is None and previous.get('global_step') == global_step:
    train_rate = previous.get('train_images_per_sec')
  metrics = {
      'top1': float(results['top1']),
      'top5': float(results['top5']),
      'loss': float(results['cross_entropy']),
      'params': count_params(config, arch),
      'macs': count_macs(config, arch),
      'train_images_per_sec': train_rate,
      'eval_images_per_sec': record.get('eval_images_per_sec'),
      'global_step': global_step,
      'one_shot': one_shot,
  }
  if 'train_start_step' in record:
    metrics['train_start_step'] = record['train_start_step']
  _write_extra_summaries(
      os.path.join(config.model_dir, 'eval'), global_step,
      {k: metrics[k] for k in ('params', 'macs', 'train_images_per_sec',
                               'eval_images_per_sec')})
  if config.export and not one_shot:
    metrics['export'] = export(config, arch,
                               tf.train.latest_checkpoint(config.model_dir))
  files.write_json(metrics, metrics_path, sort_keys=True)
  logging.info('top1 %.4f  top5 %s  loss %.4f  params %d  MACs %d  (step %d)',
               metrics['top1'], metrics['top5'], metrics['loss'],
               metrics['params'], metrics['macs'], global_step)
  return metrics


def main(argv) -> Optional[int]:
  if len(argv) > 1:
    sys.exit(f'train_eval: unexpected arguments {argv[1:]}')
  try:
    config = config_from_flags(FLAGS)
    metrics = run(config)
  except ValueError as e:
    sys.exit('train_eval: ' + ' '.join(str(e).split()))
  print(json.dumps({k: metrics[k] for k in METRIC_KEYS}))
  return 0


if __name__ == '__main__':
  define_flags()
  app.run(main)
