"""One process per run directory: the lease file `run.lock` in a model dir.

`acquire` takes it, or refuses naming the live holder, or takes over from a
holder that is gone saying why; a heartbeat thread keeps it, and `lost()`
says when another process took it. The rules: docs/restarting.md.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime
import json
import os
import socket
import threading
import time
from typing import Optional, Tuple
import uuid

from absl import logging
import tensorflow as tf

from tunas_tf.io import checks
from tunas_tf.io import errors
from tunas_tf.io import files
from tunas_tf.io import records

LOCK_FILE = 'run.lock'
# The tokens of the leases this process holds: a lease naming our pid is ours
# only with one of them (else a previous incarnation with our pid wrote it).
_TOKENS_HELD_HERE = set()
_MAX_PID = 2**31 - 1  # Linux's is 2**22; this keeps os.kill from overflowing.


class Held(ValueError):
  """A live process holds the run directory; `str()` is one line."""


@dataclasses.dataclass(frozen=True)
class Holder:
  """A process: host name, pid, start time (clock ticks since boot, field 22
  of /proc/PID/stat; None where unreadable)."""
  host: str
  pid: int
  start_time: Optional[int] = None

  @classmethod
  def this_process(cls) -> Holder:
    return cls(socket.gethostname(), os.getpid(), _proc_stat(os.getpid())[1])


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
    since = datetime.datetime.fromtimestamp(self.since, datetime.timezone.utc)
    return (f'{self.binary} on host {self.host}, pid {self.pid}, since '
            f'{since:%Y-%m-%d %H:%M:%S} UTC')


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


def _in_use(model_dir: str, text: Optional[str]) -> Held:
  """The refusal naming the holder of the lease `text` (a race's winner)."""
  try:
    lease = _Lease.parse(text)
  except ValueError:
    return Held(errors.one_line(f'{model_dir} was just taken by another '
                                'process (its lease is changing); try again'))
  return Held(errors.one_line(
      f'{model_dir} is in use by {lease.describe()} (heartbeat '
      f'{time.time() - lease.heartbeat:.0f} s ago); wait for it to end, or '
      'stop it: a holder that is gone is taken over'))


def _judge(model_dir: str, store: _File, text: str, me: Holder,
           stale_seconds: float) -> str:
  """The warning for taking over the lease `text`; Held if it is alive, or
  if it is unreadable and younger than `stale_seconds` (as while its creator
  writes it; a remote one, of unknown age, is never half written)."""
  try:
    lease = _Lease.parse(text)
  except ValueError as e:
    problem, age = errors.one_line(str(e)) or 'empty', store.age()
    if age is not None and age < stale_seconds:
      raise Held(errors.one_line(
          f'{model_dir} may be in use: {store.path} is unreadable ({problem}) '
          f'and {age:.0f} s old, as while a process creates it; if no run '
          f'uses {model_dir}, remove {store.path}, or wait: it is taken over '
          f'once {stale_seconds:g} s old')) from None
    old = 'of unknown age' if age is None else f'{age:.0f} s old'
    return errors.one_line(f'Taking over {model_dir}: {store.path} is '
                           f'unreadable ({problem}) and {old}')
  reason = _gone_reason(lease, me, stale_seconds)
  if reason is None:
    raise _in_use(model_dir, text)
  return errors.one_line(
      f'Taking over {model_dir} from {lease.describe()}: {reason}')


class _File:
  """The lock file through tf.io.gfile, local or remote (gs://, ram://)."""

  def __init__(self, path: str):
    self.path = path

  def read(self) -> Optional[str]:
    try:
      with tf.io.gfile.GFile(self.path, 'rb') as f:
        return f.read().decode(errors='replace')
    except tf.errors.NotFoundError:
      return None

  def age(self) -> Optional[float]:
    """Seconds since its last write; None if missing or not kept (ram://)."""
    try:
      mtime_nsec = tf.io.gfile.stat(self.path).mtime_nsec
    except tf.errors.NotFoundError:
      return None
    return time.time() - mtime_nsec / 1e9 if mtime_nsec else None

  def create(self, text: str) -> bool:
    """Writes a new file, False if a local one exists (O_EXCL); a remote one
    is written regardless (the caller reads it back)."""
    if files.is_remote(self.path):
      self.rewrite(text)
      return True
    try:
      fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
      return False
    with os.fdopen(fd, 'w') as f:
      f.write(text)
    return True

  def rewrite(self, text: str) -> None:
    files.write_text(text, self.path)  # Readers see the old or the new.

  def remove(self) -> None:
    with contextlib.suppress(tf.errors.NotFoundError):
      tf.io.gfile.remove(self.path)

  def take_over(self, judged: str, text: str) -> bool:
    """Whether this process replaced the local lease `judged` (judged gone)
    with `text`. Of two processes taking over, one renames the lease aside;
    the other finds none, or moves the winner's, sees it and puts it back."""
    aside = f'{self.path}.{uuid.uuid4().hex}.gone'
    try:
      os.rename(self.path, aside)
    except FileNotFoundError:
      return self.create(text)
    with open(aside, 'rb') as f:
      fresh = f.read().decode(errors='replace') != judged
    if fresh:
      with contextlib.suppress(OSError):
        os.link(aside, self.path)  # Back, unless yet another was created.
    os.remove(aside)
    return not fresh and self.create(text)


def _settle(seconds: float) -> None:
  """Waits for a competing writer's lease to land (tests replace this)."""
  time.sleep(seconds)


class RunLock(contextlib.AbstractContextManager):
  """This process's hold on `model_dir` (its lock file: `path`), kept by a
  heartbeat thread; `took_over` is the warning logged when it was taken
  over from a holder that was gone, else None."""

  def __init__(self, model_dir: str, store: _File, lease: _Lease,
               heartbeat_seconds: float, took_over: Optional[str]):
    self.model_dir, self.path, self.took_over = model_dir, store.path, took_over
    self._store, self._lease, self._lost = store, lease, None
    self._released, self._owner_pid = False, os.getpid()
    self._stop = threading.Event()
    self._mutex = threading.Lock()  # Keeps release out of a heartbeat.
    _TOKENS_HELD_HERE.add(lease.token)
    self._thread = threading.Thread(
        target=self._heartbeats, args=(heartbeat_seconds,), daemon=True,
        name=f'run_lock heartbeat {self.path}')
    self._thread.start()
    # Without a release, a run on another host would wait `stale_seconds`.
    atexit.register(self.release)

  def __exit__(self, *exc_info) -> None:
    self.release()

  def lost(self) -> Optional[str]:
    """None while this process holds the directory (or released it without
    losing it), else why not (one line)."""
    return self._lost

  def release(self) -> None:
    """Stops the heartbeat; deletes the lock file if it is still ours.

    Idempotent; an I/O error is logged (the next run takes the lease over
    as a gone holder's); a forked child leaves its parent's lease alone.
    """
    if os.getpid() != self._owner_pid:
      return
    with self._mutex:
      if self._released:
        return
      self._released = True
      self._stop.set()
    self._thread.join()
    atexit.unregister(self.release)
    _TOKENS_HELD_HERE.discard(self._lease.token)
    try:
      if _token(self._store.read()) == self._lease.token:
        self._store.remove()
    except Exception as e:  # pylint: disable=broad-except
      logging.warning('Could not remove %s: %s', self.path, e)

  def _heartbeats(self, interval: float) -> None:
    # Never raises: an I/O error is retried at the next beat.
    while not self._stop.wait(interval):
      with self._mutex:
        try:
          if not self._stop.is_set():
            self._beat()
        except Exception as e:  # pylint: disable=broad-except
          logging.warning('Heartbeat of %s failed (retrying in %g s): %s',
                          self.path, interval, e)

  def _beat(self) -> None:
    """Rewrites the heartbeat, or notes that another process took over."""
    text = self._store.read()
    if text is not None and _token(text) != self._lease.token:
      try:
        holder = f'by {_Lease.parse(text).describe()}'
      except ValueError:
        holder = 'by another process (the file is unreadable)'
      self._lost = errors.one_line(
          f'{self.model_dir} was taken over {holder}; this process no longer '
          'holds it')
      logging.warning('%s', self._lost)
      self._stop.set()
      return
    # A missing file (removed by hand, or moved aside by a process taking
    # over that will put it back) is written again: we are alive.
    beat = dataclasses.replace(self._lease, heartbeat=time.time())
    if text is not None:
      self._store.rewrite(beat.text())
    elif not self._store.create(beat.text()):
      return  # A new holder created it meanwhile: seen at the next beat.
    self._lease = beat


def _take(model_dir: str, store: _File, lease: _Lease, me: Holder,
          stale_seconds: float, settle_seconds: float) -> Optional[str]:
  """Writes `lease` or raises Held; returns the takeover warning, if any.
  Local: an exclusive create, else a judged `take_over`. Remote: the lease
  written, then read back after `settle_seconds` (the last writer wins)."""
  tf.io.gfile.makedirs(model_dir)
  remote = files.is_remote(model_dir)
  if not remote and store.create(lease.text()):
    return None
  old = store.read()
  if old is None and not remote:  # Released between our create and read.
    if store.create(lease.text()):
      return None
    raise _in_use(model_dir, store.read())
  warning = None if old is None else _judge(model_dir, store, old, me,
                                            stale_seconds)
  if remote:
    store.rewrite(lease.text())
    _settle(settle_seconds)
    won = _token(store.read()) == lease.token
  else:
    won = store.take_over(old, lease.text())
  if not won:
    raise _in_use(model_dir, store.read())
  return warning


def acquire(model_dir: str, binary: str, *, heartbeat_seconds: float = 60,
            stale_seconds: float = 300, settle_seconds: float = 2.0,
            identity: Optional[Holder] = None) -> RunLock:
  """Takes `model_dir` (local, or remote with '://') for `binary` (named in
  refusals), creating it; release the lock returned (or use it in `with`).

  Args:
    heartbeat_seconds: how often the lease's heartbeat is rewritten.
    stale_seconds: a holder on another host whose heartbeat is this old is
      gone; an unreadable lock file this old is taken over.
    settle_seconds: remote only: how long a written lease settles before it
      is read back; a later writer is caught by the holder's next heartbeat,
      which then reports `lost()`.
    identity: who this process is (tests pretend to be another).

  Raises:
    Held: a live process holds `model_dir` (the message names it), or the
      lock file is unreadable but young, or another process won a race.
    ValueError: for a bad setting.
  """
  checks.number('heartbeat_seconds', heartbeat_seconds, 0, low_open=True,
                prefix='')
  if not stale_seconds > heartbeat_seconds:
    raise ValueError(f'stale_seconds must be > heartbeat_seconds '
                     f'({heartbeat_seconds}), got {stale_seconds}')
  checks.number('settle_seconds', settle_seconds, 0, prefix='')
  me, now = identity or Holder.this_process(), time.time()
  lease = _Lease(me.host, me.pid, me.start_time, now, now, uuid.uuid4().hex,
                 binary)
  store = _File(os.path.join(model_dir, LOCK_FILE))
  warning = _take(model_dir, store, lease, me, stale_seconds, settle_seconds)
  if warning:
    logging.warning('%s', warning)
  return RunLock(model_dir, store, lease, heartbeat_seconds, warning)
