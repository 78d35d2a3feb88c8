"""The L2 rule of the search and standalone training: (weight_decay / 2) *
the sum of squares of every convolution kernel but the classifier's, no bias
or batch-norm parameter (reference/tunas.md §2.3); the gradient is
`weight_decay * w`."""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf


def weight_decay_loss(squared_norms: Sequence[tf.Tensor],
                      weight_decay: float) -> tf.Tensor:
  """(weight_decay / 2) * sum(squared_norms), a scalar float32 Tensor (0 for
  none). Raises ValueError for a negative `weight_decay`."""
  if weight_decay < 0:
    raise ValueError(f'weight_decay must be >= 0, got {weight_decay!r}')
  if not squared_norms:
    return tf.constant(0.0, tf.float32)
  return (weight_decay / 2.0) * tf.add_n(list(squared_norms))
