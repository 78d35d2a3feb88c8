"""The one walker over a spec, for the supernet, the graph and the MACs:
`describe_network` walks a search space (each OneOf a `structure.Switch`) or
a pruned architecture into a `structure.Network`. Each spec type's semantics
live here only."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence

from tunas_tf.io import checks
from tunas_tf.search_space import naming
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema
from tunas_tf.search_space import structure


def _is_zero(layer: Any) -> bool:
  """A `ZeroSpec`, or a OneOf whose only choice is one."""
  return isinstance(layer, ops.ZeroSpec) or (
      isinstance(layer, schema.OneOf) and len(layer.choices) == 1 and
      isinstance(layer.choices[0], ops.ZeroSpec))


class _Walker:
  """Describes layers, recording every `WidthRule` it creates, in order."""

  def __init__(self, filters_base: int, check_residuals: bool = True):
    self.base = filters_base
    self.check_residuals = check_residuals
    self.widths: List[structure.WidthRule] = []

  def add(self, width: structure.WidthRule) -> structure.WidthRule:
    self.widths.append(width)
    return width

  def filters(self, path: str, value: Any,
              input_width: Optional[structure.WidthRule]
              ) -> structure.WidthRule:
    """The `WidthRule` of a filters value (int, FilterMultiplier or OneOf)."""
    if isinstance(value, schema.OneOf):
      values, oneof_path = value.choices, path
    else:
      values, oneof_path = (value,), None
    if len(values) == 1 and isinstance(values[0], int) and not isinstance(
        values[0], bool) and values[0] > 0:
      return self.add(structure.FixedWidth(values[0]))
    return self.add(
        structure.ChoiceWidth(oneof_path, values, input_width, self.base))

  def _choice(self, value: Any, path: str,
              make: Callable[[Any], structure.Part],
              width: structure.WidthRule) -> structure.Part:
    """`make(value)`, or a structure.Switch over `make(choice)` for a OneOf."""
    if isinstance(value, schema.OneOf):
      return self._switch(path, [make(c) for c in value.choices], width)
    return make(value)

  def _switch(self, path: str, branches: Sequence[Optional[structure.Part]],
              width: structure.WidthRule) -> structure.Switch:
    live = [b for b in branches if b is not None]
    out = live[0].out_width if live else width
    strides = live[0].strides if live else 1
    for i, branch in enumerate(branches):
      if branch is not None and (
          branch.strides != strides or
          not structure.same_width(branch.out_width, out)):
        raise ValueError(
            f'{path}: choice {i} gives another stride or width than the '
            'first non-zero choice; the choices of a OneOf must agree')
    return structure.Switch(width, out, path=path, branches=tuple(branches))

  def _kernels(self, kernel_size: Any, strides: int, path: str,
               width: structure.WidthRule,
               make: Callable[[int, int], structure.Part]) -> structure.Part:
    """`make(k, strides)` of a kernel size k, or a Switch over a OneOf's."""
    strides = checks.positive_int(f'{path}/strides: strides', strides)

    def checked(k):
      if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise ValueError(f'{path}/kernel_size: kernel_size must be a positive '
                         f'int or a OneOf of them, got {k!r}')
      return make(k, strides)
    return self._choice(kernel_size, f'{path}/kernel_size', checked, width)

  def _depthwise(self, kernel_size: Any, strides: int, activation: str,
                 path: str, prefix: str,
                 width: structure.WidthRule) -> structure.Part:
    return self._kernels(kernel_size, strides, path, width, lambda k, s: (
        structure.Depthwise(width, width, naming.join(
            prefix, naming.depthwise_part(k)), k, s, activation)))

  def _separable(self, spec: ops.SeparableConvSpec, path: str, prefix: str,
                 in_width: structure.WidthRule,
                 block_width: structure.WidthRule) -> structure.Part:
    parts = (self._depthwise(spec.kernel_size, spec.strides,
                             spec.activation.name, path, prefix, in_width),
             structure.Conv(in_width, block_width,
                            naming.join(prefix, naming.PROJECT)))
    return structure.Chain(in_width, block_width, parts=parts)

  def _squeeze_excite(self, spec: ops.DepthwiseBottleneckSpec, path: str,
                      prefix: str, expanded: structure.WidthRule
                      ) -> Optional[structure.Part]:
    """The SE part, a Switch with an Identity branch, or None when off."""
    hidden = None

    def make(enabled):
      nonlocal hidden
      if not isinstance(enabled, bool):
        raise ValueError(f'{path}/use_squeeze_and_excite: expected a bool or '
                         f'a OneOf of bools, got {enabled!r}')
      if not enabled:
        return structure.Identity(expanded, expanded)
      if hidden is None:
        hidden = self.add(structure.DivisibleWidth(expanded, naming.SE_RATIO,
                                         self.base))
      return structure.SqueezeExcite(
          expanded, expanded, hidden, naming.join(prefix, naming.SE),
          naming.join(prefix, naming.SE_REDUCE),
          naming.join(prefix, naming.SE_EXPAND),
          spec.se_inner_activation.name, spec.se_gating_activation.name)

    part = self._choice(spec.use_squeeze_and_excite,
                        f'{path}/use_squeeze_and_excite', make, expanded)
    return None if isinstance(part, structure.Identity) else part

  def _bottleneck(self, spec: ops.DepthwiseBottleneckSpec, path: str,
                  prefix: str, in_width: structure.WidthRule,
                  block_width: structure.WidthRule) -> structure.Part:
    expanded = self.filters(f'{path}/expansion_filters',
                            spec.expansion_filters, in_width)
    activation = spec.activation.name
    parts = [structure.Conv(in_width, expanded,
                            naming.join(prefix, naming.EXPAND),
                            activation=activation),
             self._depthwise(spec.kernel_size, spec.strides, activation, path,
                             prefix, expanded)]
    se = self._squeeze_excite(spec, path, prefix, expanded)
    if se is not None:
      parts.append(se)
    parts.append(structure.Conv(expanded, block_width,
                      naming.join(prefix, naming.PROJECT)))
    return structure.Chain(in_width, block_width, parts=tuple(parts))

  def _residual(self, spec: ops.ResidualSpec, path: str, prefix: str,
                in_width: structure.WidthRule,
                block_width: structure.WidthRule) -> structure.Part:
    if _is_zero(spec.layer):
      # As the original: a skipped layer is the identity.
      return structure.Identity(in_width, in_width)
    if isinstance(spec.layer, ops.ResidualSpec):
      raise ValueError(f'{path}: a nested ResidualSpec')
    layer = self.layer(spec.layer, f'{path}/layer', prefix, in_width,
                       block_width)
    if layer is None:  # A residual endpoint: the identity as well.
      return structure.Identity(in_width, in_width)
    pooled = any(isinstance(p, structure.GlobalPool)
                 for p in structure.walk(layer))
    if self.check_residuals and (
        layer.strides != 1 or pooled or
        not structure.same_width(layer.out_width, in_width)):
      raise ValueError(
          f'{path}: a ResidualSpec layer must keep the shape (stride 1, no '
          f'global pool and the block width of its input), got stride '
          f'{layer.strides}')
    return structure.Residual(in_width, in_width, layer=layer, path=path,
                              scope=prefix)

  def _oneof(self, value: schema.OneOf, path: str, prefix: str,
             in_width: structure.WidthRule,
             block_width: structure.WidthRule) -> structure.Part:
    branches = []
    for i, choice in enumerate(value.choices):
      if isinstance(choice, ops.ZeroSpec):
        branches.append(None)
        continue
      if isinstance(choice, ops.DetectionEndpointSpec):
        raise ValueError(f'{path}: a DetectionEndpointSpec cannot be a '
                         'OneOf choice')
      branches.append(self.layer(choice, f'{path}/choices/{i}', prefix,
                                 in_width, block_width))
    return self._switch(path, branches, in_width)

  def describe(self, layer: Any, block_index: int, layer_index: int,
               in_width: structure.WidthRule,
               block_width: structure.WidthRule) -> structure.Layer:
    """The `structure.Layer` of one layer spec at its position."""
    prefix = naming.layer_prefix(block_index, layer_index)
    part = self.layer(layer, prefix, prefix, in_width, block_width)
    return structure.Layer(block_index, layer_index, prefix, layer, part,
                           in_width,
                           in_width if part is None else part.out_width)

  def layer(self, value: Any, path: str, prefix: str,
            in_width: structure.WidthRule,
            block_width: structure.WidthRule) -> Optional[structure.Part]:
    """The parts of one layer spec at schema `path` and name `prefix`; None for
    a `DetectionEndpointSpec`. ValueError for an unsupported layer or
    inconsistent choices."""
    if isinstance(value, ops.DetectionEndpointSpec):
      return None
    if isinstance(value, ops.ResidualSpec):
      return self._residual(value, path, prefix, in_width, block_width)
    if isinstance(value, schema.OneOf):
      return self._oneof(value, path, prefix, in_width, block_width)
    if isinstance(value, ops.ZeroSpec):
      return structure.Zero(in_width, in_width)
    if isinstance(value, ops.ActivationSpec):
      return structure.Activation(in_width, in_width, scope=prefix,
                        activation=value.name)
    if isinstance(value, ops.GlobalAveragePoolSpec):
      return structure.GlobalPool(in_width, in_width, scope=prefix)
    if isinstance(value, ops.ConvSpec):
      return self._kernels(value.kernel_size, value.strides, path, in_width,
                           lambda k, s: structure.Conv(
                               in_width, block_width,
                               naming.join(prefix, naming.conv_part(k)), k,
                               s, value.use_batch_norm))
    if isinstance(value, ops.SeparableConvSpec):
      return self._separable(value, path, prefix, in_width, block_width)
    if isinstance(value, ops.DepthwiseBottleneckSpec):
      return self._bottleneck(value, path, prefix, in_width, block_width)
    raise ValueError(f'{path}: unsupported layer spec {structure.short(value)}')


def describe_layer(layer: Any, in_width: structure.WidthRule,
                   block_width: structure.WidthRule,
                   filters_base: int, block_index: int = 0,
                   layer_index: int = 0,
                   check_residuals: bool = True) -> structure.Layer:
  """The `structure.Layer` of one layer for given input and block widths;
  `check_residuals` refuses a residual that changes the stride or width.
  ValueError as `describe_network`."""
  return _Walker(filters_base, check_residuals).describe(
      layer, block_index, layer_index, in_width, block_width)


def describe_network(spec: ops.ConvTowerSpec,
                     input_channels: int) -> structure.Network:
  """The `structure.Network` of a `ConvTowerSpec` (with or without OneOfs).

  Raises:
    ValueError: naming the path, for a block width not an int or a OneOf of
      ints, a bad kernel size or squeeze-excite flag, a residual that changes
      the shape, choices that disagree in stride or width, or an unsupported
      layer.
  """
  if not isinstance(spec, ops.ConvTowerSpec):
    raise ValueError(f'expected a ConvTowerSpec, got {structure.short(spec)}')
  walker = _Walker(spec.filters_base)
  width = walker.add(structure.FixedWidth(input_channels))
  input_width = width
  layers = []
  for b, block in enumerate(spec.blocks):
    path = naming.block_filters_path(b)
    if isinstance(block.filters, ops.FilterMultiplier) or (
        isinstance(block.filters, schema.OneOf) and any(
            isinstance(c, ops.FilterMultiplier)
            for c in block.filters.choices)):
      raise ValueError(f'{path}: block widths must be ints or a OneOf of '
                       f'ints, got {structure.short(block.filters)}')
    block_width = walker.filters(path, block.filters, None)
    for l, layer_spec in enumerate(block.layers):
      layers.append(walker.describe(layer_spec, b, l, width, block_width))
      width = layers[-1].out_width
  return structure.Network(tuple(layers), tuple(walker.widths), input_width,
                           width)
