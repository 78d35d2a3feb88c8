"""The supernet: a search space's network at its widest, run on sampled masks.

`Supernet(spec, num_classes, mode)` allocates every weight of the search
space `spec` at its widest width; `supernet(sampled_spec, images, training)`
runs the architecture that the masks of `sampled_spec` select
(`reference/tunas.md` §6.2-6.3, `DESIGN.md` "Two ways to run the supernet"):

* Op choices (layer alternatives, kernel sizes, squeeze-excite on/off) are
  Switches: output = sum_i mask[i] * branch_i(x), branch i runs only where
  mask[i] != 0 (one-hot: one branch; the uniform op warm-up mask: all), and
  the mask carries no gradient. Each kernel size has its own depthwise (or
  conv) kernel and batch norm; a bottleneck's 1x1 expand / project convs and
  SE weights are single widest tensors shared by all its choices.
* Filter choices: n = choices[argmax(mask)] (FilterMultipliers scaled from the
  runtime input width with `scale_filters`); the mask's values are not
  weights. In `'masked'` mode the first n of the widest channels are kept by
  channel masks (static shapes, for TPU); in `'sampled'` mode kernels are
  sliced to the sampled widths (dynamic shapes), so a step costs about what
  the sampled network costs. Both give the same outputs and gradients.
* Batch norm is stateless (batch statistics in the training and validation
  forward), with gamma/beta variables and epsilon 1e-3.
* Head: optional dropout, 1x1 conv to `num_classes` with bias (N(0, 0.01)
  init, no weight decay), global average pool. Other kernels are He-normal
  (truncated normal, std sqrt(2 / fan_in) / 0.87962566; depthwise
  fan_in = kh * kw).

Variables are named by position and role, not by OneOf path (Residual and
OneOf wrappers add no level): `blocks/{b}/layers/{l}/{part}/{var}` with parts
`conv_k{k}` (`kernel`, `bn/gamma`, `bn/beta` or `bias`), `depthwise_k{k}`,
`expand`, `project`, `se/reduce`, `se/expand` (`kernel`, `bias`), and
`classifier/kernel`, `classifier/bias`. A pruned architecture has the same
positions, so a standalone network uses the same names (its weights are the
leading slices of the supernet's).

Pass the masks into a `tf.function` as tensors and attach them to the spec
inside it (`schema.map_oneofs_with_paths`): a spec passed as a `tf.function`
argument is compared without its masks and would be traced as a constant.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Optional, Tuple

import tensorflow as tf

from tunas_tf.layers import masked
from tunas_tf.models import supernet_nodes as nodes
from tunas_tf.models import supernet_widths as widths
from tunas_tf.search_space import naming
from tunas_tf.search_space import ops as ops_lib
from tunas_tf.search_space import schema

MODES = naming.MODES


def _join(path: str, key: Any) -> str:
  return f'{path}/{key}' if path else str(key)


def _first_difference(a: Any, b: Any, path: str = '') -> Optional[str]:
  """Path of the first place where two specs differ (masks ignored)."""
  if type(a) is not type(b):
    return path
  if isinstance(a, schema.OneOf):
    if a.tag != b.tag or len(a.choices) != len(b.choices):
      return path
    for i, (x, y) in enumerate(zip(a.choices, b.choices)):
      found = _first_difference(x, y, _join(path, f'choices/{i}'))
      if found is not None:
        return found
    return None
  if dataclasses.is_dataclass(a) and not isinstance(a, type):
    for field in dataclasses.fields(a):
      found = _first_difference(getattr(a, field.name), getattr(b, field.name),
                                _join(path, field.name))
      if found is not None:
        return found
    return None
  if isinstance(a, (list, tuple)):
    if len(a) != len(b):
      return path
    for i, (x, y) in enumerate(zip(a, b)):
      found = _first_difference(x, y, _join(path, i))
      if found is not None:
        return found
    return None
  if isinstance(a, dict):
    if sorted(a) != sorted(b):
      return path
    for k in sorted(a):
      found = _first_difference(a[k], b[k], _join(path, k))
      if found is not None:
        return found
    return None
  return None if a == b else path


def _lookup(spec: Any, path: str) -> Any:
  """The value of `spec` at a schema path (for error messages)."""
  value = spec
  for key in [k for k in path.split('/') if k]:
    if isinstance(value, (list, tuple)):
      value = value[int(key)]
    elif isinstance(value, dict):
      value = value[key]
    else:
      value = getattr(value, key)
  return value


def _short(value: Any, limit: int = 100) -> str:
  text = repr(value)
  return text if len(text) <= limit else text[:limit - 3] + '...'


class _Builder:
  """Turns a spec into nodes, registering variables and width sources."""

  def __init__(self, store: nodes.VariableStore, filters_base: int):
    self.store = store
    self.base = filters_base
    self.sources: List[widths.WidthSource] = []

  def add(self, source: widths.WidthSource) -> widths.WidthSource:
    self.sources.append(source)
    return source

  def filters(self, path: str, value: Any,
              input_source: Optional[widths.WidthSource]) -> widths.WidthSource:
    """Width source of a filters value (int, FilterMultiplier or OneOf)."""
    if isinstance(value, schema.OneOf):
      values, oneof_path = value.choices, path
    else:
      values, oneof_path = (value,), None
    if len(values) == 1 and isinstance(values[0], int) and not isinstance(
        values[0], bool) and values[0] > 0:
      return self.add(widths.FixedWidth(values[0]))
    return self.add(
        widths.ChoiceWidth(oneof_path, values, input_source, self.base))

  def _choice(self, value: Any, path: str,
              make: Callable[[Any], Optional[nodes.Node]],
              source: widths.WidthSource) -> Optional[nodes.Node]:
    """`make(value)`, or a Switch over `make(choice)` for a OneOf."""
    if isinstance(value, schema.OneOf):
      return nodes.Switch(path, [make(c) for c in value.choices], source)
    return make(value)

  def _kernel_size(self, value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
      raise ValueError(f'{path}: kernel_size must be a positive int or a '
                       f'OneOf of them, got {value!r}')
    return value

  def _conv(self, spec: ops_lib.ConvSpec, path: str, prefix: str,
            in_source, block_source) -> nodes.Node:
    def make(k):
      k = self._kernel_size(k, f'{path}/kernel_size')
      return nodes.ConvBN(self.store, f'{prefix}/conv_k{k}', k, spec.strides,
                          in_source, block_source, spec.use_batch_norm)
    return self._choice(spec.kernel_size, f'{path}/kernel_size', make,
                        in_source)

  def _depthwise(self, kernel_size: Any, strides: int, activation: str,
                 path: str, prefix: str, source) -> nodes.Node:
    def make(k):
      k = self._kernel_size(k, f'{path}/kernel_size')
      return nodes.DepthwiseBN(self.store, f'{prefix}/depthwise_k{k}', k,
                               strides, source, activation)
    return self._choice(kernel_size, f'{path}/kernel_size', make, source)

  def _separable(self, spec: ops_lib.SeparableConvSpec, path: str,
                 prefix: str, in_source, block_source) -> nodes.Node:
    return nodes.Chain([
        self._depthwise(spec.kernel_size, spec.strides, spec.activation.name,
                        path, prefix, in_source),
        nodes.ConvBN(self.store, f'{prefix}/project', 1, 1, in_source,
                     block_source),
    ])

  def _bottleneck(self, spec: ops_lib.DepthwiseBottleneckSpec, path: str,
                  prefix: str, in_source, block_source) -> nodes.Node:
    expanded = self.filters(f'{path}/expansion_filters',
                            spec.expansion_filters, in_source)
    parts = [
        nodes.ConvBN(self.store, f'{prefix}/expand', 1, 1, in_source,
                     expanded, activation=spec.activation.name),
        self._depthwise(spec.kernel_size, spec.strides, spec.activation.name,
                        path, prefix, expanded),
    ]
    hidden = None

    def make_se(enabled):
      nonlocal hidden
      if not isinstance(enabled, bool):
        raise ValueError(f'{path}/use_squeeze_and_excite: expected a bool or '
                         f'a OneOf of bools, got {enabled!r}')
      if not enabled:
        return nodes.Identity(expanded)
      if hidden is None:
        hidden = self.add(widths.DivisibleWidth(
            expanded, naming.SE_RATIO, self.base))
      return nodes.SqueezeExcite(
          self.store, f'{prefix}/se', expanded, hidden,
          spec.se_inner_activation.name, spec.se_gating_activation.name)

    se = self._choice(spec.use_squeeze_and_excite,
                      f'{path}/use_squeeze_and_excite', make_se, expanded)
    if not isinstance(se, nodes.Identity):
      parts.append(se)
    parts.append(nodes.ConvBN(self.store, f'{prefix}/project', 1, 1, expanded,
                              block_source))
    return nodes.Chain(parts)

  def layer(self, value: Any, path: str, prefix: str,
            in_source: widths.WidthSource,
            block_source: widths.WidthSource) -> Optional[nodes.Node]:
    """The node of one layer spec; None for a DetectionEndpointSpec.

    Args:
      value: the layer spec (may be a OneOf or a ResidualSpec).
      path: its schema path (where its OneOfs' masks are found).
      prefix: its variable-name prefix, `blocks/{b}/layers/{l}`.
      in_source: width of its input.
      block_source: width of the block (the output of conv-like layers).

    Raises:
      ValueError: for an unsupported layer type or inconsistent choices.
    """
    if isinstance(value, ops_lib.DetectionEndpointSpec):
      return None
    if isinstance(value, ops_lib.ResidualSpec):
      inner = value.layer
      if isinstance(inner, ops_lib.ZeroSpec) or (
          isinstance(inner, schema.OneOf) and len(inner.choices) == 1 and
          isinstance(inner.choices[0], ops_lib.ZeroSpec)):
        return nodes.Identity(in_source)  # As the original: skip = identity.
      layer = self.layer(inner, f'{path}/layer', prefix, in_source,
                         block_source)
      return nodes.Residual(layer, path)
    if isinstance(value, schema.OneOf):
      branches = []
      for i, choice in enumerate(value.choices):
        if isinstance(choice, ops_lib.ZeroSpec):
          branches.append(None)
          continue
        if isinstance(choice, ops_lib.DetectionEndpointSpec):
          raise ValueError(f'{path}: a DetectionEndpointSpec cannot be a '
                           'OneOf choice')
        branches.append(self.layer(choice, f'{path}/choices/{i}', prefix,
                                   in_source, block_source))
      return nodes.Switch(path, branches, in_source)
    if isinstance(value, ops_lib.ZeroSpec):
      return nodes.Zero(in_source)
    if isinstance(value, ops_lib.ActivationSpec):
      return nodes.Activation(in_source, value.name)
    if isinstance(value, ops_lib.GlobalAveragePoolSpec):
      return nodes.GlobalAveragePool(in_source)
    if isinstance(value, ops_lib.ConvSpec):
      return self._conv(value, path, prefix, in_source, block_source)
    if isinstance(value, ops_lib.SeparableConvSpec):
      return self._separable(value, path, prefix, in_source, block_source)
    if isinstance(value, ops_lib.DepthwiseBottleneckSpec):
      return self._bottleneck(value, path, prefix, in_source, block_source)
    raise ValueError(f'{path}: unsupported layer spec {_short(value)}')


class Supernet(tf.Module):
  """A search space's network with weights at the widest width.

  Example:
    ```
    space = mobile.get_search_space('digits_search')
    net = Supernet(space, num_classes=10, input_channels=1)
    sampled = schema.map_oneofs_with_paths(
        lambda path, o: schema.OneOf(o.choices, o.tag, masks[path]), space)
    logits = net(sampled, images, training=True)        # [batch, 10]
    loss += net.regularization_loss(sampled, 4e-5)      # (4e-5 / 2) sum w^2
    ```

  Attributes:
    spec: the search-space spec the network was built from.
    num_classes: Python int.
    mode: `'masked'` or `'sampled'`.
    input_channels: Python int, the channels of the images.
  """

  def __init__(self, spec: ops_lib.ConvTowerSpec, num_classes: int,
               mode: str = naming.SAMPLED, dropout_rate: float = 0.0,
               input_channels: int = 3, seed: Optional[int] = None,
               batch_norm_epsilon: float = naming.BATCH_NORM_EPSILON,
               name: Optional[str] = None):
    """Builds the network and creates its variables.

    Args:
      spec: a `ConvTowerSpec`, a search space (with OneOfs) or a fixed
        architecture (without).
      num_classes: positive Python int.
      mode: `'masked'` (channel masks, static shapes; TPU) or `'sampled'`
        (sliced kernels, dynamic shapes; CPU/GPU).
      dropout_rate: Python float in [0, 1), dropout before the classifier
        when training.
      input_channels: positive Python int, the images' channel count.
      seed: None, or an int that fixes every initial value (per variable
        name, with stateless random ops).
      batch_norm_epsilon: positive Python float.
      name: the tf.Module name.

    Raises:
      ValueError: for an unknown mode, a bad argument (the message names it)
        or a spec the supernet cannot build.
    """
    super().__init__(name=name)
    self.mode = masked.check_mode(mode)
    if not isinstance(spec, ops_lib.ConvTowerSpec):
      raise ValueError(f'Supernet needs a ConvTowerSpec, got {_short(spec)}')
    if isinstance(num_classes, bool) or not isinstance(
        num_classes, int) or num_classes <= 0:
      raise ValueError(
          f'num_classes must be a positive int, got {num_classes!r}')
    if not 0.0 <= dropout_rate < 1.0:
      raise ValueError(f'dropout_rate must be in [0, 1), got {dropout_rate!r}')
    if isinstance(input_channels, bool) or not isinstance(
        input_channels, int) or input_channels <= 0:
      raise ValueError(
          f'input_channels must be a positive int, got {input_channels!r}')
    if not isinstance(spec.filters_base, int) or spec.filters_base <= 0:
      raise ValueError(
          f'filters_base must be a positive int, got {spec.filters_base!r}')
    if batch_norm_epsilon <= 0:
      raise ValueError(
          f'batch_norm_epsilon must be positive, got {batch_norm_epsilon!r}')
    self.spec = spec
    self.num_classes = num_classes
    self.input_channels = input_channels
    self.dropout_rate = float(dropout_rate)
    self._epsilon = float(batch_norm_epsilon)

    self._store = nodes.VariableStore(seed)
    builder = _Builder(self._store, spec.filters_base)
    source = builder.add(widths.FixedWidth(input_channels))
    self._layers: List[nodes.Node] = []
    for b, block in enumerate(spec.blocks):
      if isinstance(block.filters, ops_lib.FilterMultiplier) or (
          isinstance(block.filters, schema.OneOf) and any(
              isinstance(c, ops_lib.FilterMultiplier)
              for c in block.filters.choices)):
        raise ValueError(f'blocks/{b}/filters: block widths must be ints or a '
                         f'OneOf of ints, got {_short(block.filters)}')
      block_source = builder.filters(f'blocks/{b}/filters', block.filters,
                                     None)
      for l, layer_spec in enumerate(block.layers):
        prefix = f'blocks/{b}/layers/{l}'
        node = builder.layer(layer_spec, prefix, prefix, source, block_source)
        if node is not None:
          self._layers.append(node)
          source = node.out_source
    self._classifier = nodes.Classifier(self._store, source, num_classes,
                                        self.dropout_rate)
    self._sources = tuple(builder.sources)
    self._store.build()
    # An attribute, so that tf.train.Checkpoint tracks the variables.
    self._named_variables = dict(self._store.variables)

  # ---------------------------------------------------------------------------
  # Variables.

  def variables_by_name(self) -> Dict[str, tf.Variable]:
    """All variables by name (e.g. `blocks/2/layers/1/expand/kernel`).

    Returns:
      A dict name -> float32 tf.Variable at its widest shape, in creation
      order (network order).
    """
    return dict(self._store.variables)

  @property
  def trainable_variables(self) -> Tuple[tf.Variable, ...]:
    """Every variable (all are trainable), in creation order."""
    return tuple(self._store.variables.values())

  @property
  def variables(self) -> Tuple[tf.Variable, ...]:
    """Same as `trainable_variables` (there are no moving statistics)."""
    return self.trainable_variables

  # ---------------------------------------------------------------------------
  # Calls.

  def _context(self, sampled_spec: Any, training: bool) -> widths.CallContext:
    """Validates `sampled_spec` and resolves its masks and widths."""
    difference = _first_difference(sampled_spec, self.spec)
    if difference is not None:
      raise ValueError(
          'The sampled spec does not match the supernet\'s spec at '
          f'{difference or "<root>"!r}: got '
          f'{_short(_lookup(sampled_spec, difference))}, expected '
          f'{_short(_lookup(self.spec, difference))}')
    masks = {}
    for path, oneof in schema.flatten_with_paths(sampled_spec):
      n = len(oneof.choices)
      if oneof.mask is None:
        if n > 1:
          raise ValueError(f'The OneOf at {path!r} has {n} choices but no '
                           'mask; sample the spec first')
        continue
      mask = tf.stop_gradient(tf.cast(oneof.mask, tf.float32))
      shape = mask.shape
      if shape.rank is not None and (shape.rank != 1 or (
          shape[0] is not None and shape[0] != n)):
        raise ValueError(f'The mask at {path!r} has shape {shape}; expected '
                         f'[{n}] (one entry per choice)')
      masks[path] = mask
    return widths.CallContext(masks, self._sources, self.mode, bool(training),
                             self._epsilon)

  @tf.autograph.experimental.do_not_convert
  def __call__(self, sampled_spec: Any, images: tf.Tensor,
               training: bool = False) -> tf.Tensor:
    """Runs the sampled architecture.

    Args:
      sampled_spec: the supernet's spec with a mask on every OneOf of more
        than one choice (rank-1 float Tensor, one entry per choice: one-hot
        for a sample, uniform for the op warm-up); for a fixed spec, the spec
        itself.
      images: float Tensor [batch, H, W, input_channels] (NHWC).
      training: Python bool; enables dropout. Batch norm uses batch
        statistics either way.

    Returns:
      float32 Tensor [batch, num_classes], the logits.

    Raises:
      ValueError: if `sampled_spec` differs from the supernet's spec (the
        message names the first differing path), a multi-choice OneOf has no
        mask or a mask has the wrong shape, or the images are not
        [batch, H, W, input_channels].
    """
    ctx = self._context(sampled_spec, training)
    images = tf.convert_to_tensor(images)
    if not images.dtype.is_floating:
      raise ValueError(f'images must be a float Tensor, got {images.dtype}')
    if images.shape.rank != 4 or images.shape[-1] != self.input_channels:
      raise ValueError(f'images must be [batch, H, W, {self.input_channels}], '
                       f'got shape {images.shape}')
    x = tf.cast(images, tf.float32)
    for node in self._layers:
      x = node(x, ctx)
    return self._classifier(x, ctx)

  @tf.autograph.experimental.do_not_convert
  def regularization_loss(self, sampled_spec: Any,
                          weight_decay: float) -> tf.Tensor:
    """L2 weight decay of the sampled architecture, under its masks.

    (weight_decay / 2) * sum over kernels of sum((kernel * mask)^2), where
    the mask is the kernel's in (x) out channel mask (in sampled mode, the
    sum over the sliced kernel: the same value). A Switch multiplies each
    branch's terms by its mask value (an unused branch adds exactly 0, with
    zero gradient, whatever its weights); a kernel reached from several
    branches counts once, with its largest term. Batch-norm parameters,
    biases and the classifier are not decayed (`reference/tunas.md` §2.3,
    §6.3).

    Args:
      sampled_spec: as for `__call__`.
      weight_decay: non-negative Python float (the flag's value; halved
        here).

    Returns:
      Scalar float32 Tensor.

    Raises:
      ValueError: for a negative `weight_decay` or a bad `sampled_spec`.
    """
    if weight_decay < 0:
      raise ValueError(f'weight_decay must be >= 0, got {weight_decay!r}')
    ctx = self._context(sampled_spec, training=False)
    terms = nodes.merge_max([node.regularizers(ctx) for node in self._layers])
    if not terms:
      return tf.constant(0.0, tf.float32)
    return (weight_decay / 2.0) * tf.add_n(list(terms.values()))
