"""The common interface of abstract properties (as in abstract_nas).

A property summarizes a subgraph (its shapes, depth or linear pairings).
`infer` computes it on a `rewrite.SubgraphModel`, `mutate` returns a
randomly relaxed copy, and `distance_from(other)` says how much stricter
`self` is than `other` (<= 0 means `other` satisfies `self`).
"""

from __future__ import annotations

import abc
import random
from typing import Any, Mapping, Optional


class AbstractProperty(abc.ABC):
  """Base class of the graph properties.

  Args:
    p: mutation probability in [0, 1].
    safety_only: `distance_from` returns 0 once its feasibility checks pass.
    input_values: graph input values overriding the subgraph model's
      `inputs` during inference (a dict from input name to array).

  Raises:
    ValueError: if `p` is outside [0, 1].
  """

  def __init__(self, p: float = 0.0, safety_only: bool = False,
               input_values: Optional[Mapping[str, Any]] = None):
    if not 0.0 <= p <= 1.0:
      raise ValueError(f'{type(self).__name__}: p must be in [0, 1], got {p}')
    self.p = float(p)
    self.safety_only = bool(safety_only)
    self.input_values = input_values

  @abc.abstractmethod
  def infer(self, subgraph_model, abstract: bool = True,
            **kwargs) -> 'AbstractProperty':
    """Returns a new property of the same kind, inferred on the subgraph."""

  @abc.abstractmethod
  def mutate(self, rng: Optional[random.Random] = None) -> 'AbstractProperty':
    """Returns a mutated copy (`rng` defaults to the `random` module)."""

  @abc.abstractmethod
  def distance_from(self, other: 'AbstractProperty') -> float:
    """How much stricter `self` is than `other` (0 when satisfied).

    Raises:
      ValueError: when the distance is undefined (then unsatisfied).
    """

  def is_satisfied_by(self, other: 'AbstractProperty') -> bool:
    """Whether `other` satisfies `self` (an undefined distance is False)."""
    try:
      return self.distance_from(other) <= 0
    except ValueError:
      return False

  def verify(self, subgraph_model, abstract: bool = True) -> bool:
    """Whether the property inferred on a candidate satisfies `self`.

    Any exception during inference counts as not satisfied.
    """
    try:
      other = self.infer(subgraph_model, abstract=abstract)
    except Exception:  # pylint: disable=broad-except
      return False
    return self.is_satisfied_by(other)


def canonical_alias_pairs(subgraph_model):
  """(new tensor, old tensor) pairs of a subgraph model's rewired outputs."""
  return [(new, old) for new, olds in subgraph_model.aliases.items()
          for old in olds]
