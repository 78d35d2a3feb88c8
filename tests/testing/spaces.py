"""A search space's architectures by rule, for the tests (no TensorFlow)."""

from typing import Any, List

from tunas_tf.search_space import schema


def extreme_indices(spec: Any, largest: bool) -> List[int]:
  """Indices of the cheapest (or dearest, `largest`) architecture by rule:
  a `ZeroSpec` (or the other choice), the smallest (largest) filters, the
  first (last) choice of any other op decision."""
  indices = []
  for oneof in schema.flatten(spec):
    names = [type(c).__name__ for c in oneof.choices]
    n = len(oneof.choices)
    if 'ZeroSpec' in names and n > 1:
      zero = names.index('ZeroSpec')
      index = next(i for i in range(n) if i != zero) if largest else zero
    elif oneof.tag == schema.FILTERS_TAG:
      order = sorted(range(n), key=lambda i: oneof.choices[i])
      index = order[-1] if largest else order[0]
    else:
      index = n - 1 if largest else 0
    indices.append(index)
  return indices
