"""Architectures drawn uniformly: every OneOf index (under an unchosen
alternative too) from `np.random.RandomState(seed)`, in visit order."""

from __future__ import annotations

import itertools
from typing import Any, Iterator, List

import numpy as np

from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema


def check_num(num: Any) -> None:
  if isinstance(num, bool) or not isinstance(num, (int, np.integer)) or (
      num <= 0):
    raise ValueError(f'num must be a positive int, got {num!r}')


def draws(ssd: str, seed: int = 0) -> Iterator[List[int]]:
  """Uniform index lists of `ssd`, endlessly (the first is `describe_space
  --seed`'s); ValueError for an unknown `ssd`, at once."""
  counts = np.array(schema.num_choices(mobile.get_search_space(ssd)),
                    np.int64)
  rng = np.random.RandomState(seed)
  # One randint over the counts draws them in order, element by element:
  # the numbers of one `rng.randint(n)` per index, a NumPy call per draw.
  return (rng.randint(counts).tolist() for _ in itertools.count())


def sample_indices(ssd: str, num: int, seed: int = 0) -> List[str]:
  """`num` uniform architectures as canonical '0:2:1' strings; ValueError for
  an unknown `ssd` or `num <= 0`."""
  space_draws = draws(ssd, seed)
  check_num(num)
  return [schema.format_indices(i) for i in itertools.islice(space_draws, num)]
