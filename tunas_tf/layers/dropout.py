"""Dropout keyed on a seed: the mask is a function of (step seed, layer name),
so a resumed run draws at step t the mask an uninterrupted one drew there."""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from tunas_tf.layers import initializers


def step_seed(seed: int, step: tf.Tensor) -> tf.Tensor:
  """int64 [2] Tensor (`seed`, `step`): one training step's dropout seed."""
  return tf.stack([tf.constant(seed, tf.int64), tf.cast(step, tf.int64)])


def dropout(x: tf.Tensor, rate: float, seed: Optional[tf.Tensor],
            name: str, whole_tensor: bool = False) -> tf.Tensor:
  """`x` with a fraction `rate` in [0, 1) zeroed, the rest scaled by
  1 / (1 - rate). `seed`: None (stateful) or an integer [2] Tensor folded
  with `name`. `whole_tensor`: one mask for all of `x` (path dropout)."""
  noise_shape = _ones_shape(x) if whole_tensor else None
  if seed is None:
    return tf.nn.dropout(x, rate, noise_shape=noise_shape)
  layer_seed = tf.random.experimental.stateless_fold_in(
      seed, initializers.name_key(name))
  return tf.nn.experimental.stateless_dropout(x, rate, layer_seed,
                                              noise_shape=noise_shape)


def _ones_shape(x: tf.Tensor):
  """A noise shape of ones, one per dim of `x` (static when the rank is)."""
  if x.shape.rank is not None:
    return [1] * x.shape.rank
  return tf.ones_like(tf.shape(x))
