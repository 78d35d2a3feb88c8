"""Convolutions and batch norm over the widest filters, for one width sample.

Every op takes a `mode`: `'masked'` (TPU, static shapes: channels from n on
zeroed) or `'sampled'` (weights sliced to their leading n); both give the same
values and gradients on the first n channels, in the dtype of `x`.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Tuple, Union

import tensorflow as tf

from tunas_tf.io import checks
from tunas_tf.layers import activations
from tunas_tf.layers import normalization
from tunas_tf.search_space import filters as filters_lib
from tunas_tf.search_space import naming

MASKED = naming.MASKED
SAMPLED = naming.SAMPLED
MODES = naming.MODES

IntLike = Union[int, tf.Tensor]


def check_mode(mode: str) -> str:
  """Returns `mode` if it is one of `MODES`, else raises ValueError."""
  checks.one_of('supernet mode', mode, MODES)
  return mode


def tf_scale_filters(filters: IntLike, multiplier: float,
                     base: int) -> tf.Tensor:
  """Tensor twin of `filters.scale_filters` (float64, to round alike): a
  scalar int32 Tensor. Raises ValueError as it does."""
  filters_lib.scale_filters(1, multiplier, base)  # Its argument checks.
  value = tf.cast(filters, tf.float64) * float(multiplier) / float(base)
  scaled = tf.cast(tf.floor(value + 0.5), tf.int32) * base
  return tf.maximum(tf.constant(base, tf.int32), scaled)


def tf_make_divisible(value: Union[float, tf.Tensor],
                      divisor: int) -> tf.Tensor:
  """Tensor twin of `filters.make_divisible`: a scalar int32 Tensor.
  Raises ValueError as it does."""
  filters_lib.make_divisible(1, divisor)  # Its argument check.
  value = tf.cast(value, tf.float64)
  d = tf.constant(float(divisor), tf.float64)
  rounded = tf.maximum(d, tf.floor((value + d / 2) / d) * d)
  rounded = tf.where(rounded < 0.9 * value, rounded + d, rounded)
  return tf.cast(rounded, tf.int32)


@dataclasses.dataclass(frozen=True)
class ActiveWidth:
  """A layer's width in one call: `max` (Python int) and the sampled `n`
  (Python int or scalar int32 Tensor, `1 <= n <= max`)."""
  max: int
  n: IntLike

  @property
  def is_full(self) -> bool:
    """True when the width is statically the maximum (no mask or slice)."""
    return isinstance(self.n, int) and self.n == self.max

  def mask(self, dtype: tf.DType = tf.float32) -> Optional[tf.Tensor]:
    """[max] `dtype` Tensor, 1 on the first `n` entries; None when full."""
    if self.is_full:
      return None
    return tf.sequence_mask(self.n, self.max, dtype=dtype)

  def channels(self, mode: str) -> IntLike:
    """The channel count of a tensor of this width in `mode` (max or n)."""
    return self.max if mode == MASKED else self.n


def graph_cache(graph: tf.Graph, name: str) -> Dict:
  """A dict kept on `graph` under `name`: it lives exactly as long as the
  graph (a WeakKeyDictionary would keep the graph alive through its tensors)."""
  caches = getattr(graph, '_tunas_tf_caches', None)
  if caches is None:
    caches = {}
    setattr(graph, '_tunas_tf_caches', caches)
  return caches.setdefault(name, {})


def _slice_bounds(rank: int, ends: Dict[int, IntLike]
                  ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """(begin, end, strides) int32 [rank] of a leading slice, built once per
  graph and widths outside any Switch branch, so `cond_v2` carries no bounds
  out of a branch. `end` is 0 on unsliced axes (`end_mask`)."""
  graph = next(n for n in ends.values() if isinstance(n, tf.Tensor)).graph
  key = (rank,) + tuple(sorted(
      (axis, id(n) if isinstance(n, tf.Tensor) else n)
      for axis, n in ends.items()))
  cache = graph_cache(graph, 'slice_bounds')
  if key not in cache:
    with graph.as_default(), tf.name_scope('slice_bounds'):
      end = tf.stack([tf.cast(ends[axis], tf.int32) if axis in ends
                      else tf.constant(0, tf.int32) for axis in range(rank)])
      bounds = (tf.zeros([rank], tf.int32), end, tf.ones([rank], tf.int32))
    # The width tensors are kept so that their ids stay unique in the key.
    cache[key] = bounds + (tuple(ends.values()),)
  return cache[key][:3]


def _slice_leading(value: tf.Tensor,
                   widths: Dict[int, ActiveWidth]) -> tf.Tensor:
  """`value` sliced to the leading `widths[axis].n` entries along each axis."""
  ends = {axis: w.n for axis, w in widths.items() if not w.is_full}
  if not ends:
    return value
  rank = value.shape.rank
  if (tf.executing_eagerly() or rank is None or
      not any(isinstance(n, tf.Tensor) for n in ends.values())):
    index = [slice(None)] * (max(ends) + 1)
    for axis, n in ends.items():
      index[axis] = slice(None, n)
    return value[tuple(index)]
  begin, end, strides = _slice_bounds(rank, ends)
  end_mask = sum(1 << axis for axis in range(rank) if axis not in ends)
  sliced = tf.strided_slice(value, begin, end, strides, end_mask=end_mask)
  # Bounds that are not constants leave the shape unknown; all but the
  # dynamic widths are known.
  shape = value.shape.as_list()
  for axis, n in ends.items():
    shape[axis] = n if isinstance(n, int) else None
  sliced.set_shape(shape)
  return sliced


def effective_kernel(kernel: tf.Tensor, in_width: Optional[ActiveWidth],
                     out_width: Optional[ActiveWidth], mode: str) -> tf.Tensor:
  """The part of a widest kernel the sampled widths use.

  Args:
    kernel: [kh, kw, in_max, out_max] (HWIO), or depthwise [kh, kw, C_max, 1]
      with `out_width` None.
    in_width, out_width: `ActiveWidth` of axis 2 / 3, or None to keep it.
    mode: masked (multiplied by the masks, same shape) or sampled (sliced to
      [kh, kw, n_in, n_out]).
  """
  check_mode(mode)
  if mode == SAMPLED:
    widths = {}
    if in_width is not None:
      widths[2] = in_width
    if out_width is not None:
      widths[3] = out_width
    return _slice_leading(kernel, widths)
  if in_width is not None and not in_width.is_full:
    kernel = kernel * in_width.mask(kernel.dtype)[:, tf.newaxis]
  if out_width is not None and not out_width.is_full:
    kernel = kernel * out_width.mask(kernel.dtype)
  return kernel


def effective_vector(vector: tf.Tensor, width: ActiveWidth,
                     mode: str) -> tf.Tensor:
  """A per-channel vector [max] (bias, gamma, beta) at `width`: [max] zero
  beyond n (masked) or [n] (sampled)."""
  check_mode(mode)
  if width.is_full:
    return vector
  if mode == SAMPLED:
    return _slice_leading(vector, {0: width})
  return vector * width.mask(vector.dtype)


def l2_sum(kernel: tf.Tensor, in_width: Optional[ActiveWidth],
           out_width: Optional[ActiveWidth], mode: str) -> tf.Tensor:
  """Sum of squares of the effective kernel (arguments as `effective_kernel`),
  a scalar float32 Tensor, the same in both modes."""
  kernel = effective_kernel(kernel, in_width, out_width, mode)
  return tf.reduce_sum(tf.square(kernel))


def conv2d(x: tf.Tensor, kernel: tf.Tensor, in_width: ActiveWidth,
           out_width: ActiveWidth, strides: int, mode: str,
           bias: Optional[tf.Tensor] = None) -> tf.Tensor:
  """'SAME' convolution of `x` [batch, H, W, C] with a widest `kernel`
  [k, k, in_max, out_max] (and optional `bias` [out_max]) at the sampled
  widths; channels as `ActiveWidth.channels` by `mode`."""
  kernel = effective_kernel(kernel, in_width, out_width, mode)
  y = tf.nn.conv2d(x, kernel, [1, strides, strides, 1], 'SAME')
  if bias is not None:
    y = tf.nn.bias_add(y, effective_vector(bias, out_width, mode))
  return y


def depthwise_conv2d(x: tf.Tensor, kernel: tf.Tensor, width: ActiveWidth,
                     strides: int, mode: str) -> tf.Tensor:
  """'SAME' depthwise convolution (multiplier 1) at the sampled width;
  `kernel` [k, k, C_max, 1]."""
  kernel = effective_kernel(kernel, width, None, mode)
  return tf.nn.depthwise_conv2d(x, kernel, [1, strides, strides, 1], 'SAME')


def stateless_batch_norm(
    x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, width: ActiveWidth,
    mode: str, epsilon: float = naming.BATCH_NORM_EPSILON) -> tf.Tensor:
  """Batch norm with the batch's own statistics (no moving averages);
  `gamma`, `beta` float32 [C_max] for either dtype of `x`. Per-channel
  statistics make the masked and sampled modes agree."""
  check_mode(mode)
  if mode == SAMPLED:
    gamma = effective_vector(gamma, width, mode)
    beta = effective_vector(beta, width, mode)
  y = normalization.batch_norm(x, gamma, beta, epsilon)
  if mode == MASKED and not width.is_full:
    y = y * width.mask(y.dtype)
  return y


def activation(x: tf.Tensor, name: str, width: Optional[ActiveWidth] = None,
               mode: str = SAMPLED) -> tf.Tensor:
  """`x` through the activation `name` (one of `ops.ACTIVATIONS`), masked
  after in masked mode when it does not map 0 to 0 (sigmoid).

  Raises:
    ValueError: for an unknown name.
  """
  y = activations.by_name(name)(x)
  if (mode == MASKED and width is not None and not width.is_full and
      not activations.maps_zero_to_zero(name)):
    y = y * width.mask(y.dtype)
  return y
