"""The per-block latency table (ProxylessNAS's), as the coupled linear form.

The table maps a unit's `key` (a computing layer with the activation, pool
and endpoint layers after it) to its ms timed alone; a network predicts
`scale * sum + per_unit * count + offset` (`fit_correction`). A unit depends
only on its first layer's feature block, so the model is linear.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from tunas_tf.cost_model import features as features_lib
from tunas_tf.cost_model import macs
from tunas_tf.search_space import mobile
from tunas_tf.search_space import naming
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema
from tunas_tf.search_space import structure
from tunas_tf.search_space import walker

FORM = 'block_table'
# Layers without choices of their own that join the unit before them.
_FOLLOWERS = (ops.ActivationSpec, ops.GlobalAveragePoolSpec,
              ops.DetectionEndpointSpec)
_NOTHING = (structure.Identity, structure.Zero)
# `fit_correction`'s floor on a relative residual (its weights stay finite).
_MIN_RELATIVE = 1e-6


@dataclasses.dataclass(frozen=True)
class Unit:
  """A piece of a network timed alone: `spec` a pruned one-block
  `ConvTowerSpec` (its layers, the block's width), `num_classes` the
  classifier's width if it ends the network, `where` the layer it was first
  found at (not part of its identity)."""
  spec: ops.ConvTowerSpec
  image_size: int
  input_channels: int
  num_classes: Optional[int]
  where: str = dataclasses.field(default='', compare=False)

  @property
  def key(self) -> str:
    """'u' and 16 hex digits of a hash of what it computes."""
    text = repr((self.spec, self.image_size, self.input_channels,
                 self.num_classes))
    return 'u' + hashlib.sha1(text.encode()).hexdigest()[:16]

  def describe(self) -> str:
    """E.g. 'blocks/2/layers/1 at 16x16x24 -> 32: DepthwiseBottleneck k5
    x6, Endpoint'."""
    layers = ', '.join(_describe_layer(l) for l in self.spec.blocks[0].layers)
    head = ' + classifier' if self.num_classes is not None else ''
    s = self.image_size
    return (f'{self.where} at {s}x{s}x{self.input_channels} -> '
            f'{self.spec.blocks[0].filters}: {layers}{head}')


def _describe_layer(layer: Any) -> str:
  if isinstance(layer, ops.ResidualSpec):
    return f'Residual({_describe_layer(layer.layer)})'
  text = ops.choice_label(layer)
  if isinstance(layer, ops.ActivationSpec):
    return text
  for field in ('kernel_size', 'expansion_filters'):
    if hasattr(layer, field):
      text += ' ' + ('k' if field == 'kernel_size' else '') + ops.choice_label(
          getattr(layer, field))
  if getattr(layer, 'strides', 1) != 1:
    text += f' s{layer.strides}'
  if getattr(layer, 'use_squeeze_and_excite', False) is True:
    text += ' SE'
  return text


def unit_groups(spec: ops.ConvTowerSpec) -> List[List[int]]:
  """The layers of each unit, as flat layer positions (blocks' layers in
  order): a layer starts a unit unless it is an activation, pool or
  endpoint after another layer of its block."""
  groups: List[List[int]] = []
  k = 0
  for block in spec.blocks:
    for j, layer in enumerate(block.layers):
      if j > 0 and isinstance(layer, _FOLLOWERS):
        groups[-1].append(k)
      else:
        groups.append([k])
      k += 1
  return groups


def architecture_units(pruned: ops.ConvTowerSpec, shape: macs.InputSpec
                       ) -> List[Tuple[int, Unit]]:
  """(first layer's flat position, unit) of every unit of a pruned
  architecture that computes something (the last one always: the
  classifier)."""
  network = walker.describe_network(pruned, shape.input_channels)
  layers = network.layers
  sizes, size = [], shape.image_size
  for layer in layers:
    sizes.append(size)
    size = layer.part.out_size(size) if layer.part is not None else size
  groups = unit_groups(pruned)
  found = []
  for g, group in enumerate(groups):
    last = g == len(groups) - 1
    if not last and all(
        isinstance(leaf, _NOTHING) for k in group
        for leaf, _, _ in structure.sized_leaves(layers[k].part, sizes[k])):
      continue
    first = layers[group[0]]
    block = pruned.blocks[first.block_index]
    spec = ops.ConvTowerSpec(
        (ops.Block(tuple(layers[k].spec for k in group), block.filters),),
        pruned.filters_base)
    found.append((group[0], Unit(spec, sizes[group[0]],
                                 first.in_width.static(),
                                 shape.num_classes if last else None,
                                 first.prefix)))
  return found


def _relevant(space: ops.ConvTowerSpec, block: int, layer: int) -> List[int]:
  """Index positions of the OneOfs a layer's feature block spans: its
  block's width, the width into it (the previous block's, for a block's
  first layer) and its own."""
  prefix = naming.layer_prefix(block, layer)
  wanted = {naming.block_filters_path(block)}
  if layer == 0 and block > 0:
    wanted.add(naming.block_filters_path(block - 1))
  return [i for i, (path, _) in enumerate(schema.flatten_with_paths(space))
          if path in wanted or path == prefix or
          path.startswith(prefix + '/')]


@functools.lru_cache(maxsize=8)
def slots(ssd: str, shape: macs.InputSpec
          ) -> Tuple[Tuple[Tuple[Tuple[int, Optional[int]], str], ...],
                     Dict[str, Unit]]:
  """(slots, units by key): every entry the space needs at `shape`, from each
  unit's first layer under every combination of its feature block's
  choices; a slot ((first layer, feature position or None: the bias), unit
  key) says where its entry goes in the linear form. ValueError for an
  unknown space, or a unit depending on choices outside its feature block
  (naming the position)."""
  space = mobile.get_search_space(ssd)
  counts = schema.num_choices(space)
  layer_at = [(b, j) for b, block in enumerate(space.blocks)
              for j in range(len(block.layers))]
  groups = unit_groups(space)
  lengths = features_lib.block_feature_lengths(space)
  # Where each layer's feature block starts (`features` drops length 1).
  offsets = np.cumsum([0] + [n if n > 1 else 0 for n in lengths]).tolist()
  by_position: Dict[Tuple[int, Optional[int]], str] = {}
  units: Dict[str, Unit] = {}
  for group in groups:
    head = group[0]
    relevant = _relevant(space, *layer_at[head])
    for combination in itertools.product(*[range(counts[i])
                                            for i in relevant]):
      indices = [0] * len(counts)
      for i, value in zip(relevant, combination):
        indices[i] = value
      found = dict(architecture_units(schema.prune(space, indices), shape))
      if head not in found:
        continue  # A skipped layer: nothing to time.
      unit = found[head]
      units.setdefault(unit.key, unit)
      position = None
      if lengths[head] > 1:
        values = features_lib.features(
            features_lib.attach_one_hot_masks(space, indices))
        local = values[offsets[head]:offsets[head] + lengths[head]]
        position = offsets[head] + int(np.argmax(local))
      earlier = by_position.setdefault((head, position), unit.key)
      if earlier != unit.key:
        raise ValueError(
            f'{ssd}: the unit at {unit.where} differs ({units[earlier].describe()}'
            f' / {unit.describe()}) under one feature position: the table is '
            'not linear in the features')
  return tuple(by_position.items()), units


def linear_form(ssd: str, shape: macs.InputSpec, table: Mapping[str, float]
                ) -> Tuple[np.ndarray, float]:
  """(kernel, bias) with `features @ kernel + bias` = the sum of the
  architecture's units' entries; ValueError naming a unit `table` lacks."""
  table_slots, units = slots(ssd, shape)
  missing = [k for k in units if k not in table]
  if missing:
    raise ValueError(
        f'the block table has no entry for {missing[0]} '
        f'({units[missing[0]].describe()})'
        f"{f' and {len(missing) - 1} more' if len(missing) > 1 else ''}, which "
        f'{ssd} at {shape.image_size} px needs; measure it '
        '(tools/measure_latency --block_table appends what is missing)')
  kernel = np.zeros([features_lib.feature_length(
      mobile.get_search_space(ssd))], np.float64)
  bias = 0.0
  for (_, position), key in table_slots:
    if position is None:
      bias += table[key]
    else:
      kernel[position] += table[key]
  return kernel, bias


def columns(ssd: str, shape: macs.InputSpec, table: Mapping[str, float]
            ) -> Tuple[Tuple[np.ndarray, float], Tuple[np.ndarray, float]]:
  """The linear forms of the table sum and of the number of units."""
  ones = {key: 1.0 for key in slots(ssd, shape)[1]}
  return linear_form(ssd, shape, table), linear_form(ssd, shape, ones)


def fit_correction(sums: np.ndarray, counts: np.ndarray,
                   latencies: np.ndarray, iterations: int = 100
                   ) -> Dict[str, float]:
  """`latency ~ scale * sum + per_unit * count + offset`, minimising the
  mean absolute relative error (iteratively reweighted least squares: a
  disturbed row does not pull it); the count column is dropped when
  constant. Returns the three numbers by name."""
  sums, counts, latencies = (np.asarray(v, np.float64)
                             for v in (sums, counts, latencies))
  use_count = np.ptp(counts) > 0
  x = np.stack([sums] + ([counts] if use_count else []) +
               [np.ones_like(sums)], axis=1)
  weights = 1.0 / latencies**2  # Least squares on relative errors first.
  for _ in range(iterations):
    root = np.sqrt(weights)[:, None]
    solution = np.linalg.lstsq(x * root, latencies * root[:, 0],
                               rcond=None)[0]
    relative = np.abs(x @ solution - latencies) / latencies
    weights = 1.0 / (latencies**2 * np.maximum(relative, _MIN_RELATIVE))
  return {'scale': float(solution[0]),
          'per_unit': float(solution[1]) if use_count else 0.0,
          'offset': float(solution[-1])}


def corrected(form: Tuple[np.ndarray, float], count: Tuple[np.ndarray, float],
              correction: Mapping[str, float]) -> Tuple[np.ndarray, float]:
  """The corrected model's (kernel, bias) from the two linear forms."""
  (kernel, bias), (count_kernel, count_bias) = form, count
  return (correction['scale'] * kernel + correction['per_unit'] * count_kernel,
          correction['scale'] * bias + correction['per_unit'] * count_bias +
          correction['offset'])


def check_key(key: str) -> str:
  """`key` if it looks like a `Unit.key`; else ValueError."""
  if (len(key) != 17 or key[0] != 'u' or
      any(c not in '0123456789abcdef' for c in key[1:])):
    raise ValueError(f'{key!r} is not a block-table key (u and 16 hex '
                     'digits, as tools/measure_latency --block_table writes)')
  return key


def units_of(ssd: str, shape: macs.InputSpec,
             architectures: Optional[Sequence[Any]] = None
             ) -> Dict[str, Unit]:
  """The distinct units (by key) that `architectures` use, in the order
  found; None: every unit the space needs (`slots`)."""
  if architectures is None:
    return dict(slots(ssd, shape)[1])
  space = mobile.get_search_space(ssd)
  units: Dict[str, Unit] = {}
  for indices in architectures:
    for _, unit in architecture_units(schema.prune(space, indices), shape):
      units.setdefault(unit.key, unit)
  return units
