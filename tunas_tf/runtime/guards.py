"""A run's guards: one line for a NaN or Inf, before anything saves it, and
`run`, both engines' way to run a train or evaluation. The NaN check reads a
step's `finite_scalars` on the host, where no compiler can drop it."""

from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, ContextManager, Mapping, Optional, Sequence

import tensorflow as tf

from tunas_tf.data import unreadable
from tunas_tf.runtime import preemption


def run(call: Callable[[], Any], run_name: str, model_dir: Optional[str],
        *contexts: ContextManager[Any]) -> Any:
  """`call()` inside `contexts`, in a worker thread (the main one stays free
  for signals); an undecodable image stops it in one line."""

  def guarded():
    with contextlib.ExitStack() as stack:
      stack.enter_context(unreadable.stops_in_one_line(run_name, model_dir))
      for context in contexts:
        stack.enter_context(context)
      return call()

  return preemption.run_in_thread(guarded)


def check_finite(values: Mapping[str, Any], finite: Mapping[str, str],
                 step: int, model_dir: str, run: str) -> None:
  """ValueError for the first `finite` scalar ({name: what it is}) of
  `values` that is not finite: 'The reward is nan at step 7: the search
  stopped without saving it; the last good checkpoint is DIR/model.ckpt-6'."""
  for name, what in finite.items():
    value = float(values[name])
    if not math.isfinite(value):
      latest = tf.train.latest_checkpoint(model_dir)
      raise ValueError(f'The {what} is {value} at step {step}: {run} stopped '
                       'without saving it; the last good checkpoint is '
                       f'{latest or "none (none was saved)"}')


def check_names(finite: Sequence[str], scalars: Sequence[str]) -> None:
  """Refuses `finite` names (a task's `finite_scalars`) not among a step's
  `scalars` (ValueError)."""
  missing = sorted(set(finite) - set(scalars))
  if missing:
    raise ValueError(f"a task's finite_scalars {missing} are not among its "
                     'scalars')


class FiniteHook(tf.compat.v1.train.SessionRunHook):
  """After every session run, before any saver, checks each step `enqueue`
  queued (waiting for a TPU's host_call): ValueError (`check_finite`) for
  a non-finite one. Given to `Estimator.train`'s hooks, it reports before
  TF's NaN-loss hook. `finite`: {scalar name: what it is}, in column order;
  `run`: what stops, e.g. 'the search'."""

  def __init__(self, finite: Mapping[str, str], model_dir: str, run: str):
    self.finite, self._model_dir, self._run = dict(finite), model_dir, run
    self._next = self._dequeue = self._queue = None

  def enqueue(self, step: tf.Tensor, rows: tf.Tensor) -> tf.Operation:
    """Queues (in a host_call) the int64 `step` and the mean over replicas
    of `rows` (float32 [replicas, len(finite)], its checked scalars)."""
    return self._fifo().enqueue((step, tf.reduce_mean(rows, axis=0)))

  def _fifo(self) -> tf.queue.FIFOQueue:
    """The run's queue (one hook a run), made by the first of `enqueue` and
    `begin`; unbounded: a TPU loop queues all its steps before any read."""
    if self._queue is None:
      self._queue = tf.queue.FIFOQueue(
          2**30, [tf.int64, tf.float32], [[], [len(self.finite)]],
          name='finite_queue')
    return self._queue

  def begin(self):
    if not self.finite:
      return
    global_step = tf.compat.v1.train.get_global_step()
    self._next = tf.compat.v1.placeholder(tf.int64, [])
    # Blocks until the run's steps are all queued.
    self._dequeue = (global_step, self._fifo().dequeue_many(
        tf.cast(global_step.read_value() - self._next, tf.int32)))

  def after_create_session(self, session, coord):
    del coord
    if self._dequeue is not None:
      self._at = int(session.run(self._dequeue[0]))

  def after_run(self, run_context, run_values):
    del run_values
    if self._dequeue is None:
      return
    global_step, (steps, rows) = run_context.session.run(
        self._dequeue, {self._next: self._at})
    self._at = int(global_step)
    for step, row in zip(steps, rows):
      check_finite(dict(zip(self.finite, row)), self.finite, int(step),
                   self._model_dir, self._run)
