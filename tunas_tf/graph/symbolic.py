"""Symbolic kwargs, resolved from input shapes and constants.

A kwarg string `"K:<name>"` is `int(constants[name])`; `"S:<d>"` dim d of the
op's first input; `"S:<i>:<d>"` of its i-th input; `"S:<tensor>:<d>"` of a
named earlier tensor; a `%<div>` and/or `*<mul>` suffix gives
`(value // div) * mul`, div dividing the value (`"S:-1%2*4"`). Lists and
tuples resolve element-wise; other strings stay.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from tunas_tf.graph import ir

Shape = Tuple[Optional[int], ...]


def is_symbolic(value: Any) -> bool:
  """Whether `value` is an `S:`/`K:` string (or a list holding one)."""
  if isinstance(value, (list, tuple)):
    return any(is_symbolic(v) for v in value)
  return isinstance(value, str) and value[:2] in ('S:', 'K:')


def _int(text: str, value: str, where: str) -> int:
  try:
    return int(text)
  except ValueError:
    raise ValueError(f'{where}: bad number {text!r} in symbolic value '
                     f'{value!r}') from None


def resolve_value(value: Any,
                  input_shapes: Sequence[Shape],
                  constants: Optional[Mapping[str, Any]] = None,
                  tensor_shapes: Optional[Mapping[str, Shape]] = None,
                  where: str = 'op') -> Any:
  """One kwarg value resolved: an int for an `S:`/`K:` string, a sequence
  element-wise, anything else as is. `tensor_shapes` by canonical name (for
  `"S:<tensor>:<d>"`); `where` names the op and kwarg in errors.

  Raises:
    ValueError: for an unknown constant or tensor, an unknown (None) or
      out-of-range dim, or a `%` that does not divide.
  """
  if isinstance(value, (list, tuple)):
    return type(value)(resolve_value(v, input_shapes, constants, tensor_shapes,
                                     where) for v in value)
  if not is_symbolic(value):
    return value
  text, mul, div = value, 1, 1
  if text.count('*') > 1 or text.count('%') > 1:
    raise ValueError(f'{where}: at most one `*` and one `%` allowed in '
                     f'{value!r}')
  if '*' in text:
    text, mul_text = text.split('*')
    mul = _int(mul_text, value, where)
  if '%' in text:
    text, div_text = text.split('%')
    div = _int(div_text, value, where)
    if div <= 0:
      raise ValueError(f'{where}: divisor must be positive in {value!r}')
  kind, rest = text[0], text[2:]
  if kind == 'K':
    constants = constants or {}
    if rest not in constants:
      raise ValueError(f'{where}: unknown constant {rest!r} in {value!r}; '
                       f'known: {sorted(constants)}')
    base = int(constants[rest])
  else:
    key, _, dim_text = rest.rpartition(':')
    dim = _int(dim_text, value, where)
    if not key:
      shape = _slot_shape(input_shapes, 0, value, where)
    elif is_int(key):
      shape = _slot_shape(input_shapes, int(key), value, where)
    else:
      tensor = ir.canonicalize_tensor_name(key)
      if tensor not in (tensor_shapes or {}):
        raise ValueError(f'{where}: unknown tensor {tensor!r} in {value!r}')
      shape = tuple(tensor_shapes[tensor])
    if not -len(shape) <= dim < len(shape):
      raise ValueError(f'{where}: dim {dim} out of range for shape '
                       f'{tuple(shape)} in {value!r}')
    base = shape[dim]
    if base is None:
      raise ValueError(f'{where}: dim {dim} of shape {tuple(shape)} is unknown;'
                       f' {value!r} needs a static size')
    base = int(base)
  if base % div:
    raise ValueError(f'{where}: {base} is not divisible by {div} in {value!r}')
  return (base // div) * mul


def is_int(text: str) -> bool:
  """Whether `text` reads as an int ('3', '-1'), as a symbolic key."""
  try:
    int(text)
    return True
  except ValueError:
    return False


def _slot_shape(input_shapes: Sequence[Shape], slot: int, value: str,
                where: str) -> Shape:
  if not -len(input_shapes) <= slot < len(input_shapes):
    raise ValueError(f'{where}: input slot {slot} out of range '
                     f'({len(input_shapes)} inputs) in {value!r}')
  return tuple(input_shapes[slot])


def resolve_kwargs(op: ir.Op,
                   input_shapes: Sequence[Shape],
                   constants: Optional[Mapping[str, Any]] = None,
                   tensor_shapes: Optional[Mapping[str, Shape]] = None
                   ) -> Dict[str, Any]:
  """`op.kwargs` with symbolic values resolved (arguments and ValueError as
  `resolve_value`, naming the op and kwarg)."""
  return {key: resolve_value(value, input_shapes, constants, tensor_shapes,
                             where=f'op {op.name!r} kwarg {key!r}')
          for key, value in op.kwargs.items()}
