"""Shapes of every layer of a fixed architecture, in plain Python.

`resolve_layers` walks a *pruned* `ConvTowerSpec` (no `OneOf` left) block by
block and layer by layer, and returns one `ResolvedLayer` per layer with the
numbers every consumer needs: input and output width, input and output
resolution, kernel size, stride, expanded width and squeeze-excite width. The
MAC count (`cost_model/macs.py`), the standalone graph builder and the
supernet all read these, so the layer semantics (reference/tunas.md §6.2)
live in this one place:

* every layer of a block is built with the block's `filters` as its output
  width; convolutions, separable convolutions and bottlenecks produce it,
  while activations, detection endpoints, global pooling and `ZeroSpec`
  keep their input's shape;
* padding is 'SAME': the output resolution is `ceil(input / strides)`;
  `GlobalAveragePoolSpec` gives resolution 1 (keepdims);
* a bottleneck's expanded width is its `expansion_filters` when an int, or
  `scale_filters(input width, scale, filters_base)` for a `FilterMultiplier`;
  its squeeze-excite width is `make_divisible(0.25 * expanded, filters_base)`;
* `ResidualSpec(layer)` must keep the shape (stride 1, output width = input
  width); `ResidualSpec(ZeroSpec())` means the layer is skipped.

Resolution is a single int: images are square.

This module is plain Python (no TensorFlow).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, List, Optional

from tunas_tf.search_space import naming
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema
from tunas_tf.search_space.filters import make_divisible
from tunas_tf.search_space.filters import scale_filters


# Layers that keep their input's width and resolution and compute nothing.
_IDENTITY_LAYERS = (ops.ActivationSpec, ops.DetectionEndpointSpec)
_SUPPORTED_LAYERS = (
    ops.ConvSpec, ops.SeparableConvSpec, ops.DepthwiseBottleneckSpec,
    ops.ZeroSpec, ops.ResidualSpec, ops.GlobalAveragePoolSpec,
    ops.ActivationSpec, ops.DetectionEndpointSpec)


@dataclasses.dataclass(frozen=True)
class ResolvedLayer:
  """One layer of a fixed architecture with its shapes resolved.

  Attributes:
    block_index: index of the layer's block in `ConvTowerSpec.blocks`.
    layer_index: index of the layer in its block's `layers`.
    spec: the layer's (pruned) spec as it appears in the block, e.g. a
      `ResidualSpec` wrapping a bottleneck.
    input_width: int, channels of the layer's input.
    output_width: int, channels of the layer's output.
    input_size: int, input height (= width) in pixels.
    output_size: int, output height (= width) in pixels.
    residual: whether `spec` is a `ResidualSpec` (output = op(x) + x).
    kernel_size: int kernel size of the op's (depthwise) convolution, or None
      for layers without one.
    strides: int stride of the op (1 for layers without a convolution).
    expanded_width: int, a bottleneck's expanded width (None otherwise).
    se_width: int, a bottleneck's squeeze-excite width (None when it has no
      squeeze-excite or is not a bottleneck).
  """
  block_index: int
  layer_index: int
  spec: Any
  input_width: int
  output_width: int
  input_size: int
  output_size: int
  residual: bool = False
  kernel_size: Optional[int] = None
  strides: int = 1
  expanded_width: Optional[int] = None
  se_width: Optional[int] = None

  @property
  def op(self) -> Any:
    """The computing layer: `spec.layer` for a residual, else `spec`."""
    return self.spec.layer if self.residual else self.spec

  @property
  def is_skipped(self) -> bool:
    """True for a `ZeroSpec` op (inside a residual: the identity path only)."""
    return isinstance(self.op, ops.ZeroSpec)


def _location(block_index: int, layer_index: int) -> str:
  return f'blocks/{block_index}/layers/{layer_index}'


def _check_int(value: Any, what: str, where: str) -> int:
  if isinstance(value, schema.OneOf):
    raise ValueError(
        f'resolve: {what} at {where} is a OneOf; resolve a pruned spec '
        f'(schema.prune) instead')
  if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
    raise ValueError(
        f'resolve: {what} at {where} is {value!r}; expected a positive int')
  return value


def resolve_filters(filters: Any, input_width: int, filters_base: int,
                    where: str = 'spec') -> int:
  """Resolves an absolute or relative width to an int.

  Args:
    filters: a positive int (absolute) or a `FilterMultiplier` (relative to
      `input_width`).
    input_width: positive int, the width `FilterMultiplier` scales.
    filters_base: positive int, the rounding base of `scale_filters`.
    where: location named in error messages.

  Returns:
    Python int, `filters` or `scale_filters(input_width, scale, filters_base)`.

  Raises:
    ValueError: for a OneOf or anything but a positive int or multiplier.
  """
  if isinstance(filters, ops.FilterMultiplier):
    return scale_filters(input_width, filters.scale, filters_base)
  return _check_int(filters, 'filters', where)


def _output_size(input_size: int, strides: int) -> int:
  return int(math.ceil(input_size / strides))


def resolve_layer(layer: Any, input_width: int, block_width: int,
                  input_size: int, filters_base: int, block_index: int = 0,
                  layer_index: int = 0) -> ResolvedLayer:
  """Resolves the shapes of one pruned layer.

  Args:
    layer: a pruned layer spec (no OneOf): one of `ConvSpec`,
      `SeparableConvSpec`, `DepthwiseBottleneckSpec`, `ZeroSpec`,
      `ResidualSpec`, `GlobalAveragePoolSpec`, `ActivationSpec`,
      `DetectionEndpointSpec`.
    input_width: positive int, channels of the layer's input.
    block_width: positive int, the block's `filters` (the output width of
      width-changing layers).
    input_size: positive int, input resolution in pixels.
    filters_base: positive int, rounding base of relative widths.
    block_index: int, recorded in the result and named in errors.
    layer_index: int, recorded in the result and named in errors.

  Returns:
    A `ResolvedLayer`.

  Raises:
    ValueError: for a OneOf (the spec is not pruned), an unsupported layer
      type, a non-positive kernel size or stride, or a residual layer that
      changes the shape.
  """
  where = _location(block_index, layer_index)
  common = dict(block_index=block_index, layer_index=layer_index, spec=layer,
                input_width=input_width, input_size=input_size)
  if isinstance(layer, schema.OneOf):
    raise ValueError(
        f'resolve: the layer at {where} is a OneOf; resolve a pruned spec '
        f'(schema.prune) instead')
  if isinstance(layer, (ops.ConvSpec, ops.SeparableConvSpec)):
    kernel = _check_int(layer.kernel_size, 'kernel_size', where)
    strides = _check_int(layer.strides, 'strides', where)
    return ResolvedLayer(output_width=block_width,
                         output_size=_output_size(input_size, strides),
                         kernel_size=kernel, strides=strides, **common)
  if isinstance(layer, ops.DepthwiseBottleneckSpec):
    kernel = _check_int(layer.kernel_size, 'kernel_size', where)
    strides = _check_int(layer.strides, 'strides', where)
    expanded = resolve_filters(layer.expansion_filters, input_width,
                               filters_base, where)
    use_se = layer.use_squeeze_and_excite
    if isinstance(use_se, schema.OneOf):
      raise ValueError(
          f'resolve: use_squeeze_and_excite at {where} is a OneOf; resolve a '
          f'pruned spec (schema.prune) instead')
    se_width = (make_divisible(naming.SE_RATIO * expanded, filters_base)
                if use_se else None)
    return ResolvedLayer(output_width=block_width,
                         output_size=_output_size(input_size, strides),
                         kernel_size=kernel, strides=strides,
                         expanded_width=expanded, se_width=se_width, **common)
  if isinstance(layer, ops.GlobalAveragePoolSpec):
    return ResolvedLayer(output_width=input_width, output_size=1, **common)
  if isinstance(layer, (ops.ZeroSpec,) + _IDENTITY_LAYERS):
    return ResolvedLayer(output_width=input_width, output_size=input_size,
                         **common)
  if isinstance(layer, ops.ResidualSpec):
    inner = resolve_layer(layer.layer, input_width, block_width, input_size,
                          filters_base, block_index, layer_index)
    if inner.residual:
      raise ValueError(f'resolve: nested ResidualSpec at {where}')
    if (inner.output_width, inner.output_size) != (input_width, input_size):
      raise ValueError(
          f'resolve: the residual layer at {where} changes the shape (width '
          f'{input_width} -> {inner.output_width}, size {input_size} -> '
          f'{inner.output_size}); a residual needs stride 1 and an input as '
          f'wide as its block')
    return dataclasses.replace(inner, spec=layer, residual=True)
  raise ValueError(
      f'resolve: unsupported layer {type(layer).__name__} at {where}; expected '
      f'one of {[c.__name__ for c in _SUPPORTED_LAYERS]}')


def resolve_layers(spec: ops.ConvTowerSpec, image_size: int,
                   input_channels: int = 3) -> List[ResolvedLayer]:
  """Resolves the shapes of every layer of a pruned network.

  Args:
    spec: a pruned `ConvTowerSpec` (every `OneOf` replaced by its choice,
      e.g. by `schema.prune`).
    image_size: positive int, input resolution in pixels (square images).
    input_channels: positive int, channels of the input image.

  Returns:
    One `ResolvedLayer` per layer, blocks in order and layers in order within
    each block; layer k's input shape is layer k-1's output shape (the image
    for the first). The network's output shape is the last layer's
    `output_width` and `output_size`.

  Raises:
    ValueError: for a non-positive `image_size` or `input_channels`, a spec
      that still holds OneOfs, or any error of `resolve_layer`.
  """
  if not isinstance(spec, ops.ConvTowerSpec):
    raise ValueError(
        f'resolve_layers: expected a ConvTowerSpec, got {type(spec).__name__}')
  image_size = _check_int(image_size, 'image_size', 'the input')
  width = _check_int(input_channels, 'input_channels', 'the input')
  size = image_size
  resolved = []
  for b, block in enumerate(spec.blocks):
    block_width = _check_int(block.filters, 'filters', f'blocks/{b}/filters')
    for j, layer in enumerate(block.layers):
      layer = resolve_layer(layer, width, block_width, size, spec.filters_base,
                            b, j)
      resolved.append(layer)
      width, size = layer.output_width, layer.output_size
  return resolved
