"""An architecture's structure (`walker.describe_network`'s types): per
layer a tree of parts (convolutions, squeeze-excite, activations, pools,
`Switch`es over a OneOf's alternatives, residuals), named by `naming` and
wired by `WidthRule`s (compared by identity, one per width)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, List, Optional, Sequence, Tuple

from tunas_tf.search_space import filters as filters_lib
from tunas_tf.search_space import ops


def short(value: Any, limit: int = 100) -> str:
  """`repr(value)`, cut to `limit` characters (for error messages)."""
  text = repr(value)
  return text if len(text) <= limit else text[:limit - 3] + '...'


class WidthRule:
  """How a width is decided: fixed, chosen by a OneOf, or derived; `max`
  the widest value (where weights are allocated)."""
  max: int

  def static(self) -> Optional[int]:
    """The width when the spec alone fixes it, else None."""
    raise NotImplementedError


class FixedWidth(WidthRule):
  """A width fixed by the spec or the input (image channels, an int)."""

  def __init__(self, n: int):
    self.max = int(n)

  def static(self) -> Optional[int]:
    return self.max


def scaled_filters(value: Any, input_n: Optional[int], base: int,
                   path: str) -> int:
  """A filters value (int or `FilterMultiplier`) for an input width;
  ValueError for another value or a multiplier without an input width."""
  if isinstance(value, ops.FilterMultiplier):
    if input_n is None:
      raise ValueError(f'{path}: a FilterMultiplier needs an input width; '
                       'block widths must be ints')
    return filters_lib.scale_filters(input_n, value.scale, base)
  if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
    raise ValueError(f'{path}: filters must be positive ints or '
                     f'FilterMultipliers, got {value!r}')
  return value


class ChoiceWidth(WidthRule):
  """A width picked among `values` (ints or `FilterMultiplier`s of `input`'s
  width) by the argmax of the mask at `path` (None: one value, no OneOf)."""

  def __init__(self, path: Optional[str], values: Sequence[Any],
               input_width: Optional[WidthRule], base: int):
    self.path = path
    self.values = tuple(values)
    self.input = input_width
    self.base = base
    input_max = None if input_width is None else input_width.max
    self.max = max(scaled_filters(v, input_max, base, path or 'filters')
                   for v in self.values)

  def static(self) -> Optional[int]:
    if len(self.values) != 1:
      return None
    input_n = None if self.input is None else self.input.static()
    if isinstance(self.values[0], ops.FilterMultiplier) and input_n is None:
      return None
    return scaled_filters(self.values[0], input_n, self.base,
                          self.path or 'filters')


class DivisibleWidth(WidthRule):
  """`make_divisible(ratio * input width, base)`: the squeeze-excite width."""

  def __init__(self, input_width: WidthRule, ratio: float, base: int):
    self.input = input_width
    self.ratio = ratio
    self.base = base
    self.max = filters_lib.make_divisible(input_width.max * ratio, base)

  def static(self) -> Optional[int]:
    input_n = self.input.static()
    if input_n is None:
      return None
    return filters_lib.make_divisible(input_n * self.ratio, self.base)


def same_width(a: WidthRule, b: WidthRule) -> bool:
  """Whether two widths always agree (one object, or equal static values)."""
  return a is b or (a.static() is not None and a.static() == b.static())


@dataclasses.dataclass(eq=False)
class Part:
  """A piece of a layer. `strides`: spatial stride (out = ceil(in / s))."""
  in_width: WidthRule
  out_width: WidthRule

  @property
  def strides(self) -> int:
    return 1

  def out_size(self, in_size: int) -> int:
    """Output resolution for an input resolution ('SAME' padding)."""
    return -(-in_size // self.strides)


@dataclasses.dataclass(eq=False)
class _Convolution(Part):
  """A k x k 'SAME' convolution `name`."""
  name: str = ''
  kernel_size: int = 1
  conv_strides: int = 1

  @property
  def strides(self) -> int:
    return self.conv_strides


@dataclasses.dataclass(eq=False)
class Conv(_Convolution):
  """A conv `name`, then batch norm `name/bn` (or a bias)."""
  use_batch_norm: bool = True
  activation: Optional[str] = None  # Applied after batch norm, `name/{act}`.


@dataclasses.dataclass(eq=False)
class Depthwise(_Convolution):
  """A depthwise conv `name`, batch norm `name/bn`, an activation."""
  activation: str = ops.RELU


@dataclasses.dataclass(eq=False)
class SqueezeExcite(Part):
  """x * gate(expand(inner(reduce(mean(x))))), scope `{prefix}/se`; `hidden`
  the reduced width, the convs 1x1, biased, no batch norm."""
  hidden: Optional[WidthRule] = None
  scope: str = ''
  reduce_name: str = ''
  expand_name: str = ''
  inner_activation: str = ops.RELU
  gating_activation: str = ops.SIGMOID


@dataclasses.dataclass(eq=False)
class Activation(Part):
  """An activation layer `{scope}/{activation}`."""
  scope: str = ''
  activation: str = ops.RELU


@dataclasses.dataclass(eq=False)
class GlobalPool(Part):
  """Mean over height and width, keeping them (`{scope}/pool`)."""
  scope: str = ''

  def out_size(self, in_size: int) -> int:
    return 1


@dataclasses.dataclass(eq=False)
class Zero(Part):
  """A `ZeroSpec` layer outside a OneOf: zeros of the input's shape."""


@dataclasses.dataclass(eq=False)
class Identity(Part):
  """The input (a skipped residual layer, squeeze-excite switched off)."""


@dataclasses.dataclass(eq=False)
class Chain(Part):
  """Parts applied in order."""
  parts: Tuple[Part, ...] = ()

  @property
  def strides(self) -> int:
    return math.prod(p.strides for p in self.parts)

  def out_size(self, in_size: int) -> int:
    for part in self.parts:
      in_size = part.out_size(in_size)
    return in_size


@dataclasses.dataclass(eq=False)
class Switch(Part):
  """The alternatives of the OneOf at `path`; None is a `ZeroSpec` choice."""
  path: str = ''
  branches: Tuple[Optional[Part], ...] = ()

  @property
  def strides(self) -> int:
    live = [b for b in self.branches if b is not None]
    return live[0].strides if live else 1


@dataclasses.dataclass(eq=False)
class Residual(Part):
  """`layer(x) + x` (`{scope}/add`); `path` is the ResidualSpec's."""
  layer: Optional[Part] = None
  path: str = ''
  scope: str = ''

  @property
  def strides(self) -> int:
    return self.layer.strides

  def out_size(self, in_size: int) -> int:
    return self.layer.out_size(in_size)


def sized_leaves(part: Optional[Part],
                 in_size: int) -> List[Tuple[Part, int, int]]:
  """(leaf, input size, output size) of every part of a `Switch`-free part
  but Chains and Residuals, in order; ValueError for a `Switch`."""
  if part is None:
    return []
  if isinstance(part, Switch):
    raise ValueError(f'{part.path}: a OneOf; resolve a pruned spec')
  if isinstance(part, Chain):
    found = []
    for child in part.parts:
      found.extend(sized_leaves(child, in_size))
      in_size = child.out_size(in_size)
    return found
  if isinstance(part, Residual):
    return sized_leaves(part.layer, in_size)
  return [(part, in_size, part.out_size(in_size))]


def walk(part: Optional[Part]) -> List[Part]:
  """`part` and every part inside it, parents first (Switch branches too)."""
  if part is None:
    return []
  found = [part]
  children: Sequence[Optional[Part]] = ()
  if isinstance(part, Chain):
    children = part.parts
  elif isinstance(part, Switch):
    children = part.branches
  elif isinstance(part, Residual):
    children = (part.layer,)
  for child in children:
    found.extend(walk(child))
  return found


@dataclasses.dataclass(frozen=True)
class Layer:
  """One layer: its position, `prefix` (`naming.layer_prefix`, also its
  schema path), spec, parts (None for a `DetectionEndpointSpec`) and widths."""
  block_index: int
  layer_index: int
  prefix: str
  spec: Any
  part: Optional[Part]
  in_width: WidthRule
  out_width: WidthRule


@dataclasses.dataclass(frozen=True)
class Network:
  """A network: its `layers`, every `WidthRule` (`widths`, inputs before the
  widths derived from them), the image channels and the classifier's input."""
  layers: Tuple[Layer, ...]
  widths: Tuple[WidthRule, ...]
  input_width: WidthRule
  output_width: WidthRule
