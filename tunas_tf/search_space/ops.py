"""Op, layer and block specs: the frozen dataclasses of a search space.

Field order is `schema`'s traversal order (the `indices` vector's) and the
cost-model features' Kronecker order, so it follows the original specs.
Filter counts are ints or `FilterMultiplier`s of the layer's input width.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Tuple

RELU = 'relu'
RELU6 = 'relu6'
SWISH6 = 'swish6'  # x * relu6(x + 3) / 6, i.e. hard-swish.
SIGMOID = 'sigmoid'
ACTIVATIONS = (RELU, RELU6, SWISH6, SIGMOID)


@dataclasses.dataclass(frozen=True)
class ActivationSpec:
  """An activation layer; `name` is one of `ACTIVATIONS`."""
  name: str

  def __post_init__(self):
    if self.name not in ACTIVATIONS:
      raise ValueError(
          f'Unknown activation {self.name!r}; expected one of {ACTIVATIONS}')


@dataclasses.dataclass(frozen=True)
class FilterMultiplier:
  """A width relative to the layer's input width (`scale` x input filters)."""
  scale: float

  def __post_init__(self):
    if self.scale <= 0:
      raise ValueError(f'FilterMultiplier scale must be > 0, got {self.scale}')

  def __lt__(self, other: 'FilterMultiplier') -> bool:
    # Lets `max(choices)` find the widest multiplier (the filter warm-up rule).
    return self.scale < other.scale


@dataclasses.dataclass(frozen=True)
class ConvSpec:
  """k x k 'SAME' convolution, then batch norm (or a bias without it)."""
  kernel_size: Any
  strides: int
  use_batch_norm: bool = True


@dataclasses.dataclass(frozen=True)
class SeparableConvSpec:
  """Depthwise k x k + BN + activation, then 1x1 conv + BN (linear)."""
  kernel_size: Any
  strides: int
  activation: ActivationSpec = ActivationSpec(RELU)


@dataclasses.dataclass(frozen=True)
class DepthwiseBottleneckSpec:
  """Inverted bottleneck: 1x1 expand + BN + act, depthwise k x k + BN + act,
  optional squeeze-and-excite, 1x1 project + BN (linear). `expansion_filters`
  an int, a `FilterMultiplier` of the input width, or a OneOf of them."""
  kernel_size: Any
  expansion_filters: Any
  use_squeeze_and_excite: Any
  strides: int
  activation: ActivationSpec = ActivationSpec(RELU)
  se_inner_activation: ActivationSpec = ActivationSpec(RELU)
  se_gating_activation: ActivationSpec = ActivationSpec(SIGMOID)


@dataclasses.dataclass(frozen=True)
class ZeroSpec:
  """A layer whose output is zeros; inside a residual it means 'skip'."""


@dataclasses.dataclass(frozen=True)
class ResidualSpec:
  """`layer(x) + x`; the layer must keep the shape (stride 1, same width)."""
  layer: Any


@dataclasses.dataclass(frozen=True)
class GlobalAveragePoolSpec:
  """Global average pooling over height and width (keeps the dims)."""


@dataclasses.dataclass(frozen=True)
class DetectionEndpointSpec:
  """Marks a feature endpoint: no computation, but counted by the cost model."""


@dataclasses.dataclass(frozen=True)
class Block:
  """Layers sharing one output width `filters` (an int or a OneOf of ints)."""
  layers: Tuple[Any, ...]
  filters: Any


@dataclasses.dataclass(frozen=True)
class ConvTowerSpec:
  """A network: blocks in order; widths are rounded to `filters_base`."""
  blocks: Tuple[Block, ...]
  filters_base: int


SPEC_CLASSES = (
    ActivationSpec, FilterMultiplier, ConvSpec, SeparableConvSpec,
    DepthwiseBottleneckSpec, ZeroSpec, ResidualSpec, GlobalAveragePoolSpec,
    DetectionEndpointSpec, Block, ConvTowerSpec)


def choice_label(value: Any) -> str:
  """A short name of one `OneOf` choice, for tables and tags: '24', 'x6'
  (a `FilterMultiplier`), 'skip', 'relu', 'on'/'off', 'DepthwiseBottleneck'."""
  if isinstance(value, bool):
    return 'on' if value else 'off'
  if isinstance(value, (int, float)):
    return f'{value:g}'
  if isinstance(value, str):
    return value
  if value is None:
    return 'none'
  if isinstance(value, FilterMultiplier):
    return f'x{value.scale:g}'
  if isinstance(value, ZeroSpec):
    return 'skip'
  if isinstance(value, ActivationSpec):
    return value.name
  name = type(value).__name__
  return name[:-len('Spec')] if name.endswith('Spec') else name


def choice_labels(choices: Tuple[Any, ...]) -> Tuple[str, ...]:
  """`choice_label` of each choice; a repeated one gets its index ('Conv#0')."""
  labels = [choice_label(c) for c in choices]
  return tuple(f'{label}#{i}' if labels.count(label) > 1 else label
               for i, label in enumerate(labels))
