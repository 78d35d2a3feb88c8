"""A short search and a short standalone run, made once per test process.

The train_eval tests share them: `search()` is the shared 8-step digits
search (`searches.finished_search`) and its architecture; `trained()` trains
a pinned digits_search architecture (`PINNED`, not the search's: a search
may end elsewhere on other kernels, and this one needs no search) 20 steps
(with an EMA of the weights, no export), then resumes it to 40 (with
export). `trained_distribute()` and `distribute_search()` are the same
on the distribute engine (any TF).
"""

import functools
import glob
import json
import os
import tempfile
from typing import Any, Dict, List, NamedTuple, Set, Tuple

from absl import flags
import numpy as np
import tensorflow as tf

from tunas_tf import architecture as architecture_lib
from tunas_tf.io import lite
from tunas_tf.graph import inherit
from tunas_tf.search import runner as search_runner
from tunas_tf.train_eval import __main__ as train_eval_main
from tunas_tf.train_eval import evaluate as evaluate_lib
from tunas_tf.train_eval import network
from tunas_tf.train_eval import runner
from tunas_tf.train_eval.config import TrainEvalConfig
from tests.testing import engine
from tests.testing import searches

TINY = ['--train_batch_size=32', '--eval_batch_size=50',
        '--save_checkpoints_steps=10', '--log_every_steps=10',
        '--base_learning_rate=1.0', '--tpu_iterations_per_loop=5']


# A digits_search architecture given by its indices (kernel 5 x3 and 7 x6
# bottlenecks, one skipped layer, narrower widths). At TINY's learning rate
# its training loss falls from ln(10) = 2.30 to 1.05-1.30 in 40 steps (the
# mean of the last two logged steps; seeds 0-4, float32 and bfloat16,
# Eigen's and oneDNN's kernels), while its test accuracy after 40 steps is
# 0.15-0.41: batch norm's moving statistics (momentum 0.99) have not
# settled, so no accuracy bound is asserted on it.
PINNED_INDICES = '1:0:0:1:0:0:2:1:0:2:2:1:0:0:0:1:1:2'
PINNED = ('--ssd=digits_search', f'--indices={PINNED_INDICES}')


# The scalars a train_eval run writes: training, and its evaluation's in
# model_dir/eval (the runner's), on either engine.
TRAIN_TAGS = frozenset({'model/loss', 'model/empirical_loss',
                        'model/regularization_loss', 'model/learning_rate'})
EVAL_TAGS = frozenset({'top1', 'top5', 'cross_entropy', 'loss', 'params',
                       'macs', 'train_images_per_sec', 'eval_images_per_sec'})


def tags(directory: str) -> Set[str]:
  """The summary tags of the events files in `directory`."""
  found = set()
  for path in glob.glob(os.path.join(directory, 'events*')):
    for record in tf.data.TFRecordDataset(path):
      event = tf.compat.v1.Event.FromString(record.numpy())
      found.update(value.tag for value in event.summary.value)
  return found


def training_losses(model_dir: str) -> Dict[int, float]:
  """{step: cross-entropy of the train batch} logged by a train_eval run."""
  return searches.events(model_dir)['model/empirical_loss']


def parse_flags(*args) -> flags.FlagValues:
  """train_eval's flags, parsed from `args`."""
  values = flags.FlagValues()
  train_eval_main.define_flags(values)
  values(['train_eval'] + list(args))
  return values


def config(*args) -> TrainEvalConfig:
  """The `TrainEvalConfig` of a train_eval command line."""
  return train_eval_main.config_from_flags(parse_flags(*args))


def read_json(path: str) -> Any:
  with open(path) as f:
    return json.load(f)


def weights(checkpoint: str) -> Dict[str, Any]:
  """{name: array} of a checkpoint's weights (no slots, no shadows)."""
  reader = tf.train.load_checkpoint(checkpoint)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()
          if name.startswith(('blocks/', 'classifier/')) and
          not name.rsplit('/', 1)[-1].startswith(
              ('RMSProp', inherit.EMA_SUFFIX))}


def evaluated_logits(config: TrainEvalConfig, images: np.ndarray
                     ) -> np.ndarray:
  """The logits on `images` of the network a run evaluates (its last
  checkpoint's weights, the EMA's where it has them:
  `evaluate.restored_values`)."""
  with tf.distribute.get_strategy().scope():
    model = network.build_model(config, network.build_architecture(config))
    for variable, value in evaluate_lib.restored_values(
        model, tf.train.latest_checkpoint(config.job.model_dir), None):
      variable.assign(value)
  return model(tf.constant(images), training=False).numpy()


def tflite_logits(path: str, images: np.ndarray, delegates: bool = True
                  ) -> Tuple[np.ndarray, List[Any]]:
  """(logits of a TFLite export on float32 `images`, taken as its input
  takes them (`lite.quantize`) and dequantized where its output is integer,
  [input, output] details). `delegates=False`: TFLite's own kernels, as the
  run's int8 evaluation (XNNPACK's round otherwise)."""
  with open(path, 'rb') as f:
    interpreter = lite.interpreter(f.read(), delegates=delegates)
  given, output = (interpreter.get_input_details()[0],
                   interpreter.get_output_details()[0])
  interpreter.resize_tensor_input(given['index'], list(images.shape))
  interpreter.allocate_tensors()
  interpreter.set_tensor(given['index'], lite.quantize(images, given))
  interpreter.invoke()
  logits = interpreter.get_tensor(output['index'])
  if output['dtype'] != np.float32:
    scale, zero_point = output['quantization']
    logits = (logits.astype(np.float32) - zero_point) * scale
  return logits, [given, output]


class Search(NamedTuple):
  """A finished short search: its directory, architecture.json, indices."""
  root: str
  search_dir: str
  architecture: str
  indices: str


class Trained(NamedTuple):
  """The standalone run of the `PINNED` architecture.

  Fields:
    root: a fresh directory, the parent of `model_dir`, for more runs.
    model_dir: the run's model directory.
    first: the metrics after 20 steps.
    config: the config of the resumed run (40 steps).
    metrics: the metrics after 40 steps (with `export`).
  """
  root: str
  model_dir: str
  first: Dict[str, Any]
  config: TrainEvalConfig
  metrics: Dict[str, Any]


@functools.lru_cache(maxsize=None)
def search() -> Search:
  """The shared short search (`searches.finished_search`), to inherit from
  and to take the architecture of; `root` is a fresh directory for runs."""
  search_dir = searches.finished_search()
  architecture = os.path.join(search_dir, architecture_lib.FILE_NAME)
  return Search(tempfile.mkdtemp(), search_dir, architecture,
                architecture_lib.read(architecture).indices_string)


@functools.lru_cache(maxsize=None)
def trained() -> Trained:
  """Trains `PINNED` 20 steps (with an EMA of the weights), then resumes to
  40. (It needs no search.)"""
  engine.skip_without_estimator()
  root = tempfile.mkdtemp()
  model_dir = os.path.join(root, 'train')
  common = [*PINNED, f'--model_dir={model_dir}',
            '--moving_average_decay=0.9'] + TINY
  first = runner.run(config(*common, '--max_steps=20', '--noexport'))
  resumed = config(*common, '--max_steps=40')
  return Trained(root, model_dir, first, resumed, runner.run(resumed))


@functools.lru_cache(maxsize=None)
def trained_distribute() -> Trained:
  """`trained()` on the distribute engine: `PINNED` 20 steps (with an EMA
  of the weights, no export), then resumed to 40 (with export)."""
  root = tempfile.mkdtemp()
  model_dir = os.path.join(root, 'train')
  common = [*PINNED, f'--model_dir={model_dir}', '--engine=distribute',
            '--moving_average_decay=0.9'] + TINY
  first = runner.run(config(*common, '--max_steps=20', '--noexport'))
  resumed = config(*common, '--max_steps=40')
  return Trained(root, model_dir, first, resumed, runner.run(resumed))


@functools.lru_cache(maxsize=None)
def distribute_search() -> str:
  """The model dir of a 4-step digits search on the distribute engine (in
  this process; a checkpoint at 4)."""
  model_dir = os.path.join(tempfile.mkdtemp(), 'search')
  search_runner.run_search(searches.search_config(
      model_dir, '--engine=distribute', '--max_steps=4',
      '--train_batch_size=16', '--rl_delay_steps_fraction=0.5',
      '--tpu_iterations_per_loop=2', '--save_checkpoints_steps=4'))
  return model_dir
