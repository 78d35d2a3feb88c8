"""The linear cost model `features @ kernel + bias`, of four kinds: 'released'
(the original's simulated Pixel-1 ms), 'macs', 'flash' (int8 bytes) or a
fitted coefficients JSON. `get_cost_model` resolves `--cost_model` once; the
estimates, `cost_range` and `default_target` take its `LinearCostModel`."""


from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from tunas_tf.io import checks
from tunas_tf.io import files
from tunas_tf.io import records
from tunas_tf.cost_model import features as features_lib
from tunas_tf.cost_model import macs
from tunas_tf.cost_model import memory
from tunas_tf.cost_model import provenance as provenance_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema

RELEASED = 'released'
MACS = 'macs'
FLASH = 'flash'  # The int8 .tflite's bytes (`memory.flash_cost_model`).
FITTED = 'fitted'  # The kind of a model read from a coefficients JSON.
COST_MODEL_KINDS = (RELEASED, MACS, FLASH)
MACS_UNITS = 'multiply-adds'
FLASH_UNITS = 'int8 model, bytes'
RELEASED_UNITS = 'simulated Pixel-1 latency, ms'  # The released JSONs'.
UNKNOWN_UNITS = 'cost'  # `cost_units` of a coefficients JSON not readable here.
_DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data')
_REQUIRED_FIELDS = ('ssd', 'units', 'num_features', 'kernel', 'bias')
# The JSON's `form`: 'linear' (a fit, the released ones) or 'block_table',
# which also carries the table and correction its kernel was made from.
LINEAR_FORM = 'linear'
FORMS = (LINEAR_FORM, 'block_table')
_FORM_FIELDS = {'block_table': ('table', 'correction')}


@dataclasses.dataclass(frozen=True)
class LinearCostModel:
  """A linear cost model for the space `ssd`: read-only float64 `kernel`
  [num_features], float `bias`, `units` of the estimate, `source` ('macs',
  'flash' or the JSON's path), `kind` and, for a fitted model, how its
  latencies were measured (`measured_with`) or None."""
  ssd: str
  units: str
  kernel: np.ndarray = dataclasses.field(repr=False)
  bias: float
  source: str
  kind: str = FITTED
  measured_with: Optional[provenance_lib.Provenance] = dataclasses.field(
      default=None, compare=False, repr=False)

  @property
  def num_features(self) -> int:
    return int(self.kernel.shape[0])


def short_units(units: str) -> str:
  """The unit printed after a cost, from a `LinearCostModel.units`: 'MACs'
  for the macs model, else its last ', '-part ('ms' of `RELEASED_UNITS`)."""
  return 'MACs' if units == MACS_UNITS else units.rsplit(', ', 1)[-1]


def cost_units(cost_model: Optional[str]) -> str:
  """`short_units` of a `--cost_model` value's model, without resolving it
  (no space needed): 'MACs', 'ms', a coefficients JSON's own units, or
  `UNKNOWN_UNITS` when that file cannot be read here (a report of a run
  whose fitted model is gone)."""
  units = {MACS: MACS_UNITS, RELEASED: RELEASED_UNITS,
           FLASH: FLASH_UNITS}.get(cost_model or '')
  if units is None and cost_model:
    try:
      units = files.read_json(cost_model).get('units')
    except (ValueError, AttributeError, tf.errors.OpError):
      pass
  return short_units(units) if isinstance(units, str) and units else (
      UNKNOWN_UNITS)


def units_suffix(cost_model: Optional[str]) -> str:
  """' MACs', ' ms', or '' when the units are unknown: to follow a cost."""
  units = cost_units(cost_model)
  return '' if units == UNKNOWN_UNITS else ' ' + units


def cost_text(value: float, cost_model: Optional[str] = None,
              target: Optional[float] = None) -> str:
  """A cost as people read it, the one format of every cost printed:
  '2,248,370' from 1,000 up (never '2.25e+06'), else 6 significant digits
  ('84.2'); with `cost_model`, its units after it when known ('213,168
  MACs'); with a `target` too, '213,168 MACs (target 220,131 MACs, -3%)'."""
  def text(v):
    return (f'{v:,.0f}' if abs(v) >= 1000 else f'{v:.6g}') + (
        units_suffix(cost_model) if cost_model else '')
  if not target:
    return text(value)
  return (f'{text(value)} (target {text(target)}, '
          f'{100 * (value / target - 1):+.0f}%)')


def _read_coefficients(path: str, ssd: str) -> LinearCostModel:
  """Reads and validates a coefficients JSON (uncached)."""
  try:
    with tf.io.gfile.GFile(path) as f:
      data = json.load(f)
  except (OSError, tf.errors.OpError) as e:
    raise ValueError(f'Cost model {path}: cannot read it ({e})') from None
  except json.JSONDecodeError as e:
    raise ValueError(f'Cost model {path}: not valid JSON ({e})') from None
  what = f'Cost model {path}'
  form = records.check_keys(data, what, ()).get('form', LINEAR_FORM)
  if form not in FORMS:
    raise ValueError(f"{what}: unknown form {form!r}; expected one of "
                     f'{list(FORMS)}')
  needed = _REQUIRED_FIELDS + _FORM_FIELDS.get(form, ())
  records.check_keys(data, what, needed,
                     hint=f' (a {form!r} model needs {list(needed)})')
  _check_form_fields(path, form, data)
  if data['ssd'] != ssd:
    raise ValueError(f"{what}: field 'ssd' is {data['ssd']!r}, but the search "
                     f'space is {ssd!r}')
  records.check_value(what, 'units', data['units'], 'str')
  records.check_value(what, 'bias', data['bias'], 'float')
  expected = features_lib.feature_length(mobile.get_search_space(ssd))
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
  bad = [i for i, v in enumerate(kernel) if not checks.is_number(v)]
  if bad:
    raise ValueError(f"Cost model {path}: field 'kernel' has a non-number "
                     f'{kernel[bad[0]]!r} at position {bad[0]}')
  array = np.asarray(kernel, np.float64)
  array.setflags(write=False)
  measured_with = data.get('measured_with')
  if measured_with is not None:
    measured_with = provenance_lib.Provenance.from_dict(
        measured_with, f"Cost model {path}: field 'measured_with'")
    if measured_with.ssd != ssd:
      raise ValueError(f"Cost model {path}: field 'measured_with' names "
                       f'{measured_with.ssd!r}, not {ssd!r}')
  return LinearCostModel(ssd=ssd, units=data['units'], kernel=array,
                         bias=float(data['bias']), source=path,
                         measured_with=measured_with)


def _check_form_fields(path: str, form: str, data: Dict[str, Any]) -> None:
  """A block table's `table` (key -> positive ms) and `correction`."""
  if form != 'block_table':
    return
  table = data['table']
  if not isinstance(table, dict) or not table:
    raise ValueError(f"Cost model {path}: field 'table' must be a non-empty "
                     'object of unit keys to ms')
  for key, value in table.items():
    if not checks.is_number(value) or value <= 0:
      raise ValueError(f"Cost model {path}: field 'table' has {value!r} for "
                       f'{key!r}, not a positive number of ms')
  correction = data['correction']
  names = ('scale', 'per_unit', 'offset')
  if not isinstance(correction, dict) or not all(
      checks.is_number(correction.get(name)) for name in names):
    raise ValueError(f"Cost model {path}: field 'correction' must be an "
                     f'object of numbers {list(names)}, got {correction!r}')


@functools.lru_cache(maxsize=32)
def _cached_coefficients(path: str, ssd: str, mtime_ns: int) -> LinearCostModel:
  del mtime_ns  # Part of the cache key only: a rewritten file is re-read.
  return _read_coefficients(path, ssd)


def load_coefficients(path: str, ssd: str) -> LinearCostModel:
  """The `LinearCostModel` of a coefficients JSON for the space `ssd`, cached
  per path and modification time.

  The JSON has `ssd`, `units`, `num_features`, `kernel` (that many numbers),
  `bias`; optionally `form` (`FORMS`; a 'block_table' adds `table` and
  `correction`) and `measured_with`; other fields are ignored. ValueError
  naming the file and field: unreadable, missing or malformed, another
  `ssd`, or a length other than the space's features.
  """
  mobile.get_search_space(ssd)  # Validates the name.
  path = files.abspath(path)
  try:
    mtime_ns = tf.io.gfile.stat(path).mtime_nsec
  except tf.errors.OpError as e:
    raise ValueError(f'Cost model {path}: cannot read it ({e})') from None
  return _cached_coefficients(path, ssd, mtime_ns)


def get_cost_model(ssd: str, cost_model: Optional[str] = None, *,
                   image_size: Optional[int] = None,
                   num_classes: Optional[int] = None,
                   input_channels: Optional[int] = None,
                   precision: Optional[str] = None) -> LinearCostModel:
  """The `LinearCostModel` of `cost_model` for the space `ssd`.

  Args:
    cost_model: None (released where it exists, else macs), a kind, or the
      path of a coefficients JSON.
    image_size, num_classes, input_channels: the input 'macs' and 'flash'
      count at (default the space's); a fitted model must say it was
      measured at each one given (`measured_with`), and in `precision`.

  Raises:
    ValueError: an unknown `ssd`; 'released' for a space without one (naming
      those with one); neither a kind nor a file; an invalid JSON; a fitted
      model not measured as asked; a precision but float32 for 'released'.
  """
  info = mobile.space_info(ssd)  # Validates the name.
  if cost_model is None:
    cost_model = RELEASED if info.has_released_cost_model else MACS
  # MACs and flash are counts, the same in any arithmetic.
  if cost_model == RELEASED and precision not in (None, 'float32'):
    raise ValueError(
        f'Cost model {cost_model!r} is not of {precision} latencies: give a '
        f'fitted one measured in {precision} (tools/measure_latency '
        f'--precision={precision})')
  if cost_model == RELEASED:
    if not info.has_released_cost_model:
      released = [name for name, other in mobile.SEARCH_SPACES.items()
                  if other.has_released_cost_model]
      raise ValueError(
          f'No released cost model for search space {ssd!r}; released models '
          f"exist for {released}. Use cost_model='macs' (multiply-"
          f'adds, any space) or the path of a fitted coefficients JSON')
    model = load_coefficients(os.path.join(_DATA_DIR, f'{ssd}.json'), ssd)
    return dataclasses.replace(model, kind=RELEASED)
  if cost_model in (MACS, FLASH):
    shape = macs.resolve_input(ssd, image_size, num_classes, input_channels)
    count = (macs.macs_cost_model if cost_model == MACS
             else memory.flash_cost_model)
    kernel, bias = count(ssd, shape.image_size, shape.num_classes,
                         shape.input_channels)
    return LinearCostModel(
        ssd=ssd, units=MACS_UNITS if cost_model == MACS else FLASH_UNITS,
        kernel=kernel, bias=bias, source=cost_model, kind=cost_model)
  try:  # An existing file, local or remote (e.g. `gs://`)?
    is_file = isinstance(cost_model, str) and tf.io.gfile.exists(
        cost_model) and not tf.io.gfile.isdir(cost_model)
  except tf.errors.OpError:  # E.g. an unknown scheme: not a file.
    is_file = False
  if not is_file:
    raise ValueError(
        f'Unknown cost model {cost_model!r}; expected one of '
        f'{list(COST_MODEL_KINDS)} or the path of a coefficients JSON (no such '
        f'file)')
  model = load_coefficients(cost_model, ssd)
  given = {k: v for k, v in zip(provenance_lib.SHAPE + ('precision',), (
      image_size, num_classes, input_channels, precision)) if v is not None}
  if given:
    _check_measured_at(model, given)
  return model


def _check_measured_at(model: LinearCostModel, shape: Dict[str, int]
                       ) -> None:
  """Refuses a fitted model that does not say how it was measured, or was
  measured at another input or precision than `shape` (some of
  `provenance.SHAPE` and 'precision')."""
  if model.measured_with is None:
    raise ValueError(
        f'Cost model {model.source} does not say how its latencies were '
        "measured (no 'measured_with', which tools/fit_cost_model writes "
        "from the CSV's settings): nothing shows it was measured at this "
        f'input ({", ".join(f"{k}={v}" for k, v in shape.items())})')
  for key, value in shape.items():
    measured = getattr(model.measured_with, key)
    if measured != value and key == 'precision':  # The flag first.
      raise ValueError(
          f'Cost model {model.source} was measured in {measured}, not '
          f'{value}: search {measured} latencies with --latency_precision='
          f'{measured}, or measure and fit one in {value} '
          f'(tools/measure_latency --precision={value})')
    if measured != value:
      raise ValueError(
          f'Cost model {model.source} was measured with {key}={measured}, '
          f'not {value}: measure and fit one at this input '
          f'(tools/measure_latency --{key}={value})')


def _check_model(model: LinearCostModel, caller: str) -> None:
  if not isinstance(model, LinearCostModel):
    raise TypeError(f'{caller}: expected a LinearCostModel (from '
                    f'get_cost_model), got {type(model).__name__}')


@tf.autograph.experimental.do_not_convert
def estimate_cost(features: Union[tf.Tensor, np.ndarray],
                  model: LinearCostModel) -> tf.Tensor:
  """`features @ kernel + bias` as a float32 tensor op: a scalar for rank-1
  [num_features] (possibly mixed) features, [batch] for rank 2; ValueError
  for another rank or length."""
  _check_model(model, 'estimate_cost')
  features = tf.convert_to_tensor(features, tf.float32)
  rank = features.shape.rank
  if rank not in (1, 2):
    raise ValueError(f'estimate_cost: features must have rank 1 or 2, got '
                     f'shape {features.shape}')
  length = features.shape[-1]
  if length is not None and length != model.num_features:
    raise ValueError(
        f'estimate_cost: features have length {length}, but the '
        f'{model.ssd!r} cost model ({model.source}) expects '
        f'{model.num_features}')
  kernel = tf.constant(model.kernel.reshape([-1, 1]), tf.float32)
  batch = tf.reshape(features, [-1, model.num_features])
  cost = tf.reshape(tf.matmul(batch, kernel), [-1]) + model.bias
  return cost[0] if rank == 1 else cost


def estimate_cost_of_indices(indices: Union[str, Sequence[int]],
                             model: LinearCostModel) -> float:
  """The float cost of one architecture's indices (ints or '0:2:1'), in
  NumPy; ValueError as `schema.prune` for a wrong count or range."""
  _check_model(model, 'estimate_cost_of_indices')
  return float(estimate_costs_of_indices([indices], model)[0])


# `estimate_costs_of_indices` takes the features of at most this many
# values (rows x features, float32: 32 MB) at once.
_FEATURES_PER_CHUNK = 1 << 23


def estimate_costs_of_indices(
    indices_list: Sequence[Union[str, Sequence[int]]],
    model: LinearCostModel) -> np.ndarray:
  """float64 [len(indices_list)]: each exactly `estimate_cost_of_indices`
  (one row's dot product at a time), the features made in chunks;
  ValueError as it for the first bad index list."""
  _check_model(model, 'estimate_costs_of_indices')
  space = mobile.get_search_space(model.ssd)
  indices_list = list(indices_list)
  costs = np.empty([len(indices_list)], np.float64)
  chunk = max(1, _FEATURES_PER_CHUNK // model.num_features)
  for start in range(0, len(indices_list), chunk):
    rows = features_lib.batched_features(
        space, indices_list[start:start + chunk])
    for b, row in enumerate(rows):
      costs[start + b] = row.astype(np.float64) @ model.kernel + model.bias
  return costs


def default_target(model: LinearCostModel) -> float:
  """The search's cost target when none is given: the original's for a
  released model, else the geometric mean of `cost_range`."""
  if model.kind == RELEASED:
    return mobile.space_info(model.ssd).released_target_ms
  return math.sqrt(math.prod(cost_range(model)))


def cost_range(model: LinearCostModel) -> Tuple[float, float]:
  """(cheapest, dearest) cost of any architecture of the model's space,
  exactly, in its units.

  A layer's feature block is `kron(out_mask, in_mask, own)` with its own
  decisions independent of every other's, so every position of `own` is
  reachable: a layer adds the min (max) of its kernel row for the widths
  (o, i), i = o past a block's first layer. A dynamic program over the
  blocks' widths then adds them up (the widths chain block to block).
  """
  _check_model(model, 'cost_range')
  space = mobile.get_search_space(model.ssd)
  lengths = iter(features_lib.block_feature_lengths(space))
  extremes = [np.zeros([1]), np.zeros([1])]  # Per width of the last block.
  at = 0
  for block in space.blocks:
    if not block.layers:
      continue
    n_in = len(extremes[0])
    n = (len(block.filters.choices)
         if isinstance(block.filters, schema.OneOf) else 1)
    steps = [np.zeros([n_in, n]), np.zeros([n_in, n])]
    for j, _ in enumerate(block.layers):
      length = next(lengths)
      width_in = n_in if j == 0 else n
      if length <= 1:  # Dropped from the features: the bias has it.
        continue
      rows = model.kernel[at:at + length].reshape(n, width_in, -1)
      at += length
      for step, reduce in zip(steps, (np.min, np.max)):
        layer = reduce(rows, axis=-1)  # [n, width_in]
        step += layer.T if j == 0 else np.diag(layer)[None, :]
    extremes = [(e[:, None] + step).min(0) if k == 0 else
                (e[:, None] + step).max(0)
                for k, (e, step) in enumerate(zip(extremes, steps))]
  return (float(extremes[0].min()) + model.bias,
          float(extremes[1].max()) + model.bias)


# A search needs costs that vary over the space by at least this share of
# their median (`check_varies`).
MIN_RELATIVE_RANGE = 0.02


def check_varies(model: LinearCostModel) -> None:
  """ValueError when `cost_range` spans under `MIN_RELATIVE_RANGE` of its
  midpoint: a near-constant cost leaves the search nothing to trade."""
  low, high = cost_range(model)
  middle = abs(low + high) / 2
  if not high - low >= MIN_RELATIVE_RANGE * middle:
    raise ValueError(
        f'Cost model {model.source} hardly varies over {model.ssd!r}: '
        f'{low:.6g}..{high:.6g} {model.units} from its cheapest to its '
        f'dearest architecture ({100 * (high - low) / middle:.2g}% of '
        'their mean), so the search cannot trade accuracy against it; refit '
        'it with more measured architectures (fit_cost_model says how many)')
