"""DepthProperty, as abstract_nas's `abstract/depth.py`: the depth from input X
to output Y is the most linearity flips (linear <-> nonlinear) along any path
from X's producer to Y. A graph input counts as nonlinear, activations and
softmax (`ir.NONLINEAR_TYPES`) too; IDENTITY passes on what it receives and
NONE cuts every path."""

from __future__ import annotations

import copy
import random
from typing import Dict, Optional

import numpy as np

from tunas_tf.graph import ir
from tunas_tf.graph.properties import base

DepthMap = Dict[str, Dict[str, int]]
_LINEAR, _NONLINEAR = 'L', 'N'


def _linearity(op_type: ir.OpType) -> str:
  return _NONLINEAR if ir.is_nonlinear(op_type) else _LINEAR


def _producer_linearity(graph: ir.Graph, tensor: str) -> str:
  """Linearity of the op producing `tensor` (a graph input is nonlinear)."""
  op = graph.producer(tensor)
  while op is not None and op.type == ir.OpType.IDENTITY:
    op = graph.producer(op.input_names[0])
  if op is None or op.type == ir.OpType.NONE:
    return _NONLINEAR
  return _linearity(op.type)


def depth_map(subgraph_model) -> DepthMap:
  """`{input tensor: {output tensor: depth}}` (canonical, one entry per
  connected pair, rewired old output names added as aliases) of a subgraph
  model's structure."""
  sm = subgraph_model
  # state[tensor][(input, linearity of the last op)] = max flips so far.
  state: Dict[str, Dict[tuple, int]] = {
      t: {(t, _producer_linearity(sm.graph, t)): 0} for t in sm.input_names}
  for op in sm.subg_graph.ops:
    incoming: Dict[tuple, int] = {}
    for t in op.input_names:
      for key, d in state.get(t, {}).items():
        incoming[key] = max(incoming.get(key, -1), d)
    out: Dict[tuple, int] = {}
    if op.type == ir.OpType.IDENTITY:
      out = incoming
    elif op.type != ir.OpType.NONE:
      lin = _linearity(op.type)
      for (inp, prev), d in incoming.items():
        key = (inp, lin)
        out[key] = max(out.get(key, -1), d + (prev != lin))
    for t in op.output_names:
      state[t] = out
  result: DepthMap = {}
  for out_name in sm.output_names:
    for (inp, _), d in state.get(out_name, {}).items():
      row = result.setdefault(inp, {})
      row[out_name] = max(row.get(out_name, -1), d)
  for new, old in base.canonical_alias_pairs(sm):
    for row in result.values():
      if new in row:
        row[old] = row[new]
  return result


class DepthProperty(base.AbstractProperty):
  """The depth map of a subgraph; `delta_max` the largest change `mutate`
  makes to one depth."""

  def __init__(self, depth_map: Optional[DepthMap] = None,  # pylint: disable=redefined-outer-name
               p: float = 0.0,
               delta_max: int = 2, safety_only: bool = False):
    super().__init__(p=p, safety_only=safety_only)
    if delta_max < 0:
      raise ValueError(f'DepthProperty: delta_max must be >= 0, got '
                       f'{delta_max}')
    self.depth_map: DepthMap = copy.deepcopy(depth_map or {})
    self.delta_max = int(delta_max)

  def infer(self, subgraph_model, abstract: bool = True) -> 'DepthProperty':
    """Infers the depth map from structure (`abstract` is ignored)."""
    del abstract
    return DepthProperty(depth_map(subgraph_model), p=self.p,
                         delta_max=self.delta_max,
                         safety_only=self.safety_only)

  def mutate(self, rng: Optional[random.Random] = None) -> 'DepthProperty':
    """A copy with each depth moved by sign * step, max 0: step the length of a
    Bernoulli(p) success streak capped at `delta_max`, the sign +-1 evenly."""
    rng = rng or random
    new = copy.deepcopy(self)
    for row in new.depth_map.values():
      for out_name, depth in row.items():
        step = 0
        while step < self.delta_max and rng.random() < self.p:
          step += 1
        sign = 1 if rng.random() < 0.5 else -1
        row[out_name] = max(0, depth + sign * step)
    return new

  def distance_from(self, other: 'DepthProperty') -> float:
    """Mean over self's (input, output) entries of 1 where other lacks it, else
    max(0, self - other) / max(self, 1) (deeper is fine); 0 when `safety_only`
    or self is empty."""
    terms = []
    for inp, row in self.depth_map.items():
      for out_name, depth in row.items():
        theirs = other.depth_map.get(inp, {}).get(out_name)
        if theirs is None:
          terms.append(1.0)
        else:
          terms.append(max(0, depth - theirs) / max(depth, 1))
    if self.safety_only or not terms:
      return 0.0
    return float(np.mean(terms))
