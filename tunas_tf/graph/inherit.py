"""Weight inheritance by op name and shape: all of it lives here.

A new variable takes the old one of the same op and name, or its leading slice
when the old one is at least as large in every dim; else it stays fresh.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

import numpy as np
import tensorflow as tf

from tunas_tf.graph import model as model_lib
from tunas_tf.io import files
from tunas_tf.runtime import jobs
from tunas_tf.runtime import resume as resume_lib

Params = Dict[str, Dict[str, np.ndarray]]
_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Mismatch:
  """A variable present in both params whose old value cannot be reused."""
  op_name: str
  var_name: str
  new_shape: Tuple[int, ...]
  old_shape: Tuple[int, ...]

  def __str__(self) -> str:
    return (f'op {self.op_name!r} variable {self.var_name!r}: new shape '
            f'{self.new_shape}, old shape {self.old_shape}')


def _inherited_value(new: np.ndarray, old: np.ndarray) -> Optional[np.ndarray]:
  if new.shape == old.shape:
    return np.array(old, copy=True)
  if new.ndim == old.ndim and all(o >= n for n, o in zip(new.shape,
                                                          old.shape)):
    return np.array(old[tuple(slice(0, n) for n in new.shape)], copy=True)
  return None


def find_mismatches(new_params: Mapping[str, Mapping[str, Any]],
                    old_params: Mapping[str, Mapping[str, Any]]
                    ) -> List[Mismatch]:
  """The `Mismatch`es, in the order of `new_params`: variables in both
  params (`{op_name: {var_name: array}}`) whose old value neither fits nor
  slices."""
  found = []
  for op_name, group in new_params.items():
    for var_name, value in group.items():
      old = old_params.get(op_name, {}).get(var_name)
      if old is None:
        continue
      value, old = np.asarray(value), np.asarray(old)
      if _inherited_value(value, old) is None:
        found.append(Mismatch(op_name, var_name, tuple(value.shape),
                              tuple(old.shape)))
  return found


def inherit_params(new_params: Mapping[str, Mapping[str, Any]],
                   old_params: Mapping[str, Mapping[str, Any]]
                   ) -> Tuple[Params, Params]:
  """Splits `new_params` (`{op_name: {var_name: array}}`) into
  `(inherited, fresh)`: disjoint, covering it; `inherited` holds old values
  (or leading slices) in the new shapes. Mismatches are logged as warnings."""
  inherited: Params = {}
  fresh: Params = {}
  for op_name, group in new_params.items():
    for var_name, value in group.items():
      value = np.asarray(value)
      old = old_params.get(op_name, {}).get(var_name)
      reused = None if old is None else _inherited_value(value,
                                                         np.asarray(old))
      if reused is not None:
        inherited.setdefault(op_name, {})[var_name] = reused
      else:
        fresh.setdefault(op_name, {})[var_name] = np.array(value, copy=True)
  for mismatch in find_mismatches(new_params, old_params):
    _log.warning('inherit_params: not inherited (shape mismatch): %s',
                 mismatch)
  return inherited, fresh


def inherit_into(model: model_lib.Model,
                 old_params: Mapping[str, Mapping[str, Any]],
                 session: Optional[Any] = None) -> Tuple[Params, Params]:
  """Assigns `inherit_params`'s inherited values to a built model (`session`
  in a TF1 graph) and returns its `(inherited, fresh)`."""
  inherited, fresh = inherit_params(model_lib.get_params(model, session),
                                    old_params)
  model_lib.set_params(model, inherited, session)
  return inherited, fresh


def supernet_params(supernet: Any) -> Params:
  """A supernet's weights as `{op name: {variable name: np.ndarray}}` (new
  float32 copies, widest shapes), names split at their last `/`.

  Args:
    supernet: a `Supernet` (`variables_by_name()`), or a mapping from such
      variable names to arrays or variables (e.g. read from a checkpoint).

  Raises:
    ValueError: for another argument type or a name without `/`.
  """
  if hasattr(supernet, 'variables_by_name'):
    named = supernet.variables_by_name()
  elif isinstance(supernet, Mapping):
    named = supernet
  else:
    raise ValueError('supernet_params: expected a Supernet (with '
                     'variables_by_name()) or a mapping from variable name '
                     f'to value, got {type(supernet).__name__}')
  params: Params = {}
  for name, value in named.items():
    op_name, sep, var_name = str(name).rpartition('/')
    if not sep or not op_name or not var_name:
      raise ValueError(f'supernet_params: variable name {name!r} is not '
                       '"<op name>/<variable name>"')
    if hasattr(value, 'numpy'):
      value = value.numpy()
    params.setdefault(op_name, {})[var_name] = np.array(value, np.float32,
                                                        copy=True)
  return params


def inherit_from_supernet(model: model_lib.Model, supernet: Any,
                          strict: bool = False) -> Params:
  """Assigns a supernet's (sliced) weights to a `Model` of an architecture.

  Runs eagerly; an unbuilt model is built by one call on a 1x1 zero image
  with the supernet's `input_channels` (quicker than tracing `Model.build`).

  Args:
    model: a `model.Model` of a graph from `graph_from_spec`.
    strict: raise if a trainable variable stays fresh.

  Returns:
    The fresh params `{op name: {variable name: value}}` (batch-norm moving
    statistics always are: the supernet keeps none).

  Raises:
    ValueError: when not eager, for an unbuilt model and a `supernet` without
      `input_channels`, or when `strict` and a trainable variable is fresh.
  """
  if not tf.executing_eagerly():
    raise ValueError('inherit_from_supernet runs eagerly; in a TF1 graph use '
                     'inherit_into(model, supernet_params(values), '
                     'session)')
  if not model.built:
    channels = getattr(supernet, 'input_channels', None)
    if channels is None:
      raise ValueError('inherit_from_supernet: build the model first '
                       '(model.build(input_shape)); the supernet argument '
                       'does not say how many input channels it takes')
    model(tf.zeros([1, 1, 1, int(channels)]), training=False)
  _, fresh = inherit_into(model, supernet_params(supernet))
  names = [f'{op}/{var}' for op, group in fresh.items() for var in group
           if model.op_variables[op][var].trainable]
  if strict and names:
    raise ValueError(f'inherit_from_supernet: {len(names)} variable(s) not '
                     f'inherited: {names[:10]}')
  return fresh


# Suffix of the shadow variables of `tf.train.ExponentialMovingAverage`.
EMA_SUFFIX = 'ExponentialMovingAverage'


def search_checkpoint(search_dir: str, ssd: Optional[str] = None) -> str:
  """The latest checkpoint of a search directory.

  Raises:
    ValueError: if there is none, the directory is a train_eval one (saying
      so), or the search's config.json names another search space than
      `ssd`.
  """
  if not tf.io.gfile.isdir(search_dir):
    raise ValueError(f'--init_from_search={search_dir}: no such directory')
  config_path = os.path.join(search_dir, jobs.CONFIG_FILE)
  stored = files.read_json(config_path) if files.exists(config_path) else {}
  if not isinstance(stored, dict):
    raise ValueError(f'{config_path} is not a JSON object')
  jobs.check_written_by(stored, 'train_search',
                        f'--init_from_search={search_dir}')
  checkpoint = tf.train.latest_checkpoint(search_dir)
  if checkpoint is None:
    raise ValueError(f'--init_from_search={search_dir} holds no checkpoint')
  if ssd is not None:
    search_ssd = stored.get('ssd')
    if search_ssd is not None and search_ssd != ssd:
      raise ValueError(f'--init_from_search={search_dir} searched '
                       f'{search_ssd!r}, not --ssd={ssd}')
  return checkpoint


def read_supernet_values(checkpoint: str) -> Dict[str, np.ndarray]:
  """The supernet's weights (`blocks/`, `classifier/`, no optimizer slots)
  in a search checkpoint, by variable name; ValueError if unreadable."""
  values = resume_lib.read_checkpoint(checkpoint)
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
  """`pairs`: (variable, inherited value); `fresh`: trainable, inherit none."""
  pairs: List[Tuple[Any, np.ndarray]]
  fresh: List[Any]


class Inheritance:
  """Which variables of a `Model` inherit which values from the latest
  checkpoint of a search's model directory."""

  def __init__(self, search_dir: str):
    self.checkpoint = search_checkpoint(search_dir)
    self._old = supernet_params(
        read_supernet_values(self.checkpoint))

  def split(self, model) -> Inherited:
    """The inherited and the fresh variables of a built `model`.

    Raises:
      ValueError: if no trainable variable inherits anything.
    """
    shapes = {op: {name: np.zeros(v.shape.as_list(), np.float32)
                   for name, v in group.items()}
              for op, group in model.op_variables.items() if group}
    inherited, fresh = inherit_params(shapes, self._old)
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
  """A `Model`'s values in an Estimator checkpoint, EMA shadows preferred:
  `{op name: {variable name: array}}`, as `graph.model.set_params` takes.

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
