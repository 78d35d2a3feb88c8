"""The search spaces and reference models, and a registry of them by name.

The released spaces and reference models follow the original layer for layer,
since the released cost models depend on the exact layer lists.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from tunas_tf.io import checks
from tunas_tf.search_space import naming
from tunas_tf.search_space import schema
from tunas_tf.search_space.filters import scale_filters
from tunas_tf.search_space.ops import (
    RELU, SWISH6, ActivationSpec, Block, ConvSpec, ConvTowerSpec,
    DepthwiseBottleneckSpec, DetectionEndpointSpec, FilterMultiplier,
    GlobalAveragePoolSpec, ResidualSpec, SeparableConvSpec, ZeroSpec)
from tunas_tf.search_space.schema import FILTERS_TAG, OP_TAG, OneOf

FILTERS_BASE = 8
# Output-width multipliers of the enlarged spaces, relative to a base width.
BLOCK_FILTERS_MULTIPLIERS = (0.5, 0.625, 0.75, 1.0, 1.25, 1.5, 2.0)
PROXYLESSNAS_KERNELS = (3, 5, 7)
PROXYLESSNAS_EXPANSIONS = (3.0, 6.0)
V3_EXPANSIONS = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
MCU_EXPANSIONS = (3.0, 4.0, 6.0)  # MCUNet's (Lin et al. 2020)

# Block output widths (blocks 0..8) of the ProxylessNAS-family models.
PROXYLESSNAS_MOBILE_FILTERS = (32, 16, 32, 40, 80, 96, 192, 320, 1280)
MOBILENET_V2_FILTERS = (32, 16, 24, 32, 64, 96, 160, 320, 1280)
MNASNET_B1_FILTERS = (32, 16, 24, 40, 80, 96, 192, 320, 1280)
PROXYLESSNAS_ENLARGED_BASE_FILTERS = (16, 16, 16, 32, 64, 128, 256, 512, 1024)
MOBILENET_V3_LIKE_BASE_FILTERS = (16, 16, 32, 64, 128, 256, 512, 1024)

# Op indices of the non-collapsed ProxylessNAS space (sepconv kernel index,
# then one index per bottleneck: 3 * expansion_index + kernel_index, 6 = Zero).
MOBILENET_V2_OPS = (0, 3, 3, 6, 6, 3, 3, 3, 6, 3, 3, 3, 3, 3, 3, 3, 6, 3, 3, 3,
                    6, 3)
MNASNET_B1_OPS = (0, 0, 0, 0, 6, 1, 1, 1, 6, 4, 4, 4, 6, 3, 3, 6, 6, 4, 4, 4, 4,
                  3)
PROXYLESSNAS_MOBILE_OPS = (0, 1, 0, 6, 6, 2, 0, 1, 1, 5, 1, 1, 1, 4, 1, 1, 1, 5,
                           5, 2, 2, 5)
_ZERO_OP = 6

# (first stride, number of optional layers, endpoint) of blocks 2..7.
_PROXYLESSNAS_BODY = ((2, 3, True), (2, 3, True), (2, 3, False), (1, 3, True),
                      (2, 3, True), (1, 0, True))


def _searched_filters(base: int) -> OneOf:
  """The sorted, deduplicated widths `scale_filters(base, m)`: e.g. base 16
  -> (8, 16, 24, 32); base 64 -> (32, 40, 48, 64, 80, 96, 128)."""
  return OneOf(tuple(sorted({scale_filters(base, m, FILTERS_BASE)
                             for m in BLOCK_FILTERS_MULTIPLIERS})), FILTERS_TAG)


def _fixed_filters(n: int) -> OneOf:
  return OneOf((n,), FILTERS_TAG)


def _proxylessnas_bottleneck(strides: int, skippable: bool,
                             expansions: Sequence[float] = PROXYLESSNAS_EXPANSIONS
                             ) -> OneOf:
  """The collapsed ProxylessNAS choice: kernel x expansion (+ Zero)."""
  bottleneck = DepthwiseBottleneckSpec(
      kernel_size=OneOf(PROXYLESSNAS_KERNELS, OP_TAG),
      expansion_filters=OneOf(
          tuple(FilterMultiplier(e) for e in expansions), FILTERS_TAG),
      use_squeeze_and_excite=False,
      strides=strides,
      activation=ActivationSpec(RELU))
  choices = (bottleneck, ZeroSpec()) if skippable else (bottleneck,)
  return OneOf(choices, OP_TAG)


def _proxylessnas_layout(filters: Sequence[OneOf],
                         body: Sequence[Tuple[int, int, bool]],
                         stem_strides: int = 2,
                         expansions: Sequence[float] = PROXYLESSNAS_EXPANSIONS
                         ) -> ConvTowerSpec:
  """Stem, separable conv, searched bottleneck blocks and the 1x1 head."""
  relu = ActivationSpec(RELU)
  blocks = [
      Block((ConvSpec(3, stem_strides), relu), filters[0]),
      Block((SeparableConvSpec(OneOf(PROXYLESSNAS_KERNELS, OP_TAG), 1, relu),
             DetectionEndpointSpec()), filters[1]),
  ]
  for i, (strides, num_optional, endpoint) in enumerate(body):
    layers = [_proxylessnas_bottleneck(strides, False, expansions)]
    layers += [ResidualSpec(_proxylessnas_bottleneck(1, True, expansions))
               for _ in range(num_optional)]
    if endpoint:
      layers.append(DetectionEndpointSpec())
    blocks.append(Block(tuple(layers), filters[2 + i]))
  blocks.append(Block((ConvSpec(1, 1), relu, GlobalAveragePoolSpec()),
                      filters[2 + len(body)]))
  return ConvTowerSpec(tuple(blocks), FILTERS_BASE)


def proxylessnas_search() -> ConvTowerSpec:
  """ProxylessNAS space: 73 OneOfs, ~2.16e21 architectures (fixed widths)."""
  return _proxylessnas_layout(
      [_fixed_filters(f) for f in PROXYLESSNAS_MOBILE_FILTERS],
      _PROXYLESSNAS_BODY)


def proxylessnas_enlarged_search() -> ConvTowerSpec:
  """ProxylessNAS-Enlarged: adds output-width choices, ~1.39e28."""
  return _proxylessnas_layout(
      [_searched_filters(f) for f in PROXYLESSNAS_ENLARGED_BASE_FILTERS],
      _PROXYLESSNAS_BODY)


def _v3_bottleneck(strides: int, activation: str) -> DepthwiseBottleneckSpec:
  return DepthwiseBottleneckSpec(
      kernel_size=OneOf((3, 5, 7), OP_TAG),
      expansion_filters=OneOf(tuple(FilterMultiplier(e) for e in V3_EXPANSIONS),
                              FILTERS_TAG),
      use_squeeze_and_excite=OneOf((False, True), OP_TAG),
      strides=strides,
      activation=ActivationSpec(activation))


def mobilenet_v3_like_search() -> ConvTowerSpec:
  """MobileNetV3-Like space: 86 OneOfs, ~8.5e42 architectures."""
  filters = [_searched_filters(f) for f in MOBILENET_V3_LIKE_BASE_FILTERS]
  swish6 = ActivationSpec(SWISH6)
  blocks = [Block((
      ConvSpec(OneOf((3, 5), OP_TAG), 2),
      swish6,
      ResidualSpec(OneOf((SeparableConvSpec(OneOf((3, 5, 7), OP_TAG), 1,
                                            ActivationSpec(RELU)),
                          ZeroSpec()), OP_TAG)),
      DetectionEndpointSpec()), filters[0])]
  body = ((2, RELU, True), (2, RELU, True), (2, SWISH6, False),
          (1, SWISH6, True), (2, SWISH6, True))
  for i, (strides, activation, endpoint) in enumerate(body):
    layers = [_v3_bottleneck(strides, activation)]
    layers += [ResidualSpec(OneOf((_v3_bottleneck(1, activation), ZeroSpec()),
                                  OP_TAG)) for _ in range(3)]
    if endpoint:
      layers.append(DetectionEndpointSpec())
    blocks.append(Block(tuple(layers), filters[1 + i]))
  blocks.append(Block((ConvSpec(1, 1), swish6, GlobalAveragePoolSpec()),
                      filters[6]))
  blocks.append(Block((ConvSpec(1, 1, use_batch_norm=False), swish6),
                      filters[7]))
  return ConvTowerSpec(tuple(blocks), FILTERS_BASE)


def proxylessnas_search_indices(op_indices: Sequence[int]) -> List[int]:
  """Maps 22 non-collapsed op indices to the 73 indices of `proxylessnas_search`.

  Args:
    op_indices: the sepconv kernel index, then one index per bottleneck
      (3 * expansion_index + kernel_index, or 6 for Zero).

  Returns:
    73 ints in `proxylessnas_search` visit order (a skipped layer's nested
    kernel and expansion indices are 0).

  Raises:
    ValueError: for a wrong count or an index out of range.
  """
  if len(op_indices) != 22:
    raise ValueError(f'Expected 22 op indices, got {len(op_indices)}')
  if not 0 <= op_indices[0] < 3:
    raise ValueError(f'Separable conv kernel index {op_indices[0]} not in 0..2')
  indices = [0, op_indices[0], 0]  # block 0 width, sepconv kernel, block 1 width
  ops = iter(op_indices[1:])
  for _, num_optional, _ in _PROXYLESSNAS_BODY:
    for layer in range(1 + num_optional):
      op = next(ops)
      if not 0 <= op <= _ZERO_OP or (layer == 0 and op == _ZERO_OP):
        raise ValueError(f'Bottleneck op index {op} not allowed at layer '
                         f'{layer} of a block (0..5, or 6 for a skippable one)')
      # (kernel, expansion, Zero-or-bottleneck) indices of the layer.
      indices += [0, 0, 1] if op == _ZERO_OP else [op % 3, op // 3, 0]
    indices.append(0)  # block width
  indices.append(0)  # head width
  return indices


def _proxylessnas_reference(filters: Sequence[int],
                            op_indices: Sequence[int]) -> ConvTowerSpec:
  space = _proxylessnas_layout([_fixed_filters(f) for f in filters],
                               _PROXYLESSNAS_BODY)
  return schema.prune(space, proxylessnas_search_indices(op_indices))


def mobilenet_v2() -> ConvTowerSpec:
  """MobileNetV2 (1.0, 224) as a fixed architecture of the ProxylessNAS space."""
  return _proxylessnas_reference(MOBILENET_V2_FILTERS, MOBILENET_V2_OPS)


def mnasnet_b1() -> ConvTowerSpec:
  """MnasNet-B1 as a fixed architecture of the ProxylessNAS space."""
  return _proxylessnas_reference(MNASNET_B1_FILTERS, MNASNET_B1_OPS)


def proxylessnas_mobile() -> ConvTowerSpec:
  """ProxylessNAS-Mobile as a fixed architecture of the ProxylessNAS space."""
  return _proxylessnas_reference(PROXYLESSNAS_MOBILE_FILTERS,
                                 PROXYLESSNAS_MOBILE_OPS)


# MobileNetV3-Large bottlenecks (Howard et al. 2019, Table 1): block width,
# then (kernel, expanded width, squeeze-excite, stride) per layer.
_V3_LARGE_BLOCKS = (
    (24, RELU, True, ((3, 64, False, 2), (3, 72, False, 1))),
    (40, RELU, True, ((5, 72, True, 2), (5, 120, True, 1), (5, 120, True, 1))),
    (80, SWISH6, False, ((3, 240, False, 2), (3, 200, False, 1),
                         (3, 184, False, 1), (3, 184, False, 1))),
    (112, SWISH6, True, ((3, 480, True, 1), (3, 672, True, 1))),
    (160, SWISH6, True, ((5, 672, True, 2), (5, 960, True, 1),
                         (5, 960, True, 1))),
)


def mobilenet_v3_large() -> ConvTowerSpec:
  """MobileNetV3-Large (1.0, 224) in the layout of `mobilenet_v3_like_search`."""
  swish6 = ActivationSpec(SWISH6)
  blocks = [Block((ConvSpec(3, 2), swish6,
                   ResidualSpec(SeparableConvSpec(3, 1, ActivationSpec(RELU))),
                   DetectionEndpointSpec()), 16)]
  for width, activation, endpoint, layers_table in _V3_LARGE_BLOCKS:
    layers = []
    for i, (kernel, expanded, se, strides) in enumerate(layers_table):
      layer = DepthwiseBottleneckSpec(kernel, expanded, se, strides,
                                      ActivationSpec(activation))
      layers.append(layer if i == 0 else ResidualSpec(layer))
    if endpoint:
      layers.append(DetectionEndpointSpec())
    blocks.append(Block(tuple(layers), width))
  blocks.append(Block((ConvSpec(1, 1), swish6, GlobalAveragePoolSpec()), 960))
  blocks.append(Block((ConvSpec(1, 1, use_batch_norm=False), swish6), 1280))
  return ConvTowerSpec(tuple(blocks), FILTERS_BASE)


def cifar_search() -> ConvTowerSpec:
  """A space for 32x32 images: 3 stride-2 ProxylessNAS-style blocks (32->4)."""
  body = ((2, 2, False), (2, 2, False), (2, 2, False))
  bases = (16, 16, 24, 40, 80, 256)
  return _proxylessnas_layout([_searched_filters(b) for b in bases], body,
                              stem_strides=1)


def digits_search() -> ConvTowerSpec:
  """A tiny space for 8x8 images (the offline `digits` default; 8 -> 2)."""
  body = ((2, 1, False), (2, 1, False))
  bases = (16, 8, 16, 32, 64)
  return _proxylessnas_layout([_searched_filters(b) for b in bases], body,
                              stem_strides=1)


def mcu_search() -> ConvTowerSpec:
  """A space for microcontrollers, 32x32 grayscale (docs/microcontrollers.md).

  MCUNet's bottleneck choices (kernel {3,5,7} x expansion {3,4,6}).
  """
  body = ((2, 2, False), (2, 2, False), (2, 2, False))
  bases = (16, 8, 16, 24, 48, 128)
  return _proxylessnas_layout([_searched_filters(b) for b in bases], body,
                              stem_strides=1, expansions=MCU_EXPANSIONS)


# Classes of ImageNet as the original's recipes count them: 1000 labels plus
# background.
IMAGENET_CLASSES = 1001
# The original's cost targets for its released (simulated Pixel-1) cost
# models, in ms: MnasNet / ProxylessNAS-Mobile, and MobileNetV3-Large.
RELEASED_TARGET_MS = 84.0
RELEASED_V3_TARGET_MS = 57.0


@dataclasses.dataclass(frozen=True)
class SearchSpaceInfo:
  """Facts about one search space or reference model: the one place they live.

  Attributes:
    name: the registry key (`--ssd`).
    build: returns the spec (`ConvTowerSpec`); a new value per call.
    image_size: input resolution (pixels per side) the space is designed for.
    input_channels: channels of the images it is designed for.
    num_classes: classifier width it is designed for.
    released_target_ms: the original's cost target when it released a cost
      model for the space (`cost_model/data/<name>.json`), else None.
    mobilenet_v3_like: a MobileNetV3-like network (the original's recipes
      differ for these).
  """
  name: str
  build: Callable[[], ConvTowerSpec] = dataclasses.field(repr=False)
  image_size: int
  input_channels: int = 3
  num_classes: int = IMAGENET_CLASSES
  released_target_ms: Optional[float] = None
  mobilenet_v3_like: bool = False

  @property
  def has_released_cost_model(self) -> bool:
    return self.released_target_ms is not None

  @property
  def searchable(self) -> bool:
    """Whether the spec has a decision (a reference model has none)."""
    return bool(schema.num_choices(self.build()))


# Every space and reference model by name (total stride 32, 8 or 4).
SEARCH_SPACES: Dict[str, SearchSpaceInfo] = {info.name: info for info in (
    SearchSpaceInfo('proxylessnas_search', proxylessnas_search, 224,
                    released_target_ms=RELEASED_TARGET_MS),
    SearchSpaceInfo('proxylessnas_enlarged_search',
                    proxylessnas_enlarged_search, 224,
                    released_target_ms=RELEASED_TARGET_MS),
    SearchSpaceInfo('mobilenet_v3_like_search', mobilenet_v3_like_search, 224,
                    released_target_ms=RELEASED_V3_TARGET_MS,
                    mobilenet_v3_like=True),
    SearchSpaceInfo('mobilenet_v2', mobilenet_v2, 224),
    SearchSpaceInfo('mnasnet_b1', mnasnet_b1, 224),
    SearchSpaceInfo('proxylessnas_mobile', proxylessnas_mobile, 224),
    SearchSpaceInfo('mobilenet_v3_large', mobilenet_v3_large, 224,
                    mobilenet_v3_like=True),
    SearchSpaceInfo('cifar_search', cifar_search, 32, num_classes=10),
    SearchSpaceInfo('digits_search', digits_search, 8, input_channels=1,
                    num_classes=10),
    SearchSpaceInfo('mcu_search', mcu_search, 32, input_channels=1,
                    num_classes=10),
)}


def space_info(name: str) -> SearchSpaceInfo:
  """Returns the facts about `name`; ValueError (listing names) if unknown."""
  checks.one_of('search space', name, sorted(SEARCH_SPACES))
  return SEARCH_SPACES[name]


def kinds_note() -> str:
  """Which names are search spaces and which reference models (`--ssd`'s
  help)."""
  spaces = sorted(n for n, i in SEARCH_SPACES.items() if i.searchable)
  fixed = sorted(n for n, i in SEARCH_SPACES.items() if not i.searchable)
  return (f"Search spaces: {', '.join(spaces)}. Reference models (fixed "
          f"architectures, nothing to search; train_eval trains them): "
          f"{', '.join(fixed)}.")


def check_searchable(name: str) -> SearchSpaceInfo:
  """Returns `space_info(name)` for a space with decisions.

  Raises:
    ValueError: for an unknown name, or a reference model (saying what to
      use instead).
  """
  info = space_info(name)
  if not info.searchable:
    spaces = sorted(n for n, i in SEARCH_SPACES.items() if i.searchable)
    raise ValueError(
        f'--ssd={name} is a reference model (a fixed architecture): it has '
        f'no decision to search; search one of {", ".join(spaces)}, or '
        f'train it with train_eval --ssd={name}')
  return info


def get_search_space(name: str) -> ConvTowerSpec:
  """Returns the spec of `name`; ValueError (listing names) if unknown."""
  return space_info(name).build()


def search_space_size(spec) -> int:
  """Number of index vectors: the product of all OneOf cardinalities."""
  return math.prod(schema.num_choices(spec))


def skippable_layers(spec: ConvTowerSpec) -> Tuple[str, ...]:
  """Prefixes `blocks/{b}/layers/{l}` of layers whose op OneOf holds a
  ZeroSpec (as the original's path dropout decides), in network order."""
  zero = ZeroSpec()
  return tuple(
      naming.layer_prefix(b, l)
      for b, block in enumerate(spec.blocks)
      for l, layer in enumerate(block.layers)
      if any(oneof.tag == OP_TAG and zero in oneof.choices
             for oneof in schema.flatten(layer)))
