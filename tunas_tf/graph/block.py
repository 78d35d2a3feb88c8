"""Blocks: reusable subgraph templates, instantiated under a name prefix."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Optional, Sequence

from tunas_tf.graph import ir
from tunas_tf.graph import symbolic


@dataclasses.dataclass(frozen=True)
class Block:
  """A subgraph template (or an instance: `graph` renamed, `base_graph` the
  template, `instance_id` set).

  Renaming: every op, output and constant name gets the prefix; template
  inputs become the given `input_names`, other inputs get the prefix;
  `"K:<T>"` gets it when T is a block constant; `"S:<T>:<d>"` unless T is a
  slot index (a template input becomes its input name); `"S:<d>"` stays.
  """
  name: str
  graph: ir.Graph
  constants: Dict[str, Any] = dataclasses.field(default_factory=dict)
  base_graph: Optional[ir.Graph] = None
  base_constants: Optional[Dict[str, Any]] = None
  instance_id: Any = None

  @property
  def template_graph(self) -> ir.Graph:
    """The graph instantiation starts from."""
    return self.base_graph if self.base_graph is not None else self.graph

  @property
  def template_constants(self) -> Dict[str, Any]:
    """The constants instantiation starts from."""
    return dict(self.base_constants if self.base_constants is not None
                else self.constants)

  def prefix(self, instance_id: Any = None) -> str:
    """The name prefix of an instance, e.g. `'conv_layer0/'`."""
    return f'{self.name}{"" if instance_id is None else instance_id}/'

  def instantiate(self, input_names: Sequence[str], instance_id: Any = None,
                  constants: Optional[Mapping[str, Any]] = None) -> 'Block':
    """A new `Block` reading `input_names` (one per template input), renamed
    under `prefix(instance_id)` (0: `conv_layer0/`), template `constants`
    overridden; ValueError for a wrong input count."""
    template = self.template_graph
    if isinstance(input_names, str) or (
        len(input_names) != len(template.input_names)):
      raise ValueError(
          f'Block {self.name!r} takes {len(template.input_names)} input(s) '
          f'{list(template.input_names)}, got {input_names!r}')
    prefix = self.prefix(instance_id)
    block_constants = self.template_constants
    block_constants.update(constants or {})
    renamed_inputs = {
        ir.canonicalize_tensor_name(old): ir.canonicalize_tensor_name(new)
        for old, new in zip(template.input_names, input_names)}

    def tensor(name: str) -> str:
      name = ir.canonicalize_tensor_name(name)
      return renamed_inputs.get(name, prefix + name)

    def value(v: Any) -> Any:
      if isinstance(v, (list, tuple)):
        return type(v)(value(x) for x in v)
      if not isinstance(v, str) or v[:2] not in ('K:', 'S:'):
        return v
      cut = min([i for i in (v.find('*'), v.find('%')) if i >= 0] or [len(v)])
      body, suffix = v[:cut], v[cut:]
      if body.startswith('K:'):
        key = body[2:]
        return f'K:{prefix}{key}{suffix}' if key in block_constants else v
      key, _, dim = body[2:].rpartition(':')
      if not key or symbolic.is_int(key):
        return v
      return f'S:{tensor(key)}:{dim}{suffix}'

    ops = [ir.new_op(prefix + op.name, op.type,
                     [tensor(t) for t in op.input_names],
                     {k: value(v) for k, v in op.input_kwargs.items()},
                     {k: value(v) for k, v in op.op_kwargs.items()},
                     op.num_outputs)
           for op in template.ops]
    outputs = [renamed_inputs.get(ir.canonicalize_tensor_name(o), prefix + o)
               for o in template.output_names]
    graph = ir.new_graph(list(input_names), outputs, ops)
    return Block(name=self.name, graph=graph,
                 constants={prefix + k: v for k, v in block_constants.items()},
                 base_graph=template, base_constants=self.template_constants,
                 instance_id=instance_id)
