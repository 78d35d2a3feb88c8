"""The common interface of abstract properties (as in abstract_nas): `infer`
on a `rewrite.SubgraphModel`, `mutate` a relaxed copy, `distance_from(other)`
how much stricter `self` is (<= 0: `other` satisfies it)."""

from __future__ import annotations

import abc
import random
from typing import Any, Mapping, Optional


class AbstractProperty(abc.ABC):
  """Base class of the graph properties: `p` the mutation probability in
  [0, 1] (ValueError outside), `safety_only` makes `distance_from` 0 once its
  feasibility checks pass, `input_values` override the subgraph's `inputs`."""

  def __init__(self, p: float = 0.0, safety_only: bool = False,
               input_values: Optional[Mapping[str, Any]] = None):
    if not 0.0 <= p <= 1.0:
      raise ValueError(f'{type(self).__name__}: p must be in [0, 1], got {p}')
    self.p = float(p)
    self.safety_only = bool(safety_only)
    self.input_values = input_values

  def graph_inputs(self, subgraph_model) -> Mapping[str, Any]:
    """`input_values`, else the subgraph model's `inputs`."""
    return (self.input_values if self.input_values is not None
            else subgraph_model.inputs)

  @abc.abstractmethod
  def infer(self, subgraph_model, abstract: bool = True,
            **kwargs) -> 'AbstractProperty':
    """Returns a new property of the same kind, inferred on the subgraph."""

  @abc.abstractmethod
  def mutate(self, rng: Optional[random.Random] = None) -> 'AbstractProperty':
    """Returns a mutated copy (`rng` defaults to the `random` module)."""

  @abc.abstractmethod
  def distance_from(self, other: 'AbstractProperty') -> float:
    """How much stricter `self` is than `other` (0 when satisfied);
    ValueError when undefined (unsatisfied)."""

  def is_satisfied_by(self, other: 'AbstractProperty') -> bool:
    """Whether `other` satisfies `self` (an undefined distance is False)."""
    try:
      return self.distance_from(other) <= 0
    except ValueError:
      return False

  def verify(self, subgraph_model, abstract: bool = True) -> bool:
    """Whether the property inferred on a candidate satisfies `self` (any
    exception while inferring: no)."""
    try:
      other = self.infer(subgraph_model, abstract=abstract)
    except Exception:  # pylint: disable=broad-except
      return False
    return self.is_satisfied_by(other)


def canonical_alias_pairs(subgraph_model):
  """(new tensor, old tensor) pairs of a subgraph model's rewired outputs."""
  return [(new, old) for new, olds in subgraph_model.aliases.items()
          for old in olds]
