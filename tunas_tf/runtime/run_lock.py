"""One process per run directory: the lease file `run.lock` in a model dir.

`acquire(model_dir, binary)` takes `model_dir/run.lock` or raises `Held`
(one line naming the holder) when a live process holds it; a holder that is
gone is taken over with a warning saying who and why (`_gone_reason`). The
file is JSON (`host`, `pid`, `start_time`, `since`, `heartbeat`, `token`,
`binary`); a daemon thread rewrites `heartbeat`, and callers check `lost()`
at their checkpoints (guarantees: `acquire`).
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
from typing import Any, Optional
import uuid

from absl import logging

from tunas_tf.io import errors

LOCK_FILE = 'run.lock'

# The tokens of the locks this process holds: a lease naming our own pid is
# ours (a second `acquire` in one process is refused) only if its token is
# here; otherwise a previous incarnation with our pid wrote it.
_TOKENS_HELD_HERE = set()
# Linux's largest pid is 2**22; this bound only keeps os.kill from overflowing.
_MAX_PID = 2**31 - 1


class Held(ValueError):
  """A live process holds the run directory; `str()` is one line."""


@dataclasses.dataclass(frozen=True)
class Holder:
  """A process that holds, or asks for, a run directory.

  Attributes:
    host: the host name (`socket.gethostname()`).
    pid: the process id on that host.
    start_time: the process start time in clock ticks since boot (field 22 of
      /proc/<pid>/stat), or None where unreadable.
  """
  host: str
  pid: int
  start_time: Optional[int] = None

  @classmethod
  def this_process(cls) -> Holder:
    """The calling process."""
    pid = os.getpid()
    return cls(socket.gethostname(), pid, _proc_stat(pid)[1])


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
  def new(cls, holder: Holder, binary: str) -> _Lease:
    now = time.time()
    return cls(holder.host, holder.pid, holder.start_time, now, now,
               uuid.uuid4().hex, binary)

  @classmethod
  def parse(cls, text: str) -> _Lease:
    """The lease in `text`; ValueError saying what is wrong."""
    value = json.loads(text)  # json.JSONDecodeError is a ValueError.
    if not isinstance(value, dict):
      raise ValueError('not a JSON object')
    missing = [f.name for f in dataclasses.fields(cls) if f.name not in value]
    if missing:
      raise ValueError(f'no {", ".join(missing)}')
    lease = cls(**{f.name: value[f.name] for f in dataclasses.fields(cls)})
    lease.check()
    return lease

  def check(self) -> None:
    """Raises ValueError naming the first field of the wrong type or range."""
    def number(v: Any, kinds=(int, float)) -> bool:
      # bool is an int; a pid of True would signal pid 1.
      return isinstance(v, kinds) and not isinstance(v, bool)
    for name, ok in (
        ('pid', number(self.pid, int) and 0 < self.pid <= _MAX_PID),
        ('start_time', self.start_time is None or number(self.start_time, int)),
        ('since', number(self.since)), ('heartbeat', number(self.heartbeat)),
        *((n, isinstance(getattr(self, n), str))
          for n in ('host', 'token', 'binary'))):
      if not ok:
        raise ValueError(f'{name} {getattr(self, name)!r}')

  def text(self) -> str:
    return json.dumps(dataclasses.asdict(self), indent=1) + '\n'

  def describe(self) -> str:
    return (f'{self.binary} on host {self.host}, pid {self.pid}, since '
            f'{_utc(self.since)}')


def _utc(seconds: float) -> str:
  moment = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
  return moment.strftime('%Y-%m-%d %H:%M:%S UTC')


def _proc_stat(pid: int):
  """(state, start time) of `pid` from /proc, (None, None) where unreadable."""
  try:
    with open(f'/proc/{pid}/stat', 'rb') as f:
      stat = f.read().decode(errors='replace')
    # Field 2, the command, is in parentheses and may hold spaces and ')'.
    fields = stat[stat.rindex(')') + 2:].split()
    return fields[0], int(fields[19])  # Fields 3 and 22.
  except (OSError, ValueError, IndexError):
    return None, None


def _pid_exists(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # Another user's process.
    return True
  return True


def _gone_on_this_host(lease: _Lease, me: Holder) -> Optional[str]:
  """Why the holder on our host is gone, or None if it is alive."""
  where = f'pid {lease.pid} on host {lease.host}'
  if lease.pid == me.pid:
    if lease.token in _TOKENS_HELD_HERE:
      return None
    return (f'{where} is this process: the lease is a previous incarnation\'s'
            ' (a restarted container reuses pids)')
  if not _pid_exists(lease.pid):
    return f'{where} is gone'
  state, start_time = _proc_stat(lease.pid)
  if state == 'Z':
    return f'{where} has exited (a zombie not yet reaped)'
  if (lease.start_time is not None and start_time is not None and
      start_time != lease.start_time):
    return f'{where} is gone (the pid now names a process started later)'
  return None


def _gone_reason(lease: _Lease, me: Holder,
                 stale_seconds: float) -> Optional[str]:
  """Why `lease`'s holder is gone, or None if it is alive.

  When is a holder alive?
    * Same host: its pid exists, is not a zombie, and started when the file
      says. Our own pid with a token this process does not hold is a previous
      incarnation (a restarted container reuses pids): gone. A host name
      shared by two machines (two containers named alike) defeats this test.
    * Other host: its heartbeat is younger than `stale_seconds`, by our clock
      (so clocks must agree to well within `stale_seconds - heartbeat_seconds`).
    * An unreadable file (empty, cut short, not a lease): a local lock file is
      empty for a moment while its creator writes it, and a young one may be a
      live holder's, so it is refused until its mtime is `stale_seconds` old,
      then taken over. Where the filesystem keeps no mtime (`ram://`), it is
      taken over at once: remote writes replace the whole object, so an
      unreadable remote lease is never one being written.
  """
  if lease.host == me.host:
    return _gone_on_this_host(lease, me)
  age = time.time() - lease.heartbeat
  if age >= stale_seconds:
    return f'no heartbeat for {age:.0f} s (stale after {stale_seconds:g} s)'
  return None


def _in_use(model_dir: str, lease: _Lease) -> Held:
  age = time.time() - lease.heartbeat
  return Held(errors.one_line(
      f'{model_dir} is in use by {lease.describe()} (heartbeat {age:.0f} s '
      'ago); wait for it to end, or stop it: a holder that is gone is taken '
      'over'))


def _judge(model_dir: str, store, text: str, me: Holder,
           stale_seconds: float) -> str:
  """The warning for taking over the lease `text`; Held if it is alive."""
  try:
    lease = _Lease.parse(text)
  except ValueError as e:
    problem = errors.one_line(str(e)) or 'empty'
    age = store.age()
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
    raise _in_use(model_dir, lease)
  return errors.one_line(
      f'Taking over {model_dir} from {lease.describe()}: {reason}')


def _held_by_winner(model_dir: str, store) -> Held:
  """The refusal after losing a race to whoever's lease is in the file now."""
  text = store.read()
  try:
    return _in_use(model_dir, _Lease.parse(text or ''))
  except ValueError:
    return Held(errors.one_line(
        f'{model_dir} was just taken by another process ({store.path} is '
        'changing); try again'))


class _LocalFile:
  """A lock file on a local (or NFS) filesystem."""

  def __init__(self, path: str):
    self.path = path

  def read(self) -> Optional[str]:
    try:
      with open(self.path, 'rb') as f:
        return f.read().decode(errors='replace')
    except FileNotFoundError:
      return None

  def age(self) -> Optional[float]:
    try:
      return time.time() - os.stat(self.path).st_mtime
    except FileNotFoundError:
      return None

  def create(self, text: str) -> bool:
    """Writes `text` to a new file; False if the file exists."""
    try:
      fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
      return False
    with os.fdopen(fd, 'w') as f:
      f.write(text)
    return True

  def rewrite(self, text: str) -> None:
    # Readers see the old lease or the new one, never a partial one.
    tmp = f'{self.path}.{uuid.uuid4().hex}.tmp'
    with open(tmp, 'w') as f:
      f.write(text)
    os.replace(tmp, self.path)

  def remove(self) -> None:
    with contextlib.suppress(FileNotFoundError):
      os.remove(self.path)

  def take_over(self, judged: str, text: str) -> bool:
    """Replaces the lease `judged` (read and judged gone) with `text`.

    Moving the old file aside is atomic, so of two processes taking over one
    dead holder only one moves its lease; the other either finds no file or
    moves the winner's fresh one, which it sees and puts back.

    Returns:
      True if this process now holds the file.
    """
    aside = f'{self.path}.{uuid.uuid4().hex}.gone'
    try:
      os.rename(self.path, aside)
    except FileNotFoundError:
      return self.create(text)
    with open(aside, 'rb') as f:
      moved = f.read().decode(errors='replace')
    fresh = moved != judged  # A fresh lease (or heartbeat) since we judged.
    if fresh:
      with contextlib.suppress(OSError):
        os.link(aside, self.path)  # Back, unless yet another was created.
    os.remove(aside)
    return not fresh and self.create(text)


def _tf():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf


class _RemoteFile:
  """A lock file through tf.io.gfile (gs://, ram://): no exclusive create."""

  def __init__(self, path: str):
    self.path = path

  def read(self) -> Optional[str]:
    try:
      with _tf().io.gfile.GFile(self.path, 'rb') as f:
        return f.read().decode(errors='replace')
    except _tf().errors.NotFoundError:
      return None

  def age(self) -> Optional[float]:
    try:
      mtime_nsec = _tf().io.gfile.stat(self.path).mtime_nsec
    except _tf().errors.NotFoundError:
      return None
    return time.time() - mtime_nsec / 1e9 if mtime_nsec else None

  def create(self, text: str) -> bool:
    """Writes `text`: not exclusive (the caller reads back); True."""
    self.rewrite(text)
    return True

  def rewrite(self, text: str) -> None:
    # Through a new object and a rename: some filesystems (ram://) append
    # when an existing file is opened for writing.
    gfile = _tf().io.gfile
    tmp = f'{self.path}.{uuid.uuid4().hex}.tmp'
    with gfile.GFile(tmp, 'w') as f:
      f.write(text)
    gfile.rename(tmp, self.path, overwrite=True)

  def remove(self) -> None:
    with contextlib.suppress(_tf().errors.NotFoundError):
      _tf().io.gfile.remove(self.path)


def _settle(seconds: float) -> None:
  """Waits for a competing writer's lease to land (tests replace this)."""
  time.sleep(seconds)


def _token(text: Optional[str]) -> Optional[str]:
  try:
    return _Lease.parse(text or '').token
  except ValueError:
    return None


class RunLock:
  """This process's hold on a run directory, kept alive by a heartbeat.

  Attributes:
    model_dir: the run directory.
    path: its lock file.
    took_over: the warning logged when the lock was taken over from a holder
      that was gone (one line), else None.
  """

  def __init__(self, model_dir: str, store, lease: _Lease,
               heartbeat_seconds: float, took_over: Optional[str]):
    self.model_dir = model_dir
    self.path = store.path
    self.took_over = took_over
    self._store = store
    self._lease = lease
    self._lost: Optional[str] = None
    self._released = False
    self._owner_pid = os.getpid()
    self._stop = threading.Event()
    self._mutex = threading.Lock()  # Keeps release out of a heartbeat.
    _TOKENS_HELD_HERE.add(lease.token)
    self._thread = threading.Thread(
        target=self._heartbeats, args=(heartbeat_seconds,), daemon=True,
        name=f'run_lock heartbeat {self.path}')
    self._thread.start()
    # Without a release, a run on another host would wait `stale_seconds`.
    atexit.register(self.release)

  def __enter__(self) -> RunLock:
    return self

  def __exit__(self, *exc_info) -> None:
    self.release()

  def lost(self) -> Optional[str]:
    """None while this process holds the directory, else why not (one line).

    After `release`, None unless it was lost before.
    """
    return self._lost

  def release(self) -> None:
    """Stops the heartbeat; deletes the lock file if it is still ours.

    Idempotent. An I/O error is logged, not raised: the next run takes the
    lease over as from a holder that is gone. A forked child (which inherits
    the atexit call) leaves its parent's lease alone.
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
        if self._stop.is_set():
          return
        try:
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
    if text is None:
      if not self._store.create(beat.text()):
        return  # A new holder created it meanwhile: seen at the next beat.
    else:
      self._store.rewrite(beat.text())
    self._lease = beat


def _acquire_local(model_dir: str, store: _LocalFile, lease: _Lease,
                   me: Holder, stale_seconds: float) -> Optional[str]:
  """Takes the local lock file; returns the takeover warning, if any."""
  os.makedirs(model_dir, exist_ok=True)
  if store.create(lease.text()):
    return None
  old = store.read()
  if old is None:  # Released between our create and read.
    if store.create(lease.text()):
      return None
    raise _held_by_winner(model_dir, store)
  warning = _judge(model_dir, store, old, me, stale_seconds)
  if not store.take_over(old, lease.text()):
    raise _held_by_winner(model_dir, store)
  return warning


def _acquire_remote(model_dir: str, store: _RemoteFile, lease: _Lease,
                    me: Holder, stale_seconds: float,
                    settle_seconds: float) -> Optional[str]:
  """Writes the lease, settles, reads it back; returns the takeover warning."""
  _tf().io.gfile.makedirs(model_dir)
  old = store.read()
  warning = None if old is None else _judge(model_dir, store, old, me,
                                            stale_seconds)
  store.rewrite(lease.text())
  _settle(settle_seconds)
  if _token(store.read()) != lease.token:
    raise _held_by_winner(model_dir, store)
  return warning


def acquire(model_dir: str, binary: str, *, heartbeat_seconds: float = 60,
            stale_seconds: float = 300, settle_seconds: float = 2.0,
            identity: Optional[Holder] = None) -> RunLock:
  """Takes `model_dir` for this process (creating it) or refuses.

  What it guarantees:
    * Local paths: the lock file is created exclusively (O_CREAT|O_EXCL), so of
      two processes only one creates it. A takeover first renames the old file
      aside and checks it is the one judged gone (else puts it back and
      refuses), so two processes taking over one dead holder end with one
      winner; the other is refused naming it.
    * Remote paths (`gs://...`): there is no exclusive create, so the lease is
      written, then read back after `settle_seconds`; if another token is
      there, that process won and this one is refused. GCS has strong
      read-after-write consistency, so of two processes that both pass the
      check and both write within the settle window, the last writer wins and
      the other sees its token on read-back. A writer slower than the settle
      window, or a takeover of a holder that only looked dead (a long pause),
      is caught by the holder's next heartbeat: it reads the file before each
      rewrite and, finding another token, stops heartbeating and reports
      `lost()`. So after at most one heartbeat interval one process holds the
      directory; the binaries should check `lost()` at their checkpoints.

  Args:
    model_dir: the run directory, local or remote (with '://').
    binary: the binary taking it ('train_search' or 'train_eval'), named in
      refusals.
    heartbeat_seconds: how often the lease's heartbeat is rewritten.
    stale_seconds: a holder on another host whose heartbeat is this old is
      gone; an unreadable lock file this old is taken over. Several
      heartbeats, so one slow write does not make a live holder stale.
    settle_seconds: remote only, how long to wait before reading the lease
      back (see above).
    identity: who this process is (tests pretend to be another); defaults to
      `Holder.this_process()`.

  Returns:
    The held lock: release it (or use it as a context manager) at the end.

  Raises:
    Held: a live process holds `model_dir` (the message names it), or the
      lock file is unreadable but young, or another process won a race.
    ValueError: for a bad setting.
  """
  if not heartbeat_seconds > 0:
    raise ValueError(f'heartbeat_seconds must be > 0, got {heartbeat_seconds}')
  if not stale_seconds > heartbeat_seconds:
    raise ValueError(f'stale_seconds must be > heartbeat_seconds '
                     f'({heartbeat_seconds}), got {stale_seconds}')
  if not settle_seconds >= 0:
    raise ValueError(f'settle_seconds must be >= 0, got {settle_seconds}')
  me = identity or Holder.this_process()
  lease = _Lease.new(me, binary)
  path = os.path.join(model_dir, LOCK_FILE)
  if '://' in model_dir:
    store = _RemoteFile(path)
    warning = _acquire_remote(model_dir, store, lease, me, stale_seconds,
                              settle_seconds)
  else:
    store = _LocalFile(path)
    warning = _acquire_local(model_dir, store, lease, me, stale_seconds)
  if warning:
    logging.warning('%s', warning)
  return RunLock(model_dir, store, lease, heartbeat_seconds, warning)
