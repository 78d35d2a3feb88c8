"""The searched architecture of a search directory (reference/tunas.md §5).

The argmax of each OneOf's controller logits, read from a checkpoint of the
search (default the latest); the search space comes from the directory's
`model_spec.json`, so the indices always match what was searched. Used by
`tools/extract_architecture` (which writes `architecture.json`) and
`tools/report`.

  arch = extract.search_architecture('runs/demo')
  arch.indices_string, arch.estimated_cost, arch.probabilities
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

import numpy as np

from tunas_tf import architecture as architecture_lib
from tunas_tf import checkpoints
from tunas_tf import files
from tunas_tf.controller import reinforce
from tunas_tf.cost_model import linear as cost_linear
from tunas_tf.search import config as config_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema
from tunas_tf.search_space import spec_io

CONTROLLER_SCOPE = 'rl_controller/logits/'


def _softmax(values: np.ndarray) -> np.ndarray:
  shifted = np.exp(values - values.max())
  return shifted / shifted.sum()


def read_logits(checkpoint: str, spec: Any) -> Dict[str, np.ndarray]:
  """The controller's logits by OneOf path, checked against `spec`.

  Raises:
    ValueError: if the checkpoint cannot be read or lacks the logits of one
      of the space's OneOfs. (`reinforce.argmax_indices` checks the lengths.)
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    reader = tf.train.load_checkpoint(checkpoint)
  except (tf.errors.OpError, ValueError) as e:
    raise ValueError(f'Cannot read checkpoint {checkpoint!r}: '
                     f'{str(e).splitlines()[0]}') from None
  shapes = reader.get_variable_to_shape_map()
  logits = {}
  for path, _ in schema.flatten_with_paths(spec):
    name = CONTROLLER_SCOPE + path
    if name not in shapes:
      raise ValueError(f'Checkpoint {checkpoint!r} has no controller logits '
                       f'{name!r}: not a search of this space')
    logits[path] = np.asarray(reader.get_tensor(name), np.float64).reshape(-1)
  return logits


def _newest_readable(model_dir: str) -> str:
  """The checkpoint the `checkpoint` file names, if it can be read.

  Raises:
    ValueError: when there is none, or it cannot be read (naming the newest
      readable one to pass as --checkpoint); nothing is changed.
  """
  point = checkpoints.resume_point(model_dir)
  if point.checkpoint is None:
    raise ValueError(f'No checkpoint in {model_dir!r}: the search has not '
                     'saved one yet')
  if point.skipped:
    prefix, reason = point.skipped[0]
    raise ValueError(f'{prefix} is unreadable ({reason}); pass '
                     f'--checkpoint={point.checkpoint} (the newest readable '
                     'one) or resume the search, which falls back to it')
  return point.checkpoint


def search_architecture(model_dir: str, checkpoint: Optional[str] = None
                        ) -> architecture_lib.Architecture:
  """The searched architecture of `model_dir`.

  Args:
    model_dir: a search's model directory (config.json, model_spec.json,
      checkpoints).
    checkpoint: a checkpoint path; default the directory's latest.

  Raises:
    ValueError: for a directory that is not a search, holds no checkpoint,
      or whose files disagree.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  config = config_lib.read(model_dir)
  spec_path = os.path.join(model_dir, config_lib.MODEL_SPEC_FILE)
  if not files.exists(spec_path):
    raise ValueError(f'No {config_lib.MODEL_SPEC_FILE} in {model_dir!r}')
  spec = spec_io.loads(files.read_text(spec_path))
  ssd = config.ssd
  if spec != mobile.get_search_space(ssd):
    raise ValueError(f'{spec_path} differs from the current {ssd!r} space; '
                     'the search was made with another version')
  if checkpoint is None:
    checkpoint = _newest_readable(model_dir)
  logits = read_logits(checkpoint, spec)
  indices = reinforce.argmax_indices(logits, spec)
  cost = cost_linear.estimate_cost_of_indices(indices,
                                              config.resolved_cost_model)
  global_step = int(tf.train.load_checkpoint(checkpoint).get_tensor(
      'global_step'))
  return architecture_lib.Architecture(
      ssd, indices, estimated_cost=cost, cost_model=config.cost_model,
      cost_target=config.rl_cost_model_target, global_step=global_step,
      max_global_step=config.max_global_step,
      checkpoint=os.path.abspath(checkpoint), image_size=config.job.image_size,
      num_classes=config.job.num_classes, num_channels=config.job.num_channels,
      probabilities={path: tuple(round(float(p), 6) for p in _softmax(v))
                     for path, v in logits.items()})


def extract(model_dir: str, checkpoint: Optional[str] = None
            ) -> Dict[str, Any]:
  """`search_architecture` as the JSON object of `architecture.json`."""
  return search_architecture(model_dir, checkpoint).to_json()
