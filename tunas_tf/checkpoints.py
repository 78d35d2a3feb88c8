"""A search's weights for a standalone network, and a network's own values.

- `search_checkpoint`, `read_supernet_values`, `Inheritance`: the supernet
  weights of a search checkpoint, mapped onto a standalone `graph.model.Model`
  (the chosen ops' leading slices; `graph.inherit.inherit_params`).
- `model_values`: a `Model`'s values in its own Estimator checkpoint, the
  exponential moving averages of the weights preferred (for export).
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import tensorflow as tf

from tunas_tf import files
from tunas_tf.graph import from_spec
from tunas_tf.graph import inherit
from tunas_tf.runtime import resume as resume_lib

# Suffix of the shadow variables of `tf.train.ExponentialMovingAverage`.
EMA_SUFFIX = 'ExponentialMovingAverage'


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
  config_path = os.path.join(search_dir, files.CONFIG_FILE)
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

  Raises:
    ValueError: if the checkpoint cannot be read.
  """
  try:
    values = resume_lib.reader(checkpoint)
  except (tf.errors.OpError, ValueError) as e:
    raise ValueError(f'Cannot read checkpoint {checkpoint!r}: '
                     f'{str(e).splitlines()[0]}') from None
  kept = {}
  for name in values.get_variable_to_shape_map():
    if not name.startswith(('blocks/', 'classifier/')):
      continue
    last = name.rsplit('/', 1)[-1]
    if last.startswith(('RMSProp', 'Momentum', 'Adam', EMA_SUFFIX)):
      continue
    kept[name] = values.get_tensor(name)
  return kept


class Inherited(NamedTuple):
  """How a `Model`'s variables split under inheritance.

  Fields:
    pairs: (variable, inherited value) for every inherited variable.
    fresh: the trainable variables that inherit nothing.
  """
  pairs: List[Tuple[Any, np.ndarray]]
  fresh: List[Any]


class Inheritance:
  """Which variables of a `Model` inherit which values from a search.

  Args:
    search_dir: the search's model directory (its latest checkpoint is read).
  """

  def __init__(self, search_dir: str):
    self.checkpoint = search_checkpoint(search_dir)
    self._old = from_spec.supernet_params(
        read_supernet_values(self.checkpoint))

  def split(self, model) -> Inherited:
    """The inherited and the fresh variables of a built `model`.

    Raises:
      ValueError: if no trainable variable inherits anything.
    """
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
    return Inherited(pairs, fresh_trainable)


def model_values(model, checkpoint: str) -> Dict[str, Dict[str, Any]]:
  """A `Model`'s values in an Estimator checkpoint, EMA shadows preferred.

  Returns:
    {op name: {variable name: array}}, as `graph.model.set_params` takes.

  Raises:
    ValueError: if a variable of `model` is missing from the checkpoint.
  """
  values = resume_lib.reader(checkpoint)
  names = values.get_variable_to_shape_map()
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
      params.setdefault(op, {})[name] = values.get_tensor(key)
  return params
