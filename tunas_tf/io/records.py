"""Dataclasses read from JSON objects, refused in one line naming the field."""

from __future__ import annotations

import dataclasses
from typing import Any, Collection, Dict, Optional

from tunas_tf.io import checks

# What a field's annotation asks of its JSON value: (test, words).
_KINDS = {
    'str': (lambda v: isinstance(v, str), 'a string'),
    'int': (lambda v: isinstance(v, int) and not isinstance(v, bool),
            'an int'),
    'float': (checks.is_number, 'a number'),
    'bool': (lambda v: isinstance(v, bool), 'true or false'),
}


def check_keys(data: Any, what: str, required: Collection[str],
               known: Optional[Collection[str]] = None,
               hint: str = '') -> Dict[str, Any]:
  """Returns `data` if it is a JSON object with every `required` key and
  (unless `known` is None) no key outside `known`.

  Raises:
    ValueError: '{what} is not a JSON object', '{what} has no field {name!r}
      {hint}' (the first missing) or '{what} has unknown fields [..]{hint}'.
  """
  if not isinstance(data, dict):
    raise ValueError(f'{what} is not a JSON object')
  missing = [name for name in required if name not in data]
  if missing:
    raise ValueError(f'{what} has no field {missing[0]!r}{hint}')
  unknown = [] if known is None else sorted(set(data) - set(known))
  if unknown:
    raise ValueError(f'{what} has unknown fields {unknown}{hint}')
  return data


def check_value(what: str, name: str, value: Any, kind: str) -> None:
  """Raises ValueError("{what}: field {name!r} is {value!r}, expected an
  int") unless `value` is of `kind` ('str', 'int', 'float' or 'bool')."""
  test, words = _KINDS[kind]
  if not test(value):
    raise ValueError(f'{what}: field {name!r} is {value!r}, expected {words}')


def from_dict(cls: type, data: Any, what: str, *,
              ignored: Optional[Collection[str]] = (), hint: str = '') -> Any:
  """The dataclass `cls` from the JSON object `data`: a field without a
  default needs its key, one with takes it for an absent or null key; a str,
  int, float or bool annotation (Optional: or null) is checked.

  Args:
    what: the object's name in messages (a path, 'FILE: field x').
    ignored: keys dropped unread; None: every key that is not a field.
    hint: ends the message of a missing or unknown key.

  Raises:
    ValueError: as `check_keys` and `check_value`, and what `cls` raises.
  """
  fields = dataclasses.fields(cls)
  required = [f.name for f in fields if f.default is dataclasses.MISSING and
              f.default_factory is dataclasses.MISSING]
  known = None if ignored is None else [f.name for f in fields] + [*ignored]
  check_keys(data, what, required, known, hint)
  values = {}
  for f in fields:
    value = data.get(f.name)
    if value is None and f.name not in required:
      continue
    kind = f.type if isinstance(f.type, str) else getattr(f.type, '__name__',
                                                            '')
    if kind.startswith('Optional['):
      kind = kind[len('Optional['):-1] if value is not None else None
    if kind in _KINDS:
      check_value(what, f.name, value, kind)
    values[f.name] = value
  return cls(**values)
