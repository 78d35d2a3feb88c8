"""Small file helpers: atomic writes, so a killed run never leaves half a file.

Example:
  files.write_json({'top1': 0.97}, 'runs/a/metrics.json')
  metrics = files.read_json('runs/a/metrics.json')
"""

from __future__ import annotations

import json
import os
from typing import Any


def write_text(text: str, path: str) -> None:
  """Writes `text` to `path` through a temporary file and a rename.

  Creates the parent directory if needed. Readers see the old file or the new
  one, never a partial write.
  """
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  tmp = path + '.tmp'
  with open(tmp, 'w') as f:
    f.write(text)
  os.replace(tmp, path)


def write_json(value: Any, path: str, sort_keys: bool = False) -> None:
  """Writes `value` as indented JSON atomically (see `write_text`)."""
  write_text(json.dumps(value, indent=1, sort_keys=sort_keys) + '\n', path)


def read_json(path: str) -> Any:
  """Reads a JSON file.

  Raises:
    ValueError: if the file is missing or not valid JSON (the message names
      the path).
  """
  if not os.path.exists(path):
    raise ValueError(f'{path} does not exist')
  try:
    with open(path) as f:
      return json.load(f)
  except json.JSONDecodeError as e:
    raise ValueError(f'{path} is not valid JSON ({e})') from None
