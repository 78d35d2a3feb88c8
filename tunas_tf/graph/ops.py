"""What each `OpType` computes: its variables and its forward pass (NHWC).
An op computes in its first input's dtype; variables are float32, cast on
read by CONV, DEPTHWISE_CONV, DENSE and LAYER_NORM (BATCH_NORM keeps float32).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import tensorflow as tf

from tunas_tf.graph import ir
from tunas_tf.layers import activations
from tunas_tf.layers import dropout as dropout_lib
from tunas_tf.layers import initializers
from tunas_tf.layers import normalization
from tunas_tf.search_space import naming

OpType = ir.OpType

_CONV_KEYS = {'kernel_size', 'strides', 'dilations', 'padding', 'use_bias',
              'kernel_init', 'bias_init'}
_NORM_KEYS = {'epsilon', 'use_scale', 'use_bias', 'scale_init', 'bias_init'}
_POOL_KEYS = {'window_shape', 'strides', 'padding'}
ALLOWED_KWARGS: Dict[OpType, frozenset] = {
    OpType.CONV: frozenset(_CONV_KEYS | {'features', 'feature_group_count'}),
    OpType.DEPTHWISE_CONV: frozenset(_CONV_KEYS | {'depth_multiplier'}),
    OpType.DENSE: frozenset({'features', 'use_bias', 'kernel_init',
                             'bias_init'}),
    OpType.BATCH_NORM: frozenset(_NORM_KEYS | {'momentum', 'stateless'}),
    OpType.LAYER_NORM: frozenset(_NORM_KEYS),
    OpType.GELU: frozenset({'approximate'}),
    OpType.SOFTMAX: frozenset({'axis'}),
    OpType.AVG_POOL: frozenset(_POOL_KEYS),
    OpType.MAX_POOL: frozenset(_POOL_KEYS),
    OpType.GLOBAL_AVG_POOL: frozenset({'keepdims'}),
    OpType.MEAN: frozenset({'axis', 'keepdims'}),
    OpType.CONCAT: frozenset({'axis'}),
    OpType.RESHAPE: frozenset({'new_shape'}),
    OpType.TRANSPOSE: frozenset({'axes'}),
    OpType.DROPOUT: frozenset({'rate', 'whole_tensor'}),
}


@dataclasses.dataclass(frozen=True)
class VariableSpec:
  """A variable an op needs: `init` an initializer string (`'I:zeros'`,
  `'I:normal:stddev:0.01'`, ...) or number; `fan_in`/`fan_out` the units
  feeding one output / fed by one input (variance scaling)."""
  shape: tuple
  init: Any
  trainable: bool = True
  fan_in: int = 1
  fan_out: int = 1


def check_kwargs(op: ir.Op, kwargs: Mapping[str, Any]) -> None:
  """Raises ValueError naming the op if `kwargs` has keys its type ignores."""
  unknown = sorted(set(kwargs) - ALLOWED_KWARGS.get(op.type, frozenset()))
  if unknown:
    raise ValueError(
        f'Op {op.name!r} ({op.type.name}): unknown kwargs {unknown}; allowed: '
        f'{sorted(ALLOWED_KWARGS.get(op.type, ()))}')


def _pair(value: Any, where: str, name: str) -> List[int]:
  if isinstance(value, (list, tuple)):
    if len(value) != 2:
      raise ValueError(f'{where}: {name} must be an int or 2 ints, got '
                       f'{value!r}')
    return [int(v) for v in value]
  return [int(value)] * 2


def _conv_windows(kwargs: Mapping[str, Any],
                  where: str) -> Tuple[List[int], List[int]]:
  """A convolution's (strides, dilations); refuses both above 1."""
  strides = _pair(kwargs.get('strides', 1), where, 'strides')
  dilations = _pair(kwargs.get('dilations', 1), where, 'dilations')
  if max(strides) > 1 and max(dilations) > 1:
    raise ValueError(f'{where}: strides {strides} and dilations {dilations} '
                     'cannot both be above 1; use one of them')
  return strides, dilations


def _require(kwargs: Mapping[str, Any], key: str, where: str) -> Any:
  if key not in kwargs:
    raise ValueError(f'{where}: missing required kwarg {key!r}')
  return kwargs[key]


def _padding(kwargs: Mapping[str, Any], default: str, where: str) -> str:
  padding = str(kwargs.get('padding', default)).upper()
  if padding not in ('SAME', 'VALID'):
    raise ValueError(f"{where}: padding must be 'SAME' or 'VALID', got "
                     f'{kwargs["padding"]!r}')
  return padding


def _channels(shape: Sequence[Optional[int]], where: str, rank=None) -> int:
  if rank is not None and len(shape) != rank:
    raise ValueError(f'{where}: expects a rank-{rank} (NHWC) input, got shape '
                     f'{tuple(shape)}')
  if not shape or shape[-1] is None:
    raise ValueError(f'{where}: the last dim of input shape {tuple(shape)} '
                     'must be known')
  return int(shape[-1])


def variable_specs(op: ir.Op, kwargs: Mapping[str, Any],
                   input_shapes: Sequence[Sequence[Optional[int]]],
                   stateless_batch_norm: bool = False
                   ) -> Dict[str, VariableSpec]:
  """{variable name (`kernel`, `bias`, `gamma`, ...): `VariableSpec`} that
  `op` needs for inputs of static `input_shapes` (None for unknown dims);
  `stateless_batch_norm` the model's default. ValueError naming the op for a
  missing kwarg, an unknown channel count or an unsupported option."""
  where = f'Op {op.name!r} ({op.type.name})'
  check_kwargs(op, kwargs)
  kernel_init = kwargs.get('kernel_init', 'I:lecun_normal')
  bias_init = kwargs.get('bias_init', 'I:zeros')
  specs = {}
  if op.type in (OpType.CONV, OpType.DEPTHWISE_CONV):
    _conv_windows(kwargs, where)
    cin = _channels(input_shapes[0], where, rank=4)
    kh, kw = _pair(_require(kwargs, 'kernel_size', where), where,
                   'kernel_size')
  if op.type == OpType.CONV:
    features = int(_require(kwargs, 'features', where))
    if int(kwargs.get('feature_group_count', 1)) != 1:
      raise ValueError(f'{where}: feature_group_count must be 1, got '
                       f'{kwargs["feature_group_count"]!r}; use '
                       'DEPTHWISE_CONV')
    specs['kernel'] = VariableSpec((kh, kw, cin, features), kernel_init,
                                   fan_in=kh * kw * cin,
                                   fan_out=kh * kw * features)
  elif op.type == OpType.DEPTHWISE_CONV:
    mult = int(kwargs.get('depth_multiplier', 1))
    specs['kernel'] = VariableSpec((kh, kw, cin, mult), kernel_init,
                                   fan_in=kh * kw, fan_out=kh * kw * mult)
    features = cin * mult
  elif op.type == OpType.DENSE:
    cin = _channels(input_shapes[0], where)
    features = int(_require(kwargs, 'features', where))
    specs['kernel'] = VariableSpec((cin, features), kernel_init, fan_in=cin,
                                   fan_out=features)
  elif op.type in (OpType.BATCH_NORM, OpType.LAYER_NORM):
    c = _channels(input_shapes[0], where)
    if kwargs.get('use_scale', True):
      specs['gamma'] = VariableSpec((c,), kwargs.get('scale_init', 'I:ones'))
    if kwargs.get('use_bias', True):
      specs['beta'] = VariableSpec((c,), kwargs.get('bias_init', 'I:zeros'))
    stateless = kwargs.get('stateless', stateless_batch_norm)
    if op.type == OpType.BATCH_NORM and not stateless:
      specs['moving_mean'] = VariableSpec((c,), 'I:zeros', trainable=False)
      specs['moving_variance'] = VariableSpec((c,), 'I:ones', trainable=False)
  if 'kernel' in specs and kwargs.get('use_bias', True):  # Its output width.
    specs['bias'] = VariableSpec((features,), bias_init)
  return specs


def initial_value(spec: VariableSpec, seed: Optional[int],
                  var_name: str, where: str) -> tf.Tensor:
  """A float32 initial value of `spec.shape`, fixed by (`seed`, `var_name`)
  with a seed, from the global generator without.

  `spec.init`: a number, or `'I:<fn>[:key:value...]'`, fn one of zeros, ones,
  constant (value), normal (stddev, mean), truncated_normal (stddev), uniform
  (minval, maxval), or {lecun, he/kaiming, glorot/xavier}_{normal, uniform}
  (scale). ValueError naming the op (`where`) for anything else.
  """
  shape = spec.shape
  if isinstance(spec.init, (int, float)):
    return tf.fill(shape, tf.constant(float(spec.init), tf.float32))
  if not isinstance(spec.init, str) or not spec.init.startswith('I:'):
    raise ValueError(f'{where}: initializer must be an "I:<fn>" string or a '
                     f'number, got {spec.init!r}')
  parts = spec.init[2:].split(':')
  fn, args = parts[0], parts[1:]
  if len(args) % 2:
    raise ValueError(f'{where}: initializer {spec.init!r} needs key:value '
                     'pairs after the name')
  try:
    kw = {args[i]: float(args[i + 1]) for i in range(0, len(args), 2)}
  except ValueError:
    raise ValueError(
        f'{where}: non-numeric argument in {spec.init!r}') from None

  scaling = {'lecun': (1.0, 'fan_in'), 'he': (2.0, 'fan_in'),
             'kaiming': (2.0, 'fan_in'), 'glorot': (1.0, 'fan_avg'),
             'xavier': (1.0, 'fan_avg')}
  family, _, dist = fn.rpartition('_')
  known_args = {'zeros': set(), 'ones': set(), 'constant': {'value'},
                'normal': {'stddev', 'mean'}, 'truncated_normal': {'stddev'},
                'uniform': {'minval', 'maxval'}}
  if fn in known_args or (family in scaling and dist in ('normal', 'uniform')):
    unknown = set(kw) - known_args.get(fn, {'scale'})
    if unknown:
      raise ValueError(f'{where}: initializer {spec.init!r} takes no '
                       f'argument(s) {sorted(unknown)}')
  if fn == 'zeros':
    return tf.zeros(shape, tf.float32)
  if fn == 'ones':
    return tf.ones(shape, tf.float32)
  if fn == 'constant':
    return tf.fill(shape, tf.constant(kw.get('value', 0.0), tf.float32))
  if fn == 'normal':
    return initializers.normal(shape, kw.get('stddev', 1e-2), seed, var_name,
                               kw.get('mean', 0.0))
  if fn == 'truncated_normal':
    return initializers.truncated_normal(shape, kw.get('stddev', 1e-2), seed,
                                         var_name)
  if fn == 'uniform':
    return initializers.uniform(shape, kw.get('minval', -0.05),
                                kw.get('maxval', 0.05), seed, var_name)
  if family in scaling and dist in ('normal', 'uniform'):
    scale, mode = scaling[family]
    scale = kw.get('scale', scale)
    fan = (spec.fan_in if mode == 'fan_in'
           else (spec.fan_in + spec.fan_out) / 2.0)
    variance = scale / max(1.0, fan)
    if dist == 'normal':
      return initializers.truncated_normal_init(
          shape, math.sqrt(variance), seed, var_name)
    limit = math.sqrt(3.0 * variance)
    return initializers.uniform(shape, -limit, limit, seed, var_name)
  raise ValueError(f'{where}: unknown initializer {spec.init!r}')


def _batch_size(x: tf.Tensor):
  static = x.shape[0]
  return static if static is not None else tf.shape(x)[0]


def _window(value: Any, spatial: Sequence[Optional[int]], where: str,
            name: str) -> List[int]:
  values = (list(value) if isinstance(value, (list, tuple))
            else [value] * len(spatial))
  if len(values) != len(spatial):
    raise ValueError(f'{where}: {name} {value!r} does not match '
                     f'{len(spatial)} spatial dims')
  # 0 means the whole dim (global pooling).
  if any(int(v) == 0 and dim is None for v, dim in zip(values, spatial)):
    raise ValueError(f'{where}: {name} 0 needs a static spatial size')
  return [int(v) or int(dim) for v, dim in zip(values, spatial)]


def _batch_norm(x, kwargs, variables, training, stateless):
  gamma, beta = variables.get('gamma'), variables.get('beta')
  eps = float(kwargs.get('epsilon', naming.BATCH_NORM_EPSILON))
  if stateless:
    return normalization.batch_norm(x, gamma, beta, eps)
  if not training:
    return normalization.batch_norm(x, gamma, beta, eps,
                                    variables['moving_mean'],
                                    variables['moving_variance'])
  y, mean, variance = normalization.batch_norm_with_statistics(x, gamma, beta,
                                                               eps)
  # The fused op's batch statistics (biased variance); no gradient.
  mean, variance = tf.stop_gradient(mean), tf.stop_gradient(variance)
  momentum = float(kwargs.get('momentum', 0.99))
  updates = [variables[name].assign(momentum * variables[name] +
                                    (1 - momentum) * batch)
             for name, batch in (('moving_mean', mean),
                                 ('moving_variance', variance))]
  with tf.control_dependencies(updates):
    return tf.identity(y)


def _layer_norm(x, kwargs, variables):
  mean, variance = tf.nn.moments(x, [-1], keepdims=True)
  return tf.nn.batch_normalization(x, mean, variance, variables.get('beta'),
                                   variables.get('gamma'),
                                   float(kwargs.get('epsilon', 1e-6)))


def _conv(op_type, x, kwargs, variables, where):
  strides, dilations = _conv_windows(kwargs, where)
  padding = _padding(kwargs, 'SAME', where)
  if op_type == OpType.CONV:
    y = tf.nn.conv2d(x, variables['kernel'], [1] + strides + [1], padding,
                     dilations=[1] + dilations + [1])
  else:
    y = tf.nn.depthwise_conv2d(x, variables['kernel'], [1] + strides + [1],
                               padding, dilations=dilations)
  if 'bias' in variables:
    y = tf.nn.bias_add(y, variables['bias'])
  return y


def _dense(x, variables):
  kernel = variables['kernel']
  if x.shape.rank == 2:
    y = tf.matmul(x, kernel)
  else:
    y = tf.tensordot(x, kernel, [[x.shape.rank - 1], [0]])
    y.set_shape(x.shape[:-1].concatenate(kernel.shape[-1:]))
  if 'bias' in variables:
    y = y + variables['bias']
  return y


def _pool(op_type, x, kwargs, where):
  spatial = x.shape[1:-1]
  window = _window(_require(kwargs, 'window_shape', where), spatial, where,
                   'window_shape')
  strides = _window(kwargs.get('strides', 1), spatial, where, 'strides')
  padding = _padding(kwargs, 'VALID', where)
  pool = tf.nn.avg_pool if op_type == OpType.AVG_POOL else tf.nn.max_pool
  return pool(x, window, strides, padding)


def _reshape(op_type, x, kwargs, where):
  if op_type == OpType.FLATTEN:
    rest = x.shape[1:]
    size = rest.num_elements() if rest.is_fully_defined() else -1
    return tf.reshape(x, [_batch_size(x), size])
  new_shape = list(_require(kwargs, 'new_shape', where))
  if new_shape and new_shape[0] == 'B':
    new_shape[0] = _batch_size(x)
  if any(isinstance(d, str) for d in new_shape):
    raise ValueError(f'{where}: new_shape {kwargs["new_shape"]!r} has strings '
                     "other than a leading 'B'")
  return tf.reshape(x, new_shape)


def _dropout(x, kwargs, training, seed, name, where):
  rate = float(_require(kwargs, 'rate', where))
  whole_tensor = kwargs.get('whole_tensor', False)
  if not isinstance(whole_tensor, bool):
    raise ValueError(f'{where}: whole_tensor must be a bool, got '
                     f'{whole_tensor!r}')
  if not (training and rate > 0):
    return x
  return dropout_lib.dropout(x, rate, seed, name, whole_tensor=whole_tensor)


_ACTIVATIONS: Dict[OpType, Callable[[tf.Tensor], tf.Tensor]] = {
    OpType.RELU: activations.relu,
    OpType.RELU6: activations.relu6,
    OpType.SWISH: activations.swish,
    OpType.H_SWISH: activations.hard_swish,
    OpType.SIGMOID: activations.sigmoid,
    OpType.H_SIGMOID: activations.hard_sigmoid,
    OpType.IDENTITY: tf.identity,
    OpType.NONE: tf.stop_gradient,
}
# Ops that combine their inputs, left to right.
_COMBINE = {OpType.ADD: operator.add, OpType.MUL: operator.mul}


# Ops whose variables are read in the input's dtype (see the module docstring).
_CAST_ON_READ = frozenset({OpType.CONV, OpType.DEPTHWISE_CONV, OpType.DENSE,
                           OpType.LAYER_NORM})


def apply(op: ir.Op, kwargs: Mapping[str, Any], inputs: Sequence[tf.Tensor],
          variables: Mapping[str, tf.Variable], training: bool = False,
          stateless_batch_norm: bool = False,
          dropout_seed: Optional[tf.Tensor] = None) -> List[tf.Tensor]:
  """Runs one op: a list of `op.num_outputs` tensors; ValueError naming the
  op on bad kwargs (`ALLOWED_KWARGS`).

  Defaults and variables per type:
  * CONV: strides, dilations [1] (not both > 1), padding ['SAME'], use_bias
    [True], kernel_init ['I:lecun_normal'], bias_init ['I:zeros'];
    `kernel` [kh, kw, C_in, features] (HWIO), `bias` [features].
  * DEPTHWISE_CONV: as CONV, depth_multiplier [1]; `kernel` [kh, kw, C, m].
  * DENSE (last axis): `kernel` [C_in, features], `bias` [features].
  * BATCH_NORM (last axis): momentum [0.99], epsilon [1e-3], stateless [the
    model's]; `gamma`, `beta`, unless stateless `moving_mean`,
    `moving_variance`. Training or stateless: batch statistics; training and
    stateful also m <- momentum * m + (1 - momentum) * batch.
  * LAYER_NORM (last axis): epsilon [1e-6]; `gamma`, `beta`.
  * Activations (`_ACTIVATIONS`, GELU approximate [False], SOFTMAX axis [-1];
    NONE is a stop-gradient); ADD, MUL of all inputs, broadcast.
  * AVG_POOL, MAX_POOL: window_shape (0: the whole dim), strides [1],
    padding ['VALID']. GLOBAL_AVG_POOL, MEAN: keepdims [False]. CONCAT: axis
    [-1]. FLATTEN to [batch, -1]; RESHAPE new_shape (a leading 'B' keeps the
    batch); TRANSPOSE axes.
  * DROPOUT (training only): rate, whole_tensor [False] (one mask for the
    whole input: path dropout), keyed on the op's name and `dropout_seed`.
  """
  where = f'Op {op.name!r} ({op.type.name})'
  check_kwargs(op, kwargs)
  t = op.type
  x = inputs[0]
  if t in _CAST_ON_READ:
    variables = {name: v if v.dtype == x.dtype else tf.cast(v, x.dtype)
                 for name, v in variables.items()}
  if t in _ACTIVATIONS:
    y = _ACTIVATIONS[t](x)
  elif t == OpType.GELU:
    y = tf.nn.gelu(x, approximate=bool(kwargs.get('approximate', False)))
  elif t == OpType.SOFTMAX:
    y = tf.nn.softmax(x, axis=int(kwargs.get('axis', -1)))
  elif t in (OpType.CONV, OpType.DEPTHWISE_CONV):
    y = _conv(t, x, kwargs, variables, where)
  elif t == OpType.DENSE:
    y = _dense(x, variables)
  elif t == OpType.BATCH_NORM:
    y = _batch_norm(x, kwargs, variables, training,
                    kwargs.get('stateless', stateless_batch_norm))
  elif t == OpType.LAYER_NORM:
    y = _layer_norm(x, kwargs, variables)
  elif t in _COMBINE:
    y = functools.reduce(_COMBINE[t], inputs)
  elif t in (OpType.AVG_POOL, OpType.MAX_POOL):
    y = _pool(t, x, kwargs, where)
  elif t == OpType.GLOBAL_AVG_POOL:
    y = tf.reduce_mean(x, list(range(1, x.shape.rank - 1)),
                       keepdims=bool(kwargs.get('keepdims', False)))
  elif t == OpType.MEAN:
    axis = _require(kwargs, 'axis', where)
    axis = list(axis) if isinstance(axis, (list, tuple)) else int(axis)
    y = tf.reduce_mean(x, axis, keepdims=bool(kwargs.get('keepdims', False)))
  elif t == OpType.CONCAT:
    y = tf.concat(list(inputs), int(kwargs.get('axis', -1)))
  elif t in (OpType.FLATTEN, OpType.RESHAPE):
    y = _reshape(t, x, kwargs, where)
  elif t == OpType.TRANSPOSE:
    y = tf.transpose(x, list(_require(kwargs, 'axes', where)))
  elif t == OpType.DROPOUT:
    y = _dropout(x, kwargs, training, dropout_seed, op.name, where)
  else:
    raise ValueError(f'{where}: unknown op type {t!r}')
  return [y]
