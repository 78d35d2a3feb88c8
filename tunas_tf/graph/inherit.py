"""Weight inheritance by op name and shape.

Parameters are nested dicts `{op_name: {var_name: np.ndarray}}` (what
`model.get_params` returns). A new variable inherits the old variable of the
same op and variable name when

* the shapes are equal: the old value as is;
* the old value is at least as large in every dim (same rank): its leading
  slice, e.g. an old kernel [3, 3, 32, 64] gives `old[:, :, :16, :24]` for
  a new [3, 3, 16, 24] (a supernet's widest kernel to a standalone net);

and stays fresh otherwise. A fresh variable whose name exists in the old
params is a mismatch: it is logged (op, variable, both shapes) and listed
by `find_mismatches`. Unlike abstract_nas's `inherit_params`, which matches
whole ops by name without a shape check, matching is per variable and
shape-aware.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from tunas_tf.graph import model as model_lib

Params = Dict[str, Dict[str, np.ndarray]]
_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Mismatch:
  """A variable present in both params whose old value cannot be reused.

  Attributes:
    op_name: the op.
    var_name: the variable.
    new_shape: its shape in the new params.
    old_shape: its shape in the old params.
  """
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
  """Variables in both params whose old value neither fits nor slices.

  Args:
    new_params: `{op_name: {var_name: array}}` of the new model.
    old_params: the same for the model to inherit from.

  Returns:
    A list of `Mismatch`, in the order of `new_params`.
  """
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
  """Splits the new params into inherited and fresh values.

  Args:
    new_params: `{op_name: {var_name: array}}` of the new model (e.g. its
      initial values).
    old_params: the same for the model to inherit from; not modified.

  Returns:
    `(inherited, fresh)`, both `{op_name: {var_name: np.ndarray}}` with
    disjoint variables that together cover `new_params`: `inherited` holds
    old values (or their leading slices) in the new shapes, `fresh` the new
    values of everything else (abstract_nas calls it `trainable`). An op
    appears in both when only some of its variables are inherited. Each
    mismatch (see module docstring) is logged as a warning.
  """
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
  """Assigns the inheritable old values to a built model's variables.

  Args:
    model: a built `model.Model`.
    old_params: `{op_name: {var_name: array}}` to inherit from.
    session: a `tf.compat.v1.Session` for a model in a TF1 graph.

  Returns:
    `(inherited, fresh)` as `inherit_params` returns them for the model's
    current values; the inherited ones are now assigned.
  """
  inherited, fresh = inherit_params(model_lib.get_params(model, session),
                                    old_params)
  model_lib.set_params(model, inherited, session)
  return inherited, fresh
