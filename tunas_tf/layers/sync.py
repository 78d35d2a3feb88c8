"""A numerically silent data dependency (the gradient-sync barrier), the
original's `with_data_dependencies`: XLA may drop control dependencies, so
every output gets a term read from every dependency that changes nothing."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import tensorflow as tf

# Smallest positive normal number of each floating dtype, 2 ** (min exponent).
_SMALLEST_NORMAL = {
    tf.float16: 2.0**-14,
    tf.bfloat16: 2.0**-126,
    tf.float32: 2.0**-126,
    tf.float64: 2.0**-1022,
}


def smallest_normal(dtype: tf.dtypes.DType) -> float:
  """The smallest positive normal number of a float dtype (Python float);
  ValueError for another dtype."""
  dtype = tf.as_dtype(dtype)
  if dtype not in _SMALLEST_NORMAL:
    raise ValueError(f'Expected a floating dtype, got {dtype.name}')
  return _SMALLEST_NORMAL[dtype]


def _first_element(tensor: tf.Tensor, bounds: Dict) -> tf.Tensor:
  """Element [0, ..., 0] of `tensor`: one StridedSlice on bounds made once
  per rank (`bounds`, kept by the caller)."""
  rank = tensor.shape.rank
  if rank == 0:
    return tensor
  if rank is None:
    return tf.reshape(tensor, [-1])[0]
  if rank not in bounds:
    bounds[rank] = (tf.zeros([rank], tf.int32), tf.ones([rank], tf.int32))
  zeros, ones = bounds[rank]
  return tf.strided_slice(tensor, zeros, ones, ones,
                          shrink_axis_mask=(1 << rank) - 1)


def with_data_dependencies(
    dependencies: Sequence[tf.Tensor],
    outputs: Sequence[Optional[tf.Tensor]]) -> List[Optional[tf.Tensor]]:
  """`outputs` bit for bit, but data-dependent on every dependency.

  s = stop_gradient(sum of each dependency's element [0, ..., 0]), cast to
  the output's dtype, NaN -> 0, clipped to [-tiny, tiny] (tiny: the dtype's
  smallest normal); each output gets -|s| * tiny, at most tiny**2, which
  rounds to -0.0, and x + (-0.0) == x. (The original added tiny * s
  unclipped, spreading NaN/inf.) Gradients never reach `dependencies`.

  Args:
    dependencies: numeric tensors with an element; empty returns `outputs`.
    outputs: floating tensors or None (passed through).

  Raises:
    ValueError: if an output is not floating.
  """
  outputs = [None if o is None else tf.convert_to_tensor(o) for o in outputs]
  for i, output in enumerate(outputs):
    if output is not None and output.dtype not in _SMALLEST_NORMAL:
      raise ValueError(f'with_data_dependencies: outputs must be floating, '
                       f'got dtype {output.dtype.name} for output {i}')
  if not dependencies:
    return outputs

  with tf.name_scope('with_data_dependencies'):
    dependencies = [tf.convert_to_tensor(d) for d in dependencies]
    dtype = dependencies[0].dtype
    bounds = {}
    first_elements = [tf.cast(_first_element(d, bounds), dtype)
                      for d in dependencies]
    total = tf.stop_gradient(tf.add_n(first_elements))

    terms = {}  # One term per output dtype.
    results = []
    for output in outputs:
      if output is None:
        results.append(None)
        continue
      out_dtype = output.dtype
      if out_dtype not in terms:
        tiny = smallest_normal(out_dtype)
        value = tf.cast(total, out_dtype)
        value = tf.where(tf.math.is_nan(value), tf.zeros_like(value), value)
        value = tf.clip_by_value(value, -tiny, tiny)
        # |term| <= tiny**2 rounds to -0.0; adding -0.0 changes nothing.
        terms[out_dtype] = -tf.abs(value) * tf.constant(tiny, out_dtype)
      results.append(output + terms[out_dtype])
    return results
