"""ShapeProperty: the shapes at a subgraph's boundary (as in abstract_nas)."""

from __future__ import annotations

import copy
import random
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from tunas_tf.graph import ir
from tunas_tf.graph import model as model_lib
from tunas_tf.graph.properties import base

Shapes = Dict[str, Tuple[Optional[int], ...]]


def tensor_shapes(subgraph_model, graph: ir.Graph, input_shapes: Shapes,
                  output_names, abstract: bool,
                  graph_inputs: Optional[Mapping[str, Any]] = None) -> Shapes:
  """{canonical tensor name: shape} of every tensor `output_names` (None:
  all) needs in `graph`: traced without weights when `abstract`, else run on
  `graph_inputs` by the subgraph model's state."""
  if abstract:
    return model_lib.abstract_shapes(graph, subgraph_model.constants,
                                     input_shapes, output_names)
  state = subgraph_model.state
  if state is None:
    raise ValueError('Concrete shape inference needs a state (a built Model)')
  values = state.call_all(graph_inputs, output_names=output_names)
  return {k: tuple(v.shape.as_list()) for k, v in values.items()}


class ShapeProperty(base.AbstractProperty):
  """Input and output shapes of a subgraph.

  `input_shapes`: canonical boundary tensors (with a spec) or the graph's
  input names. `output_shapes`: the new tensors plus their rewired old names
  (with a spec) or the graph's output names as written. `p`: the chance that
  `mutate` drops each output constraint.
  """

  def __init__(self, input_shapes: Optional[Shapes] = None,
               output_shapes: Optional[Shapes] = None, p: float = 0.0,
               safety_only: bool = False,
               input_values: Optional[Mapping[str, Any]] = None):
    super().__init__(p=p, safety_only=safety_only, input_values=input_values)
    self.input_shapes: Shapes = dict(input_shapes or {})
    self.output_shapes: Shapes = dict(output_shapes or {})

  def infer(self, subgraph_model, max_size: int = 0,
            intermediates: bool = False, abstract: bool = True
            ) -> 'ShapeProperty':
    """The boundary shapes of a `rewrite.SubgraphModel`; `intermediates` adds
    every op output of the cut graph (`"op:k"`); `abstract` traces without
    weights (the same shapes). RuntimeError naming `max_size` for a larger
    tensor (when > 0), or "Malformed graph" when it cannot be traced."""
    sm = subgraph_model
    graph_inputs = self.graph_inputs(sm)
    if not graph_inputs:
      raise ValueError('Shape inference needs input values (SubgraphModel '
                       'inputs or input_values)')
    in_shapes = {name: tuple(np.shape(v)) for name, v in graph_inputs.items()}
    try:
      if sm.has_spec:
        shapes = tensor_shapes(sm, sm.graph, in_shapes, sm.input_names,
                               abstract, graph_inputs)
        input_shapes = {n: shapes[n] for n in sm.input_names}
      else:
        input_shapes = dict(in_shapes)
      wanted = None if intermediates else sm.output_names
      graph = sm.subg_outputs_graph
      shapes = tensor_shapes(sm, graph, in_shapes, wanted, abstract,
                             graph_inputs)
    except Exception as e:  # pylint: disable=broad-except
      raise RuntimeError(f'Malformed graph ({e})') from e
    if max_size > 0:
      for name, shape in shapes.items():
        size = int(np.prod([d or 1 for d in shape]))
        if size > max_size:
          raise RuntimeError(f'Tensor {name!r} of shape {shape} has {size} '
                             f'elements, more than max_size={max_size}')
    written = {ir.canonicalize_tensor_name(o): o for o in sm.original_outputs}
    if intermediates:
      names = [t for op in graph.ops for t in op.output_names]
    else:
      names = list(sm.output_names)
    output_shapes = {}
    for name in names:
      key = name if sm.has_spec else written.get(name, name)
      output_shapes[key] = shapes[name]
    for new, old in base.canonical_alias_pairs(sm):
      output_shapes[old] = shapes[new]
    return ShapeProperty(input_shapes, output_shapes, p=self.p,
                         safety_only=self.safety_only,
                         input_values=self.input_values)

  def mutate(self, rng: Optional[random.Random] = None) -> 'ShapeProperty':
    """A copy that drops each output-shape constraint with probability p."""
    rng = rng or random
    new = copy.deepcopy(self)
    new.output_shapes = {k: v for k, v in self.output_shapes.items()
                         if rng.random() >= self.p}
    return new

  def distance_from(self, other: 'ShapeProperty') -> float:
    """Mean fraction of mismatched dims over self's outputs, in [0, 1] (0 when
    `safety_only`). ValueError (unsatisfied) if the inputs differ, an output is
    missing, a rank or batch differs, or other's spatial dims are not one
    integer factor from self's."""
    if self.input_shapes != other.input_shapes:
      raise ValueError(f'Input shapes differ: {self.input_shapes} vs '
                       f'{other.input_shapes}')
    fractions = []
    for name, shape in self.output_shapes.items():
      if name not in other.output_shapes:
        raise ValueError(f'Output {name!r} is missing')
      theirs = other.output_shapes[name]
      if len(shape) != len(theirs):
        raise ValueError(f'Output {name!r}: rank {len(theirs)} != '
                         f'{len(shape)}')
      if shape and shape[0] != theirs[0]:
        raise ValueError(f'Output {name!r}: batch {theirs[0]} != {shape[0]}')
      spatial, spatial_other = shape[1:-1], theirs[1:-1]
      if spatial and any(d != 1 for d in spatial):
        if not _common_factor(spatial, spatial_other):
          raise ValueError(f'Output {name!r}: spatial {spatial_other} is not a'
                           f' multiple of {spatial}')
      fractions.append(sum(a != b for a, b in zip(shape, theirs)) /
                       max(1, len(shape)))
    if self.safety_only or not fractions:
      return 0.0
    return float(np.mean(fractions))


def _common_factor(mine, theirs) -> bool:
  """Whether theirs = f * mine (or mine = f * theirs) for one integer f."""
  if any(not a or not b for a, b in zip(mine, theirs)):
    return tuple(mine) == tuple(theirs)
  for big, small in ((theirs, mine), (mine, theirs)):
    if all(b % s == 0 for b, s in zip(big, small)):
      if len({b // s for b, s in zip(big, small)}) == 1:
        return True
  return False
