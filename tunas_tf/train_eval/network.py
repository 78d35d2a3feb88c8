"""The standalone network of a run: its architecture (the pruned space,
widths scaled by `filters_multiplier`), graph, size and cost."""

from __future__ import annotations

import dataclasses
from typing import Any, Tuple

import tensorflow as tf

from tunas_tf.cost_model import macs
from tunas_tf.graph import from_spec
from tunas_tf.graph import model as model_lib
from tunas_tf.runtime import precision
from tunas_tf.runtime import replicas
from tunas_tf.search_space import filters as filters_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops as spec_ops
from tunas_tf.search_space import schema
from tunas_tf.train_eval.config import TrainEvalConfig


def scale_architecture(spec: spec_ops.ConvTowerSpec,
                       multiplier: float) -> spec_ops.ConvTowerSpec:
  """A pruned spec with every absolute width n made
  `filters.scale_filters(n, multiplier, spec.filters_base)`."""
  if multiplier == 1.0:
    return spec
  base = spec.filters_base

  def scale(value):
    if isinstance(value, bool) or not isinstance(value, int):
      return value
    return filters_lib.scale_filters(value, multiplier, base)

  def layer(value):
    if isinstance(value, spec_ops.ResidualSpec):
      return dataclasses.replace(value, layer=layer(value.layer))
    if isinstance(value, spec_ops.DepthwiseBottleneckSpec):
      return dataclasses.replace(
          value, expansion_filters=scale(value.expansion_filters))
    return value

  blocks = tuple(dataclasses.replace(b, filters=scale(b.filters),
                                     layers=tuple(layer(l) for l in b.layers))
                 for b in spec.blocks)
  return dataclasses.replace(spec, blocks=blocks)


def build_architecture(config: TrainEvalConfig) -> spec_ops.ConvTowerSpec:
  """The pruned (and scaled) architecture of `config` (whose indices fit)."""
  return scale_architecture(schema.prune(mobile.get_search_space(config.ssd),
                                         config.indices),
                            config.filters_multiplier)


def build_graph(config: TrainEvalConfig,
                arch: spec_ops.ConvTowerSpec) -> Tuple[Any, Any]:
  """(graph, constants) of `arch` for the run's classes, channels and
  dropout; path dropout on the layers `config.ssd` may skip (training
  only)."""
  skippable = mobile.skippable_layers(mobile.get_search_space(config.ssd))
  return from_spec.graph_from_spec(
      arch, config.job.num_classes, input_channels=config.job.num_channels,
      dropout_rate=config.dropout_rate,
      path_dropout_rate=config.path_dropout_rate, skippable_layers=skippable)


def build_model(config: TrainEvalConfig, arch: spec_ops.ConvTowerSpec,
                one_shot: bool = False) -> model_lib.Model:
  """The run's network, variables made (initial values keyed on (seed,
  name), updated alike on every replica); batch statistics if `one_shot`."""
  graph, constants = build_graph(config, arch)
  dtype = precision.compute_dtype(config.use_bfloat16, config.job.use_tpu)
  model = model_lib.Model(graph, constants, stateless_batch_norm=one_shot,
                          seed=config.job.seed, compute_dtype=dtype)
  with replicas.identical_variables():
    model(tf.zeros([1, *input_shape(config)]), training=False)
  return model


def input_shape(config: TrainEvalConfig) -> Tuple[int, int, int]:
  """[H, W, C] of one image."""
  return (config.job.image_size, config.job.image_size, config.job.num_channels)


def count_params(config: TrainEvalConfig, arch) -> int:
  """Trainable weights of the standalone network (batch-norm stats excluded)."""
  graph, constants = build_graph(config, arch)
  with tf.Graph().as_default():
    # Seeded: unseeded random ops are refused under op determinism.
    model = model_lib.Model(graph, constants, seed=config.job.seed)
    model(tf.compat.v1.placeholder(tf.float32, [1, *input_shape(config)]))
    return model_lib.count_params(model)


def count_macs(config: TrainEvalConfig, arch) -> int:
  """Multiply-adds of the standalone network, classifier included."""
  job = config.job
  return int(macs.count_macs(arch, job.image_size, job.num_classes,
                             job.num_channels))
