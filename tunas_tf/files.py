"""File helpers shared by the binaries: atomic writes and stored configs.

Paths go through `tf.io.gfile`, so model directories may be local or on
Cloud Storage (`gs://...`, as TPU runs need).

Example:
  files.write_json({'top1': 0.97}, 'runs/a/metrics.json')
  metrics = files.read_json('runs/a/metrics.json')
"""

from __future__ import annotations

import json
import os
from typing import Any, Collection, Dict

# A run's settings in its model directory (the search's and train_eval's).
CONFIG_FILE = 'config.json'


def _gfile():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.io.gfile


def exists(path: str) -> bool:
  return _gfile().exists(path)


def write_text(text: str, path: str) -> None:
  """Writes `text` to `path` through a temporary file and a rename.

  Creates the parent directory if needed. Readers see the old file or the new
  one, never a partial write.
  """
  gfile = _gfile()
  directory = os.path.dirname(path)
  if directory:
    gfile.makedirs(directory)
  tmp = path + '.tmp'
  with gfile.GFile(tmp, 'w') as f:
    f.write(text)
  gfile.rename(tmp, path, overwrite=True)


def write_json(value: Any, path: str, sort_keys: bool = False) -> None:
  """Writes `value` as indented JSON atomically (see `write_text`)."""
  write_text(json.dumps(value, indent=1, sort_keys=sort_keys) + '\n', path)


def read_text(path: str) -> str:
  """Reads a text file; ValueError naming the path if it does not exist."""
  gfile = _gfile()
  if not gfile.exists(path):
    raise ValueError(f'{path} does not exist')
  with gfile.GFile(path) as f:
    return f.read()


def read_json(path: str) -> Any:
  """Reads a JSON file.

  Raises:
    ValueError: if the file is missing or not valid JSON (the message names
      the path).
  """
  text = read_text(path)
  try:
    return json.loads(text)
  except json.JSONDecodeError as e:
    raise ValueError(f'{path} is not valid JSON ({e})') from None


def write_or_check_config(path: str, new: Dict[str, Any],
                          run_only_fields: Collection[str],
                          derived_fields: Collection[str] = ()) -> bool:
  """Writes a run's settings, or checks them against those stored at `path`.

  Args:
    path: the `config.json` path.
    new: this run's settings (JSON-able, flat).
    run_only_fields: settings that only say how long or where to run; they
      may differ, and the stored file takes the new values.
    derived_fields: settings computed from others; compared after the
      others, so an error names what the user changed.

  Returns:
    True when `path` already held a config (a restart).

  Raises:
    ValueError: naming the first differing field outside `run_only_fields`,
      or when the stored file is not a JSON object.
  """
  if not exists(path):
    write_json(new, path, sort_keys=True)
    return False
  old = read_json(path)
  if not isinstance(old, dict):
    raise ValueError(f'{path} does not hold a JSON object')
  derived = set(derived_fields)
  for key in sorted(set(old) | set(new), key=lambda k: (k in derived, k)):
    if key in run_only_fields:
      continue
    if old.get(key, '<missing>') != new.get(key, '<missing>'):
      raise ValueError(
          f'{path} was written by a different run: {key} is '
          f"{old.get(key, '<missing>')!r} there and "
          f"{new.get(key, '<missing>')!r} now; use a new --model_dir or the "
          'same settings')
  write_json({**old, **{k: new[k] for k in run_only_fields if k in new}},
             path, sort_keys=True)
  return True


def read_config(model_dir: str, kind: str) -> Dict[str, Any]:
  """The JSON object a run stored in `model_dir/config.json`.

  Args:
    model_dir: the run's model directory.
    kind: what the directory should hold, for the error ('search', ...).

  Raises:
    ValueError: if there is no config.json, it is not valid JSON, or it does
      not hold a JSON object (the message names the path).
  """
  path = os.path.join(model_dir, CONFIG_FILE)
  if not exists(path):
    raise ValueError(f'No {CONFIG_FILE} in {model_dir!r}: not a {kind} '
                     'directory')
  values = read_json(path)
  if not isinstance(values, dict):
    raise ValueError(f'{path} does not hold a JSON object')
  return values
