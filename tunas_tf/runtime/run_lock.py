"""One process per run directory: the lease file `run.lock` in a model dir.

`acquire` takes it, or refuses naming the live holder, or takes over from a
holder that is gone saying why; a heartbeat thread keeps it, and `lost()`
says when another process took it. The rules: docs/restarting.md.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import socket
import threading
import time
from typing import Optional, Tuple
import uuid

from absl import logging

from tunas_tf.io import checks
from tunas_tf.io import errors
from tunas_tf.io import files
from tunas_tf.io import records

LOCK_FILE = 'run.lock'
# Our leases' tokens: a lease naming our pid without one is a past process's.
_TOKENS_HELD_HERE = set()
_MAX_PID = 2**31 - 1  # Linux's is 2**22; this keeps os.kill from overflowing.


class Held(ValueError):
  """A live process holds the run directory; `str()` is one line."""

  def __init__(self, text: str):
    super().__init__(errors.one_line(text))  # Names from a file anyone wrote.


@dataclasses.dataclass(frozen=True)
class Holder:
  """A process; its start time in ticks since boot (/proc/PID/stat 22)."""
  host: str
  pid: int
  start_time: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class _Lease:
  """The content of a lock file."""
  host: str
  pid: int
  start_time: Optional[int]
  since: float
  heartbeat: float
  token: str
  binary: str

  @classmethod
  def parse(cls, text: Optional[str]) -> _Lease:
    """The lease in `text`; ValueError saying what is wrong."""
    lease = records.from_dict(cls, json.loads(text or ''), 'lease',
                              ignored=None)
    checks.number('pid', lease.pid, 1, _MAX_PID, integer=True,
                  prefix='lease: ')  # kill(0) would signal our group.
    return lease

  def text(self) -> str:
    return json.dumps(dataclasses.asdict(self), indent=1) + '\n'

  def describe(self) -> str:
    since = time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(self.since))
    return f'{self.binary} on host {self.host}, pid {self.pid}, since {since}'


def _token(text: Optional[str]) -> Optional[str]:
  try:
    return _Lease.parse(text).token
  except ValueError:
    return None


def _proc_stat(pid: int) -> Tuple[Optional[str], Optional[int]]:
  """(state, start time) of `pid` from /proc, (None, None) where unreadable."""
  try:
    with open(f'/proc/{pid}/stat', 'rb') as f:
      stat = f.read().decode(errors='replace')
    # Field 2, the command, is in parentheses and may hold spaces and ')'.
    fields = stat[stat.rindex(')') + 2:].split()
    return fields[0], int(fields[19])  # Fields 3 and 22.
  except (OSError, ValueError, IndexError):
    return None, None


def _gone_reason(lease: _Lease, me: Holder,
                 stale_seconds: float) -> Optional[str]:
  """Why `lease`'s holder is gone, or None if it is alive: on our host by
  its pid, elsewhere by a heartbeat `stale_seconds` old (by our clock)."""
  if lease.host != me.host:
    age = time.time() - lease.heartbeat
    return (f'no heartbeat for {age:.0f} s (stale after {stale_seconds:g} s)'
            if age >= stale_seconds else None)
  where = f'pid {lease.pid} on host {lease.host}'
  if lease.pid == me.pid:
    return None if lease.token in _TOKENS_HELD_HERE else (
        f"{where} is this process: the lease is a previous incarnation's (a "
        'restarted container reuses pids)')
  try:
    os.kill(lease.pid, 0)
  except ProcessLookupError:
    return f'{where} is gone'
  except PermissionError:  # Another user's process.
    pass
  state, start_time = _proc_stat(lease.pid)
  if state == 'Z':
    return f'{where} has exited (a zombie not yet reaped)'
  if None not in (lease.start_time, start_time) and (
      start_time != lease.start_time):
    return f'{where} is gone (the pid now names a process started later)'
  return None


def _judge(model_dir: str, path: str, text: str, me: Holder,
           stale_seconds: float) -> str:
  """The warning for taking over the lease `text`; Held if it is alive, or
  if it is unreadable and younger than `stale_seconds` (as while its creator
  writes it; a remote one, of unknown age, is never half written)."""
  try:
    lease = _Lease.parse(text)
  except ValueError as e:
    problem, age = errors.one_line(e), files.age(path)
    if age is not None and age < stale_seconds:
      raise Held(
          f'{model_dir} may be in use: {path} is unreadable ({problem}) and '
          f'{age:.0f} s old, as while a process creates it; if no run uses '
          f'{model_dir}, remove {path}, or wait: it is taken over once '
          f'{stale_seconds:g} s old') from None
    old = 'of unknown age' if age is None else f'{age:.0f} s old'
    return errors.one_line(f'Taking over {model_dir}: {path} is unreadable '
                           f'({problem}) and {old}')
  reason = _gone_reason(lease, me, stale_seconds)
  if reason is None:
    raise Held(f'{model_dir} is in use by {lease.describe()} (heartbeat '
               f'{time.time() - lease.heartbeat:.0f} s ago); wait for it to '
               'end, or stop it: a holder that is gone is taken over')
  return errors.one_line(
      f'Taking over {model_dir} from {lease.describe()}: {reason}')


# Waits for a competing writer's lease to land (tests replace it).
_settle = time.sleep


def _take_over(path: str, judged: Optional[str], text: str,
               settle_seconds: float) -> bool:
  """Whether `text` replaced the lease `judged` (judged gone; None: none):
  locally by `files.replace_unchanged`; remotely (no atomic rename) it is
  written, and read back after `settle_seconds` (the last writer wins)."""
  if not files.is_remote(path):
    return files.replace_unchanged(path, judged, text)
  if judged is None and files.read_or_none(path) is not None:
    return False
  files.write_text(text, path)
  _settle(settle_seconds)
  return files.read_or_none(path) == text


class RunLock(contextlib.AbstractContextManager):
  """This process's hold on `model_dir` (its lock file: `path`), kept by a
  heartbeat thread; `took_over` is the warning logged when it was taken
  over from a holder that was gone, else None."""

  def __init__(self, model_dir: str, lease: _Lease, heartbeat_seconds: float,
               settle_seconds: float, took_over: Optional[str]):
    self.model_dir, self.took_over = model_dir, took_over
    self.path = os.path.join(model_dir, LOCK_FILE)
    self._lease, self._lost, self._stop = lease, None, threading.Event()
    self._owner_pid = os.getpid()
    _TOKENS_HELD_HERE.add(lease.token)
    self._thread = threading.Thread(
        target=self._heartbeats, args=(heartbeat_seconds, settle_seconds),
        daemon=True, name=f'run_lock heartbeat {self.path}')
    self._thread.start()
    # Without a release, a run on another host would wait `stale_seconds`.
    atexit.register(self.release)

  def __exit__(self, *exc_info) -> None:
    self.release()

  def lost(self) -> Optional[str]:
    """None unless another process took the directory: then why (one line)."""
    return self._lost

  def release(self) -> None:
    """Stops the heartbeat; deletes the lock file if still ours (an I/O error
    logged). Idempotent; a forked child leaves its parent's lease alone."""
    if os.getpid() != self._owner_pid or self._stop.is_set():
      return
    self._stop.set()
    atexit.unregister(self.release)
    self._thread.join()  # Its last beat done: nothing writes after this.
    _TOKENS_HELD_HERE.discard(self._lease.token)
    try:
      if _token(files.read_or_none(self.path)) == self._lease.token:
        files.remove(self.path)
    except Exception as e:  # pylint: disable=broad-except
      logging.warning('Could not remove %s: %s', self.path, e)

  def _heartbeats(self, interval: float, settle_seconds: float) -> None:
    """Rewrites the heartbeat until stopped or taken over; logs I/O errors."""
    while not self._stop.wait(interval):
      try:
        text = files.read_or_none(self.path)
        if text is not None and _token(text) != self._lease.token:
          try:
            holder = f'by {_Lease.parse(text).describe()}'
          except ValueError:
            holder = 'by another process (the file is unreadable)'
          self._lost = errors.one_line(
              f'{self.model_dir} was taken over {holder}; this process no '
              'longer holds it')
          logging.warning('%s', self._lost)
          return
        # A missing file (removed by hand, or moved aside by a process taking
        # over that will put it back) is written again: we are alive. If a
        # new holder created it meanwhile, the next beat sees it.
        beat = dataclasses.replace(self._lease, heartbeat=time.time())
        if text is not None:
          files.write_text(beat.text(), self.path)
        if text is not None or _take_over(self.path, None, beat.text(),
                                          settle_seconds):
          self._lease = beat
      except Exception as e:  # pylint: disable=broad-except
        logging.warning('Heartbeat of %s failed (retrying in %g s): %s',
                        self.path, interval, e)


def acquire(model_dir: str, binary: str, *, heartbeat_seconds: float = 60,
            stale_seconds: float = 300, settle_seconds: float = 2.0,
            identity: Optional[Holder] = None) -> RunLock:
  """Takes `model_dir` (local or remote) for `binary`, creating it; release
  the lock returned (or use it in `with`).

  Args:
    heartbeat_seconds: how often the lease's heartbeat is rewritten.
    stale_seconds: the age at which another host's heartbeat, or an
      unreadable lock file, is taken over.
    settle_seconds: remote only: how long a written lease settles before it
      is read back.
    identity: who this process is (tests pretend to be another).

  Raises:
    Held: a live holder (named), a young unreadable lock file, a lost race.
    ValueError: for a bad setting.
  """
  checks.number('heartbeat_seconds', heartbeat_seconds, 0, low_open=True,
                prefix='')
  if not stale_seconds > heartbeat_seconds:
    raise ValueError(f'stale_seconds must be > heartbeat_seconds '
                     f'({heartbeat_seconds}), got {stale_seconds}')
  checks.number('settle_seconds', settle_seconds, 0, prefix='')
  me = identity or Holder(socket.gethostname(), os.getpid(),
                          _proc_stat(os.getpid())[1])
  now, path = time.time(), os.path.join(model_dir, LOCK_FILE)
  lease = _Lease(me.host, me.pid, me.start_time, now, now, uuid.uuid4().hex,
                 binary)
  warning = None
  if not _take_over(path, None, lease.text(), settle_seconds):
    old = files.read_or_none(path)
    warning = None if old is None else _judge(model_dir, path, old, me,
                                              stale_seconds)
    if not _take_over(path, old, lease.text(), settle_seconds):
      _judge(model_dir, path, files.read_or_none(path) or '', me,
             stale_seconds)  # Held, naming the winner.
      raise Held(f'{model_dir} was just taken by another process; try again')
    if warning:
      logging.warning('%s', warning)
  return RunLock(model_dir, lease, heartbeat_seconds, settle_seconds, warning)
