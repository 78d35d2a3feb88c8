"""Executes a `Graph` as a `tf.Module`: one variable per op variable, named
`"{op name}/{variable name}"`, made on first call (or `build`); eagerly, in
`tf.function` or in a TF1 graph."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from tunas_tf.graph import ir
from tunas_tf.graph import ops as ops_lib
from tunas_tf.graph import symbolic

Params = Dict[str, Dict[str, np.ndarray]]
Inputs = Union[Any, Mapping[str, Any]]


class Model(tf.Module):
  """A graph with its variables.

  Args:
    constants: named integer constants for `"K:<name>"` kwargs.
    stateless_batch_norm: batch norm always on batch statistics, no moving
      averages (the search's setting); an op's `stateless` kwarg overrides it.
    seed: None (TF's global generator) or an int fixing each initial value by
      (seed, variable name).
    share_variables_with: a `Model` whose variables same-named ops reuse.
    compute_dtype: tf.float32 or tf.bfloat16, of inputs, reads and outputs.
  """

  def __init__(self, graph: ir.Graph,
               constants: Optional[Mapping[str, Any]] = None, *,
               stateless_batch_norm: bool = False,
               seed: Optional[int] = None,
               share_variables_with: Optional['Model'] = None,
               compute_dtype: tf.DType = tf.float32,
               name: Optional[str] = None):
    super().__init__(name=name)
    if not isinstance(graph, ir.Graph):
      raise ValueError(f'Model needs an ir.Graph, got {type(graph).__name__}')
    try:
      dtype = tf.as_dtype(compute_dtype)
    except TypeError:
      dtype = None
    if dtype not in (tf.float32, tf.bfloat16):
      raise ValueError('Model compute_dtype must be float32 or bfloat16, got '
                       f'{compute_dtype!r}')
    self._compute_dtype = dtype
    self._graph = graph
    self._constants = dict(constants or {})
    self._stateless = bool(stateless_batch_norm)
    self._seed = seed
    # A closure, so that tf.Module does not track the other model.
    shared = share_variables_with
    self._shared_lookup = (lambda name: shared.op_variables.get(name)
                           if shared is not None else None)
    self.op_variables: Dict[str, Dict[str, tf.Variable]] = {}

  @property
  def stateless_batch_norm(self) -> bool:
    """The model's default batch-norm mode."""
    return self._stateless

  @property
  def compute_dtype(self) -> tf.DType:
    """The dtype the ops compute in."""
    return self._compute_dtype

  @property
  def built(self) -> bool:
    """Whether every op's variables exist."""
    return all(op.name in self.op_variables for op in self._graph.ops)

  def build(self, input_shapes: Union[Sequence[Optional[int]],
                                      Mapping[str, Sequence[Optional[int]]]]
            ) -> None:
    """Creates the variables without data, for the shape of the single input
    or {input name: shape} (None dims except where kwargs or variables need
    them)."""
    specs = _input_specs(self._graph, input_shapes)
    if tf.executing_eagerly():
      fn = tf.function(lambda inputs: self.call_all(inputs, training=False))
      fn.get_concrete_function(specs)
    else:
      self.call_all({k: tf.compat.v1.placeholder(s.dtype, s.shape)
                     for k, s in specs.items()}, training=False)

  @tf.autograph.experimental.do_not_convert
  def __call__(self, inputs: Inputs, training: bool = False,
               dropout_seed: Optional[tf.Tensor] = None
               ) -> Union[tf.Tensor, Dict[str, tf.Tensor]]:
    """The output tensor (one output) or {output name as written: tensor}.

    `inputs`: a tensor (one input) or {input name or canonical name: tensor},
    cast to float32 (bfloat16 with that `compute_dtype`). `training`: batch
    norm on batch statistics updating its averages; dropout. `dropout_seed`:
    None (stateful) or an integer [2] Tensor keying each DROPOUT op's mask.
    ValueError for a missing input, or a bare tensor for several inputs.
    """
    values = self.call_all(inputs, training=training,
                           dropout_seed=dropout_seed)
    outputs = {name: values[ir.canonicalize_tensor_name(name)]
               for name in self._graph.output_names}
    if len(outputs) == 1:
      return next(iter(outputs.values()))
    return outputs

  @tf.autograph.experimental.do_not_convert
  def call_all(self, inputs: Inputs, training: bool = False,
               output_names: Optional[Sequence[str]] = None,
               dropout_seed: Optional[tf.Tensor] = None
               ) -> Dict[str, tf.Tensor]:
    """{canonical tensor name: tensor} of every tensor, inputs included
    (arguments as `__call__`); with `output_names`, only the ops they need run.
    """
    values = self._named_inputs(inputs)
    run = self._graph.ops
    if output_names is not None:
      run = ir.prune_graph(self._graph, output_names).ops
    for op in run:
      args = [values[t] for t in op.input_names]
      shapes = [tuple(a.shape.as_list()) for a in args]
      tensor_shapes = {k: tuple(v.shape.as_list()) for k, v in values.items()}
      kwargs = symbolic.resolve_kwargs(op, shapes, self._constants,
                                       tensor_shapes)
      variables = self._variables_for(op, kwargs, shapes)
      with tf.name_scope(op.name):
        outs = ops_lib.apply(op, kwargs, args, variables, training=training,
                             stateless_batch_norm=self._stateless,
                             dropout_seed=dropout_seed)
      if len(outs) != op.num_outputs:
        raise RuntimeError(f'Op {op.name!r} returned {len(outs)} output(s) but '
                           f'declares num_outputs={op.num_outputs}')
      values.update(zip(op.output_names, outs))
    return values

  def _named_inputs(self, inputs: Inputs) -> Dict[str, tf.Tensor]:
    values = {}
    for name, value in _per_input(self._graph, inputs, 'tensor').items():
      value = tf.convert_to_tensor(value)
      if self._compute_dtype != tf.float32:
        value = tf.cast(value, self._compute_dtype)
      elif not value.dtype.is_floating:
        value = tf.cast(value, tf.float32)
      values[ir.canonicalize_tensor_name(name)] = value
    return values

  def _variables_for(self, op: ir.Op, kwargs: Mapping[str, Any],
                     shapes) -> Dict[str, tf.Variable]:
    if op.name in self.op_variables:
      return self.op_variables[op.name]
    specs = ops_lib.variable_specs(op, kwargs, shapes, self._stateless)
    shared = self._shared_lookup(op.name)
    if shared is not None:
      for var_name, spec in specs.items():
        if (var_name not in shared or
            tuple(shared[var_name].shape.as_list()) != tuple(spec.shape)):
          have = (tuple(shared[var_name].shape.as_list())
                  if var_name in shared else 'missing')
          raise ValueError(f'Op {op.name!r}: shared variable {var_name!r} has '
                           f'shape {have}, the op needs {tuple(spec.shape)}')
      variables = {k: shared[k] for k in specs}
    else:
      variables = {}
      with tf.init_scope():
        for var_name, spec in specs.items():
          full = f'{op.name}/{var_name}'
          value = ops_lib.initial_value(spec, self._seed, full,
                                        f'Op {op.name!r}')
          variables[var_name] = tf.Variable(value, trainable=spec.trainable,
                                            name=full)
    self.op_variables[op.name] = variables
    return self.op_variables[op.name]


def _per_input(graph: ir.Graph, values: Any, what: str) -> Dict[str, Any]:
  """{input name as written: value} of a bare value (one input) or a mapping
  by written or canonical input name; ValueError naming a missing input."""
  names = graph.input_names
  if not isinstance(values, Mapping):
    if len(names) != 1:
      raise ValueError(f'Graph has {len(names)} inputs {list(names)}; pass '
                       f'a dict from input name to {what}')
    values = {names[0]: values}
  found = {}
  for name in names:
    key = name if name in values else ir.canonicalize_tensor_name(name)
    if key not in values:
      raise ValueError(f'Missing graph input {name!r} ({what}); got keys '
                       f'{sorted(values)}')
    found[name] = values[key]
  return found


def _input_specs(graph: ir.Graph, input_shapes) -> Dict[str, tf.TensorSpec]:
  return {name: tf.TensorSpec(tuple(shape), tf.float32) for name, shape
          in _per_input(graph, input_shapes, 'shape').items()}


def abstract_shapes(graph: ir.Graph,
                    constants: Optional[Mapping[str, Any]],
                    input_shapes: Union[Sequence[Optional[int]],
                                        Mapping[str, Sequence[Optional[int]]]],
                    output_names: Optional[Sequence[str]] = None
                    ) -> Dict[str, tuple]:
  """{canonical tensor name: static shape (None unknown)} of every tensor,
  traced into a throwaway `tf.Graph`; arguments as `Model.build`, `output_names`
  as `Model.call_all`."""
  specs = _input_specs(graph, input_shapes)
  with tf.Graph().as_default():
    inputs = {k: tf.compat.v1.placeholder(s.dtype, s.shape)
              for k, s in specs.items()}
    values = Model(graph, constants).call_all(inputs,
                                              output_names=output_names)
    return {k: tuple(v.shape.as_list()) for k, v in values.items()}


def count_params(model: Model, trainable_only: bool = True) -> int:
  """The number of scalar parameters of a built model (`trainable_only`:
  batch-norm moving statistics left out)."""
  return sum(int(np.prod(v.shape)) for group in model.op_variables.values()
             for v in group.values() if v.trainable or not trainable_only)


def get_params(model: Model, session: Optional[Any] = None) -> Params:
  """A built model's values `{op_name: {var_name: np.ndarray}}` (ops without
  variables left out); `session` for a model in a TF1 graph."""
  groups = {op: dict(group) for op, group in model.op_variables.items()
            if group}
  if session is not None:
    return session.run(groups)
  return {op: {name: v.numpy() for name, v in group.items()}
          for op, group in groups.items()}


def set_params(model: Model, params: Mapping[str, Mapping[str, Any]],
               session: Optional[Any] = None) -> None:
  """Assigns `{op_name: {var_name: array}}` (any subset) to a built model's
  variables; `session` for a TF1 graph. ValueError for an unknown op or
  variable or a shape mismatch (named), nothing assigned then."""
  pairs = []
  for op_name, group in params.items():
    if op_name not in model.op_variables:
      raise ValueError(f'set_params: model has no variables for op '
                       f'{op_name!r}')
    for var_name, value in group.items():
      variable = model.op_variables[op_name].get(var_name)
      if variable is None:
        raise ValueError(f'set_params: op {op_name!r} has no variable '
                         f'{var_name!r}; it has '
                         f'{sorted(model.op_variables[op_name])}')
      value = np.asarray(value, dtype=variable.dtype.as_numpy_dtype)
      if tuple(value.shape) != tuple(variable.shape.as_list()):
        raise ValueError(f'set_params: op {op_name!r} variable {var_name!r} '
                         f'has shape {tuple(variable.shape.as_list())}, value '
                         f'has shape {value.shape}')
      pairs.append((variable, value))
  if session is not None:
    session.run([v.assign(x) for v, x in pairs])
  else:
    for variable, value in pairs:
      variable.assign(value)
