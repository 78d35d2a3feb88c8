"""Where a restarted run resumes: the newest checkpoint that reads back in
full, the unreadable ones set aside (docs/restarting.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from typing import Any, Iterator, List, NamedTuple, Optional, Tuple

from absl import logging
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from tunas_tf.io import errors
from tunas_tf.io import files


# The file TF keeps beside the checkpoints, naming the latest (and the kept).
STATE_FILE = 'checkpoint'
# The suffix given to the files of a checkpoint that cannot be read.
UNREADABLE_SUFFIX = '.unreadable'
_STEP = re.compile(r'-(\d+)$')
# Where `tf.train.Checkpoint` (the distribute engine) stores its object graph.
_OBJECT_GRAPH = '_CHECKPOINTABLE_OBJECT_GRAPH'


class _ByVariableName:
  """A `tf.train.Checkpoint`'s tensors under their variables' names (the
  Estimator's `Saver` keys), or their object paths (`global_step`) where no
  variable has that name, so tools read either engine's checkpoint alike."""

  def __init__(self, raw: Any):
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(raw.get_tensor(_OBJECT_GRAPH))
    self._raw = raw
    attributes = [a for node in graph.nodes for a in node.attributes]
    suffix = '/.ATTRIBUTES/VARIABLE_VALUE'
    self._keys = {a.checkpoint_key[:-len(suffix)]: a.checkpoint_key
                  for a in attributes if a.checkpoint_key.endswith(suffix)}
    self._keys.update((a.full_name, a.checkpoint_key) for a in attributes
                      if a.full_name)
    self._keys.pop('save_counter', None)  # The Checkpoint's, not the run's.

  def get_variable_to_shape_map(self):
    shapes = self._raw.get_variable_to_shape_map()
    return {name: shapes[key] for name, key in self._keys.items()}

  def get_variable_to_dtype_map(self):
    dtypes = self._raw.get_variable_to_dtype_map()
    return {name: dtypes[key] for name, key in self._keys.items()}

  def has_tensor(self, name: str) -> bool:
    return name in self._keys

  def get_tensor(self, name: str):
    if name not in self._keys:
      raise tf.errors.NotFoundError(None, None,
                                    f'Key {name} not found in checkpoint')
    return self._raw.get_tensor(self._keys[name])


def _raw_reader(prefix: str) -> Any:
  """A `CheckpointReader` of `prefix`, keyed as the checkpoint is."""
  # Not `tf.train.load_checkpoint`: on ram:// a prefix counts as a directory.
  return tf.compat.v1.train.NewCheckpointReader(prefix)


def reader(prefix: str) -> Any:
  """A reader of the checkpoint `prefix` keyed by variable name, whichever
  engine wrote it; tf.errors.OpError when it cannot be read."""
  raw = _raw_reader(prefix)
  return _ByVariableName(raw) if raw.has_tensor(_OBJECT_GRAPH) else raw


def read_checkpoint(prefix: str) -> Any:
  """`reader(prefix)`, or one line: ValueError('Cannot read checkpoint ...')."""
  try:
    return reader(prefix)
  except (tf.errors.OpError, ValueError) as e:
    raise ValueError(f'Cannot read checkpoint {prefix!r}: '
                     f'{str(e).splitlines()[0]}') from None


def unreadable_reason(prefix: str) -> Optional[str]:
  """Why the checkpoint `prefix` cannot be restored, or None if it can: every
  tensor is read back (checksums too), before a run relies on it."""
  if not tf.io.gfile.exists(prefix + '.index'):
    return 'its files are missing'
  try:
    values = _raw_reader(prefix)
    for name in values.get_variable_to_shape_map():
      values.get_tensor(name)
  except Exception as e:  # pylint: disable=broad-except
    # TF raises OpErrors, and IndexError/ValueError for a truncated file.
    return errors.first_line(e)
  return None


def checkpoint_step(prefix: str) -> int:
  """The global step in the checkpoint `prefix` (either engine's);
  tf.errors.OpError when it cannot be read or has none."""
  return int(reader(prefix).get_tensor('global_step'))


class ResumePoint(NamedTuple):
  """Where a run in a model directory resumes."""
  checkpoint: Optional[str]  # The prefix; None for a fresh start.
  global_step: int  # Its step (0 for a fresh start).
  skipped: List[Tuple[str, str]]  # (prefix, reason) of newer unreadable ones.
  older: List[str]  # Older ones the `checkpoint` file keeps listing.
  state_ok: bool  # Whether the `checkpoint` file exists and parses.

  @property
  def text(self) -> Optional[str]:
    """'step N (model.ckpt-N)', or None for a fresh start."""
    if self.checkpoint is None:
      return None
    return f'step {self.global_step} ({os.path.basename(self.checkpoint)})'

  @property
  def state_stale(self) -> bool:
    """Whether the `checkpoint` file must be rewritten to name `checkpoint`."""
    return self.checkpoint is not None and (bool(self.skipped) or
                                            not self.state_ok)


def _step(prefix: str) -> int:
  match = _STEP.search(prefix)
  return int(match.group(1)) if match else -1


def _candidates(model_dir: str) -> Tuple[List[str], List[str], bool]:
  """(prefixes newest first, those the `checkpoint` file names, whether it
  parses): on disk up to its latest step (newer ones are an interrupted
  save, left alone as TF leaves them), or all on disk without it."""
  on_disk = [path[:-len('.index')] for path in tf.io.gfile.glob(
      os.path.join(model_dir, 'model.ckpt-*.index'))]
  state = None
  if tf.io.gfile.exists(os.path.join(model_dir, STATE_FILE)):
    state = tf.train.get_checkpoint_state(model_dir)
  if state is None or not state.model_checkpoint_path:
    return sorted(on_disk, key=_step, reverse=True), [], False
  latest = state.model_checkpoint_path
  named = [latest] + list(state.all_model_checkpoint_paths)
  older = [p for p in named + on_disk if _step(p) <= _step(latest)]
  ordered = [latest] + sorted(set(older) - {latest}, key=_step, reverse=True)
  return ordered, named, True


def resume_point(model_dir: str) -> ResumePoint:
  """Finds the newest readable checkpoint of `model_dir`; writes nothing.

  Raises:
    ValueError: when the directory has checkpoints but none can be read,
      naming each and why.
  """
  if not tf.io.gfile.isdir(model_dir):
    return ResumePoint(None, 0, [], [], False)
  candidates, named, state_ok = _candidates(model_dir)
  skipped = []
  for i, prefix in enumerate(candidates):
    reason = unreadable_reason(prefix)
    if reason is None:
      step = checkpoint_step(prefix)
      # Only those the `checkpoint` file named stay in it (and so in the
      # Saver's rotation): a fallback never schedules other files' deletion.
      older = [p for p in candidates[i + 1:] if p in named]
      return ResumePoint(prefix, step, skipped, older, state_ok)
    skipped.append((prefix, reason))
  if skipped:
    listed = '; '.join(f'{os.path.basename(p)}: {r}' for p, r in skipped)
    raise ValueError(f'No readable checkpoint in {model_dir} ({listed}); '
                     'nothing was changed: restore one or use a new '
                     '--model_dir')
  return ResumePoint(None, 0, [], [], state_ok)


def _set_aside(path: str) -> str:
  """Renames `path` to a free `path.unreadable[.N]`; returns the new name."""
  target, n = path + UNREADABLE_SUFFIX, 1
  while tf.io.gfile.exists(target):
    target, n = f'{path}{UNREADABLE_SUFFIX}.{n}', n + 1
  tf.io.gfile.rename(path, target)
  return target


def _write_state(model_dir: str, latest: str, kept: List[str]) -> None:
  """Writes the `checkpoint` file as TF's Saver does (relative names)."""

  def name(prefix: str) -> str:
    # Not `normpath`, which would turn `gs://b/run` into `gs:/b/run`.
    same = os.path.dirname(prefix) == model_dir.rstrip('/')
    return json.dumps(os.path.basename(prefix) if same else prefix)

  files.write_text(''.join([f'model_checkpoint_path: {name(latest)}\n'] + [
      f'all_model_checkpoint_paths: {name(p)}\n' for p in kept]),
                   os.path.join(model_dir, STATE_FILE))


def use_resume_point(model_dir: str, point: ResumePoint) -> Optional[str]:
  """Points a stale `checkpoint` file at `point.checkpoint`, the skipped
  files renamed `*.unreadable` first (a resumed run must not overwrite them;
  killed in between, it falls back again). Returns (and logs) the line
  saying what changed; None when nothing needed changing."""
  if not point.state_stale:
    return None
  for prefix, _ in point.skipped:
    for path in tf.io.gfile.glob(prefix + '.*'):
      if UNREADABLE_SUFFIX not in path:
        _set_aside(path)
  state_path = os.path.join(model_dir, STATE_FILE)
  if not point.state_ok and tf.io.gfile.exists(state_path):
    _set_aside(state_path)
  _write_state(model_dir, point.checkpoint,
               sorted(point.older, key=_step) + [point.checkpoint])
  name = os.path.basename(point.checkpoint)
  problems = [f'{os.path.basename(p)} is unreadable ({r})'
              for p, r in point.skipped]
  if not point.state_ok:
    problems.append(f'the {STATE_FILE} file is missing or unreadable')
  line = (f'{model_dir}: {"; ".join(problems)}: resuming from {name}, the '
          f'newest readable checkpoint; the unreadable files are kept as '
          f'*{UNREADABLE_SUFFIX} and the {STATE_FILE} file now names {name}')
  logging.warning('%s', line)
  return line


@contextlib.contextmanager
def refuse_unreadable(checkpoint: Optional[str]) -> Iterator[None]:
  """Turns the body's failed restore of `checkpoint` into ValueError naming
  it and why (None: a fresh run, whose errors pass through)."""
  try:
    yield
  except tf.errors.OpError as e:
    if checkpoint is None or 'Restore' not in str(e):
      raise
    raise ValueError(
        f'Cannot resume from {checkpoint}: {errors.first_line(e)}; remove '
        'the broken checkpoint or use a new --model_dir') from None
