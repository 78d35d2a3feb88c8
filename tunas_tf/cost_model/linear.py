"""The linear cost model: `features @ kernel + bias` (reference/tunas.md §7).

Three kinds of coefficients, one format (DESIGN "Cost models"):

* `'released'`: the original's simulated Pixel-1 latencies (ms) for
  `RELEASED_SPACES`, shipped in `cost_model/data/<ssd>.json`;
* `'macs'`: the exact multiply-add count of the sampled network for any
  space (`cost_model.macs`), at the space's input (`macs.default_input`)
  unless `image_size` / `num_classes` / `input_channels` say otherwise;
* the path of a coefficients JSON `{"ssd", "units", "num_features", "kernel",
  "bias", ...}` (e.g. fitted to the user's device).

`cost_model=None` means `'released'` where the space has a released model
and `'macs'` elsewhere.

`estimate_cost` is a tensor op (it works on the controller's warm-up
mixtures); `estimate_cost_of_indices` is its plain Python/NumPy twin for a
fixed architecture.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from typing import Any, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from tunas_tf.cost_model import features as features_lib
from tunas_tf.cost_model import macs
from tunas_tf.search_space import mobile

RELEASED = 'released'
MACS = 'macs'
COST_MODEL_KINDS = (RELEASED, MACS)
# Spaces with released coefficients (the original's `cost_model_data.py`).
RELEASED_SPACES = ('proxylessnas_search', 'proxylessnas_enlarged_search',
                   'mobilenet_v3_like_search')
MACS_UNITS = 'multiply-adds'
_DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data')
_REQUIRED_FIELDS = ('ssd', 'units', 'num_features', 'kernel', 'bias')


@dataclasses.dataclass(frozen=True)
class LinearCostModel:
  """Coefficients of a linear cost model for one search space.

  Attributes:
    ssd: name of the search space the features come from.
    units: what the estimate measures, e.g. 'simulated Pixel-1 latency, ms'.
    kernel: read-only float64 NumPy array [num_features].
    bias: Python float.
    source: 'released', 'macs', or the path of the JSON it was read from.
  """
  ssd: str
  units: str
  kernel: np.ndarray = dataclasses.field(repr=False)
  bias: float
  source: str

  @property
  def num_features(self) -> int:
    return int(self.kernel.shape[0])


@functools.lru_cache(maxsize=None)
def _space_feature_length(ssd: str) -> int:
  return features_lib.feature_length(mobile.get_search_space(ssd))


def _is_number(value: Any) -> bool:
  return (isinstance(value, (int, float)) and not isinstance(value, bool) and
          math.isfinite(value))


def _read_coefficients(path: str, ssd: str) -> LinearCostModel:
  """Reads and validates a coefficients JSON (uncached)."""
  try:
    with open(path) as f:
      data = json.load(f)
  except OSError as e:
    raise ValueError(f'Cost model {path}: cannot read it ({e})') from None
  except json.JSONDecodeError as e:
    raise ValueError(f'Cost model {path}: not valid JSON ({e})') from None
  if not isinstance(data, dict):
    raise ValueError(f'Cost model {path}: expected a JSON object with fields '
                     f'{list(_REQUIRED_FIELDS)}, got {type(data).__name__}')
  for field in _REQUIRED_FIELDS:
    if field not in data:
      raise ValueError(f'Cost model {path}: missing field {field!r} (needs '
                       f'{list(_REQUIRED_FIELDS)})')
  if data['ssd'] != ssd:
    raise ValueError(f"Cost model {path}: field 'ssd' is {data['ssd']!r}, but "
                     f'the search space is {ssd!r}')
  if not isinstance(data['units'], str):
    raise ValueError(f"Cost model {path}: field 'units' must be a string, got "
                     f"{data['units']!r}")
  expected = _space_feature_length(ssd)
  num_features = data['num_features']
  if isinstance(num_features, bool) or num_features != expected:
    raise ValueError(f"Cost model {path}: field 'num_features' is "
                     f'{num_features!r}, but the features of {ssd!r} have '
                     f'length {expected}')
  kernel = data['kernel']
  if not isinstance(kernel, list) or len(kernel) != expected:
    length = len(kernel) if isinstance(kernel, list) else type(kernel).__name__
    raise ValueError(f"Cost model {path}: field 'kernel' has {length} values; "
                     f'expected num_features = {expected}')
  bad = [i for i, v in enumerate(kernel) if not _is_number(v)]
  if bad:
    raise ValueError(f"Cost model {path}: field 'kernel' has a non-number "
                     f'{kernel[bad[0]]!r} at position {bad[0]}')
  if not _is_number(data['bias']):
    raise ValueError(f"Cost model {path}: field 'bias' must be a finite "
                     f"number, got {data['bias']!r}")
  array = np.asarray(kernel, np.float64)
  array.setflags(write=False)
  return LinearCostModel(ssd=ssd, units=data['units'], kernel=array,
                         bias=float(data['bias']), source=path)


@functools.lru_cache(maxsize=32)
def _cached_coefficients(path: str, ssd: str, mtime_ns: int) -> LinearCostModel:
  del mtime_ns  # Part of the cache key only: a rewritten file is re-read.
  return _read_coefficients(path, ssd)


def load_coefficients(path: str, ssd: str) -> LinearCostModel:
  """Loads and validates a coefficients JSON for the search space `ssd`.

  Args:
    path: path of a JSON object with fields `ssd` (str), `units` (str),
      `num_features` (int), `kernel` (list of `num_features` numbers) and
      `bias` (number); other fields are ignored.
    ssd: the search space the coefficients will be applied to.

  Returns:
    A `LinearCostModel` (cached per path and modification time).

  Raises:
    ValueError: naming the file and the field, if the file cannot be read or
      parsed, a field is missing or malformed, `ssd` differs, `num_features`
      differs from the feature length of the space, or `kernel` does not have
      `num_features` numbers; also for an unknown `ssd`.
  """
  mobile.get_search_space(ssd)  # Validates the name.
  path = os.path.abspath(path)
  try:
    mtime_ns = os.stat(path).st_mtime_ns
  except OSError as e:
    raise ValueError(f'Cost model {path}: cannot read it ({e})') from None
  return _cached_coefficients(path, ssd, mtime_ns)


def get_cost_model(ssd: str, cost_model: Optional[str] = None, *,
                   image_size: Optional[int] = None,
                   num_classes: Optional[int] = None,
                   input_channels: Optional[int] = None) -> LinearCostModel:
  """Returns the coefficients of a cost model for a search space.

  Args:
    ssd: a name of `mobile.SEARCH_SPACES`.
    cost_model: None (released where it exists, else macs), `'released'`,
      `'macs'`, or the path of a coefficients JSON.
    image_size: input resolution for `'macs'` (default: the space's, see
      `macs.default_input`); ignored by the other kinds.
    num_classes: classifier width for `'macs'` (default: the space's).
    input_channels: image channels for `'macs'` (default: the space's).

  Returns:
    A `LinearCostModel`.

  Raises:
    ValueError: for an unknown `ssd`; `'released'` for a space without a
      released model (the message lists those that have one and suggests
      `'macs'`); a `cost_model` that is neither a kind nor an existing file;
      or an invalid coefficients file (see `load_coefficients`).
  """
  mobile.get_search_space(ssd)  # Validates the name.
  if cost_model is None:
    cost_model = RELEASED if ssd in RELEASED_SPACES else MACS
  if cost_model == RELEASED:
    if ssd not in RELEASED_SPACES:
      raise ValueError(
          f'No released cost model for search space {ssd!r}; released models '
          f"exist for {list(RELEASED_SPACES)}. Use cost_model='macs' (multiply-"
          f'adds, any space) or the path of a fitted coefficients JSON')
    return load_coefficients(os.path.join(_DATA_DIR, f'{ssd}.json'), ssd)
  if cost_model == MACS:
    shape = macs.resolve_input(ssd, image_size, num_classes, input_channels)
    kernel, bias = macs.macs_cost_model(ssd, shape.image_size,
                                        shape.num_classes, shape.input_channels)
    return LinearCostModel(ssd=ssd, units=MACS_UNITS, kernel=kernel,
                           bias=bias, source=MACS)
  if not isinstance(cost_model, str) or not os.path.isfile(cost_model):
    raise ValueError(
        f'Unknown cost model {cost_model!r}; expected one of '
        f'{list(COST_MODEL_KINDS)} or the path of a coefficients JSON (no such '
        f'file)')
  return load_coefficients(cost_model, ssd)


@tf.autograph.experimental.do_not_convert
def estimate_cost(features: Union[tf.Tensor, np.ndarray], ssd: str,
                  cost_model: Optional[str] = None, *,
                  image_size: Optional[int] = None,
                  num_classes: Optional[int] = None,
                  input_channels: Optional[int] = None) -> tf.Tensor:
  """The linear cost of (possibly mixed) architecture features, as a tensor op.

  Args:
    features: float features from `features.features`: rank 1
      [num_features], or rank 2 [batch, num_features]; a tensor or an array.
    ssd: the search space the features come from.
    cost_model: None, `'released'`, `'macs'` or a coefficients JSON path (see
      `get_cost_model`).
    image_size: input resolution for `'macs'` (default: the space's).
    num_classes: classifier width for `'macs'` (default: the space's).
    input_channels: image channels for `'macs'` (default: the space's).

  Returns:
    float32 tensor: a scalar for rank-1 features, [batch] for rank 2.
    `features @ kernel + bias`, in the model's units (ms for released,
    multiply-adds for macs).

  Raises:
    ValueError: for a features length that differs from the model's, a rank
      other than 1 or 2, or any error of `get_cost_model`.
  """
  model = get_cost_model(ssd, cost_model, image_size=image_size,
                         num_classes=num_classes, input_channels=input_channels)
  features = tf.convert_to_tensor(features, tf.float32)
  rank = features.shape.rank
  if rank not in (1, 2):
    raise ValueError(f'estimate_cost: features must have rank 1 or 2, got '
                     f'shape {features.shape}')
  length = features.shape[-1]
  if length is not None and length != model.num_features:
    raise ValueError(
        f'estimate_cost: features have length {length}, but the {ssd!r} cost '
        f'model ({model.source}) expects {model.num_features}')
  kernel = tf.constant(model.kernel.reshape([-1, 1]), tf.float32)
  batch = tf.reshape(features, [-1, model.num_features])
  cost = tf.reshape(tf.matmul(batch, kernel), [-1]) + model.bias
  return cost[0] if rank == 1 else cost


def estimate_cost_of_indices(indices: Union[str, Sequence[int]], ssd: str,
                             cost_model: Optional[str] = None, *,
                             image_size: Optional[int] = None,
                             num_classes: Optional[int] = None,
                             input_channels: Optional[int] = None) -> float:
  """The cost of a fixed architecture, in plain Python/NumPy (no TF graph).

  Args:
    indices: one index per OneOf of the space in visit order, as a list of
      ints or a colon-separated string ('0:2:1').
    ssd: a name of `mobile.SEARCH_SPACES`.
    cost_model: None, `'released'`, `'macs'` or a coefficients JSON path (see
      `get_cost_model`).
    image_size: input resolution for `'macs'` (default: the space's).
    num_classes: classifier width for `'macs'` (default: the space's).
    input_channels: image channels for `'macs'` (default: the space's).

  Returns:
    Python float, e.g. about 84.4 (ms) for ProxylessNAS-Mobile's indices in
    `proxylessnas_search` under the released model.

  Raises:
    ValueError: for a wrong number of indices or an index out of range (the
      messages of `schema.prune`), or any error of `get_cost_model`.
  """
  model = get_cost_model(ssd, cost_model, image_size=image_size,
                         num_classes=num_classes, input_channels=input_channels)
  spec = features_lib.attach_one_hot_masks(mobile.get_search_space(ssd),
                                           indices)
  values = features_lib.features(spec).astype(np.float64)
  return float(values @ model.kernel + model.bias)
