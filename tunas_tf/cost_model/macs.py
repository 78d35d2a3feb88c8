"""Multiply-adds of a network, and the exact linear `macs` cost model: the
count is exactly linear in `cost_model.features`, so the coefficients are
derived, not fitted."""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from tunas_tf.io import checks
from tunas_tf.cost_model import features as features_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import resolve
from tunas_tf.search_space import schema
from tunas_tf.search_space import structure

@dataclasses.dataclass(frozen=True)
class InputSpec:
  """What the MAC count needs to know about the data (square images)."""
  image_size: int
  num_classes: int
  input_channels: int


def resolve_input(ssd: str, image_size: Optional[int] = None,
                  num_classes: Optional[int] = None,
                  input_channels: Optional[int] = None) -> InputSpec:
  """The input space `ssd` is designed for (`mobile.space_info`), with the
  given values instead; ValueError for an unknown space or a value that is
  not a positive int."""
  info = mobile.space_info(ssd)
  given = {'image_size': image_size, 'num_classes': num_classes,
           'input_channels': input_channels}
  for name, value in given.items():
    value = getattr(info, name) if value is None else value
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or (
        value <= 0):
      raise ValueError(f'{name} must be a positive int, got {value!r}')
    given[name] = int(value)
  return InputSpec(**given)


def layer_macs(layer: resolve.ResolvedLayer) -> int:
  """Multiply-adds of one resolved layer (the rules: `count_macs`); 0 for
  activations, pools, endpoints and skipped layers."""
  total = 0
  for part, _, out_size in structure.sized_leaves(layer.part,
                                                  layer.input_size):
    positions = out_size * out_size
    if isinstance(part, structure.Conv):
      total += (positions * part.kernel_size**2 * part.in_width.static() *
                part.out_width.static())
    elif isinstance(part, structure.Depthwise):
      total += positions * part.kernel_size**2 * part.in_width.static()
    elif isinstance(part, structure.SqueezeExcite):
      total += 2 * part.in_width.static() * part.hidden.static()
  return total


def classifier_macs(width: int, size: int, num_classes: int) -> int:
  """MACs of the 1x1 classifier conv on a `size` x `size` x `width` map."""
  return size * size * width * num_classes


def count_macs(pruned_spec: ops.ConvTowerSpec, image_size: int,
               num_classes: int, input_channels: int = 3) -> int:
  """Multiply-adds of a fixed network, classifier head included.

  Per layer: convolution `H_out * W_out * k * k * C_in * C_out`; depthwise
  `H_out * W_out * k * k * C`; squeeze-and-excite `C * S + S * C` with
  `S = make_divisible(SE_RATIO * C, filters_base)`, C the expanded width; the
  head a 1x1 convolution to `num_classes` at the final resolution (1 after a
  global pool); `H_out = ceil(H / stride)` ('SAME'). Nothing for batch norm,
  biases, activations, adds and pools. ValueError for a spec still holding
  OneOfs or malformed shapes (`resolve.resolve_layers`).
  """
  layers = resolve.resolve_layers(pruned_spec, image_size, input_channels)
  total = sum(layer_macs(layer) for layer in layers)
  if layers:
    width, size = layers[-1].output_width, layers[-1].output_size
  else:
    width, size = input_channels, image_size
  return total + classifier_macs(width, size, num_classes)


def _layer_alternatives(layer: Any) -> Dict[int, List[Any]]:
  """Hot position in the layer's feature block -> distinct pruned layers."""
  counts = schema.num_choices(layer)
  found: Dict[int, List[Any]] = {}
  for combo in itertools.product(*(range(n) for n in counts)):
    masked = features_lib.attach_one_hot_masks(layer, list(combo))
    position = int(np.argmax(features_lib.layer_features(masked)))
    pruned = schema.prune(layer, list(combo))
    seen = found.setdefault(position, [])
    if pruned not in seen:
      seen.append(pruned)
  return found


def macs_cost_model_for_spec(spec: ops.ConvTowerSpec, image_size: int,
                             num_classes: int, input_channels: int = 3
                             ) -> Tuple[np.ndarray, float]:
  """(kernel, bias) of the exact linear MAC model of `spec`: for every one-hot
  architecture, `features(attach_one_hot_masks(spec, indices)) @ kernel +
  bias == count_macs(schema.prune(spec, indices), ...)`, since a layer's MACs
  depend only on its block's width, its input width and its own choices.

  The kernel is a read-only float64 array (0 where no architecture reaches);
  ValueError when the MACs are not linear in the features (a choice changing
  the resolution, or choices sharing a feature with different MACs).
  """
  return layer_count_model(spec, image_size, num_classes, input_channels,
                           layer_macs, classifier_macs, 'macs')


def layer_count_model(spec: ops.ConvTowerSpec, image_size: int,
                      num_classes: int, input_channels: int,
                      layer_value: Callable[[resolve.ResolvedLayer], float],
                      head_value: Callable[[int, int, int], float],
                      name: str, width: Optional[int] = None
                      ) -> Tuple[np.ndarray, Any]:
  """The exact linear model of any per-layer count (`macs_cost_model_for_spec`
  for MACs): `layer_value(resolved layer)` summed over the layers, plus
  `head_value(width, size, num_classes)` of the classifier; `name` in the
  errors. Same returns and errors as `macs_cost_model_for_spec`; with
  `width`, both values are [width] vectors, the kernel [features, width]
  and the bias [width] (several counts at once)."""
  block_lengths = features_lib.block_feature_lengths(spec)
  shape = () if width is None else (width,)
  kernel = np.zeros((features_lib.feature_length(spec),) + shape, np.float64)
  positions = [(b, j) for b, block in enumerate(spec.blocks)
               for j in range(len(block.layers))]
  cast = float if width is None else lambda v: np.asarray(v, np.float64)
  if not positions:
    return kernel, cast(head_value(input_channels, image_size, num_classes))
  last = positions[-1]
  bias = np.zeros(shape)
  offset = 0
  size = image_size
  # The previous layer's possible output widths, and whether they are masked.
  in_widths, in_masked = (input_channels,), False
  for (b, j), length in zip(positions, block_lengths):
    where = f'blocks/{b}/layers/{j}'
    layer = spec.blocks[b].layers[j]
    filters = spec.blocks[b].filters
    out_masked = isinstance(filters, schema.OneOf)
    out_widths = tuple(filters.choices) if out_masked else (filters,)
    alternatives = _layer_alternatives(layer)
    layer_length = features_lib.layer_feature_length(layer)
    n_in = len(in_widths) if in_masked else 1
    out_size = None
    for (o, out_width), (i, in_width) in itertools.product(
        enumerate(out_widths), enumerate(in_widths)):
      if j > 0 and o != i:
        continue  # Coupled to the block's own mask: only o == i is reachable.
      for position, pruned_layers in alternatives.items():
        values = {}
        for pruned in pruned_layers:
          resolved = resolve.resolve_layer(
              pruned, in_width, out_width, size, spec.filters_base, b, j)
          if out_size is None:
            out_size = resolved.output_size
          elif resolved.output_size != out_size:
            raise ValueError(
                f'{name}: the choices of {where} change the output '
                f'resolution ({out_size} vs {resolved.output_size}); the '
                'count is not linear in the features')
          value = np.asarray(layer_value(resolved), np.float64)
          if (b, j) == last:
            value = value + head_value(resolved.output_width,
                                       resolved.output_size, num_classes)
          values[value.tobytes()] = value
        if len(values) > 1:
          raise ValueError(
              f'{name}: choices of {where} share a feature but differ '
              f'({[v.tolist() for v in values.values()]}); the count is not '
              'linear in the features')
        _, value = values.popitem()
        if length == 1:
          bias += value
        else:
          kernel[offset + (o * n_in + i) * layer_length + position] = value
    if length > 1:
      offset += length
    size = out_size
    in_widths, in_masked = out_widths, out_masked
  kernel.setflags(write=False)
  return kernel, cast(bias)


@functools.lru_cache(maxsize=32)
def macs_cost_model(ssd: str, image_size: int, num_classes: int,
                    input_channels: int) -> Tuple[np.ndarray, float]:
  """`macs_cost_model_for_spec` of space `ssd`, cached (a reference model:
  kernel [0.], its MACs the bias); ValueError for an unknown space."""
  return macs_cost_model_for_spec(mobile.get_search_space(ssd), image_size,
                                  num_classes, input_channels)


def _layer_counts(layer: resolve.ResolvedLayer) -> Dict[str, int]:
  """What a layer's latency follows besides its MACs: `depthwise_macs`
  (depthwise convolutions do few MACs per byte), `ops` (kernels launched:
  convolutions, depthwise convolutions, squeeze-excites, a residual's add)
  and `activations` (elements the convolutions write)."""
  counts = {'depthwise_macs': 0, 'ops': 0, 'activations': 0}
  for part, _, out_size in structure.sized_leaves(layer.part,
                                                  layer.input_size):
    positions = out_size * out_size
    if isinstance(part, structure.Depthwise):
      counts['depthwise_macs'] += (positions * part.kernel_size**2 *
                                   part.in_width.static())
      counts['activations'] += positions * part.in_width.static()
    elif isinstance(part, structure.Conv):
      counts['activations'] += positions * part.out_width.static()
    if isinstance(part, (structure.Conv, structure.Depthwise,
                         structure.SqueezeExcite)):
      counts['ops'] += 1
  if isinstance(layer.part, structure.Residual) and counts['ops']:
    counts['ops'] += 1
  return counts


LAYER_COUNTS = ('depthwise_macs', 'ops', 'activations')


@functools.lru_cache(maxsize=32)
def layer_counts_model(ssd: str, count: str, image_size: int,
                       num_classes: int, input_channels: int
                       ) -> Tuple[np.ndarray, float]:
  """The exact linear model (kernel, bias) of one of `LAYER_COUNTS` for a
  named space: what a fitted latency model adds to MACs
  (`fit.fit`)."""
  checks.one_of('count', count, list(LAYER_COUNTS))
  return layer_count_model(
      mobile.get_search_space(ssd), image_size, num_classes, input_channels,
      lambda layer: _layer_counts(layer)[count], lambda *_: 0, count)
