"""Shapes of every layer of a fixed architecture, in plain Python: 'SAME'
padding (`ceil(input / strides)`), square resolutions."""

from __future__ import annotations

import dataclasses
from typing import Any, List, Optional

from tunas_tf.search_space import naming
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema
from tunas_tf.search_space import structure
from tunas_tf.search_space import walker

_SUPPORTED_LAYERS = (
    ops.ConvSpec, ops.SeparableConvSpec, ops.DepthwiseBottleneckSpec,
    ops.ZeroSpec, ops.ResidualSpec, ops.GlobalAveragePoolSpec,
    ops.ActivationSpec, ops.DetectionEndpointSpec)


@dataclasses.dataclass(frozen=True)
class ResolvedLayer:
  """One layer of a fixed architecture with its shapes resolved (widths in
  channels, sizes in pixels); `kernel_size` its largest kernel or None,
  `expanded_width`/`se_width` a bottleneck's, `part` None for an endpoint."""
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
  part: Optional[structure.Part] = dataclasses.field(
      default=None, compare=False, repr=False)

  @property
  def op(self) -> Any:
    """The computing layer: `spec.layer` for a residual, else `spec`."""
    return self.spec.layer if self.residual else self.spec

  @property
  def is_skipped(self) -> bool:
    """True for a `ZeroSpec` op (inside a residual: the identity path only)."""
    return isinstance(self.op, ops.ZeroSpec)


def _check_int(value: Any, what: str, where: str) -> int:
  if isinstance(value, schema.OneOf):
    raise ValueError(
        f'resolve: {what} at {where} is a OneOf; resolve a pruned spec '
        f'(schema.prune) instead')
  if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
    raise ValueError(
        f'resolve: {what} at {where} is {value!r}; expected a positive int')
  return value


def _check_pruned(layer: Any, where: str) -> None:
  """Raises for a OneOf or an unsupported layer type, naming the field."""
  found = schema.flatten_with_paths(layer)
  if found:
    path = min((p for p, _ in found), key=len)
    what = ('the layer' if path in ('', 'layer')
            else path.rsplit('/', 1)[-1])
    raise ValueError(
        f'resolve: {what} at {where} is a OneOf; resolve a pruned spec '
        f'(schema.prune) instead')
  inner = layer.layer if isinstance(layer, ops.ResidualSpec) else layer
  for value in (layer, inner):
    if not isinstance(value, _SUPPORTED_LAYERS):
      raise ValueError(
          f'resolve: unsupported layer {type(value).__name__} at {where}; '
          f'expected one of {[c.__name__ for c in _SUPPORTED_LAYERS]}')
  if isinstance(inner, ops.ResidualSpec):
    raise ValueError(f'resolve: nested ResidualSpec at {where}')
  for name in ('kernel_size', 'strides'):
    if hasattr(inner, name):
      _check_int(getattr(inner, name), name, where)


def resolve_layer(layer: Any, input_width: int, block_width: int,
                  input_size: int, filters_base: int, block_index: int = 0,
                  layer_index: int = 0) -> ResolvedLayer:
  """The `ResolvedLayer` of one pruned layer (one of `_SUPPORTED_LAYERS`).

  `block_width` is the output width of width-changing layers; `block_index`,
  `layer_index` are recorded and named in errors.

  Raises:
    ValueError: for a OneOf, an unsupported layer, a non-positive kernel size
      or stride, or a residual that changes the shape.
  """
  where = naming.layer_prefix(block_index, layer_index)
  _check_pruned(layer, where)
  described = walker.describe_layer(
      layer, structure.FixedWidth(input_width),
      structure.FixedWidth(block_width), filters_base, block_index,
      layer_index, check_residuals=False)
  part = described.part
  # A residual's own shape is its layer's (the sum is checked below).
  op = part.layer if isinstance(part, structure.Residual) else part
  leaves = [leaf for leaf, _, _ in structure.sized_leaves(part, input_size)]
  kernels = [leaf.kernel_size for leaf in leaves
             if isinstance(leaf, (structure.Conv, structure.Depthwise))]
  expand = naming.join(where, naming.EXPAND)
  expanded = [leaf.out_width.static() for leaf in leaves
              if isinstance(leaf, structure.Conv) and leaf.name == expand]
  se = [leaf.hidden.static() for leaf in leaves
        if isinstance(leaf, structure.SqueezeExcite)]
  resolved = ResolvedLayer(
      block_index=block_index, layer_index=layer_index, spec=layer,
      input_width=input_width,
      output_width=input_width if op is None else op.out_width.static(),
      input_size=input_size,
      output_size=input_size if op is None else op.out_size(input_size),
      residual=isinstance(layer, ops.ResidualSpec),
      kernel_size=max(kernels) if kernels else None,
      strides=1 if part is None else part.strides,
      expanded_width=expanded[0] if expanded else None,
      se_width=se[0] if se else None, part=part)
  shape = (resolved.output_width, resolved.output_size)
  if resolved.residual and shape != (input_width, input_size):
    raise ValueError(
        f'resolve: the residual layer at {where} changes the shape (width '
        f'{input_width} -> {shape[0]}, size {input_size} -> {shape[1]}); a '
        f'residual needs stride 1 and an input as wide as its block')
  return resolved


def resolve_layers(spec: ops.ConvTowerSpec, image_size: int,
                   input_channels: int = 3) -> List[ResolvedLayer]:
  """One `ResolvedLayer` per layer of a pruned `ConvTowerSpec`, in order.
  ValueError for a non-positive `image_size` or `input_channels`, or as
  `resolve_layer`."""
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
