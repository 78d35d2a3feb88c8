"""File helpers shared by the binaries: atomic writes and stored configs.

Paths go through `tf.io.gfile`, so model directories may be local or on
Cloud Storage (`gs://...`, as TPU runs need).
"""

from __future__ import annotations

import io
import json
import os
import time
from typing import Any, Callable, Collection, Dict, Mapping, Optional
import uuid

# A run's settings in its model directory (the search's and train_eval's).
CONFIG_FILE = 'config.json'


def _tf():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf


def exists(path: str) -> bool:
  return _tf().io.gfile.exists(path)


def is_remote(path: str) -> bool:
  """Whether `path` names a filesystem of `tf.io.gfile` (`gs://...`)."""
  return '://' in path


def abspath(path: str) -> str:
  """`os.path.abspath` of a local path; a remote one as it is."""
  return path if is_remote(path) else os.path.abspath(path)


def _write(data: Any, path: str, mode: str) -> None:
  gfile = _tf().io.gfile
  directory = os.path.dirname(path)
  if directory:
    gfile.makedirs(directory)
  # A new object per writer: two writers never share one, and some
  # filesystems (ram://) append to an existing file opened for writing.
  tmp = f'{path}.{uuid.uuid4().hex}.tmp'
  with gfile.GFile(tmp, mode) as f:
    f.write(data)
  gfile.rename(tmp, path, overwrite=True)


def write_text(text: str, path: str) -> None:
  """Writes `text` to `path` (and its directory) by a rename: atomically."""
  _write(text, path, 'w')


def write_bytes(data: bytes, path: str) -> None:
  """Writes `data` to `path` atomically (see `write_text`)."""
  _write(data, path, 'wb')


def write_png(figure: Any, path: str, **savefig_args: Any) -> None:
  """Saves a matplotlib `figure` as a PNG at `path` (see `write_text`),
  drawn into memory so that `path` may be remote."""
  buffer = io.BytesIO()
  figure.savefig(buffer, format='png', **savefig_args)
  write_bytes(buffer.getvalue(), path)


def write_json(value: Any, path: str, sort_keys: bool = False) -> None:
  """Writes `value` as indented JSON atomically (see `write_text`)."""
  write_text(json.dumps(value, indent=1, sort_keys=sort_keys) + '\n', path)


def read_or_none(path: str) -> Optional[str]:
  """The text at `path` (bytes that are not UTF-8 replaced), None if it is
  missing."""
  try:
    with _tf().io.gfile.GFile(path, 'rb') as f:
      return f.read().decode(errors='replace')
  except _tf().errors.NotFoundError:
    return None


def age(path: str) -> Optional[float]:
  """Seconds since `path` was written; None if it is missing or its
  filesystem keeps no times (ram://)."""
  try:
    mtime_nsec = _tf().io.gfile.stat(path).mtime_nsec
  except _tf().errors.NotFoundError:
    return None
  return time.time() - mtime_nsec / 1e9 if mtime_nsec else None


def remove(path: str) -> None:
  """Removes `path` if it exists."""
  try:
    _tf().io.gfile.remove(path)
  except _tf().errors.NotFoundError:
    pass


def create_new(path: str, text: str) -> bool:
  """Writes `text` to a new local file (and its directory); False if `path`
  exists (O_EXCL: of two processes creating it, one does)."""
  os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
  try:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
  except FileExistsError:
    return False
  with os.fdopen(fd, 'w') as f:
    f.write(text)
  return True


def replace_unchanged(path: str, expected: Optional[str], text: str) -> bool:
  """Whether the local file `path`, holding `expected` (None: missing), now
  holds `text` by this call. Atomic: it is renamed aside first, so of two
  processes replacing it one moves it; the other finds none, or moves the
  winner's file, sees it and puts it back."""
  aside = f'{path}.{uuid.uuid4().hex}.aside'
  try:
    os.rename(path, aside)
  except FileNotFoundError:
    return create_new(path, text)
  with open(aside, 'rb') as f:
    changed = f.read().decode(errors='replace') != expected
  if changed:
    try:
      os.link(aside, path)  # Back, unless yet another was created.
    except OSError:
      pass
  os.remove(aside)
  return not changed and create_new(path, text)


def read_text(path: str) -> str:
  """Reads a text file; ValueError naming the path if it does not exist."""
  text = read_or_none(path)
  if text is None:
    raise ValueError(f'{path} does not exist')
  return text


def read_input(path: str) -> str:
  """Reads a text file a user named (local or remote).

  Raises:
    ValueError: 'cannot read {path}: {reason}' (missing, a directory,
      unreadable).
  """
  tf = _tf()
  try:
    with tf.io.gfile.GFile(path) as f:
      return f.read()
  except tf.errors.OpError as e:
    # TF's message starts with the path: '{path}; No such file or directory'.
    reason = (e.message or type(e).__name__).replace(f'{path}; ', '', 1)
    raise ValueError(f'cannot read {path}: {reason}') from None


def read_json(path: str) -> Any:
  """Reads a JSON file; ValueError naming the path if it is missing or not
  valid JSON."""
  text = read_text(path)
  try:
    return json.loads(text)
  except json.JSONDecodeError as e:
    raise ValueError(f'{path} is not valid JSON ({e})') from None


def check_config(path: str, new: Dict[str, Any],
                 run_only_fields: Collection[str],
                 derived_fields: Collection[str] = (),
                 check_stored: Optional[Callable[[Dict[str, Any]], None]]
                 = None,
                 added_fields: Optional[Mapping[str, Any]] = None
                 ) -> Optional[Dict[str, Any]]:
  """Checks a run's settings against those stored at `path`; writes nothing.

  Args:
    new: this run's settings (JSON-able, flat).
    run_only_fields: settings a restart may change (cadence, where to run).
    derived_fields: compared last, so an error names what the user changed.
    check_stored: called with the stored settings before any comparison.
    added_fields: settings an earlier version did not store, with the value
      it ran with: taken where the stored file lacks them.

  Returns:
    The stored settings, or None when `path` does not exist (a new run).

  Raises:
    ValueError: naming the first differing field with both values, or a
      stored file that is not a JSON object.
  """
  if not exists(path):
    return None
  old = read_json(path)
  if not isinstance(old, dict):
    raise ValueError(f'{path} does not hold a JSON object')
  if check_stored is not None:
    check_stored(old)
  old = {**(added_fields or {}), **old}
  derived = set(derived_fields)
  for key in sorted(set(old) | set(new), key=lambda k: (k in derived, k)):
    if key in run_only_fields:
      continue
    if key not in old:
      raise ValueError(f'{path} has no field {key!r}: written by another '
                       'binary or an earlier version; use a new --model_dir')
    if old.get(key, '<missing>') != new.get(key, '<missing>'):
      raise ValueError(
          f'{path} was written by a different run: {key} is '
          f"{old.get(key, '<missing>')!r} there and "
          f"{new.get(key, '<missing>')!r} now; use a new --model_dir or the "
          'same settings')
  return old


def write_config(path: str, new: Dict[str, Any],
                 stored: Optional[Dict[str, Any]],
                 run_only_fields: Collection[str]) -> None:
  """Writes `new` (a new run), or `stored` (what `check_config` returned)
  with the new run-only values, only when the content changes."""
  if stored is None:
    write_json(new, path, sort_keys=True)
    return
  merged = {**stored, **{k: new[k] for k in run_only_fields if k in new}}
  if merged != stored:
    write_json(merged, path, sort_keys=True)


def _nearest_existing(path: str) -> str:
  """`path` or its nearest ancestor that exists (local paths)."""
  path = os.path.abspath(path)
  while not os.path.lexists(path):
    path = os.path.dirname(path)
  return path


def _directory_problem(path: str) -> Optional[str]:
  """Why a local `path` cannot be used as an output directory, or None."""
  found = _nearest_existing(path)
  if found == os.path.abspath(path):
    if not os.path.isdir(found):
      return 'is a file, not a directory'
    return None if os.access(found, os.W_OK | os.X_OK) else 'is not writable'
  if not os.path.isdir(found):
    return f'cannot be created: {found} is a file'
  if not os.access(found, os.W_OK | os.X_OK):
    return f'cannot be created: {found} is not writable'
  return None


def check_output_dir(path: str, flag: str) -> None:
  """ValueError '{flag}={path} is a file, not a directory' (or is not
  writable, or cannot be created) unless `path` is a writable directory or
  can be created as one; creates nothing (a remote path: not a file)."""
  if not is_remote(path):
    problem = _directory_problem(path)
  else:
    gfile = _tf().io.gfile
    problem = ('is a file, not a directory'
               if gfile.exists(path) and not gfile.isdir(path) else None)
  if problem:
    raise ValueError(f'{flag}={path} {problem}')


def check_output_file(path: str, flag: str) -> None:
  """Checks that `path` can be written as a file; creates nothing.

  Raises:
    ValueError: '{flag}={path} is a directory, not a file', or '... cannot
      be written: {ancestor} is a file' (or is not writable).
  """
  if _tf().io.gfile.isdir(path):
    raise ValueError(f'{flag}={path} is a directory, not a file')
  directory = os.path.dirname(path)
  if directory and not is_remote(path):
    problem = _directory_problem(directory)
    if problem:
      found = _nearest_existing(directory)
      reason = ('is a file' if not os.path.isdir(found) else
                'is not writable')
      raise ValueError(f'{flag}={path} cannot be written: {found} {reason}')


def read_config(model_dir: str, kind: str) -> Dict[str, Any]:
  """The JSON object a run stored in `model_dir/config.json`.

  Raises:
    ValueError: if there is no config.json (not a `kind` directory), it is
      not valid JSON, or it does not hold a JSON object.
  """
  path = os.path.join(model_dir, CONFIG_FILE)
  if not exists(path):
    raise ValueError(f'No {CONFIG_FILE} in {model_dir!r}: not a {kind} '
                     'directory')
  values = read_json(path)
  if not isinstance(values, dict):
    raise ValueError(f'{path} does not hold a JSON object')
  return values
