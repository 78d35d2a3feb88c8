"""Stopping a run cleanly on SIGTERM or SIGINT: finish the step, save, exit
`EXIT_CODE`; a second signal ends the process at once (docs/restarting.md).
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
from typing import Any, Callable, Iterator, Optional

from absl import logging

# EX_TEMPFAIL of sysexits.h: a temporary failure, run the command again.
EXIT_CODE = 75
SIGNALS = (signal.SIGTERM, signal.SIGINT)
# `StopRequest.raise_if_stopped`'s `what` for an evaluation cut short.
NOTHING_SAVED = 'before its evaluation ended (nothing to save)'


class Stopped(Exception):
  """A run stopped by a signal, its state saved; the message is one line."""


class StopRequest:
  """Whether a stop was asked for: `signal_name` ('SIGTERM', 'SIGINT', None)
  and `lost()`, why another process took the model directory (None: not)."""

  def __init__(self, lost: Optional[Callable[[], Optional[str]]] = None):
    self.signal_name: Optional[str] = None
    self._lost = lost or (lambda: None)

  def lost(self) -> Optional[str]:
    return self._lost()

  def raise_if_stopped(self, step: int, what: str = 'checkpoint saved'
                       ) -> None:
    """After a signal: `Stopped`('stopped at step N by SIGTERM, checkpoint
    saved: run the same command to resume'), `what` for 'checkpoint saved'."""
    if self.signal_name:
      raise Stopped(f'stopped at step {step} by {self.signal_name}, {what}: '
                    'run the same command to resume')

  def hook(self):
    """The Estimator hook that acts on this request (`_hook_type`)."""
    return _hook_type()(self)


@functools.lru_cache(maxsize=None)
def _hook_type() -> type:
  """`StopHook`'s class (made on first use: importing this module does not
  import TensorFlow)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  class StopHook(tf.compat.v1.train.SessionRunHook):
    """Ends training after the session run in flight as `max_steps` does (a
    checkpoint is saved); a lost model directory raises, saving nothing."""

    def __init__(self, request: StopRequest):
      self._request = request

    def after_run(self, run_context, run_values):
      del run_values
      lost = self._request.lost()
      if lost:
        raise ValueError(lost)
      if self._request.signal_name:
        run_context.request_stop()

  return StopHook


@contextlib.contextmanager
def stop_on_signal(binary: str,
                   lost: Optional[Callable[[], Optional[str]]] = None
                   ) -> Iterator[StopRequest]:
  """Turns SIGTERM and SIGINT into a `StopRequest(lost)` for the block: the
  first sets `signal_name` and logs a line naming `binary`, a second gets the
  default action. Outside the main thread the request never stops."""
  request = StopRequest(lost)
  if threading.current_thread() is not threading.main_thread():
    yield request
    return

  def handle(signum, frame):
    del frame
    for s in SIGNALS:
      signal.signal(s, signal.SIG_DFL)
    request.signal_name = signal.Signals(signum).name
    logging.warning('%s: %s received: finishing the step in flight and '
                    'saving a checkpoint (a second signal stops at once, '
                    'without one)', binary, request.signal_name)

  previous = {s: signal.signal(s, handle) for s in SIGNALS}
  try:
    yield request
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)


def keep_handlers_under_tpu_estimator() -> None:
  """Makes TPUEstimator's `InstallSignalHandlerHook` a no-op for the process:
  it would undo `stop_on_signal`, and fails in `run_in_thread`'s thread."""
  from tensorflow_estimator.python.estimator.tpu import tpu_estimator  # pylint: disable=g-import-not-at-top
  hook = tpu_estimator.InstallSignalHandlerHook
  hook.before_run = lambda self, run_context: None
  hook.end = lambda self, session: None


def run_in_thread(fn: Callable[[], Any]) -> Any:
  """`fn()` in a worker thread, the main thread waiting (and so free to run
  signal handlers at once); returns its result or raises its exception."""
  outcome = {}

  def target():
    try:
      outcome['value'] = fn()
    except BaseException as e:  # pylint: disable=broad-except
      outcome['error'] = e

  thread = threading.Thread(target=target, name='tunas_tf-run', daemon=True)
  thread.start()
  while thread.is_alive():
    thread.join(0.2)
  if 'error' in outcome:
    raise outcome['error']
  return outcome.get('value')

