"""The activations by spec name: the supernet and the graph ops both call
these, so they compute bit-identical activations."""

from __future__ import annotations

from typing import Callable, Dict

import tensorflow as tf

from tunas_tf.io import checks
from tunas_tf.search_space import ops as ops_lib

Activation = Callable[[tf.Tensor], tf.Tensor]


def relu(x: tf.Tensor) -> tf.Tensor:
  """max(x, 0)."""
  return tf.nn.relu(x)


def relu6(x: tf.Tensor) -> tf.Tensor:
  """min(max(x, 0), 6)."""
  return tf.nn.relu6(x)


def hard_swish(x: tf.Tensor) -> tf.Tensor:
  """x * relu6(x + 3) * (1 / 6) (times 1/6 as the original): `swish6`."""
  return x * tf.nn.relu6(x + 3.0) * (1.0 / 6.0)


def hard_sigmoid(x: tf.Tensor) -> tf.Tensor:
  """relu6(x + 3) / 6 (the graph's H_SIGMOID; no spec names it)."""
  return tf.nn.relu6(x + 3.0) / 6.0


def sigmoid(x: tf.Tensor) -> tf.Tensor:
  """1 / (1 + exp(-x))."""
  return tf.nn.sigmoid(x)


def swish(x: tf.Tensor) -> tf.Tensor:
  """x * sigmoid(x) (the graph's SWISH; no spec names it)."""
  return x * tf.nn.sigmoid(x)


_BY_NAME: Dict[str, Activation] = {
    ops_lib.RELU: relu,
    ops_lib.RELU6: relu6,
    ops_lib.SWISH6: hard_swish,
    ops_lib.SIGMOID: sigmoid,
}


def by_name(name: str) -> Activation:
  """The function of activation `name`; ValueError for an unknown name."""
  checks.one_of('activation', name, ops_lib.ACTIVATIONS)  # _BY_NAME's keys.
  return _BY_NAME[name]


def maps_zero_to_zero(name: str) -> bool:
  """Whether activation `name` maps 0 to 0 (all but sigmoid)."""
  by_name(name)
  return name != ops_lib.SIGMOID
