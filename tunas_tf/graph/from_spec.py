"""An architecture spec -> the standalone network as a `Graph`.

It computes what `Supernet` computes for that architecture, with ops named so
that a `model.Model`'s variables `"{op}/{variable}"` are exactly the supernet's.
"""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Tuple

from tunas_tf.io import checks
from tunas_tf.graph import ir
from tunas_tf.search_space import naming
from tunas_tf.search_space import ops as spec_ops
from tunas_tf.search_space import schema
from tunas_tf.search_space import structure
from tunas_tf.search_space import walker

OpType = ir.OpType

INPUT_NAME = 'input'
OUTPUT_NAME = 'logits'
CLASSIFIER_NAME = naming.CLASSIFIER  # Re-exported: `train_eval` reads it.

_KERNEL_INIT = 'I:he_normal'  # Truncated, std sqrt(2 / fan_in): the supernet's.
_CLASSIFIER_INIT = f'I:normal:stddev:{naming.CLASSIFIER_STDDEV}'

_ACTIVATION_TYPES = {
    spec_ops.RELU: OpType.RELU,
    spec_ops.RELU6: OpType.RELU6,
    spec_ops.SWISH6: OpType.H_SWISH,
    spec_ops.SIGMOID: OpType.SIGMOID,
}


class _Builder:
  """Collects the ops of the graph, naming them by position and role."""

  def __init__(self, epsilon: float, path_dropout_rate: float = 0.0,
               path_dropout_layers: FrozenSet[str] = frozenset()):
    self.ops: List[ir.Op] = []
    self.epsilon = epsilon
    self.path_dropout_rate = path_dropout_rate
    self.path_dropout_layers = path_dropout_layers

  def add(self, name: str, op_type: OpType, inputs: List[str],
          **op_kwargs) -> str:
    self.ops.append(ir.new_op(name, op_type, inputs, op_kwargs=op_kwargs))
    return name

  def activation(self, x: str, name: str, prefix: str) -> str:
    """The activation `name` on `x`, as op `{prefix}/{name}`."""
    if name not in _ACTIVATION_TYPES:
      raise ValueError(f'{prefix}: unknown activation {name!r}; expected one '
                       f'of {spec_ops.ACTIVATIONS}')
    return self.add(f'{prefix}/{name}', _ACTIVATION_TYPES[name], [x])

  def convolution(self, x: str, part: structure.Part) -> str:
    """CONV or DEPTHWISE_CONV `name`, BATCH_NORM `name/bn` (a CONV without
    it has a bias), the activation `name/{act}` if any."""
    conv = isinstance(part, structure.Conv)
    batch_norm = not conv or part.use_batch_norm
    features = {'features': part.out_width.static()} if conv else {}
    y = self.add(part.name, OpType.CONV if conv else OpType.DEPTHWISE_CONV,
                 [x], **features, kernel_size=part.kernel_size,
                 strides=part.strides, use_bias=not batch_norm,
                 kernel_init=_KERNEL_INIT)
    if batch_norm:
      y = self.add(naming.batch_norm_name(part.name), OpType.BATCH_NORM, [y],
                   epsilon=self.epsilon)
    if part.activation is not None:
      y = self.activation(y, part.activation, part.name)
    return y

  def squeeze_excite(self, x: str, part: structure.SqueezeExcite) -> str:
    """x * gate(expand(inner(reduce(mean(x))))), under `{prefix}/se`."""
    s = self.add(naming.join(part.scope, 'pool'), OpType.GLOBAL_AVG_POOL, [x],
                 keepdims=True)
    s = self.add(part.reduce_name, OpType.CONV, [s],
                 features=part.hidden.static(), kernel_size=1, use_bias=True,
                 kernel_init=_KERNEL_INIT)
    s = self.activation(s, part.inner_activation, part.reduce_name)
    s = self.add(part.expand_name, OpType.CONV, [s],
                 features=part.in_width.static(), kernel_size=1,
                 use_bias=True, kernel_init=_KERNEL_INIT)
    s = self.activation(s, part.gating_activation, part.expand_name)
    return self.add(naming.join(part.scope, 'mul'), OpType.MUL, [x, s])

  def part(self, x: str, part: Optional[structure.Part], prefix: str) -> str:
    """The ops of one part of a pruned layer; returns its output tensor."""
    if part is None or isinstance(part, structure.Identity):
      return x  # An endpoint, or a skipped layer: the identity path only.
    if isinstance(part, structure.Zero):
      raise ValueError(
          f'{prefix}: a ZeroSpec outside a ResidualSpec outputs zeros, which '
          'the graph cannot express; graph_from_spec supports ZeroSpec only '
          'as a skipped residual layer (ResidualSpec(ZeroSpec()))')
    if isinstance(part, structure.Chain):
      for child in part.parts:
        x = self.part(x, child, prefix)
      return x
    if isinstance(part, structure.Residual):
      y = self.part(x, part.layer, prefix)
      if y == x:
        return y
      if prefix in self.path_dropout_layers and self.path_dropout_rate > 0:
        # One scalar mask for the whole branch: the layer is dropped or kept.
        y = self.add(naming.join(part.scope, 'path_dropout'), OpType.DROPOUT,
                     [y], rate=self.path_dropout_rate, whole_tensor=True)
      return self.add(naming.join(part.scope, 'add'), OpType.ADD, [y, x])
    if isinstance(part, structure.Activation):
      return self.activation(x, part.activation, part.scope)
    if isinstance(part, structure.GlobalPool):
      return self.add(naming.join(part.scope, 'pool'), OpType.GLOBAL_AVG_POOL,
                      [x], keepdims=True)
    if isinstance(part, (structure.Conv, structure.Depthwise)):
      return self.convolution(x, part)
    if isinstance(part, structure.SqueezeExcite):
      return self.squeeze_excite(x, part)
    # graph_from_spec has refused OneOfs (Switch parts) already.
    raise ValueError(f'{prefix}: unsupported part {type(part).__name__}')


def _check_skippable(layers: Sequence[structure.Layer],
                     skippable: Sequence[str], rate: float) -> FrozenSet[str]:
  """`skippable` as a set, after checking that it names layers (residual
  ones when `rate` is positive)."""
  if isinstance(skippable, str):
    raise ValueError('graph_from_spec: skippable_layers must be a sequence '
                     f'of layer prefixes, got the string {skippable!r}')
  by_prefix = {l.prefix: l for l in layers}
  unknown = sorted(set(skippable) - set(by_prefix))
  if unknown:
    raise ValueError(f'graph_from_spec: skippable_layers {unknown} are not '
                     'layers of the spec (blocks/{b}/layers/{l})')
  not_residual = sorted(
      p for p in set(skippable)
      if not isinstance(by_prefix[p].spec, spec_ops.ResidualSpec))
  if not_residual and rate > 0:
    raise ValueError(f'graph_from_spec: skippable_layers {not_residual} are '
                     'not residual layers; path dropout drops a residual '
                     'branch')
  return frozenset(skippable)


def graph_from_spec(spec: spec_ops.ConvTowerSpec, num_classes: int,
                    input_channels: int = 3, dropout_rate: float = 0.0,
                    path_dropout_rate: float = 0.0,
                    skippable_layers: Sequence[str] = (),
                    batch_norm_epsilon: float = naming.BATCH_NORM_EPSILON,
                    classifier: bool = True
                    ) -> Tuple[ir.Graph, Dict[str, Any]]:
  """The standalone network of a fixed architecture, as a graph.

  Ops, with a layer's prefix `blocks/{b}/layers/{l}`: `ConvSpec` gives CONV
  `{prefix}/conv_k{k}` and BATCH_NORM `.../bn` (without batch norm the CONV has
  a bias); `SeparableConvSpec` DEPTHWISE_CONV `{prefix}/depthwise_k{k}` + bn,
  then CONV `{prefix}/project` + bn; `DepthwiseBottleneckSpec` CONV `expand` +
  bn, DEPTHWISE_CONV `depthwise_k{k}` + bn, optional CONVs with bias
  `se/reduce` and `se/expand` (with `se/pool`, `se/mul`), CONV `project` + bn;
  the head CONV `classifier` (1x1, bias) after an optional
  `classifier/dropout`. An activation after part P is `P/{activation}`, an
  `ActivationSpec` layer `{prefix}/{activation}`, a pool `{prefix}/pool`, a
  residual sum `{prefix}/add` (after `{prefix}/path_dropout` when used). A
  skipped layer and a `DetectionEndpointSpec` give no ops. Run the `Model`
  with `stateless_batch_norm=True` to reproduce the supernet's outputs; each
  kernel size has its own variable, so a leading slice is the sub-kernel.

  Args:
    spec: a pruned `ConvTowerSpec` (no `OneOf`).
    num_classes: positive int, the number of logits.
    input_channels: positive int, the images' channels.
    dropout_rate: float in [0, 1); dropout before the classifier.
    path_dropout_rate: float in [0, 1); when training, the residual branch
      of each layer of `skippable_layers` is dropped whole with this
      probability (one mask per batch), scaled by 1 / (1 - rate) when kept.
    skippable_layers: prefixes `blocks/{b}/layers/{l}` of layers of `spec`
      (residual ones when `path_dropout_rate` is positive).
    batch_norm_epsilon: positive float, every batch norm's epsilon.
    classifier: False ends the graph at the last layer's output (no
      `logits`): a piece of a network timed alone; it must compute something.

  Returns:
    `(graph, constants)`: an `ir.Graph` from `input` (float [batch, H, W,
    input_channels]) to `logits` ([batch, num_classes]), and its constants
    (`{'num_classes': num_classes}`), for `model.Model(graph, constants)`.

  Raises:
    ValueError: for a spec with a `OneOf` (naming its path), a `ZeroSpec`
      outside a residual, a residual that changes the shape, an unsupported
      layer, a bad `skippable_layers` entry (naming it), or a bad argument.
  """
  if not isinstance(spec, spec_ops.ConvTowerSpec):
    raise ValueError('graph_from_spec: expected a ConvTowerSpec, got '
                     f'{type(spec).__name__}')
  oneofs = [path for path, _ in schema.flatten_with_paths(spec)]
  if oneofs:
    shown = ', '.join(repr(p or '<root>') for p in oneofs[:3])
    more = f' and {len(oneofs) - 3} more' if len(oneofs) > 3 else ''
    raise ValueError(
        f'graph_from_spec: the spec still has {len(oneofs)} OneOf(s), at '
        f'{shown}{more}; pass a pruned architecture (schema.prune)')
  num_classes = checks.positive_int('graph_from_spec: num_classes',
                                    num_classes)
  input_channels = checks.positive_int('graph_from_spec: input_channels',
                                       input_channels)
  checks.number('graph_from_spec: dropout_rate', dropout_rate, 0, 1,
                high_open=True, prefix='')
  checks.number('graph_from_spec: path_dropout_rate', path_dropout_rate, 0, 1,
                high_open=True, prefix='')
  checks.number('graph_from_spec: batch_norm_epsilon', batch_norm_epsilon, 0,
                low_open=True, prefix='')
  layers = walker.describe_network(spec, input_channels).layers
  path_dropout_layers = _check_skippable(layers, skippable_layers,
                                         path_dropout_rate)
  builder = _Builder(float(batch_norm_epsilon), float(path_dropout_rate),
                     path_dropout_layers)
  x = INPUT_NAME
  for layer in layers:
    x = builder.part(x, layer.part, layer.prefix)
  if not classifier:
    if x == INPUT_NAME:
      raise ValueError('graph_from_spec: without the classifier the spec '
                       'computes nothing (only skipped layers or endpoints)')
    return ir.new_graph([INPUT_NAME], [x], builder.ops), {
        'num_classes': num_classes}
  if dropout_rate > 0:
    x = builder.add(naming.join(naming.CLASSIFIER, 'dropout'),
                    OpType.DROPOUT, [x], rate=float(dropout_rate))
  x = builder.add(naming.CLASSIFIER, OpType.CONV, [x],
                  features='K:num_classes', kernel_size=1, use_bias=True,
                  kernel_init=_CLASSIFIER_INIT)
  builder.add(OUTPUT_NAME, OpType.GLOBAL_AVG_POOL, [x], keepdims=False)
  graph = ir.new_graph([INPUT_NAME], [OUTPUT_NAME], builder.ops)
  return graph, {'num_classes': num_classes}
