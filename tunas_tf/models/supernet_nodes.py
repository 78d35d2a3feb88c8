"""The supernet's nodes: a stateless tree over one `VariableStore`; a node
runs `node(x, ctx)` in `ctx.dtype` and lists its masked L2 terms
(`node.regularizers(ctx)`, float32)."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from tunas_tf.layers import dropout as dropout_lib
from tunas_tf.layers import initializers
from tunas_tf.layers import masked
from tunas_tf.models import supernet_widths as widths
from tunas_tf.search_space import naming
from tunas_tf.search_space import structure

Regularizers = Dict[str, tf.Tensor]


_CONV, _DEPTHWISE, _ONES, _ZEROS, _CLASSIFIER = (
    'conv', 'depthwise', 'ones', 'zeros', 'normal')


class VariableStore:
  """The supernet's variables by name, at the widest shape requested (a part
  shared by two branches gets the elementwise largest); `build` creates them."""

  def __init__(self, seed: Optional[int]):
    self._seed = seed
    self._requests: Dict[str, Tuple[List[int], str]] = {}
    self.variables: Dict[str, tf.Variable] = {}

  def request(self, name: str, shape: Sequence[int], init: str) -> None:
    """Records that a node uses variable `name` of at most `shape`; ValueError
    when `name` was requested with another rank or initialiser."""
    shape = [int(d) for d in shape]
    if name in self._requests:
      old_shape, old_init = self._requests[name]
      if len(old_shape) != len(shape) or old_init != init:
        raise ValueError(
            f'Variable {name!r} is requested as {init} {shape} and as '
            f'{old_init} {old_shape}; two parts would share one name')
      self._requests[name] = ([max(a, b) for a, b in zip(old_shape, shape)],
                              init)
    else:
      self._requests[name] = (shape, init)

  def _initial_value(self, name: str, shape: List[int],
                     init: str) -> Callable[[], tf.Tensor]:
    seed = self._seed
    if init in (_CONV, _DEPTHWISE):
      fan_in = (initializers.conv_fan_in if init == _CONV
                else initializers.depthwise_fan_in)(shape)
      stddev = initializers.he_normal_stddev(fan_in)
      return lambda: initializers.truncated_normal_init(shape, stddev, seed,
                                                        name)
    if init == _CLASSIFIER:
      return lambda: initializers.normal(shape, naming.CLASSIFIER_STDDEV,
                                         seed, name)
    if init == _ONES:
      return lambda: tf.ones(shape, tf.float32)
    return lambda: tf.zeros(shape, tf.float32)

  def build(self) -> None:
    """Creates every requested variable (float32, trainable), in order."""
    for name, (shape, init) in self._requests.items():
      self.variables[name] = tf.Variable(
          self._initial_value(name, shape, init), name=name, dtype=tf.float32,
          trainable=True)

  def get(self, name: str, shape: Sequence[int],
          active: Optional[tf.Tensor] = None,
          dtype: tf.DType = tf.float32) -> tf.Tensor:
    """Variable `name` (its leading `shape`), cast to `dtype`; exactly zeros,
    zero gradient, where the scalar bool `active` is False."""
    variable = self.variables[name]
    value = (variable if list(variable.shape) == list(shape)
             else variable[tuple(slice(0, int(d)) for d in shape)])
    if active is not None:
      value = tf.where(active, value, tf.zeros_like(value))
    if tf.as_dtype(dtype) != variable.dtype:
      value = tf.cast(value, dtype)
    return value


def merge_max(terms: Sequence[Regularizers]) -> Regularizers:
  """Merges regulariser dicts; a name found twice keeps the largest term."""
  merged: Regularizers = {}
  for term in terms:
    for name, value in term.items():
      merged[name] = (tf.maximum(merged[name], value) if name in merged
                      else value)
  return merged


class Node:
  """The piece of the network of a `structure.Part` (`part`), its variables
  requested from the store."""

  def __init__(self, part: structure.Part, store: VariableStore):
    del store
    self.part = part

  def __call__(self, x: tf.Tensor, ctx: widths.CallContext) -> tf.Tensor:
    """[batch, H, W, C_in] -> [batch, H', W', C_out] in `ctx.dtype`; C the
    width's max (masked) or sampled n."""
    raise NotImplementedError

  def regularizers(self, ctx: widths.CallContext) -> Regularizers:
    """Masked sums of squares {kernel name: scalar float32 Tensor}."""
    del ctx
    return {}


def _part_variable_names(part: str) -> Dict[str, str]:
  """The variable names of a part: kernel, bias, and its batch norm's."""
  bn = naming.batch_norm_name(part)
  return {naming.KERNEL: naming.variable_name(part, naming.KERNEL),
          naming.BIAS: naming.variable_name(part, naming.BIAS),
          naming.GAMMA: naming.variable_name(bn, naming.GAMMA),
          naming.BETA: naming.variable_name(bn, naming.BETA)}


class _Part(Node):
  """A node whose variables are, by role, `names[role]` of `shapes[role]`."""

  def _request(self, store: VariableStore, names: Dict[str, str],
               requests: Dict[str, Tuple[Sequence[int], str]]) -> None:
    """Requests each role's (shape, init) of `requests`, in order."""
    self.store, self.names = store, names
    self.shapes = {role: shape for role, (shape, _) in requests.items()}
    for role, (shape, init) in requests.items():
      store.request(names[role], shape, init)

  def _get(self, role: str, active: Optional[tf.Tensor] = None,
           dtype: tf.DType = tf.float32) -> tf.Tensor:
    return self.store.get(self.names[role], self.shapes[role], active, dtype)


def zeros_output(x: tf.Tensor, strides: int, channels) -> tf.Tensor:
  """Zeros of `x`'s dtype, [batch, ceil(H / strides), ceil(W / strides),
  channels]."""
  static = x.shape.as_list()
  dynamic = tf.shape(x)
  dims = []
  for axis in range(3):
    size = static[axis] if static[axis] is not None else dynamic[axis]
    if axis > 0 and strides > 1:
      size = (-(-size // strides) if isinstance(size, int)
              else (size + strides - 1) // strides)
    dims.append(size)
  dims.append(channels)
  if all(isinstance(d, int) for d in dims):
    return tf.zeros(dims, x.dtype)
  return tf.zeros(tf.stack([tf.cast(d, tf.int32) for d in dims]), x.dtype)


class Identity(Node):
  """Returns its input (a Switch's SE-off branch, a skipped residual)."""

  def __call__(self, x, ctx):
    del ctx
    return x


class Zero(Node):
  """Zeros of the input's shape (a ZeroSpec outside a Switch)."""

  def __call__(self, x, ctx):
    del ctx
    return tf.zeros_like(x)


class Activation(Node):
  """An activation layer (keeps the width)."""

  def __call__(self, x, ctx):
    return masked.activation(x, self.part.activation,
                             ctx.width(self.part.in_width), ctx.mode)


class GlobalAveragePool(Node):
  """Mean over height and width, keeping them: [b, H, W, C] -> [b, 1, 1, C]."""

  def __call__(self, x, ctx):
    del ctx
    return tf.reduce_mean(x, axis=[1, 2], keepdims=True)


class ConvBN(_Part):
  """A k x k conv, then batch norm (or a bias), then an optional activation.
  Variables: `{name}/kernel` [k, k, in_max, out_max], `{name}/bn/gamma`,
  `{name}/bn/beta` (or `{name}/bias`) [out_max]."""

  def __init__(self, part: structure.Conv, store: VariableStore):
    self.part = part
    k, c_out = part.kernel_size, [part.out_width.max]
    requests = {naming.KERNEL: (
        (k, k, part.in_width.max, part.out_width.max), _CONV)}
    if part.use_batch_norm:
      requests.update({naming.GAMMA: (c_out, _ONES),
                       naming.BETA: (c_out, _ZEROS)})
    else:
      requests[naming.BIAS] = (c_out, _ZEROS)
    self._request(store, _part_variable_names(part.name), requests)

  def __call__(self, x, ctx):
    part = self.part
    in_w, out_w = ctx.width(part.in_width), ctx.width(part.out_width)
    bias = (None if part.use_batch_norm
            else self._get(naming.BIAS, ctx.active, ctx.dtype))
    y = masked.conv2d(x, self._get(naming.KERNEL, ctx.active, ctx.dtype),
                      in_w, out_w, part.strides, ctx.mode, bias)
    if part.use_batch_norm:
      # gamma and beta stay float32 (the fused op's statistics dtype).
      y = masked.stateless_batch_norm(
          y, self._get(naming.GAMMA, ctx.active),
          self._get(naming.BETA, ctx.active), out_w, ctx.mode, ctx.epsilon)
    if part.activation is not None:
      y = masked.activation(y, part.activation, out_w, ctx.mode)
    return y

  def regularizers(self, ctx):
    return {self.names[naming.KERNEL]: masked.l2_sum(
        self._get(naming.KERNEL, ctx.active), ctx.width(self.part.in_width),
        ctx.width(self.part.out_width), ctx.mode)}


class DepthwiseBN(_Part):
  """A k x k depthwise conv, batch norm and an activation. Variables:
  `{name}/kernel` [k, k, C_max, 1], `{name}/bn/gamma`, `{name}/bn/beta`."""

  def __init__(self, part: structure.Depthwise, store: VariableStore):
    self.part = part
    k, c = part.kernel_size, part.in_width.max
    self._request(store, _part_variable_names(part.name), {
        naming.KERNEL: ((k, k, c, 1), _DEPTHWISE),
        naming.GAMMA: ([c], _ONES), naming.BETA: ([c], _ZEROS)})

  def __call__(self, x, ctx):
    width = ctx.width(self.part.in_width)
    y = masked.depthwise_conv2d(
        x, self._get(naming.KERNEL, ctx.active, ctx.dtype), width,
        self.part.strides, ctx.mode)
    y = masked.stateless_batch_norm(
        y, self._get(naming.GAMMA, ctx.active),
        self._get(naming.BETA, ctx.active), width, ctx.mode, ctx.epsilon)
    return masked.activation(y, self.part.activation, width, ctx.mode)

  def regularizers(self, ctx):
    return {self.names[naming.KERNEL]: masked.l2_sum(
        self._get(naming.KERNEL, ctx.active), ctx.width(self.part.in_width),
        None, ctx.mode)}


class SqueezeExcite(_Part):
  """x * gate(conv(inner(conv(mean(x))))). Variables: `{reduce}/kernel`
  [1, 1, C_max, H_max], `{reduce}/bias`, `{expand}/kernel` [1, 1, H_max,
  C_max], `{expand}/bias`."""

  def __init__(self, part: structure.SqueezeExcite, store: VariableStore):
    self.part = part
    c, h = part.in_width.max, part.hidden.max
    self._request(store, {
        f'{conv}_{kind}': naming.variable_name(name, kind)
        for conv, name in (('reduce', part.reduce_name),
                           ('expand', part.expand_name))
        for kind in (naming.KERNEL, naming.BIAS)}, {
            'reduce_kernel': ((1, 1, c, h), _CONV),
            'reduce_bias': ((h,), _ZEROS),
            'expand_kernel': ((1, 1, h, c), _CONV),
            'expand_bias': ((c,), _ZEROS)})

  def __call__(self, x, ctx):
    part = self.part
    width, hidden = ctx.width(part.in_width), ctx.width(part.hidden)
    s = tf.reduce_mean(x, axis=[1, 2], keepdims=True)
    s = masked.conv2d(s, self._get('reduce_kernel', ctx.active, ctx.dtype),
                      width, hidden, 1, ctx.mode,
                      self._get('reduce_bias', ctx.active, ctx.dtype))
    s = masked.activation(s, part.inner_activation, hidden, ctx.mode)
    s = masked.conv2d(s, self._get('expand_kernel', ctx.active, ctx.dtype),
                      hidden, width, 1, ctx.mode,
                      self._get('expand_bias', ctx.active, ctx.dtype))
    s = masked.activation(s, part.gating_activation, width, ctx.mode)
    return x * s

  def regularizers(self, ctx):
    width, hidden = ctx.width(self.part.in_width), ctx.width(self.part.hidden)
    return {
        self.names['reduce_kernel']: masked.l2_sum(
            self._get('reduce_kernel', ctx.active), width, hidden, ctx.mode),
        self.names['expand_kernel']: masked.l2_sum(
            self._get('expand_kernel', ctx.active), hidden, width, ctx.mode)}


class Chain(Node):
  """Nodes applied in order."""

  def __init__(self, part: structure.Chain, store: VariableStore):
    self.part = part
    self.nodes = [build(p, store) for p in part.parts]

  def __call__(self, x, ctx):
    for node in self.nodes:
      x = node(x, ctx)
    return x

  def regularizers(self, ctx):
    return merge_max([node.regularizers(ctx) for node in self.nodes])


class Residual(Node):
  """layer(x) + x."""

  def __init__(self, part: structure.Residual, store: VariableStore):
    self.part = part
    self.layer = build(part.layer, store)

  def __call__(self, x, ctx):
    return self.layer(x, ctx) + x

  def regularizers(self, ctx):
    return self.layer.regularizers(ctx)


class Switch(Node):
  """sum_i mask[i] * branch_i(x); branch i runs only where mask[i] != 0.

  A one-hot mask runs one `tf.switch_case` case (the chosen branch); any other
  mask (the op warm-up's) the dense mixture of the live branches, a branch at
  mask 0 reading zeros. One live branch is one `tf.cond`. `None` branches are
  `ZeroSpec`s. One choice with a mask: branch_0(x) * mask[0], regularisers
  unscaled (the original's `maybe_switch_v2`).
  """

  def __init__(self, part: structure.Switch, store: VariableStore):
    self.part = part
    self.branches = [build(b, store) for b in part.branches]

  def _zeros(self, x, ctx):
    channels = ctx.width(self.part.out_width).channels(ctx.mode)
    return zeros_output(x, self.part.strides, channels)

  def __call__(self, x, ctx):
    # `entries.chosen` decides which branches run; `entries.scale`, the mask
    # in the compute dtype, multiplies their outputs.
    mask, entries = ctx.mask(self.part.path), ctx.entries(self.part.path)
    if len(self.branches) == 1:
      branch = self.branches[0]
      y = branch(x, ctx) if branch is not None else self._zeros(x, ctx)
      return y if mask is None else y * entries.scale[0]
    live = [i for i, branch in enumerate(self.branches) if branch is not None]
    if not live:
      return self._zeros(x, ctx)
    if len(live) == 1:
      return self._in_cond(live[0], x, ctx, entries)
    # Case i for a one-hot mask on i, the last case (the dense mixture, no
    # conds: a cond per branch doubled the gradient's build time) for any
    # other. The index is made in this call: like `_in_cond`'s predicate, it
    # makes the cases' variable reads wait for the call's dependencies.
    nonzero = tf.not_equal(mask, 0.0)
    one_hot = tf.equal(tf.reduce_sum(tf.cast(nonzero, tf.int32)), 1)
    index = tf.where(one_hot, tf.argmax(mask, output_type=tf.int32),
                     len(self.branches))
    cases = [self._one_branch(i, x, ctx, entries)
             for i in range(len(self.branches))]
    cases.append(lambda: self._dense_mixture(x, ctx, entries))
    return tf.switch_case(index, cases)

  def _one_branch(self, i, x, ctx, entries):
    """The case of a one-hot mask on choice `i`: mask[i] * branch_i(x)."""
    branch = self.branches[i]
    if branch is None:
      return lambda: self._zeros(x, ctx)
    return lambda: entries.scale[i] * branch(x, ctx)

  def _dense_mixture(self, x, ctx, entries):
    """sum_i mask[i] * branch_i(x), every live branch run (`ctx.gated`)."""
    total = None
    for i, branch in enumerate(self.branches):
      if branch is None:
        continue
      with ctx.gated(entries.chosen[i]):
        y = entries.scale[i] * branch(x, ctx)
      total = y if total is None else total + y
    return total

  def _in_cond(self, i, x, ctx, entries):
    """mask[i] * branch_i(x) where mask[i] != 0, else zeros. The predicate is
    made in this call, so the cond's variable reads wait for the call's control
    dependencies (the validation forward's on the weight update)."""
    chosen = tf.identity(entries.chosen[i])
    return tf.cond(chosen,
                   lambda: entries.scale[i] * self.branches[i](x, ctx),
                   lambda: self._zeros(x, ctx))

  def regularizers(self, ctx):
    mask, entries = ctx.mask(self.part.path), ctx.entries(self.part.path)
    terms = []
    for i, branch in enumerate(self.branches):
      if branch is None:
        continue
      if mask is None or len(self.branches) == 1:
        # As the original's maybe_switch_v2: a [1] mask scales the output
        # only (it serves path dropout), not the regulariser.
        terms.append(branch.regularizers(ctx))
        continue
      # Gated (`ctx.gated`) rather than a tf.cond per branch, as the forward.
      with ctx.gated(entries.chosen[i]):
        values = branch.regularizers(ctx)
      terms.append({name: entries.mask[i] * value
                    for name, value in values.items()})
    return merge_max(terms)


class Classifier(_Part):
  """Optional dropout, a 1x1 conv to the classes with bias, global mean.
  Variables: `classifier/kernel` [1, 1, C_max, num_classes] (N(0, 0.01)),
  `classifier/bias`; no weight decay."""

  def __init__(self, store: VariableStore, rule: structure.WidthRule,
               num_classes: int, dropout_rate: float):
    self.in_rule = rule
    self.num_classes = num_classes
    self.dropout_rate = dropout_rate
    self._request(store, _part_variable_names(naming.CLASSIFIER), {
        naming.KERNEL: ((1, 1, rule.max, num_classes), _CLASSIFIER),
        naming.BIAS: ([num_classes], _ZEROS)})

  def __call__(self, x, ctx):
    """Logits [batch, num_classes] in `ctx.dtype`."""
    if ctx.training and self.dropout_rate > 0:
      x = dropout_lib.dropout(x, self.dropout_rate, ctx.dropout_seed,
                              naming.CLASSIFIER)
    classes = masked.ActiveWidth(self.num_classes, self.num_classes)
    y = masked.conv2d(x, self._get(naming.KERNEL, dtype=ctx.dtype),
                      ctx.width(self.in_rule), classes, 1, ctx.mode,
                      self._get(naming.BIAS, dtype=ctx.dtype))
    return tf.reduce_mean(y, axis=[1, 2])


_NODES = {structure.Conv: ConvBN, structure.Depthwise: DepthwiseBN,
          structure.SqueezeExcite: SqueezeExcite,
          structure.Activation: Activation,
          structure.GlobalPool: GlobalAveragePool, structure.Zero: Zero,
          structure.Identity: Identity, structure.Chain: Chain,
          structure.Switch: Switch, structure.Residual: Residual}


def build(part: Optional[structure.Part],
          store: VariableStore) -> Optional[Node]:
  """The node of a part (None for None: a ZeroSpec choice or an endpoint).
  ValueError for an unknown part."""
  if part is None:
    return None
  if type(part) not in _NODES:
    raise ValueError(f'Unknown part {type(part).__name__}')
  return _NODES[type(part)](part, store)
