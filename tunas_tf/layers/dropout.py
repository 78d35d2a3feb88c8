"""Dropout keyed on a seed: the mask is a function of (seed, layer name).

A training step passes one seed for the whole network (`step_seed`); each
dropout layer folds its own name into it, so two layers draw different masks
and a resumed run draws, at step t, the mask an uninterrupted one drew there.
Without a seed, TF's stateful dropout draws.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from tunas_tf.layers import initializers


def step_seed(seed: int, step: tf.Tensor) -> tf.Tensor:
  """The dropout seed of one training step: int64 [2] Tensor (the job's
  Python int seed, the scalar integer global step)."""
  return tf.stack([tf.constant(seed, tf.int64), tf.cast(step, tf.int64)])


def dropout(x: tf.Tensor, rate: float, seed: Optional[tf.Tensor],
            name: str, whole_tensor: bool = False) -> tf.Tensor:
  """`x` with a fraction `rate` of its entries zeroed, the rest scaled by
  1 / (1 - `rate`).

  Args:
    rate: Python float in [0, 1).
    seed: None (stateful dropout), or an integer [2] Tensor: the mask is
      then a function of (`seed`, `name`).
    name: the layer's name, e.g. the graph op's or `classifier`.
    whole_tensor: draw one scalar mask for all of `x`, batch included (path
      dropout).
  """
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
