"""The first elements of a `tf.data.Dataset` as NumPy, for the tests that
compare streams element by element (data/streams, data/datasets)."""

from typing import Any, List

import tensorflow as tf


def take(dataset: tf.data.Dataset, count: int) -> List[Any]:
  """The first `count` elements of `dataset`, each nest of tensors as NumPy."""
  return [tf.nest.map_structure(lambda t: t.numpy(), element)
          for element in dataset.take(count)]
