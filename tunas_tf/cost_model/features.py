"""Coupled one-hot features of a (sampled) architecture, in the original's
order (`coupled_tf_features`) so the released coefficients apply. Masks are
tensors or NumPy arrays, these also [B, n] (one row per architecture)."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, List, NamedTuple, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from tunas_tf.search_space import ops
from tunas_tf.search_space import schema

Array = Union[np.ndarray, tf.Tensor]


class _Masks(NamedTuple):
  """What the masks of a spec are: tensors (`use_tf`, rank 1), or NumPy
  arrays, rank 1 (`batch` None) or [batch, n] (one row per architecture)."""
  use_tf: bool
  batch: Optional[int]


def _masks_of(spec: Any) -> _Masks:
  """`_Masks` of a spec: tensors if any mask is one; else batched, of the
  first rank-2 NumPy mask's rows, if there is one."""
  masks = [oneof.mask for oneof in schema.flatten(spec)]
  if any(tf.is_tensor(mask) for mask in masks):
    return _Masks(use_tf=True, batch=None)
  batch = next((np.shape(mask)[0] for mask in masks if np.ndim(mask) == 2),
               None)
  return _Masks(use_tf=False, batch=batch)


def _kron(vectors: Sequence[Optional[Array]], use_tf: bool) -> Optional[Array]:
  """Flattened outer product of rank-1 vectors (NumPy: of the rows of
  [batch, n] ones, row by row); None stands for [1]."""
  out = None
  for vector in vectors:
    if vector is None:
      continue
    if out is None:
      out = vector
    elif use_tf:
      out = tf.reshape(out[:, None] * vector[None, :], [-1])
    else:  # np.outer's products, on the last axis.
      product = out[..., :, None] * vector[..., None, :]
      out = product.reshape(product.shape[:-2] +
                            (product.shape[-2] * product.shape[-1],))
  return out


def _checked_mask(oneof: schema.OneOf, path: str, masks: _Masks) -> Array:
  """The OneOf's mask as a float32 vector of static length n: rank 1, or
  [batch, n] for batched NumPy masks."""
  n = len(oneof.choices)
  if oneof.mask is None:
    raise ValueError(
        f'features: the OneOf at {path!r} has no mask; sample the spec '
        f'(controller) or attach masks (attach_one_hot_masks) first')
  if masks.use_tf:
    mask = tf.cast(oneof.mask, tf.float32)
    if mask.shape.rank is not None and mask.shape.num_elements() not in (
        None, n):
      raise ValueError(
          f'features: the mask at {path!r} has shape {mask.shape}; expected '
          f'[{n}] (one entry per choice)')
    return tf.reshape(mask, [n])
  mask = np.asarray(oneof.mask, np.float32)
  if masks.batch is not None:
    if mask.shape != (masks.batch, n):
      raise ValueError(
          f'features: the mask at {path!r} has shape {mask.shape}; expected '
          f'[{masks.batch}, {n}] (one row per architecture, as many as the '
          'first rank-2 mask has; one entry per choice)')
    return mask
  if mask.size != n:
    raise ValueError(
        f'features: the mask at {path!r} has shape {mask.shape}; expected '
        f'[{n}] (one entry per choice)')
  return mask.reshape(n)


def _layer_features(value: Any, path: str, masks: _Masks) -> Optional[Array]:
  """Features of any spec value; None means the constant [1]."""
  use_tf = masks.use_tf
  if isinstance(value, schema.OneOf):
    mask = _checked_mask(value, path, masks)
    children = [
        _layer_features(choice, f'{path}/choices/{i}' if path else
                        f'choices/{i}', masks)
        for i, choice in enumerate(value.choices)]
    if all(child is None for child in children):
      return mask
    parts = []
    for i, child in enumerate(children):
      if use_tf:  # The graph's ops as they always were.
        parts.append(mask[i:i + 1] if child is None else mask[i] * child)
      else:  # [..., 1]: a column of batched masks.
        column = mask[..., i:i + 1]
        parts.append(column if child is None else column * child)
    return tf.concat(parts, 0) if use_tf else np.concatenate(parts, -1)
  join = lambda key: f'{path}/{key}' if path else str(key)
  if dataclasses.is_dataclass(value) and not isinstance(value, type):
    return _kron([_layer_features(getattr(value, f.name), join(f.name), masks)
                  for f in dataclasses.fields(value)], use_tf)
  if isinstance(value, (list, tuple)):
    return _kron([_layer_features(v, join(i), masks)
                  for i, v in enumerate(value)], use_tf)
  if isinstance(value, dict):
    return _kron([_layer_features(value[k], join(k), masks)
                  for k in sorted(value)], use_tf)
  return None


def _ones(masks: _Masks) -> Array:
  """The constant features [1] ([batch, 1] for batched masks)."""
  if masks.use_tf:
    return tf.ones([1])
  return np.ones(([] if masks.batch is None else [masks.batch]) + [1],
                 np.float32)


@tf.autograph.experimental.do_not_convert
def layer_features(layer: Any) -> Array:
  """Rank-1 float32 features of one layer (any spec value) whose OneOfs carry
  masks; ValueError for a missing mask or one of the wrong length."""
  masks = _masks_of(layer)
  out = _layer_features(layer, '', masks)
  return _ones(masks) if out is None else out


def _check_tower(spec: Any) -> None:
  if not isinstance(spec, ops.ConvTowerSpec):
    raise ValueError(
        f'features: expected a ConvTowerSpec, got {type(spec).__name__}')


@tf.autograph.experimental.do_not_convert
def features(spec: ops.ConvTowerSpec) -> Array:
  """The coupled one-hot features of a masked network, in the original order.

  Per layer (activations, pools and endpoints included), in network order:
  `kron(out_mask, in_mask, layer_features(layer))`, `out_mask` the mask of
  the block's `filters` OneOf, `in_mask` that of the previous layer's output
  width (none for the first layer); a plain-int `filters` has no mask and
  missing operands are skipped. `kron(x, y)` is the flattened outer product
  (index `i * len(y) + j`). `layer_features`: a primitive gives [1]; a
  dataclass, list or tuple the kron of its fields or items (dicts: sorted
  keys); a OneOf the concatenation of `mask[i] * layer_features(choice_i)`.
  Per-layer blocks of length 1 are dropped (a single [1] if none remain).

  Returns float32 features of length `feature_length(spec)` (a tensor or an
  array, as the masks). ValueError for another type than `ConvTowerSpec`, a
  missing mask, or one of the wrong length or batch (naming its path).
  """
  _check_tower(spec)
  masks = _masks_of(spec)
  blocks = []
  in_mask = None
  for b, block in enumerate(spec.blocks):
    out_mask = (_checked_mask(block.filters, f'blocks/{b}/filters', masks)
                if isinstance(block.filters, schema.OneOf) else None)
    for j, layer in enumerate(block.layers):
      value = _kron([out_mask, in_mask,
                     _layer_features(layer, f'blocks/{b}/layers/{j}', masks)],
                    masks.use_tf)
      if value is not None and int(value.shape[-1]) > 1:
        blocks.append(value)
      in_mask = out_mask
  if not blocks:
    return _ones(masks)
  return tf.concat(blocks, 0) if masks.use_tf else np.concatenate(blocks, -1)


def layer_feature_length(value: Any) -> int:
  """Length of `layer_features(value)`, from the structure alone (no masks)."""
  if isinstance(value, schema.OneOf):
    return sum(layer_feature_length(choice) for choice in value.choices)
  if dataclasses.is_dataclass(value) and not isinstance(value, type):
    value = [getattr(value, f.name) for f in dataclasses.fields(value)]
  elif isinstance(value, dict):
    value = list(value.values())
  if isinstance(value, (list, tuple)):
    return int(np.prod([layer_feature_length(v) for v in value]))
  return 1


def block_feature_lengths(spec: ops.ConvTowerSpec) -> List[int]:
  """Per layer, in network order, the length of its feature block
  `n_out * n_in * layer_feature_length(layer)` (length-1 blocks included)."""
  _check_tower(spec)
  lengths = []
  n_in = 1
  for block in spec.blocks:
    n_out = (len(block.filters.choices)
             if isinstance(block.filters, schema.OneOf) else 1)
    for layer in block.layers:
      lengths.append(n_out * n_in * layer_feature_length(layer))
      n_in = n_out
  return lengths


def feature_length(spec: ops.ConvTowerSpec) -> int:
  """Length of `features(spec)`, from the structure alone (no masks needed)."""
  kept = [n for n in block_feature_lengths(spec) if n > 1]
  return sum(kept) if kept else 1


def attach_one_hot_masks(spec: Any, indices: Union[str, Sequence[int]]) -> Any:
  """A copy of `spec` whose OneOfs carry one-hot NumPy masks of `indices`;
  ValueError as `schema.prune`."""
  return attach_batched_one_hot_masks(spec, [indices], batched=False)


def attach_batched_one_hot_masks(
    spec: Any, indices_list: Sequence[Union[str, Sequence[int]]],
    batched: bool = True) -> Any:
  """`attach_one_hot_masks` of many architectures: [len(indices_list), n]
  masks, row b that of `indices_list[b]` (rank 1, of the one list, unless
  `batched`)."""
  parsed = schema.check_indices_list(spec, indices_list)
  rows = np.arange(len(parsed))
  position = itertools.count()

  def one_hot(_, oneof):
    i = next(position)
    mask = np.zeros([len(parsed), len(oneof.choices)], np.float32)
    mask[rows, [values[i] for values in parsed]] = 1.0
    return mask if batched else mask[0]

  return schema.with_masks(spec, one_hot)


def batched_features(spec: ops.ConvTowerSpec,
                     indices_list: Sequence[Union[str, Sequence[int]]]
                     ) -> np.ndarray:
  """[len(indices_list), feature_length(spec)] float32 features, row b exactly
  `features(attach_one_hot_masks(spec, indices_list[b]))`."""
  values = features(attach_batched_one_hot_masks(spec, indices_list))
  return np.ascontiguousarray(
      np.broadcast_to(values, (len(indices_list), values.shape[-1])))
