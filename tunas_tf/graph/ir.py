"""The graph IR: op types, ops, graphs and tensor names.

A `Graph` is a flat list of frozen `Op`s over named tensors: output k of op
X is `"X:k"` (`"X"` is `"X:0"`), graph inputs are tensors too; op names are
unique and never hold `:`, `*` or `%`. Rewrites build new graphs.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import heapq
import re
from typing import (Any, Callable, Dict, Iterable, List, Mapping, Optional,
                    Sequence, Tuple)


# What an op computes; `tunas_tf.graph.ops.apply` says how, and its kwargs.
OpType = enum.Enum('OpType', [
    'NONE', 'IDENTITY', 'DENSE', 'CONV', 'DEPTHWISE_CONV', 'ADD', 'MUL',
    'RELU', 'RELU6', 'GELU', 'SWISH', 'H_SWISH', 'SIGMOID', 'H_SIGMOID',
    'SOFTMAX', 'BATCH_NORM', 'LAYER_NORM', 'RESHAPE', 'FLATTEN', 'TRANSPOSE',
    'DROPOUT', 'AVG_POOL', 'MAX_POOL', 'GLOBAL_AVG_POOL', 'MEAN', 'CONCAT'],
                   start=0)


# Depth linearity (upstream's `is_nonlinear` in `abstract/depth.py`):
# activations and softmax are nonlinear, IDENTITY is neutral, NONE is
# skipped, the rest are linear.
NONLINEAR_TYPES = frozenset({
    OpType.RELU, OpType.RELU6, OpType.GELU, OpType.SWISH, OpType.H_SWISH,
    OpType.SIGMOID, OpType.H_SIGMOID, OpType.SOFTMAX})

# (min, max) number of inputs per op type; max None means unbounded.
_ARITY: Dict[OpType, Tuple[int, Optional[int]]] = {
    OpType.ADD: (2, None), OpType.MUL: (2, None), OpType.CONCAT: (1, None)}

_OP_NAME_RE = re.compile(r'^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*$')


def is_nonlinear(op_type: OpType) -> bool:
  """Whether `op_type` counts as nonlinear for depth (`NONLINEAR_TYPES`)."""
  if not isinstance(op_type, OpType):
    raise ValueError(f'Unknown op type {op_type!r}')
  return op_type in NONLINEAR_TYPES


def canonicalize_tensor_name(name: str) -> str:
  """`name` (`"X"` or `"X:k"`) as `"X:k"`; ValueError if empty or its index
  is not a non-negative int."""
  if not isinstance(name, str) or not name:
    raise ValueError(f'Tensor name must be a non-empty string, got {name!r}')
  if ':' not in name:
    return f'{name}:0'
  base, _, index = name.rpartition(':')
  if not base or not index.isdigit():
    raise ValueError(f'Malformed tensor name {name!r}; expected "op" or '
                     '"op:index"')
  return f'{base}:{int(index)}'


def split_tensor_name(name: str) -> Tuple[str, int]:
  """Splits a tensor name into (op name, output index): `"x"` -> `("x", 0)`."""
  base, _, index = canonicalize_tensor_name(name).rpartition(':')
  return base, int(index)


@dataclasses.dataclass(frozen=True)
class Op:
  """One node of the graph (build it with `new_op`): `name` (unique, also
  the variables' prefix), canonical `input_names` in slot order,
  `input_kwargs` (call-time data) and `op_kwargs` (layer construction)."""
  name: str
  type: OpType
  input_names: Tuple[str, ...]
  input_kwargs: Dict[str, Any] = dataclasses.field(default_factory=dict)
  op_kwargs: Dict[str, Any] = dataclasses.field(default_factory=dict)
  num_outputs: int = 1

  @property
  def output_names(self) -> Tuple[str, ...]:
    """The canonical names of this op's outputs, `"{name}:{k}"`."""
    return tuple(f'{self.name}:{k}' for k in range(self.num_outputs))

  @property
  def kwargs(self) -> Dict[str, Any]:
    """`op_kwargs` and `input_kwargs` merged (input_kwargs win); a copy."""
    return {**copy.deepcopy(self.op_kwargs),
            **copy.deepcopy(self.input_kwargs)}


@dataclasses.dataclass(frozen=True)
class Graph:
  """A validated graph (build it with `new_graph`): `input_names` and
  `output_names` as written (`Model` returns outputs under these keys), `ops`
  in topological order."""
  input_names: Tuple[str, ...]
  output_names: Tuple[str, ...]
  ops: Tuple[Op, ...]

  def op(self, name: str) -> Op:
    """The op called `name`; ValueError if there is none."""
    for op in self.ops:
      if op.name == name:
        return op
    raise ValueError(f'Graph has no op named {name!r}')

  @property
  def op_names(self) -> Tuple[str, ...]:
    """The op names, in topological order."""
    return tuple(op.name for op in self.ops)

  def producer(self, tensor_name: str) -> Optional[Op]:
    """The op producing `tensor_name`, or None for a graph input/unknown."""
    name, index = split_tensor_name(tensor_name)
    for op in self.ops:
      if op.name == name and index < op.num_outputs:
        return op
    return None

  def consumers(self, tensor_name: str) -> List[Op]:
    """The ops reading `tensor_name`, in graph order."""
    tensor_name = canonicalize_tensor_name(tensor_name)
    return [op for op in self.ops if tensor_name in op.input_names]


def _check_op_name(name: str) -> None:
  if not isinstance(name, str) or not name:
    raise ValueError(f'Op name must be a non-empty string, got {name!r}')
  bad = [c for c in ':*%' if c in name]
  if bad:
    raise ValueError(f'Op name {name!r} contains {bad[0]!r}; `:`, `*` and `%` '
                     'are reserved for tensor names and symbolic kwargs')
  if not _OP_NAME_RE.match(name):
    raise ValueError(f'Op name {name!r} is not a valid variable scope; use '
                     'letters, digits and `_ . - / >`')


def new_op(op_name: str,
           op_type: OpType,
           input_names: Sequence[str],
           input_kwargs: Optional[Mapping[str, Any]] = None,
           op_kwargs: Optional[Mapping[str, Any]] = None,
           num_outputs: int = 1) -> Op:
  """An `Op` with canonical input names and copied kwargs (None: `{}`).
  ValueError naming the op for a bad name or type, a wrong input count for
  the type, or `num_outputs < 1`."""
  _check_op_name(op_name)
  if not isinstance(op_type, OpType):
    raise ValueError(f'Op {op_name!r}: unknown op type {op_type!r}')
  if isinstance(input_names, str):
    raise ValueError(f'Op {op_name!r}: input_names must be a list of tensor '
                     f'names, got the string {input_names!r}')
  inputs = tuple(canonicalize_tensor_name(n) for n in input_names)
  lo, hi = _ARITY.get(op_type, (1, 1))
  if len(inputs) < lo or (hi is not None and len(inputs) > hi):
    want = f'{lo}' if lo == hi else f'at least {lo}' if hi is None else (
        f'{lo} to {hi}')
    raise ValueError(f'Op {op_name!r} ({op_type.name}) takes {want} input(s), '
                     f'got {len(inputs)}: {list(inputs)}')
  if not isinstance(num_outputs, int) or num_outputs < 1:
    raise ValueError(f'Op {op_name!r}: num_outputs must be an int >= 1, got '
                     f'{num_outputs!r}')
  return Op(name=op_name, type=op_type, input_names=inputs,
            input_kwargs=copy.deepcopy(dict(input_kwargs or {})),
            op_kwargs=copy.deepcopy(dict(op_kwargs or {})),
            num_outputs=num_outputs)


def find_cycle(ops: Sequence[Op]) -> List[str]:
  """Op names `[a, b, ..., a]` of one cycle among `ops`, every one of which
  reads another's output (what a stuck topological sort leaves)."""
  by_name = {op.name: op for op in ops}
  path: List[str] = []
  seen: Dict[str, int] = {}
  name = ops[0].name
  while name not in seen:
    seen[name] = len(path)
    path.append(name)
    name = next(split_tensor_name(t)[0] for t in by_name[name].input_names
                if split_tensor_name(t)[0] in by_name)
  return list(reversed(path[seen[name]:] + [name]))


def toposort(ops: Sequence[Op], available: Iterable[str],
             priority: Optional[Callable[[int, Op], Any]] = None,
             context: str = 'new_graph') -> List[Op]:
  """`ops` with every op after its inputs' producers, ready ops by smallest
  `priority(index, op)` (default: the given order, so a sorted list stays);
  `available` tensors exist from the start. ValueError naming a cycle."""
  priority = priority or (lambda i, op: i)
  available = set(available)
  op_index = {op.name: i for i, op in enumerate(ops)}
  waiting: Dict[int, set] = {}
  readers: Dict[str, List[int]] = {}
  heap = []
  for i, op in enumerate(ops):
    deps = {split_tensor_name(t)[0] for t in op.input_names
            if t not in available and split_tensor_name(t)[0] in op_index}
    waiting[i] = deps
    for d in deps:
      readers.setdefault(d, []).append(i)
    if not deps:
      heapq.heappush(heap, (priority(i, op), i))
  order = []
  while heap:
    _, i = heapq.heappop(heap)
    order.append(ops[i])
    for j in readers.get(ops[i].name, ()):
      waiting[j].discard(ops[i].name)
      if not waiting[j]:
        heapq.heappush(heap, (priority(j, ops[j]), j))
  if len(order) < len(ops):
    done = {op.name for op in order}
    cycle = find_cycle([op for op in ops if op.name not in done])
    raise ValueError(f'{context}: ops form a cycle: {" -> ".join(cycle)}')
  return order


def new_graph(input_names: Sequence[str], output_names: Sequence[str],
              ops: Sequence[Op]) -> Graph:
  """A validated `Graph` (arguments copied); `output_names` op names, tensor
  names or graph inputs; `ops` in any order that admits a topological sort.

  Raises:
    ValueError: naming the op, for a duplicate op or input name, an op named
      like an input, a tensor or output nobody produces, or a cycle.
  """
  if isinstance(input_names, str) or isinstance(output_names, str):
    raise ValueError('new_graph: input_names and output_names must be lists, '
                     f'got {input_names!r}, {output_names!r}')
  inputs = tuple(input_names)
  canonical_inputs = [canonicalize_tensor_name(n) for n in inputs]
  if len(set(canonical_inputs)) != len(canonical_inputs):
    raise ValueError(f'new_graph: duplicate graph input in {list(inputs)}')
  input_ops = {split_tensor_name(n)[0] for n in canonical_inputs}
  ops = copy.deepcopy(list(ops))
  names = set()
  produced = set(canonical_inputs)
  for op in ops:
    if not isinstance(op, Op):
      raise ValueError(f'new_graph: expected Op, got {op!r}')
    if op.name in names:
      raise ValueError(f'new_graph: duplicate op name {op.name!r}')
    if op.name in input_ops:
      raise ValueError(f'new_graph: op {op.name!r} has the name of a graph '
                       'input')
    names.add(op.name)
    produced.update(op.output_names)
  for op in ops:
    for t in op.input_names:
      if t not in produced:
        raise ValueError(f'new_graph: op {op.name!r} reads unknown tensor '
                         f'{t!r}')
  for out in output_names:
    if canonicalize_tensor_name(out) not in produced:
      raise ValueError(f'new_graph: output {out!r} is not produced by any op '
                       'or graph input')
  ordered = toposort(ops, canonical_inputs)
  return Graph(input_names=inputs, output_names=tuple(output_names),
               ops=tuple(ordered))


def prune_graph(graph: Graph,
                output_names: Optional[Sequence[str]] = None) -> Graph:
  """The graph with `output_names` (default its own), keeping only the ops
  they need, in order; ValueError for an output not produced."""
  output_names = list(graph.output_names if output_names is None
                      else output_names)
  needed = {canonicalize_tensor_name(n) for n in output_names}
  kept = []
  for op in reversed(graph.ops):
    if needed.intersection(op.output_names):
      kept.append(op)
      needed.update(op.input_names)
  return new_graph(graph.input_names, output_names, list(reversed(kept)))
