"""Widths of the supernet's layers: a `CallContext` resolves every
`structure.WidthRule` to a `masked.ActiveWidth` once per call."""

from __future__ import annotations

import contextlib
import copy
from typing import Dict, Iterator, Mapping, NamedTuple, Optional, Sequence

import tensorflow as tf

from tunas_tf.layers import masked
from tunas_tf.search_space import filters as filters_lib
from tunas_tf.search_space import ops as ops_lib
from tunas_tf.search_space import structure


def resolve_width(rule: structure.WidthRule, masks: Mapping[str, tf.Tensor],
                  resolved: Mapping[int, masked.ActiveWidth]
                  ) -> masked.ActiveWidth:
  """`rule`'s `ActiveWidth` for one call: a choice's value at its mask's
  argmax (`masks` by OneOf path; `resolved` the widths it derives from, by
  `id(rule)`); `n` a Python int when static, else a scalar int32 Tensor."""
  if isinstance(rule, structure.FixedWidth):
    return masked.ActiveWidth(rule.max, rule.max)
  input_n = resolved[id(rule.input)].n if rule.input is not None else None
  if isinstance(rule, structure.DivisibleWidth):
    if isinstance(input_n, int):
      return masked.ActiveWidth(rule.max, filters_lib.make_divisible(
          input_n * rule.ratio, rule.base))
    return masked.ActiveWidth(rule.max, masked.tf_make_divisible(
        tf.cast(input_n, tf.float64) * rule.ratio, rule.base))
  tensor = isinstance(input_n, tf.Tensor)  # Else a Python int or None.
  candidates = [
      masked.tf_scale_filters(input_n, v.scale, rule.base)
      if tensor and isinstance(v, ops_lib.FilterMultiplier) else
      structure.scaled_filters(v, input_n, rule.base, rule.path or 'filters')
      for v in rule.values]
  if len(candidates) == 1:
    return masked.ActiveWidth(rule.max, candidates[0])
  index = tf.argmax(masks[rule.path], output_type=tf.int32)
  stacked = tf.stack([tf.cast(c, tf.int32) for c in candidates])
  return masked.ActiveWidth(rule.max, tf.gather(stacked, index))


class MaskEntries(NamedTuple):
  """A mask's entries as scalars, made outside every Switch branch (a branch
  captures the one it reads): `mask` float32, `scale` in the compute dtype,
  `chosen` bool (`mask[i] != 0`)."""
  mask: Sequence[tf.Tensor]
  scale: Sequence[tf.Tensor]
  chosen: Sequence[tf.Tensor]


def _mask_entries(mask: tf.Tensor, dtype: tf.DType) -> MaskEntries:
  """`MaskEntries` of a rank-1 mask of static length."""
  n = mask.shape[0]
  values = tf.unstack(mask, num=n)
  scale = values if mask.dtype == dtype else tf.unstack(tf.cast(mask, dtype),
                                                        num=n)
  chosen = tf.unstack(tf.not_equal(mask, 0.0), num=n)
  return MaskEntries(values, scale, chosen)


class CallContext:
  """Per-call state: the mode, the masks and every width, resolved up front
  (outside any `tf.cond`, so a width made in one branch is not read in
  another). `active`: None, or a scalar bool Tensor, False in a Switch branch
  whose mask entry is 0 (its nodes then read zeros for their weights)."""

  def __init__(self, masks: Mapping[str, tf.Tensor],
               rules: Sequence[structure.WidthRule], mode: str,
               training: bool,
               epsilon: float, dtype: tf.DType = tf.float32,
               dropout_seed: Optional[tf.Tensor] = None):
    self.mode = mode
    self.training = training
    self.dropout_seed = dropout_seed
    self.epsilon = epsilon
    self.dtype = tf.as_dtype(dtype)
    self._masks = dict(masks)
    self._entries: Dict[str, MaskEntries] = {
        path: _mask_entries(mask, self.dtype)
        for path, mask in self._masks.items()}
    self.active: Optional[tf.Tensor] = None
    self._widths: Dict[int, masked.ActiveWidth] = {}
    for rule in rules:
      self._widths[id(rule)] = resolve_width(rule, self._masks,
                                               self._widths)

  def mask(self, path: str) -> Optional[tf.Tensor]:
    """The (stop-gradiented float32) mask of the OneOf at `path`, or None."""
    return self._masks.get(path)

  def for_call(self, training: bool,
               dropout_seed: Optional[tf.Tensor]) -> 'CallContext':
    """This context (the same tensors) for `training`, `dropout_seed`."""
    other = copy.copy(self)
    other.training = training
    other.dropout_seed = dropout_seed
    return other

  def entries(self, path: str) -> Optional['MaskEntries']:
    """The mask of the OneOf at `path` entry by entry, or None."""
    return self._entries.get(path)

  def width(self, rule: structure.WidthRule) -> masked.ActiveWidth:
    """The `ActiveWidth` of `rule` in this call."""
    return self._widths[id(rule)]

  @contextlib.contextmanager
  def gated(self, active: tf.Tensor) -> Iterator[None]:
    """Within the block, `self.active` is also conditioned on `active`."""
    outer = self.active
    self.active = active if outer is None else tf.logical_and(outer, active)
    try:
      yield
    finally:
      self.active = outer
