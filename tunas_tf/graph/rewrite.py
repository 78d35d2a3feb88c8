"""Subgraph replacement (`replace_subgraph`) and the subgraph view
(`SubgraphModel`) that properties work on."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from tunas_tf.graph import ir
from tunas_tf.graph import model as model_lib


@dataclasses.dataclass(frozen=True, init=False)
class SubgraphNode:
  """One op of a replacement subgraph."""
  op: ir.Op
  output_names: Tuple[Optional[str], ...]

  def __init__(self, op: ir.Op,
               output_names: Optional[Sequence[Optional[str]]] = None):
    """A node inserting `op`; `output_names` per output slot a tensor name to
    rewire (stored canonical) or None / `''`, at most `op.num_outputs`.
    ValueError (naming the op) for a non-`ir.Op` or too many entries."""
    if not isinstance(op, ir.Op):
      raise ValueError(f'SubgraphNode needs an ir.Op, got {op!r}')
    if isinstance(output_names, str):
      raise ValueError(f'SubgraphNode {op.name!r}: output_names must be a '
                       f'list, got the string {output_names!r}')
    names = tuple(ir.canonicalize_tensor_name(n) if n else None
                  for n in (output_names or ()))
    if len(names) > op.num_outputs:
      raise ValueError(f'SubgraphNode {op.name!r}: {len(names)} output_names '
                       f'for {op.num_outputs} output(s)')
    object.__setattr__(self, 'op', op)
    object.__setattr__(self, 'output_names', names)

  @property
  def rewires(self) -> List[Tuple[str, str]]:
    """(old tensor, new tensor) pairs this node rewires."""
    return [(old, f'{self.op.name}:{k}')
            for k, old in enumerate(self.output_names) if old]


SubgraphSpec = Sequence[SubgraphNode]


def _check_spec(graph: ir.Graph, spec: SubgraphSpec) -> Dict[str, str]:
  """Validates the spec and returns the rewire map old tensor -> new."""
  input_ops = {ir.split_tensor_name(n)[0] for n in graph.input_names}
  existing = {ir.canonicalize_tensor_name(n) for n in graph.input_names}
  for op in graph.ops:
    existing.update(op.output_names)
  names = set()
  rewire: Dict[str, str] = {}
  for node in spec:
    if not isinstance(node, SubgraphNode):
      raise ValueError(f'replace_subgraph: expected SubgraphNode, got '
                       f'{node!r}')
    name = node.op.name
    if name in names:
      raise ValueError(f'replace_subgraph: op {name!r} appears twice in the '
                       'spec')
    if name in input_ops:
      raise ValueError(f'replace_subgraph: op {name!r} has the name of a '
                       'graph input')
    names.add(name)
    for old, new in node.rewires:
      if old not in existing:
        raise ValueError(f'replace_subgraph: op {name!r} rewires {old!r}, '
                         'which is not a tensor of the graph')
      if old in rewire:
        raise ValueError(f'replace_subgraph: op {name!r} rewires {old!r}, '
                         f'which {rewire[old]!r} already rewires')
      rewire[old] = new
  return rewire


def replace_subgraph(graph: ir.Graph, subgraph_spec: SubgraphSpec) -> ir.Graph:
  """A copy of `graph` with the subgraph spliced in (neither argument mutated).

  For every `node.output_names[k]` naming an existing tensor X, every old
  consumer of X, and the graph's outputs, read `"{node.op.name}:k"` instead;
  spec ops' own inputs are never redirected, so a node may read X and replace
  it ("insert after X"). A spec op named like an old op replaces it; the
  result keeps only the ops its outputs need, each spec op as soon as its
  inputs exist, old ops otherwise in their order.

  Raises:
    ValueError: naming the op, for a duplicate or input-named spec op, an
      `output_names` entry not in the graph or rewired twice, a missing
      tensor or producer, a cycle, or a spec node no output depends on.
  """
  graph = copy.deepcopy(graph)
  spec = copy.deepcopy(list(subgraph_spec))
  rewire = _check_spec(graph, spec)
  spec_names = {node.op.name for node in spec}
  ops: List[ir.Op] = []
  for op in graph.ops:
    if op.name not in spec_names:
      ops.append(dataclasses.replace(
          op, input_names=tuple(rewire.get(t, t) for t in op.input_names)))
  old_count = len(ops)
  ops += [node.op for node in spec]
  # A rewired output becomes the new tensor's canonical name; others (and
  # outputs rewired to a tensor of the same name) stay as written.
  outputs = []
  for out in graph.output_names:
    canonical = ir.canonicalize_tensor_name(out)
    new = rewire.get(canonical, canonical)
    outputs.append(out if new == canonical else new)

  inputs = {ir.canonicalize_tensor_name(n) for n in graph.input_names}
  producer = {t: op for op in ops for t in op.output_names}
  available = set(producer) | inputs
  for out in outputs:
    if ir.canonicalize_tensor_name(out) not in available:
      raise ValueError(f'replace_subgraph: graph output {out!r} has no '
                       'producer')
  for op in ops[old_count:]:
    for t in op.input_names:
      if t not in available:
        raise ValueError(f'replace_subgraph: op {op.name!r} reads missing '
                         f'tensor {t!r}')
  # Keep what the outputs need (a reverse walk; cycles are caught below).
  needed = set()
  stack = [ir.canonicalize_tensor_name(o) for o in outputs]
  while stack:
    op = producer.get(stack.pop())
    if op is None or op.name in needed:
      continue
    needed.add(op.name)
    for t in op.input_names:
      if t not in available:
        raise ValueError(f'replace_subgraph: op {op.name!r} reads missing '
                         f'tensor {t!r}')
      stack.append(t)
  for node in spec:
    if node.op.name not in needed:
      raise ValueError(f'replace_subgraph: op {node.op.name!r} of the spec is '
                       'unused: no graph output depends on it')
  kept = [op for op in ops if op.name in needed]
  index = {op.name: i for i, op in enumerate(ops)}
  ordered = ir.toposort(
      kept, inputs,
      priority=lambda i, op: (index[op.name] < old_count, index[op.name]),
      context='replace_subgraph')
  return ir.new_graph(graph.input_names, outputs, ordered)


class SubgraphModel:
  """A subgraph in the context of its graph, `replace_subgraph(old, spec)`.

  `state`: a built `Model` of `graph`, or None (structure and shapes only);
  `inputs`: {graph input name: array}; `subgraph_spec` None: the whole graph.

  Attributes:
    input_names: canonical boundary inputs (read by spec ops, produced
      outside), in order of first appearance.
    output_names: canonical boundary outputs: each rewired slot, plus spec
      outputs read outside the spec.
    aliases: {new output: the old tensor names it replaced}.
    subg_graph: the spec ops as an `ir.Graph` over `input_names`.
    subg_inputs_graph, subg_outputs_graph: the graph cut to `input_names`
      (None without a spec) / to `output_names`.
  """

  def __init__(self, graph: ir.Graph, constants: Optional[Mapping[str, Any]],
               state: Optional[model_lib.Model],
               inputs: Optional[Mapping[str, Any]],
               subgraph_spec: Optional[SubgraphSpec] = None):
    self.graph = graph
    self.constants = dict(constants or {})
    self.state = state
    self.inputs = dict(inputs or {})
    self.subgraph_spec = list(subgraph_spec) if subgraph_spec else None
    self.original_outputs = tuple(graph.output_names)
    self.aliases: Dict[str, List[str]] = {}
    self._subg_model = None
    if not self.subgraph_spec:
      self.input_names = [ir.canonicalize_tensor_name(n)
                          for n in graph.input_names]
      self.output_names = [ir.canonicalize_tensor_name(n)
                           for n in graph.output_names]
      self.subg_graph = graph
      self.subg_inputs_graph = None
      self.subg_outputs_graph = graph
      return
    graph_op_names = set(graph.op_names)
    spec_ops = []
    for node in self.subgraph_spec:
      if node.op.name not in graph_op_names:
        raise ValueError(f'SubgraphModel: spec op {node.op.name!r} is not in '
                         'the graph; pass replace_subgraph(graph, spec)')
      spec_ops.append(graph.op(node.op.name))
    produced = {t for op in spec_ops for t in op.output_names}
    self.input_names = []
    for op in spec_ops:
      for t in op.input_names:
        if t not in produced and t not in self.input_names:
          self.input_names.append(t)
    outputs: List[str] = []
    for node in self.subgraph_spec:
      for old, new in node.rewires:
        if new not in outputs:
          outputs.append(new)
        self.aliases.setdefault(new, []).append(old)
    spec_names = {op.name for op in spec_ops}
    read_outside = {t for op in graph.ops if op.name not in spec_names
                    for t in op.input_names}
    read_outside.update(ir.canonicalize_tensor_name(o)
                        for o in graph.output_names)
    for op in spec_ops:
      outputs += [t for t in op.output_names
                  if t in read_outside and t not in outputs]
    self.output_names = outputs
    self.subg_graph = ir.new_graph(self.input_names, self.output_names,
                                   spec_ops)
    self.subg_inputs_graph = ir.prune_graph(graph, self.input_names)
    self.subg_outputs_graph = ir.prune_graph(graph, self.output_names)

  @property
  def has_spec(self) -> bool:
    """Whether this is a proper subgraph (a spec was given)."""
    return self.subgraph_spec is not None

  def _require_state(self) -> model_lib.Model:
    if self.state is None:
      raise ValueError('Cannot execute subgraph without state (a built '
                       'Model of the graph)')
    return self.state

  @property
  def subg_model(self) -> model_lib.Model:
    """A `Model` of `subg_graph` sharing the state's variables by op name."""
    state = self._require_state()
    if self._subg_model is None:
      self._subg_model = model_lib.Model(
          self.subg_graph, self.constants,
          stateless_batch_norm=state.stateless_batch_norm,
          share_variables_with=state)
    return self._subg_model

  def get_subg_inputs(self, graph_inputs: Optional[Mapping[str, Any]] = None
                      ) -> Dict[str, Any]:
    """{canonical boundary input: tensor} from graph inputs (or `inputs`)."""
    return self._in_context(self.input_names, graph_inputs)

  def get_subg_outputs(self, graph_inputs: Optional[Mapping[str, Any]] = None
                       ) -> Dict[str, Any]:
    """{canonical boundary output: tensor} in context, from graph inputs."""
    return self._in_context(self.output_names, graph_inputs)

  def _in_context(self, names: Sequence[str],
                  graph_inputs: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    state = self._require_state()
    graph_inputs = self.inputs if graph_inputs is None else graph_inputs
    values = state.call_all(graph_inputs, output_names=names)
    return {name: values[name] for name in names}

  def execute_subg(self, subg_inputs: Mapping[str, Any]) -> Dict[str, Any]:
    """The subgraph alone: {boundary input: value} -> {boundary output:
    tensor}."""
    values = self.subg_model.call_all(subg_inputs,
                                      output_names=self.output_names)
    return {name: values[name] for name in self.output_names}

