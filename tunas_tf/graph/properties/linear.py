"""LinopProperty: which input dims mix into which output dims.

For input X (rank m) and output Y (rank n) the pairing is an [m, n] matrix:
dim i pairs with dim j when every index of X along i influences Y's line
along j through its centre; ALL_TO_ONE, MANY_TO_ONE or ONE_TO_ONE by how
many indices of i the centre depends on, else NONE (a 3x3 SAME conv: batch
ONE_TO_ONE, H->H MANY_TO_ONE, C->every dim ALL_TO_ONE). Concrete inference
differentiates the subgraph; abstract (the default) composes op pairings.
"""

from __future__ import annotations

import copy
import enum
import random
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from tunas_tf.graph import ir
from tunas_tf.graph import model as model_lib
from tunas_tf.graph import symbolic
from tunas_tf.graph.properties import base
from tunas_tf.graph.properties import shape as shape_lib


class PairingMapping(enum.IntEnum):
  """Strength of a pairing cell (ordered: a larger value is stronger)."""
  NONE = 0
  ONE_TO_ONE = 1
  MANY_TO_ONE = 2
  ALL_TO_ONE = 3


class Pairing:
  """A pairing matrix: int array [input rank, output rank] of `Mapping` values
  (from anything `np.asarray` accepts)."""

  Mapping = PairingMapping

  def __init__(self, mappings: Any):
    self.mappings = np.asarray(mappings, dtype=np.int64)
    if self.mappings.ndim != 2:
      raise ValueError(f'Pairing needs a 2-D matrix, got shape '
                       f'{self.mappings.shape}')

  @classmethod
  def identity(cls, rank: int) -> 'Pairing':
    """The pairing of a tensor with itself: ONE_TO_ONE on the diagonal."""
    return cls(np.eye(rank, dtype=np.int64) * int(PairingMapping.ONE_TO_ONE))

  @property
  def shape(self):
    """(input rank, output rank)."""
    return self.mappings.shape

  def join(self, other: 'Pairing') -> 'Pairing':
    """Elementwise max of two pairings; ValueError for different shapes."""
    if self.shape != other.shape:
      raise ValueError(f'Cannot join pairings of shapes {self.shape} and '
                       f'{other.shape}')
    return Pairing(np.maximum(self.mappings, other.mappings))

  def compose(self, other: 'Pairing') -> 'Pairing':
    """The pairing X->Z of self (X->Y) and other (Y->Z); ValueError when self's
    output rank is not other's input rank."""
    a, b = self.mappings, other.mappings
    if a.shape[1] != b.shape[0]:
      raise ValueError(f'Cannot compose pairings of shapes {a.shape} and '
                       f'{b.shape}')
    out = np.zeros((a.shape[0], b.shape[1]), dtype=np.int64)
    for i in range(a.shape[0]):
      for k in range(b.shape[1]):
        both = (a[i] > 0) & (b[:, k] > 0)
        if not both.any():
          continue
        if (a[i][both] == PairingMapping.ALL_TO_ONE).any():
          out[i, k] = PairingMapping.ALL_TO_ONE
        else:
          out[i, k] = max(a[i][both].max(), b[:, k][both].max())
    return Pairing(out)

  def __eq__(self, other: Any) -> bool:
    return (isinstance(other, Pairing) and self.shape == other.shape and
            bool((self.mappings == other.mappings).all()))

  def __repr__(self) -> str:
    return f'Pairing({self.mappings.tolist()})'


def _strength(count: int, size: int) -> int:
  if count == 0:
    return PairingMapping.NONE
  if count == size and size > 1:
    return PairingMapping.ALL_TO_ONE
  return PairingMapping.MANY_TO_ONE if count > 1 else PairingMapping.ONE_TO_ONE


def _line_targets(y: tf.Tensor, rng: np.random.RandomState) -> List[tf.Tensor]:
  """Scalars: a random positive mix of each centre line of y (non-zero
  gradient wherever a line element has one, almost surely), then y's centre."""
  shape = y.shape.as_list()
  centre = [d // 2 for d in shape]
  targets = []
  for j, size in enumerate(shape):
    index = tuple(slice(None) if a == j else c for a, c in enumerate(centre))
    weights = tf.constant(rng.uniform(0.5, 1.5, size), y.dtype)
    targets.append(tf.reduce_sum(y[index] * weights))
  targets.append(y[tuple(centre)] if shape else y)
  return targets


def _pairing_from_grads(grads: Sequence[np.ndarray]) -> Pairing:
  """Builds a pairing from per-line gradients and the centre's gradient."""
  *lines, centre = [np.asarray(g) != 0 for g in grads]
  rank = centre.ndim
  out = np.zeros((rank, len(lines)), dtype=np.int64)
  for i in range(rank):
    others = tuple(a for a in range(rank) if a != i)
    strength = _strength(int(np.any(centre, axis=others).sum()),
                         centre.shape[i])
    for j, line in enumerate(lines):
      if np.all(np.any(line, axis=others)):
        out[i, j] = strength
    # Unpaired cells stay NONE.
  return Pairing(out)


def jacobian_pairings(fn: Callable[[Dict[str, tf.Tensor]],
                                   Dict[str, tf.Tensor]],
                      inputs: Mapping[str, Any], seed: int = 0
                      ) -> Dict[str, Dict[str, Pairing]]:
  """`{output name: {input name: Pairing}}` of every connected pair of `fn`
  (a dict of float tensors -> a dict of float tensors) at `inputs`."""
  rng = np.random.RandomState(seed)
  xs = {k: tf.convert_to_tensor(v, tf.float32) for k, v in inputs.items()}
  names = list(xs)
  with tf.GradientTape(persistent=True) as tape:
    for x in xs.values():
      tape.watch(x)
    ys = fn(dict(xs))
    targets = {k: _line_targets(y, rng) for k, y in ys.items()}
  result: Dict[str, Dict[str, Pairing]] = {}
  unconnected = tf.UnconnectedGradients.NONE
  for out_name, ts in targets.items():
    per_input = [tape.gradient(t, [xs[n] for n in names],
                               unconnected_gradients=unconnected)
                 for t in ts]
    for k, name in enumerate(names):
      grads = [g[k] for g in per_input]
      if all(g is None for g in grads):
        continue
      grads = [np.zeros(xs[name].shape, np.float32) if g is None
               else tf.convert_to_tensor(g).numpy() for g in grads]
      result.setdefault(out_name, {})[name] = _pairing_from_grads(grads)
  del tape
  return result


_OP_CACHE: Dict[tuple, List[Pairing]] = {}


def op_pairings(op: ir.Op, input_shapes: Sequence[Sequence[int]],
                constants: Optional[Mapping[str, Any]] = None,
                tensor_shapes: Optional[Mapping[str, tuple]] = None
                ) -> List[Pairing]:
  """One `Pairing` ([slot rank, output rank]; all NONE when unconnected) per
  input slot of `op` with its output 0: the op run alone on all-ones inputs
  of `input_shapes`, variables uniform in [0.5, 1.5]; cached by op type,
  resolved kwargs and shapes."""
  shapes = [tuple(int(d) for d in s) for s in input_shapes]
  kwargs = symbolic.resolve_kwargs(op, shapes, constants, tensor_shapes)
  key = (op.type, tuple(shapes), repr(sorted(kwargs.items())))
  if key not in _OP_CACHE:
    slots = [f'slot{k}' for k in range(len(shapes))]
    single = ir.new_graph(slots, [op.name], [ir.new_op(
        op.name, op.type, slots, op_kwargs=kwargs)])
    model = model_lib.Model(single, seed=0)
    model.build(dict(zip(slots, shapes)))
    rng = np.random.RandomState(0)
    model_lib.set_params(model, {
        name: {v: rng.uniform(0.5, 1.5, var.shape).astype(np.float32)
               for v, var in group.items()}
        for name, group in model.op_variables.items()})
    out, out_rank = f'{op.name}:0', []

    def fn(xs):
      y = model.call_all(xs)[out]
      out_rank.append(y.shape.rank)
      return {out: y}

    found = jacobian_pairings(
        fn, {s: np.ones(shape, np.float32) for s, shape in zip(slots, shapes)})
    out_rank = out_rank[0]
    _OP_CACHE[key] = [found.get(out, {}).get(
        s, Pairing(np.zeros((len(shape), out_rank), np.int64)))
                      for s, shape in zip(slots, shapes)]
  return [copy.deepcopy(p) for p in _OP_CACHE[key]]


PairingMap = Dict[str, Dict[str, Pairing]]


class LinopProperty(base.AbstractProperty):
  """The pairings `{output tensor: {input tensor: Pairing}}` of a subgraph:
  canonical boundary tensors with a spec (rewired old names as output
  aliases), the graph's names as written without. `p`: the chance `mutate`
  drops each entry."""

  def __init__(self, pairings: Optional[PairingMap] = None, p: float = 0.0,
               safety_only: bool = False,
               input_values: Optional[Mapping[str, Any]] = None):
    super().__init__(p=p, safety_only=safety_only, input_values=input_values)
    self.pairings: PairingMap = copy.deepcopy(pairings or {})

  def infer(self, subgraph_model, abstract: bool = True) -> 'LinopProperty':
    """The pairings of a `rewrite.SubgraphModel`: composing `op_pairings` along
    paths (joined by elementwise max) when `abstract`, else from Jacobians of
    its state (training=False)."""
    sm = subgraph_model
    graph_inputs = self.graph_inputs(sm)
    if abstract:
      found = self._infer_abstract(sm, graph_inputs)
    else:
      found = self._infer_concrete(sm, graph_inputs)
    if sm.has_spec:
      for new, old in base.canonical_alias_pairs(sm):
        if new in found:
          found[old] = copy.deepcopy(found[new])
    else:
      in_written = {ir.canonicalize_tensor_name(n): n
                    for n in sm.graph.input_names}
      out_written = {ir.canonicalize_tensor_name(n): n
                     for n in sm.original_outputs}
      found = {out_written.get(o, o): {in_written.get(i, i): pr
                                       for i, pr in row.items()}
               for o, row in found.items()}
    return LinopProperty(found, p=self.p, safety_only=self.safety_only,
                         input_values=self.input_values)

  def _infer_concrete(self, sm, graph_inputs) -> PairingMap:
    if sm.state is None:
      raise ValueError('Concrete LinopProperty inference needs a state')
    if sm.has_spec:
      subg_inputs = sm.get_subg_inputs(graph_inputs)
      fn = sm.execute_subg
    else:
      subg_inputs = {ir.canonicalize_tensor_name(k): v
                     for k, v in graph_inputs.items()}

      def fn(xs):
        values = sm.state.call_all(xs, output_names=sm.output_names)
        return {o: values[o] for o in sm.output_names}

    return jacobian_pairings(fn, subg_inputs)

  def _infer_abstract(self, sm, graph_inputs) -> PairingMap:
    in_shapes = {name: tuple(np.shape(v)) for name, v in graph_inputs.items()}
    if sm.has_spec:
      shapes = shape_lib.tensor_shapes(sm, sm.graph, in_shapes,
                                       sm.input_names, True)
      boundary = {n: shapes[n] for n in sm.input_names}
    else:
      boundary = {ir.canonicalize_tensor_name(k): v
                  for k, v in in_shapes.items()}
    shapes = model_lib.abstract_shapes(sm.subg_graph, sm.constants, boundary)
    state: Dict[str, Dict[str, Pairing]] = {
        n: {n: Pairing.identity(len(boundary[n]))} for n in sm.input_names}
    for op in sm.subg_graph.ops:
      out: Dict[str, Pairing] = {}
      if op.type == ir.OpType.IDENTITY:
        out = copy.deepcopy(state.get(op.input_names[0], {}))
      elif op.type != ir.OpType.NONE:
        slot_pairings = op_pairings(op, [shapes[t] for t in op.input_names],
                                    sm.constants, shapes)
        for t, op_pair in zip(op.input_names, slot_pairings):
          for inp, pr in state.get(t, {}).items():
            composed = pr.compose(op_pair)
            out[inp] = out[inp].join(composed) if inp in out else composed
      state[op.output_names[0]] = out
    return {o: copy.deepcopy(state.get(o, {})) for o in sm.output_names
            if state.get(o)}

  def mutate(self, rng: Optional[random.Random] = None) -> 'LinopProperty':
    """A copy that drops each (output, input) entry with probability p."""
    rng = rng or random
    new = copy.deepcopy(self)
    new.pairings = {o: {i: pr for i, pr in row.items()
                        if rng.random() >= self.p}
                    for o, row in self.pairings.items()}
    return new

  def distance_from(self, other: 'LinopProperty') -> float:
    """Mean over self's entries of (cells where self > other) / max(1, self's
    non-zero cells), a missing entry all NONE; in [0, 1], 0 when `safety_only`
    or self is empty. ValueError for an entry of another shape."""
    terms = []
    for out_name, row in self.pairings.items():
      for in_name, pr in row.items():
        theirs = other.pairings.get(out_name, {}).get(in_name)
        mine = pr.mappings
        if theirs is None:
          theirs_m = np.zeros_like(mine)
        elif theirs.shape != pr.shape:
          raise ValueError(f'Pairing {out_name!r}<-{in_name!r}: shape '
                           f'{theirs.shape} != {pr.shape}')
        else:
          theirs_m = theirs.mappings
        terms.append(float((mine > theirs_m).sum()) /
                     max(1, int((mine > 0).sum())))
    if self.safety_only or not terms:
      return 0.0
    return float(np.mean(terms))
