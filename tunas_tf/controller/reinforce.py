"""The REINFORCE controller: one categorical per OneOf (`Controller`), the
original's warm-up sampling (`independent_sample`) and the argmax result;
eager, in `tf.function` and in a TF1 graph."""

from __future__ import annotations

import collections
import functools
import numbers
import re
from typing import (Any, List, Mapping, NamedTuple, Optional, Sequence, Tuple,
                    Union)

import numpy as np
import tensorflow as tf

from tunas_tf.layers import initializers
from tunas_tf.search_space import schema

# A choice is active when its mask entry exceeds this in absolute value.
ACTIVE_THRESHOLD = 1e-6

Probability = Union[None, float, tf.Tensor]
Seed = Union[None, Sequence[int], tf.Tensor]

# The kinds of draw, folded into a stateless seed before the path's key.
_CATEGORICAL_DRAW, _WARMUP_DRAW = 1, 2


class DistInfo(NamedTuple):
  """A sample's scalar float32 log-prob (under the warm-up rule) and exact
  entropy, both summed over active OneOfs; logits / temperature by path and
  by `<tag>_<k>` (k counting that tag's OneOfs), in visit order."""
  sample_log_prob: tf.Tensor
  entropy: tf.Tensor
  logits_by_path: 'collections.OrderedDict[str, tf.Tensor]'
  logits_by_tag: 'collections.OrderedDict[str, tf.Tensor]'
  controller: 'Controller'


class Controller(tf.Module):
  """One zero-initialised float32 variable `logits/<path>` per OneOf of a
  spec; `paths` and `num_choices` in visit order."""

  def __init__(self, spec: Any, name: str = 'controller'):
    super().__init__(name=name)
    entries = schema.flatten_with_paths(spec)
    self.paths = tuple(path for path, _ in entries)
    self.num_choices = tuple(len(oneof.choices) for _, oneof in entries)
    # Initial values are callables, so that their ops are made outside any
    # control-flow context (a TPU or XLA compile context refuses a tensor
    # made inside it as a variable's initial value).
    self._logits = [
        tf.Variable(functools.partial(tf.zeros, [n], tf.float32),
                    trainable=True,
                    # `logits/<path>`, characters TF refuses replaced.
                    name=re.sub(r'[^A-Za-z0-9_.\-/]', '_',
                                f'logits/{path}' if path else 'logits'))
        for path, n in zip(self.paths, self.num_choices)]

  @property
  def logits_by_path(self) -> 'collections.OrderedDict[str, tf.Variable]':
    """OrderedDict path -> logits variable (rank 1 float32 [num_choices])."""
    return collections.OrderedDict(zip(self.paths, self._logits))

  def check_compatible(self, spec: Any) -> None:
    """Raises ValueError, naming the first path or size that differs, unless
    `spec` has this controller's OneOfs."""
    found = [(path, len(oneof.choices))
             for path, oneof in schema.flatten_with_paths(spec)]
    mine = list(zip(self.paths, self.num_choices))
    if found != mine:
      diff = next((i for i, (a, b) in enumerate(zip(found, mine)) if a != b),
                  min(len(found), len(mine)))
      got, want = (pairs[diff] if diff < len(pairs) else None
                   for pairs in (found, mine))
      raise ValueError(
          f'Controller does not match the spec: OneOf {diff} (path, choices) '
          f'is {got} in the spec but {want} in the controller '
          f'({len(found)} vs {len(mine)} OneOfs)')


def _check_probability(value: Probability, name: str) -> Probability:
  if value is None or tf.is_tensor(value):
    return value
  if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
      0.0 <= float(value) <= 1.0):
    raise ValueError(f'{name} must be None, a tensor or a number in [0, 1], '
                     f'got {value!r}')
  return float(value)


def _check_seed(seed: Seed) -> Optional[tf.Tensor]:
  """None, or `seed` as a [2] int32/int64 tensor (Python ints: int32)."""
  if seed is None:
    return None
  if not tf.is_tensor(seed):
    seed = tf.constant(seed, tf.int32)
  if seed.dtype not in (tf.int32, tf.int64) or seed.shape != [2]:
    raise ValueError('seed must be None or a stateless seed (shape [2], '
                     f'int32 or int64), got {seed!r}')
  return seed


class _Draws:
  """A OneOf's random draws, stateless under `seed` (`independent_sample`)."""

  def __init__(self, seed: Optional[tf.Tensor]):
    fold_in = tf.random.experimental.stateless_fold_in
    self._seeds = None if seed is None else {
        kind: fold_in(seed, tf.constant(kind, seed.dtype))
        for kind in (_CATEGORICAL_DRAW, _WARMUP_DRAW)}

  def _seed(self, kind: int, path: str) -> tf.Tensor:
    seed = self._seeds[kind]
    return tf.random.experimental.stateless_fold_in(
        seed, tf.constant(initializers.name_key(path), seed.dtype))

  def categorical(self, logits: tf.Tensor, path: str) -> tf.Tensor:
    """Scalar int32 index drawn from softmax(logits) (rank-1 logits)."""
    if self._seeds is None:
      return tf.random.categorical(logits[tf.newaxis], 1, dtype=tf.int32)[0, 0]
    return tf.random.stateless_categorical(
        logits[tf.newaxis], 1, self._seed(_CATEGORICAL_DRAW, path),
        dtype=tf.int32)[0, 0]

  def uniform(self, path: str) -> tf.Tensor:
    """Scalar float32 u ~ U(0, 1), the warm-up draw."""
    if self._seeds is None:
      return tf.random.uniform([])
    return tf.random.stateless_uniform([], self._seed(_WARMUP_DRAW, path))


def _replace_with_probability(mask: tf.Tensor, log_prob: tf.Tensor,
                              probability: Probability,
                              replacement: tf.Tensor, uniform
                              ) -> Tuple[tf.Tensor, tf.Tensor]:
  """If `uniform()` < p: (replacement, log(p)); else (mask, log(1-p) +
  log_prob); p None leaves both and draws nothing."""
  if probability is None:
    return mask, log_prob
  probability = tf.convert_to_tensor(probability, tf.float32)
  replace = tf.less(uniform(), probability)
  return (tf.where(replace, replacement, mask),
          tf.where(replace, tf.math.log(probability),
                   tf.math.log(1.0 - probability) + log_prob))


def _draw_mask(oneof: schema.OneOf, path: str, logits: tf.Tensor,
               log_softmax: tf.Tensor, draws: _Draws,
               increase_ops_probability: Probability,
               increase_filters_probability: Probability
               ) -> Tuple[tf.Tensor, tf.Tensor]:
  """(rank-1 float32 mask, its log-prob) drawn from softmax(logits), warm-up
  rules applied."""
  n = len(oneof.choices)
  mask = tf.ones([1], tf.float32) if n == 1 else tf.one_hot(
      draws.categorical(logits, path), n, dtype=tf.float32)
  log_prob = tf.reduce_sum(mask * log_softmax)
  uniform = functools.partial(draws.uniform, path)
  if oneof.tag == schema.OP_TAG:
    mask, log_prob = _replace_with_probability(
        mask, log_prob, increase_ops_probability,
        tf.fill([n], 1.0 / n), uniform)
  elif oneof.tag == schema.FILTERS_TAG:
    # The first largest choice (ints, or FilterMultipliers by their `<`).
    largest = max(range(n), key=lambda i: oneof.choices[i])
    mask, log_prob = _replace_with_probability(
        mask, log_prob, increase_filters_probability,
        tf.one_hot(largest, n, dtype=tf.float32), uniform)
  return mask, log_prob


def uniform_sample(spec: Any,
                   increase_ops_probability: Probability = None,
                   increase_filters_probability: Probability = None,
                   *,
                   seed: Seed = None) -> Any:
  """Samples an architecture uniformly: every choice of every OneOf 1/n.

  The draws of `independent_sample` with all logits 0, so under the same seed
  the two draw the same masks while the controller is untrained. Arguments,
  the masked copy of `spec` returned and ValueError as `independent_sample`.
  """
  increase_ops_probability = _check_probability(increase_ops_probability,
                                                'increase_ops_probability')
  increase_filters_probability = _check_probability(
      increase_filters_probability, 'increase_filters_probability')
  draws = _Draws(_check_seed(seed))

  def draw(path: str, oneof: schema.OneOf) -> tf.Tensor:
    logits = tf.zeros([len(oneof.choices)], tf.float32)
    return _draw_mask(oneof, path, logits, tf.nn.log_softmax(logits), draws,
                      increase_ops_probability, increase_filters_probability)[0]

  return schema.with_masks(spec, draw)


# No tensor-dependent Python control flow here: autograph has nothing to
# convert, and skipping it traces a big space faster (bench/DECISIONS.md,
# '`independent_sample` without autograph').
@tf.autograph.experimental.do_not_convert
def independent_sample(
    spec: Any,
    increase_ops_probability: Probability = None,
    increase_filters_probability: Probability = None,
    temperature: Union[float, tf.Tensor] = 1.0,
    *,
    controller: Optional[Controller] = None,
    seed: Seed = None,
) -> Tuple[Any, DistInfo]:
  """Samples an architecture, one independent categorical per OneOf.

  Warm-up, per OneOf with its own u ~ U(0, 1): if u < p the mask becomes the
  uniform vector (op tag, p = `increase_ops_probability`) or the one-hot of
  the largest choice (filters tag, `increase_filters_probability`), log-prob
  log(p); else the sample stays, log-prob log(1 - p) + log pi(a). A OneOf
  under a choice with |mask| <= `ACTIVE_THRESHOLD` is inactive: only active
  ones count (the original's `hierarchical`).

  Args:
    temperature: positive scalar; the distribution is softmax(logits / T).
    controller: whose logits to use; None makes one (pass one made outside
      a `tf.function`).
    seed: None (stateful draws), or a [2] int32/int64 tensor or two ints;
      each draw is keyed by its kind and the OneOf's path, so other OneOfs
      do not shift it.

  Returns:
    (copy of `spec` whose OneOfs carry a rank-1 float32 `mask`, `DistInfo`).

  Raises:
    ValueError: a Python temperature <= 0 or probability outside [0, 1], a
      malformed seed, or a `controller` built for another spec.
  """
  if not tf.is_tensor(temperature) and not temperature > 0:
    raise ValueError(f'temperature must be > 0, got {temperature!r}')
  increase_ops_probability = _check_probability(increase_ops_probability,
                                                'increase_ops_probability')
  increase_filters_probability = _check_probability(
      increase_filters_probability, 'increase_filters_probability')
  seed = _check_seed(seed)
  if controller is None:
    controller = Controller(spec)
  else:
    controller.check_compatible(spec)

  temperature = tf.convert_to_tensor(temperature, tf.float32)
  logits_by_path = collections.OrderedDict()
  logits_by_tag = collections.OrderedDict()
  tag_counts = collections.Counter()
  masks, log_probs, entropies = {}, {}, {}
  variables = controller.logits_by_path
  draws = _Draws(seed)

  def draw(path: str, oneof: schema.OneOf) -> tf.Tensor:
    logits = variables[path] / temperature
    logits_by_path[path] = logits
    logits_by_tag[f'{oneof.tag}_{tag_counts[oneof.tag]}'] = logits
    tag_counts[oneof.tag] += 1

    log_softmax = tf.nn.log_softmax(logits)
    entropies[path] = -tf.reduce_sum(
        tf.math.multiply_no_nan(log_softmax, tf.nn.softmax(logits)))
    masks[path], log_probs[path] = _draw_mask(
        oneof, path, logits, log_softmax, draws, increase_ops_probability,
        increase_filters_probability)
    return masks[path]

  sampled = schema.with_masks(spec, draw)

  zero = tf.constant(0.0, tf.float32)
  sample_log_prob, entropy = zero, zero
  for path in controller.paths:
    enclosing = [(parent, i) for parent, i in schema.enclosing_choices(path)
                 if parent in masks]
    if not enclosing:
      sample_log_prob += log_probs[path]
      entropy += entropies[path]
      continue
    active = tf.reduce_all(tf.stack([
        tf.greater(tf.abs(masks[parent][i]), ACTIVE_THRESHOLD)
        for parent, i in enclosing]))
    sample_log_prob += tf.where(active, log_probs[path], zero)
    entropy += tf.where(active, entropies[path], zero)

  return sampled, DistInfo(sample_log_prob=sample_log_prob, entropy=entropy,
                           logits_by_path=logits_by_path,
                           logits_by_tag=logits_by_tag, controller=controller)


def argmax_indices(logits_by_path: Mapping[str, Any], spec: Any) -> List[int]:
  """The first argmax of each OneOf's concrete logits, in `spec`'s visit
  order; ValueError for a OneOf of `spec` without logits or with logits of
  the wrong length."""
  indices = []
  for path, oneof in schema.flatten_with_paths(spec):
    n = len(oneof.choices)
    if path not in logits_by_path:
      raise ValueError(f'argmax_indices: no logits for the OneOf at {path!r}')
    values = np.asarray(logits_by_path[path]).reshape(-1)
    if values.shape[0] != n:
      raise ValueError(f'argmax_indices: logits at {path!r} have '
                       f'{values.shape[0]} entries; the OneOf has {n} choices')
    indices.append(int(np.argmax(values)))
  return indices
