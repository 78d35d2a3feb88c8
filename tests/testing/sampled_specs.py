"""Sampled specs for the supernet tests: masks attached to a search space."""

from typing import Callable, Dict, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from tunas_tf.search_space import schema


def one_hot(n: int, index: int) -> np.ndarray:
  """float32 [n] with a 1 at `index`."""
  mask = np.zeros([n], np.float32)
  mask[index] = 1.0
  return mask


def uniform(n: int) -> np.ndarray:
  """The op warm-up mask: float32 [n] of 1/n."""
  return np.full([n], 1.0 / n, np.float32)


def masks_from_indices(spec, indices: Sequence[int],
                       overrides: Optional[Mapping[str, np.ndarray]] = None
                       ) -> Dict[str, np.ndarray]:
  """One-hot masks {path: float32 [n]} (visit order), then `overrides`."""
  paths = schema.flatten_with_paths(spec)
  if len(indices) != len(paths):
    raise ValueError(f'{len(paths)} OneOfs, {len(indices)} indices')
  masks = {path: one_hot(len(o.choices), i)
           for (path, o), i in zip(paths, indices)}
  for path, mask in (overrides or {}).items():
    if path not in masks:
      raise ValueError(f'No OneOf at {path!r}')
    masks[path] = np.asarray(mask, np.float32)
  return masks


def random_indices(spec, rng: np.random.Generator) -> list:
  """A uniformly random index per OneOf."""
  return [int(rng.integers(n)) for n in schema.num_choices(spec)]


def attach(spec, masks: Mapping[str, object],
           convert: Callable = tf.convert_to_tensor):
  """`spec` with `masks[path]` (as a Tensor) on the OneOf at each path."""
  return schema.with_masks(spec, {path: convert(mask)
                                  for path, mask in masks.items()})
