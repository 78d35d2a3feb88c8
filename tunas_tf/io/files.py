"""File helpers shared by the binaries: atomic writes, checked reads, output
paths, through `tf.io.gfile`, so model directories may be local or on Cloud
Storage (`gs://...`, as TPU runs need)."""

from __future__ import annotations

import io
import json
import os
import time
from typing import Any, Optional, Tuple
import uuid

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


def write_bytes(data: bytes, path: str) -> None:
  """Writes `data` to `path` (and its directory) by a rename: atomically."""
  gfile = _tf().io.gfile
  directory = os.path.dirname(path)
  if directory:
    gfile.makedirs(directory)
  # A new object per writer: two writers never share one, and some
  # filesystems (ram://) append to an existing file opened for writing.
  tmp = f'{path}.{uuid.uuid4().hex}.tmp'
  with gfile.GFile(tmp, 'wb') as f:
    f.write(data)
  gfile.rename(tmp, path, overwrite=True)


def write_text(text: str, path: str) -> None:
  """`write_bytes` of `text` in UTF-8."""
  write_bytes(text.encode(), path)


def write_png(figure: Any, path: str, **savefig_args: Any) -> None:
  """Saves a matplotlib `figure` as a PNG at `path` (`write_bytes`),
  drawn into memory so that `path` may be remote."""
  buffer = io.BytesIO()
  figure.savefig(buffer, format='png', **savefig_args)
  write_bytes(buffer.getvalue(), path)


def write_json(value: Any, path: str, sort_keys: bool = False) -> None:
  """Writes `value` as indented JSON atomically (`write_text`)."""
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
  """Reads a text file a user named (local or remote); ValueError 'cannot
  read {path}: {reason}' (missing, a directory, unreadable)."""
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


def _directory_problem(path: str) -> Optional[Tuple[str, str]]:
  """(the local `path` or its nearest existing ancestor, 'is a file' or 'is
  not writable') if `path` cannot be used as an output directory, else None."""
  found = os.path.abspath(path)
  while not os.path.lexists(found):
    found = os.path.dirname(found)
  if not os.path.isdir(found):
    return found, 'is a file'
  return None if os.access(found, os.W_OK | os.X_OK) else (
      found, 'is not writable')


def check_output_dir(path: str, flag: str) -> None:
  """ValueError '{flag}={path} is a file, not a directory' (or is not
  writable, or cannot be created) unless `path` is a writable directory or
  can be created as one; creates nothing (a remote path: not a file)."""
  if is_remote(path):
    gfile = _tf().io.gfile
    problem = ('is a file, not a directory'
               if gfile.exists(path) and not gfile.isdir(path) else None)
  else:
    found, problem = _directory_problem(path) or (None, None)
    if found != os.path.abspath(path) and problem:
      problem = f'cannot be created: {found} {problem}'
    elif problem == 'is a file':
      problem = 'is a file, not a directory'
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
  problem = directory and not is_remote(path) and _directory_problem(directory)
  if problem:
    raise ValueError(f'{flag}={path} cannot be written: {" ".join(problem)}')
