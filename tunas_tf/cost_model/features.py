"""Coupled one-hot features of a (sampled) architecture.

The cost model is linear in these features, so their order is exactly the
original's (`coupled_tf_features`), for the released coefficients to apply
(the rule: `features`). Under one-hot masks each per-layer block is one-hot;
under the controller's warm-up masks it is the corresponding mixture. Masks
may be tensors (the controller's: `features` returns a float32 tensor) or
NumPy arrays (`attach_one_hot_masks`: a float32 array, no graph needed).
"""

from __future__ import annotations

import dataclasses
from typing import Any, List, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from tunas_tf.search_space import ops
from tunas_tf.search_space import schema

Array = Union[np.ndarray, tf.Tensor]


def _kron(vectors: Sequence[Optional[Array]], use_tf: bool) -> Optional[Array]:
  """Flattened outer product of rank-1 vectors; None stands for [1]."""
  out = None
  for vector in vectors:
    if vector is None:
      continue
    if out is None:
      out = vector
    elif use_tf:
      out = tf.reshape(out[:, None] * vector[None, :], [-1])
    else:
      out = np.outer(out, vector).ravel()
  return out


def _checked_mask(oneof: schema.OneOf, path: str, use_tf: bool) -> Array:
  """The OneOf's mask as a rank-1 float32 vector of static length n."""
  n = len(oneof.choices)
  if oneof.mask is None:
    raise ValueError(
        f'features: the OneOf at {path!r} has no mask; sample the spec '
        f'(controller) or attach masks (attach_one_hot_masks) first')
  if use_tf:
    mask = tf.cast(oneof.mask, tf.float32)
    if mask.shape.rank is not None and mask.shape.num_elements() not in (
        None, n):
      raise ValueError(
          f'features: the mask at {path!r} has shape {mask.shape}; expected '
          f'[{n}] (one entry per choice)')
    return tf.reshape(mask, [n])
  mask = np.asarray(oneof.mask, np.float32)
  if mask.size != n:
    raise ValueError(
        f'features: the mask at {path!r} has shape {mask.shape}; expected '
        f'[{n}] (one entry per choice)')
  return mask.reshape(n)


def _layer_features(value: Any, path: str, use_tf: bool) -> Optional[Array]:
  """Features of any spec value; None means the constant [1]."""
  if isinstance(value, schema.OneOf):
    mask = _checked_mask(value, path, use_tf)
    children = [
        _layer_features(choice, f'{path}/choices/{i}' if path else
                        f'choices/{i}', use_tf)
        for i, choice in enumerate(value.choices)]
    if all(child is None for child in children):
      return mask
    parts = []
    for i, child in enumerate(children):
      parts.append(mask[i:i + 1] if child is None else mask[i] * child)
    return tf.concat(parts, 0) if use_tf else np.concatenate(parts)
  join = lambda key: f'{path}/{key}' if path else str(key)
  if dataclasses.is_dataclass(value) and not isinstance(value, type):
    return _kron([_layer_features(getattr(value, f.name), join(f.name), use_tf)
                  for f in dataclasses.fields(value)], use_tf)
  if isinstance(value, (list, tuple)):
    return _kron([_layer_features(v, join(i), use_tf)
                  for i, v in enumerate(value)], use_tf)
  if isinstance(value, dict):
    return _kron([_layer_features(value[k], join(k), use_tf)
                  for k in sorted(value)], use_tf)
  return None


def _uses_tensors(spec: Any) -> bool:
  return any(tf.is_tensor(oneof.mask) for oneof in schema.flatten(spec))


@tf.autograph.experimental.do_not_convert
def layer_features(layer: Any) -> Array:
  """The features of one layer (or any spec value) with masked OneOfs.

  Args:
    layer: a spec value whose OneOfs all carry masks.

  Returns:
    Rank-1 float32 features: a tensor if any mask is a tensor, else a NumPy
    array. Length = the product over fields of their lengths, with a OneOf
    contributing the sum over its choices (1 for a value without OneOfs).

  Raises:
    ValueError: if a OneOf has no mask or a mask of the wrong length.
  """
  use_tf = _uses_tensors(layer)
  out = _layer_features(layer, '', use_tf)
  if out is None:
    return tf.ones([1]) if use_tf else np.ones([1], np.float32)
  return out


def _check_tower(spec: Any) -> None:
  if not isinstance(spec, ops.ConvTowerSpec):
    raise ValueError(
        f'features: expected a ConvTowerSpec, got {type(spec).__name__}')


def _filters_mask(block: ops.Block, b: int, use_tf: bool) -> Optional[Array]:
  if isinstance(block.filters, schema.OneOf):
    return _checked_mask(block.filters, f'blocks/{b}/filters', use_tf)
  return None


@tf.autograph.experimental.do_not_convert
def features(spec: ops.ConvTowerSpec) -> Array:
  """The coupled one-hot features of a masked network, in the original order.

  The order: walk the blocks and every layer of each (activations, pools and
  endpoints included) and emit `kron(out_mask, in_mask, layer_features(layer))`
  per layer, `out_mask` the mask of the block's `filters` OneOf, `in_mask` that
  of the previous layer's output width (the previous block's `filters` for a
  block's first layer, none for the network's first layer, the block's own
  `out_mask` for its other layers); a plain-int `filters` has no mask and
  missing operands are skipped. `kron(x, y)` is the flattened outer product
  (index `i * len(y) + j`). `layer_features`: a primitive gives [1]; a
  dataclass, list or tuple the kron of its fields or items in order (dicts:
  sorted keys); a OneOf the concatenation over its choices of
  `mask[i] * layer_features(choice_i)`. Per-layer blocks of length 1 are
  dropped and the rest concatenated (a single [1] if none remain).

  Args:
    spec: a `ConvTowerSpec` whose OneOfs all carry masks: rank-1 float
      tensors (e.g. `controller.reinforce.independent_sample`) or NumPy arrays
      (e.g. `attach_one_hot_masks`). A spec without OneOfs is allowed.

  Returns:
    Rank-1 float32 features of length `feature_length(spec)`: a tf.Tensor
    if any mask is a tensor (masks of other kinds are converted), else a
    NumPy array.

  Raises:
    ValueError: if `spec` is not a `ConvTowerSpec`, or a OneOf has no mask or
      a mask of the wrong length (the message names its path).
  """
  _check_tower(spec)
  use_tf = _uses_tensors(spec)
  blocks = []
  in_mask = None
  for b, block in enumerate(spec.blocks):
    out_mask = _filters_mask(block, b, use_tf)
    for j, layer in enumerate(block.layers):
      value = _kron([out_mask, in_mask,
                     _layer_features(layer, f'blocks/{b}/layers/{j}', use_tf)],
                    use_tf)
      if value is not None and int(value.shape[0]) > 1:
        blocks.append(value)
      in_mask = out_mask
  if use_tf:
    return tf.concat(blocks, 0) if blocks else tf.ones([1])
  return np.concatenate(blocks) if blocks else np.ones([1], np.float32)


def _value_length(value: Any) -> int:
  if isinstance(value, schema.OneOf):
    return sum(_value_length(choice) for choice in value.choices)
  if dataclasses.is_dataclass(value) and not isinstance(value, type):
    return int(np.prod([_value_length(getattr(value, f.name))
                        for f in dataclasses.fields(value)]))
  if isinstance(value, (list, tuple)):
    return int(np.prod([_value_length(v) for v in value]))
  if isinstance(value, dict):
    return int(np.prod([_value_length(value[k]) for k in value]))
  return 1


def layer_feature_length(layer: Any) -> int:
  """Length of `layer_features(layer)`, from the structure alone (no masks)."""
  return _value_length(layer)


def block_feature_lengths(spec: ops.ConvTowerSpec) -> List[int]:
  """Length of every per-layer feature block (length-1 blocks included).

  Args:
    spec: a `ConvTowerSpec` (masks not needed).

  Returns:
    One int per layer (blocks in order, layers in order): `n_out * n_in * L`
    with `n_out`, `n_in` the lengths of the out and in filter masks (1 where
    there is none) and `L = layer_feature_length(layer)`.
  """
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
  """Length of `features(spec)`, from the structure alone (no masks needed).

  E.g. 144 for `proxylessnas_search`, 5983 for `proxylessnas_enlarged_search`
  and 29068 for `mobilenet_v3_like_search`.
  """
  kept = [n for n in block_feature_lengths(spec) if n > 1]
  return sum(kept) if kept else 1


def attach_one_hot_masks(spec: Any, indices: Union[str, Sequence[int]]) -> Any:
  """Returns a copy of `spec` whose OneOfs carry one-hot NumPy masks.

  Args:
    spec: a spec containing OneOfs.
    indices: one index per OneOf in visit order (list of ints or a
      colon-separated string), as for `schema.prune`.

  Returns:
    The spec with `OneOf(choices, tag, mask)`, mask a float32 NumPy array of
    length `len(choices)` with a 1 at the chosen index.

  Raises:
    ValueError: for a wrong number of indices or an index out of range, with
      the messages of `schema.prune`.
  """
  values = schema.parse_indices(indices)
  schema.prune(spec, values)  # Validates count and ranges, same messages.
  position = iter(values)

  def one_hot(_, oneof):
    mask = np.zeros([len(oneof.choices)], np.float32)
    mask[next(position)] = 1.0
    return mask

  return schema.with_masks(spec, one_hot)
