"""Widths of the supernet's layers, decided per call from the sampled masks.

A `WidthSource` describes, when the network is built, how a width is chosen
(fixed; picked among ints or `FilterMultiplier`s of another width by the
argmax of a filters mask; or rounded from another width for squeeze-excite)
and knows its widest value, at which weights are allocated. A `CallContext`
resolves every source of a network to a `masked.Width` once per call.
"""

from __future__ import annotations

import contextlib
from typing import Dict, Iterator, Mapping, Optional, Sequence

import tensorflow as tf

from tunas_tf.layers import masked
from tunas_tf.search_space import filters as filters_lib
from tunas_tf.search_space import ops as ops_lib

Width = masked.Width

# -----------------------------------------------------------------------------
# Widths.
# -----------------------------------------------------------------------------


class WidthSource:
  """How a width is decided; resolved to a `Width` once per call.

  Attributes:
    max: Python int, the widest value (the allocated width).
  """
  max: int

  def resolve(self, masks: Mapping[str, tf.Tensor],
              resolved: Mapping[int, Width]) -> Width:
    """Returns the sampled `Width`.

    Args:
      masks: float32 rank-1 mask Tensors by OneOf path.
      resolved: the `Width`s of sources created earlier, by `id(source)`.
    """
    raise NotImplementedError


class FixedWidth(WidthSource):
  """A width fixed when the network is built (e.g. the image channels)."""

  def __init__(self, n: int):
    self.max = int(n)

  def resolve(self, masks, resolved) -> Width:
    del masks, resolved
    return Width(self.max, self.max)


def _scaled(value, input_n, base: int, path: str):
  """A filters value (int or FilterMultiplier) for an input width."""
  if isinstance(value, ops_lib.FilterMultiplier):
    if input_n is None:
      raise ValueError(f'{path}: a FilterMultiplier needs an input width; '
                       'block widths must be ints')
    if isinstance(input_n, int):
      return filters_lib.scale_filters(input_n, value.scale, base)
    return masked.tf_scale_filters(input_n, value.scale, base)
  if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
    raise ValueError(f'{path}: filters must be positive ints or '
                     f'FilterMultipliers, got {value!r}')
  return value


class ChoiceWidth(WidthSource):
  """A width picked among `values` by the argmax of the mask at `path`.

  Values are ints or `FilterMultiplier`s of `input_source`'s runtime width
  (rounded with `scale_filters` and `base`). The mask's values are not
  weights: only its argmax is read.
  """

  def __init__(self, path: Optional[str], values: Sequence,
               input_source: Optional[WidthSource], base: int):
    self.path = path
    self.values = tuple(values)
    self.input_source = input_source
    self.base = base
    input_max = None if input_source is None else input_source.max
    self.max = max(_scaled(v, input_max, base, path or 'filters')
                   for v in self.values)

  def resolve(self, masks, resolved) -> Width:
    input_n = None
    if self.input_source is not None:
      input_n = resolved[id(self.input_source)].n
    candidates = [_scaled(v, input_n, self.base, self.path or 'filters')
                  for v in self.values]
    if len(candidates) == 1:
      return Width(self.max, candidates[0])
    index = tf.argmax(masks[self.path], output_type=tf.int32)
    stacked = tf.stack([tf.cast(c, tf.int32) for c in candidates])
    return Width(self.max, tf.gather(stacked, index))


class DivisibleWidth(WidthSource):
  """`make_divisible(ratio * input width, base)`: the squeeze-excite width."""

  def __init__(self, input_source: WidthSource, ratio: float, base: int):
    self.input_source = input_source
    self.ratio = ratio
    self.base = base
    self.max = filters_lib.make_divisible(input_source.max * ratio, base)

  def resolve(self, masks, resolved) -> Width:
    del masks
    input_n = resolved[id(self.input_source)].n
    if isinstance(input_n, int):
      return Width(self.max,
                   filters_lib.make_divisible(input_n * self.ratio, self.base))
    return Width(self.max, masked.tf_make_divisible(
        tf.cast(input_n, tf.float64) * self.ratio, self.base))


class CallContext:
  """Per-call state: the mode, the masks and every width, resolved up front.

  Widths are resolved when the context is made, outside any `tf.cond`, so
  that a width first needed inside one branch can be read in another.

  Attributes:
    mode: `'masked'` or `'sampled'`.
    training: Python bool (only dropout reads it; batch norm is stateless).
    epsilon: batch-norm epsilon.
    active: None, or a scalar bool Tensor: False while listing the
      regularisers of a Switch branch whose mask entry is 0.
  """

  def __init__(self, masks: Mapping[str, tf.Tensor],
               sources: Sequence[WidthSource], mode: str, training: bool,
               epsilon: float):
    self.mode = mode
    self.training = training
    self.epsilon = epsilon
    self._masks = dict(masks)
    self.active: Optional[tf.Tensor] = None
    self._widths: Dict[int, Width] = {}
    for source in sources:
      self._widths[id(source)] = source.resolve(self._masks, self._widths)

  def mask(self, path: str) -> Optional[tf.Tensor]:
    """The (stop-gradiented float32) mask of the OneOf at `path`, or None."""
    return self._masks.get(path)

  def width(self, source: WidthSource) -> Width:
    """The resolved `Width` of `source`."""
    return self._widths[id(source)]

  @contextlib.contextmanager
  def gated(self, active: tf.Tensor) -> Iterator[None]:
    """Within the block, `self.active` is also conditioned on `active`."""
    outer = self.active
    self.active = active if outer is None else tf.logical_and(outer, active)
    try:
      yield
    finally:
      self.active = outer
