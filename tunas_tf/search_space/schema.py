"""The search-space schema: `OneOf` nodes and traversal of nested specs.

One visit order defines the `indices` vector: a OneOf's choices before the
OneOf, dataclass fields in declaration order, sequences in order, dict keys
sorted. A path joins field names, indices, keys and `choices/<i>` with '/'
(`blocks/2/layers/1/layer/choices/0/kernel_size`; the root's is '').
"""

from __future__ import annotations

import collections.abc
import dataclasses
import operator
from typing import Any, Callable, List, Mapping, Sequence, Tuple, Union

OP_TAG = 'op_indices'
FILTERS_TAG = 'filters_indices'
TAGS = (OP_TAG, FILTERS_TAG)


@dataclasses.dataclass(frozen=True)
class OneOf:
  """A choice among `choices` (non-empty; lists stored as tuples).

  `tag` (`OP_TAG` or `FILTERS_TAG`) decides only the controller's warm-up rule
  and the `logits_by_tag` names. `mask`: an optional rank-1 float Tensor, one
  entry per choice, attached by the controller; not compared, hashed or
  serialised.
  """
  choices: Tuple[Any, ...]
  tag: str
  mask: Any = dataclasses.field(default=None, compare=False, repr=False)

  def __post_init__(self):
    object.__setattr__(self, 'choices', tuple(self.choices))
    if not self.choices:
      raise ValueError('OneOf needs at least one choice, got none')
    if self.tag not in TAGS:
      raise ValueError(f'Unknown OneOf tag {self.tag!r}; expected one of {TAGS}')


def _join(path: str, key: Any) -> str:
  return f'{path}/{key}' if path else str(key)


def _map(fn: Callable[[str, OneOf], Any], value: Any, path: str) -> Any:
  """Rebuilds `value`, replacing each OneOf (children first) by fn(path, .)."""
  if isinstance(value, OneOf):
    choices = tuple(
        _map(fn, choice, _join(path, f'choices/{i}'))
        for i, choice in enumerate(value.choices))
    return fn(path, OneOf(choices, value.tag, value.mask))
  if dataclasses.is_dataclass(value) and not isinstance(value, type):
    changes = {
        field.name: _map(fn, getattr(value, field.name),
                         _join(path, field.name))
        for field in dataclasses.fields(value)
    }
    return dataclasses.replace(value, **changes)
  if isinstance(value, list):
    return [_map(fn, v, _join(path, i)) for i, v in enumerate(value)]
  if isinstance(value, tuple):
    return tuple(_map(fn, v, _join(path, i)) for i, v in enumerate(value))
  if isinstance(value, dict):
    # Sorted keys define the visit order; the result keeps the same keys.
    mapped = {k: _map(fn, value[k], _join(path, k)) for k in sorted(value)}
    return {k: mapped[k] for k in value}
  return value


def map_oneofs_with_paths(fn: Callable[[str, OneOf], Any], spec: Any) -> Any:
  """A copy of `spec` with each OneOf `o` at path `p` replaced by fn(p, o),
  children first."""
  return _map(fn, spec, '')


def with_masks(spec: Any,
               masks: Union[Mapping[str, Any], Sequence[Any],
                            Callable[[str, OneOf], Any]]) -> Any:
  """A copy of `spec` whose OneOfs carry `masks` (opaque values): a mapping
  {path: mask} covering every OneOf, a sequence in visit order, or a callable
  (path, OneOf) -> mask. ValueError for a missing path or a wrong count."""
  if callable(masks):
    mask_at = masks
  elif isinstance(masks, collections.abc.Mapping):
    def mask_at(path, _):
      if path not in masks:
        raise ValueError(f'with_masks: no mask for the OneOf at {path!r}')
      return masks[path]
  else:
    values = list(masks)
    expected = len(flatten(spec))
    if len(values) != expected:
      raise ValueError(f'with_masks: expected {expected} masks (one per '
                       f'OneOf), got {len(values)}')
    position = iter(values)

    def mask_at(path, oneof):
      del path, oneof
      return next(position)

  return _map(lambda path, oneof: OneOf(oneof.choices, oneof.tag,
                                        mask_at(path, oneof)), spec, '')


def flatten_with_paths(spec: Any) -> List[Tuple[str, OneOf]]:
  """[(path, OneOf)] of every OneOf of `spec` as found, in visit order."""
  found = []

  def visit(value, path):
    if isinstance(value, OneOf):
      for i, choice in enumerate(value.choices):
        visit(choice, _join(path, f'choices/{i}'))
      found.append((path, value))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
      for field in dataclasses.fields(value):
        visit(getattr(value, field.name), _join(path, field.name))
    elif isinstance(value, (list, tuple)):
      for i, v in enumerate(value):
        visit(v, _join(path, i))
    elif isinstance(value, dict):
      for k in sorted(value):
        visit(value[k], _join(path, k))

  visit(spec, '')
  return found


def enclosing_choices(path: str) -> List[Tuple[str, int]]:
  """(path, choice index) of every `choices/<i>` step on the way to `path`."""
  tokens = path.split('/') if path else []
  return [('/'.join(tokens[:k]), int(tokens[k + 1]))
          for k in range(len(tokens) - 1)
          if tokens[k] == 'choices' and tokens[k + 1].isdigit()]


def flatten(spec: Any) -> List[OneOf]:
  """The OneOfs of `spec` in visit order."""
  return [oneof for _, oneof in flatten_with_paths(spec)]


def parse_indices(indices: Union[str, Sequence[int]]) -> List[int]:
  """A colon-separated string ('0:2:1'; '' is none) or a list of ints as a
  list of Python ints; ValueError for a token not a non-negative integer."""
  if isinstance(indices, str):
    text = indices.strip()
    if not text:
      return []
    tokens = text.split(':')
  else:
    tokens = list(indices)
    if all(type(t) is int and t >= 0 for t in tokens):
      return tokens
  parsed = []
  for position, token in enumerate(tokens):
    if isinstance(token, bool):
      raise ValueError(f'Index {position} is {token!r}, not an integer')
    try:
      value = int(str(token).strip()) if isinstance(token, str) else token
    except ValueError:
      raise ValueError(
          f'Index {position} is {token!r}, not a non-negative integer') from None
    if not isinstance(value, int) and hasattr(value, '__index__'):
      value = int(value)  # NumPy integers.
    if not isinstance(value, int) or value < 0:
      raise ValueError(
          f'Index {position} is {token!r}, not a non-negative integer')
    parsed.append(value)
  return parsed


def format_indices(indices: Union[str, Sequence[int]]) -> str:
  """The canonical '0:2:1' form, the only maker of index strings;
  ValueError as `parse_indices`."""
  return ':'.join(str(i) for i in parse_indices(indices))


def check_indices(spec: Any, indices: Union[str, Sequence[int]]) -> List[int]:
  """The indices as ints, one valid choice per OneOf of `spec`; ValueError as
  `parse_indices` or `prune`."""
  return check_indices_list(spec, [indices])[0]


def check_indices_list(
    spec: Any, indices_list: Sequence[Union[str, Sequence[int]]]
) -> List[List[int]]:
  """`check_indices` of many index lists, `spec` traversed once."""
  found = flatten_with_paths(spec)
  limits = [len(oneof.choices) for _, oneof in found]
  parsed = []
  for indices in indices_list:
    values = parse_indices(indices)
    if len(values) != len(limits) or any(map(operator.ge, values, limits)):
      _check_choices(values, found)
    parsed.append(values)
  return parsed


def _check_choices(values: Sequence[int],
                   found: Sequence[Tuple[str, OneOf]]) -> None:
  """`prune`'s checks of parsed indices against `flatten_with_paths(spec)`:
  the count, then each index in visit order (the first out of range)."""
  if len(values) != len(found):
    raise ValueError(
        f'prune: expected {len(found)} indices (one per OneOf), got '
        f'{len(values)}')
  for i, (index, (path, oneof)) in enumerate(zip(values, found)):
    if index >= len(oneof.choices):
      raise ValueError(
          f'prune: index {index} at position {i} (path {path!r}) is out of '
          f'range; allowed 0..{len(oneof.choices) - 1}')


def prune(spec: Any, indices: Union[str, Sequence[int]]) -> Any:
  """A fixed architecture: each OneOf replaced by its chosen (pruned) choice.

  `indices` (list or '0:2:1' string) give one index per OneOf in visit order;
  choices under an unpicked alternative still consume theirs, as in the
  original. ValueError for a wrong count or an index out of range (naming the
  path and range).
  """
  values = check_indices(spec, indices)
  position = iter(values)

  def choose(_, oneof):
    return oneof.choices[next(position)]

  return map_oneofs_with_paths(choose, spec)


def num_choices(spec: Any) -> List[int]:
  """The choice count of every OneOf of `spec`, in visit order."""
  return [len(oneof.choices) for oneof in flatten(spec)]


def extreme_indices(spec: Any, largest: bool) -> List[int]:
  """Indices of the cheapest (or dearest, `largest`) architecture by rule:
  a `ZeroSpec` (or the other choice), the smallest (largest) filters, the
  first (last) choice of any other op decision."""
  indices = []
  for oneof in flatten(spec):
    names = [type(c).__name__ for c in oneof.choices]
    n = len(oneof.choices)
    if 'ZeroSpec' in names and n > 1:
      zero = names.index('ZeroSpec')
      index = next(i for i in range(n) if i != zero) if largest else zero
    elif oneof.tag == FILTERS_TAG:
      order = sorted(range(n), key=lambda i: oneof.choices[i])
      index = order[-1] if largest else order[0]
    else:
      index = n - 1 if largest else 0
    indices.append(index)
  return indices
