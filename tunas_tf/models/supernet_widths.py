"""Widths of the supernet's layers, decided per call from the sampled masks.

A `structure.Width` (the walker's description, here `WidthSource`) says how
a width is chosen (fixed; picked among ints or `FilterMultiplier`s of
another width by the argmax of a filters mask; or rounded from another
width for squeeze-excite) and knows its widest value, at which weights are
allocated. A `CallContext` resolves every source of a network to a
`masked.Width` once per call (`resolve_width`).
"""

from __future__ import annotations

import contextlib
from typing import Dict, Iterator, Mapping, Optional, Sequence

import tensorflow as tf

from tunas_tf.layers import masked
from tunas_tf.search_space import filters as filters_lib
from tunas_tf.search_space import ops as ops_lib
from tunas_tf.search_space import structure

Width = masked.Width

WidthSource = structure.Width


def _scaled(value, input_n, base: int, path: str):
  """A filters value for an input width (Python int or int32 Tensor)."""
  if isinstance(value, ops_lib.FilterMultiplier) and isinstance(
      input_n, tf.Tensor):
    return masked.tf_scale_filters(input_n, value.scale, base)
  return structure.scaled_filters(value, input_n, base, path)


def resolve_width(source: WidthSource, masks: Mapping[str, tf.Tensor],
                  resolved: Mapping[int, Width]) -> Width:
  """The sampled `Width` of a `structure.Width` for one call.

  Args:
    source: a `structure.FixedWidth`, `ChoiceWidth` or `DivisibleWidth`.
    masks: float32 rank-1 mask Tensors by OneOf path.
    resolved: the `Width`s of the sources it derives from, by `id(source)`.

  Returns:
    A `masked.Width`: for a choice, the value at the argmax of its mask (the
    mask's values are not weights); its `n` is a Python int when the spec
    and the inputs fix it, else a scalar int32 Tensor.
  """
  if isinstance(source, structure.FixedWidth):
    return Width(source.max, source.max)
  input_n = resolved[id(source.input)].n if source.input is not None else None
  if isinstance(source, structure.DivisibleWidth):
    if isinstance(input_n, int):
      return Width(source.max, filters_lib.make_divisible(
          input_n * source.ratio, source.base))
    return Width(source.max, masked.tf_make_divisible(
        tf.cast(input_n, tf.float64) * source.ratio, source.base))
  candidates = [_scaled(v, input_n, source.base, source.path or 'filters')
                for v in source.values]
  if len(candidates) == 1:
    return Width(source.max, candidates[0])
  index = tf.argmax(masks[source.path], output_type=tf.int32)
  stacked = tf.stack([tf.cast(c, tf.int32) for c in candidates])
  return Width(source.max, tf.gather(stacked, index))


class CallContext:
  """Per-call state: the mode, the masks and every width, resolved up front.

  Widths are resolved when the context is made, outside any `tf.cond`, so
  that a width first needed inside one branch can be read in another.

  Attributes:
    mode: `'masked'` or `'sampled'`.
    training: Python bool (only dropout reads it; batch norm is stateless).
    dropout_seed: None, or an integer [2] Tensor keying the dropout masks
      (`layers.dropout`).
    epsilon: batch-norm epsilon.
    dtype: the compute dtype of the forward pass (float32 or bfloat16):
      activations, kernels and biases as read (`VariableStore.get(...,
      dtype=ctx.dtype)`) and the masks that scale activations
      (`forward_mask`). The regularisers read float32 variables.
    active: None, or a scalar bool Tensor: False for a Switch branch whose
      mask entry is 0, while running it in a mixture or listing its
      regularisers; nodes then read zeros for its weights
      (`VariableStore.get(..., active)`).
  """

  def __init__(self, masks: Mapping[str, tf.Tensor],
               sources: Sequence[WidthSource], mode: str, training: bool,
               epsilon: float, dtype: tf.DType = tf.float32,
               dropout_seed: Optional[tf.Tensor] = None):
    self.mode = mode
    self.training = training
    self.dropout_seed = dropout_seed
    self.epsilon = epsilon
    self.dtype = tf.as_dtype(dtype)
    self._masks = dict(masks)
    self.active: Optional[tf.Tensor] = None
    self._widths: Dict[int, Width] = {}
    for source in sources:
      self._widths[id(source)] = resolve_width(source, self._masks,
                                               self._widths)

  def mask(self, path: str) -> Optional[tf.Tensor]:
    """The (stop-gradiented float32) mask of the OneOf at `path`, or None."""
    return self._masks.get(path)

  def forward_mask(self, path: str) -> Optional[tf.Tensor]:
    """`mask(path)` in the compute dtype (the same tensor for float32)."""
    mask = self._masks.get(path)
    if mask is None or mask.dtype == self.dtype:
      return mask
    return tf.cast(mask, self.dtype)

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
