"""An architecture as the network a device runs: a concrete tf.function of
one [1, H, W, C] image (untrained, seeded, batch norm on moving statistics)
and the network holding its variables (for the TFLite converter)."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Tuple

import tensorflow as tf

from tunas_tf.cost_model import macs
from tunas_tf.graph import from_spec
from tunas_tf.graph import model as model_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema


def inference_function(ssd: str, indices: Any,
                       shape: macs.InputSpec) -> Tuple[Any, model_lib.Model]:
  """(concrete function, network) of `indices` of `ssd`; ValueError for an
  unknown space or indices that do not fit."""
  pruned = schema.prune(mobile.get_search_space(ssd), indices)
  return spec_function(pruned, shape.image_size, shape.input_channels,
                       shape.num_classes)


def spec_function(pruned: Any, image_size: int, input_channels: int,
                  num_classes: Optional[int]
                  ) -> Tuple[Any, model_lib.Model]:
  """(concrete function, network) of a pruned `ConvTowerSpec` on one
  [1, image_size, image_size, input_channels] image; `num_classes` None
  ends it at its last layer (no classifier: a piece timed alone)."""
  graph, constants = from_spec.graph_from_spec(
      pruned, num_classes or 1, input_channels=input_channels,
      classifier=num_classes is not None)
  net = model_lib.Model(graph, constants, seed=0)
  signature = [1, image_size, image_size, input_channels]

  @tf.function(input_signature=[tf.TensorSpec(signature, tf.float32)])
  def forward(images):
    return net(images, training=False)

  return forward.get_concrete_function(), net


def builder(ssd: str, shape: macs.InputSpec
            ) -> Callable[[str], Tuple[Any, model_lib.Model]]:
  """`inference_function` of `ssd` at `shape`, as a function of indices."""
  return lambda indices: inference_function(ssd, indices, shape)


def unit_builder(units: Mapping[str, Any]
                 ) -> Callable[[str], Tuple[Any, model_lib.Model]]:
  """The `Build` of block-table entries: key -> its `block_table.Unit`
  built alone (`spec_function`)."""
  return lambda key: spec_function(units[key].spec, units[key].image_size,
                                   units[key].input_channels,
                                   units[key].num_classes)
