"""Where a restarted run resumes, and checkpoints that cannot be read.

`resume_point` and `use_resume_point`: the newest checkpoint is read back
in full; when it cannot be (truncated, corrupt, a missing shard or file),
the run falls back to the newest readable one, sets the unreadable files
aside (`*.unreadable`, never deleted) and points the `checkpoint` file at
it, in one line; with none readable it refuses in one line.
`refuse_unreadable`: a foreign checkpoint failing inside the Estimator's
restore becomes one line naming the file.
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
  """A `tf.train.Checkpoint`'s tensors under their variables' names.

  Such a checkpoint keys a tensor by its object path
  (`controller/_logits/3/.ATTRIBUTES/VARIABLE_VALUE`); its object graph
  keeps each variable's own name (`rl_controller/logits/blocks/1/filters`),
  the key the Estimator's `Saver` uses. Both engines name the variables
  alike, so the tools read either engine's checkpoint by these names. A
  tensor is also found by its object path (`global_step`) where no
  variable has that name. The Checkpoint's own `save_counter` is left out:
  it counts saves, not the run's state.
  """

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
    shapes = raw.get_variable_to_shape_map()
    dtypes = raw.get_variable_to_dtype_map()
    self._shapes = {name: shapes[key] for name, key in self._keys.items()}
    self._dtypes = {name: dtypes[key] for name, key in self._keys.items()}

  def get_variable_to_shape_map(self):
    return dict(self._shapes)

  def get_variable_to_dtype_map(self):
    return dict(self._dtypes)

  def has_tensor(self, name: str) -> bool:
    return name in self._keys

  def get_tensor(self, name: str):
    if name not in self._keys:
      raise tf.errors.NotFoundError(None, None,
                                    f'Key {name} not found in checkpoint')
    return self._raw.get_tensor(self._keys[name])


def _raw_reader(prefix: str) -> Any:
  """A `CheckpointReader` of `prefix`, keyed as the checkpoint is.

  `tf.train.load_checkpoint` first asks whether the path is a directory, to
  read that directory's latest checkpoint instead; a prefix is not one, and
  on TF's `ram://` filesystem, where every leading part of a file's name
  counts as a directory, the answer is yes and the read fails.
  """
  return tf.compat.v1.train.NewCheckpointReader(prefix)


def reader(prefix: str) -> Any:
  """A reader of the checkpoint `prefix` keyed by variable name, whichever
  engine wrote it (`get_variable_to_shape_map`, `has_tensor`, `get_tensor`;
  `global_step`, `rl_controller/logits/...`, `blocks/...`).

  Raises:
    tf.errors.OpError: when the checkpoint cannot be read.
  """
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
  """Why the checkpoint `prefix` cannot be restored, or None if it can.

  Reads every tensor back (the data files' checksums included), so a
  truncated or corrupt data file, a missing shard or a bad index is found
  before a run relies on it.
  """
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
  """The global step stored in the checkpoint `prefix` (either engine's).

  Raises:
    tf.errors.OpError: when the checkpoint cannot be read or has no step.
  """
  return int(reader(prefix).get_tensor('global_step'))


class ResumePoint(NamedTuple):
  """Where a run in a model directory resumes.

  Fields:
    checkpoint: the checkpoint prefix to resume from; None for a fresh start.
    global_step: its global step (0 for a fresh start).
    skipped: (prefix, reason) of the newer checkpoints that cannot be read.
    older: the older checkpoints to keep listing in the `checkpoint` file.
    state_ok: whether the `checkpoint` file exists and can be parsed.
  """
  checkpoint: Optional[str]
  global_step: int
  skipped: List[Tuple[str, str]]
  older: List[str]
  state_ok: bool

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
  """The checkpoints a restart may resume from, newest first.

  Returns:
    (prefixes, named, state_ok): `prefixes` are those the `checkpoint` file
    names (`named`, at most as new as its latest) and the `model.ckpt-N`
    files on disk up to that step, or all of those on disk when the file is
    missing or unreadable (state_ok False). Newer files the `checkpoint`
    file does not name are an interrupted save and are left alone, as TF
    leaves them.
  """
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
  """Makes the Estimator resume from `point.checkpoint`; returns the line.

  When the `checkpoint` file is stale: renames the skipped checkpoints'
  files and an unparsable `checkpoint` file to `*.unreadable` (so the
  resumed run cannot overwrite them when it saves at their steps), then
  points the `checkpoint` file at `point.checkpoint` (in that order: a run
  killed in between finds the renamed files missing and falls back again).
  Logs and returns the one line saying what it skipped, why, and what it
  changed; None when nothing needed changing.
  """
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
  """Runs a resume from `checkpoint`; a failed restore becomes one line.

  Args:
    checkpoint: the checkpoint the run resumes from (None: a fresh run,
      whose errors pass through).

  Raises:
    ValueError: when the body fails restoring `checkpoint`, naming it and the
      reason.
  """
  try:
    yield
  except tf.errors.OpError as e:
    if checkpoint is None or 'Restore' not in str(e):
      raise
    raise ValueError(f'Cannot resume from {checkpoint}: '
                     f'{errors.first_line(e)}; remove the broken checkpoint or use a new '
                     '--model_dir') from None
