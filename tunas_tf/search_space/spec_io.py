"""Specs <-> JSON, versioned, with an explicit registry of types (no pickle).

`{"format_version": 1, "spec": NODE}`, NODE a JSON number, string, boolean,
null or list, or `{"__type__": "tuple"|"dict"|"OneOf"|CLASS, ...}` for
tuples, dicts (`items`: [KEY, NODE] pairs), `OneOf`s (`choices`, `tag`; masks
are not serialised) and the registered spec dataclasses
(`ops.SPEC_CLASSES`, `fields`). Unknown types, unknown or missing fields and
other versions are refused with a ValueError naming the problem.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict

from tunas_tf.search_space import ops
from tunas_tf.search_space.schema import OneOf

FORMAT_VERSION = 1
_TYPE_KEY = '__type__'
_REGISTRY: Dict[str, type] = {cls.__name__: cls for cls in ops.SPEC_CLASSES}
_BUILTIN_TYPES = ('tuple', 'dict', 'OneOf')
KNOWN_TYPES = tuple(sorted(_REGISTRY)) + _BUILTIN_TYPES


def _encode(value: Any) -> Any:
  if value is None or isinstance(value, (bool, int, float, str)):
    return value
  if isinstance(value, OneOf):
    return {_TYPE_KEY: 'OneOf', 'choices': [_encode(c) for c in value.choices],
            'tag': value.tag}
  if isinstance(value, list):
    return [_encode(v) for v in value]
  if isinstance(value, tuple):
    return {_TYPE_KEY: 'tuple', 'items': [_encode(v) for v in value]}
  if isinstance(value, dict):
    for key in value:
      if not isinstance(key, (str, int)) or isinstance(key, bool):
        raise ValueError(f'spec_io: dict key {key!r} is not a str or int')
    return {_TYPE_KEY: 'dict',
            'items': [[k, _encode(value[k])] for k in sorted(value, key=str)]}
  cls = type(value)
  if dataclasses.is_dataclass(value) and _REGISTRY.get(cls.__name__) is cls:
    return {_TYPE_KEY: cls.__name__,
            'fields': {f.name: _encode(getattr(value, f.name))
                       for f in dataclasses.fields(value)}}
  raise ValueError(f'spec_io: cannot serialise a {cls.__name__}; known types '
                   f'are {list(KNOWN_TYPES)} and JSON primitives')


def _decode(node: Any, where: str) -> Any:
  if node is None or isinstance(node, (bool, int, float, str)):
    return node
  if isinstance(node, list):
    return [_decode(v, f'{where}/{i}') for i, v in enumerate(node)]
  if not isinstance(node, dict) or _TYPE_KEY not in node:
    raise ValueError(f'spec_io: malformed node at {where or "/"}: expected a '
                     f'JSON primitive, list or object with "{_TYPE_KEY}"')
  type_name = node[_TYPE_KEY]
  try:
    if type_name == 'tuple':
      return tuple(_decode(v, f'{where}/{i}')
                   for i, v in enumerate(node['items']))
    if type_name == 'dict':
      return {k: _decode(v, f'{where}/{k}') for k, v in node['items']}
    if type_name == 'OneOf':
      return OneOf([_decode(c, f'{where}/choices/{i}')
                    for i, c in enumerate(node['choices'])], node['tag'])
  except (KeyError, TypeError) as e:
    raise ValueError(
        f'spec_io: malformed {type_name} at {where or "/"}: {e!r}') from None
  cls = _REGISTRY.get(type_name)
  if cls is None:
    raise ValueError(f'spec_io: unknown type {type_name!r} at {where or "/"}; '
                     f'known types are {list(KNOWN_TYPES)}')
  fields = node.get('fields')
  if not isinstance(fields, dict):
    raise ValueError(f'spec_io: {type_name} at {where or "/"} has no "fields" '
                     'object')
  names = [f.name for f in dataclasses.fields(cls)]
  unknown = sorted(set(fields) - set(names))
  if unknown:
    raise ValueError(f'spec_io: {type_name} at {where or "/"} has unknown '
                     f'fields {unknown}; expected {names}')
  try:
    return cls(**{k: _decode(v, f'{where}/{k}') for k, v in fields.items()})
  except TypeError as e:
    raise ValueError(f'spec_io: bad {type_name} at {where or "/"}: {e}') from None


def to_json(spec: Any) -> Dict[str, Any]:
  """Returns the JSON-ready document (a dict) for `spec`."""
  return {'format_version': FORMAT_VERSION, 'spec': _encode(spec)}


def from_json(document: Any) -> Any:
  """The spec of a `to_json` document; ValueError on another format version,
  an unknown type (listing the known ones), unknown fields or a bad node."""
  if not isinstance(document, dict) or 'spec' not in document:
    raise ValueError('spec_io: not a spec document (expected an object with '
                     '"format_version" and "spec")')
  version = document.get('format_version')
  if version != FORMAT_VERSION:
    raise ValueError(f'spec_io: unsupported format_version {version!r}; this '
                     f'version reads {FORMAT_VERSION}')
  return _decode(document['spec'], '')


def dumps(spec: Any, indent: int | None = 1) -> str:
  """`spec` as a JSON string (the module docstring's format)."""
  return json.dumps(to_json(spec), indent=indent, sort_keys=True)


def loads(text: str) -> Any:
  """The spec of a `dumps` string; ValueError as `from_json` or for bad JSON."""
  try:
    document = json.loads(text)
  except json.JSONDecodeError as e:
    raise ValueError(f'spec_io: invalid JSON: {e}') from None
  return from_json(document)
