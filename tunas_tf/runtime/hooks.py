"""The progress line and images/s of both engines, and the Estimator's hooks
(the checkpoint and summary writers keep the graph out of the events files:
bench/DECISIONS.md, 'No graph in the events files')."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Mapping, Optional

from absl import logging
import tensorflow as tf
# The cache of v1 FileWriters that TF's session hooks share (one per logdir);
# not exported under tf.*.
from tensorflow.python.ops import summary_ops_v2  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.summary.writer import writer_cache  # pylint: disable=g-direct-tensorflow-import


class ProgressLine:
  """Either engine's progress line: `update` logs at each multiple of
  `every` and at `max_step`; the first only starts the clock (warm-up)."""

  def __init__(self, max_step: int, every: int,
               formats: Optional[Mapping[str, Callable[[float], str]]] = None):
    self._max_step, self._every, self._formats = max_step, every, formats or {}
    self._last = None  # (time, step) of the last line or the first update.

  def update(self, step: int, values: Mapping[str, float],
             images: Callable[[], Optional[str]] = lambda: None) -> None:
    """Logs 'step 40/120  12.10 steps/s  ETA 7s  reward 0.523 ...' (`values`
    written by `formats`, else `name=value` to 4 significant digits), then
    `images()` images/s unless None."""
    now = time.time()
    if self._last is None:
      self._last = (now, step)
      return
    last_time, last_step = self._last
    if step // self._every == last_step // self._every and (
        step < self._max_step):
      return
    self._last = (now, step)
    rate = (step - last_step) / max(now - last_time, 1e-9)
    eta = (self._max_step - step) / rate if rate > 0 else float('inf')
    line = ['step %d/%d  %.2f steps/s  ETA %.0fs  %s', step, self._max_step,
            rate, eta, ' '.join(self._formats[k](v) if k in self._formats
                                else f'{k}={v:.4g}' for k, v in values.items())]
    shown = images()
    if shown is not None:
      line = [line[0] + '  %s images/s', *line[1:], shown]
    logging.info(*line)


class Throughput:
  """Either engine's images/s per replica over a series of calls, from the
  end of the first (which pays for warm-up) to the end of the last."""

  def __init__(self, replicas: int = 1):
    self._replicas = max(1, int(replicas))
    self._start = self._first = self._last = None
    self._first_images = self._images = 0

  def begin(self) -> None:
    """Before a call: the first one's start."""
    if self._first is None:
      self._start = time.time()

  def add(self, images: int) -> None:
    """After a call: its images."""
    now = time.time()
    if self._first is None:
      self._first, self._first_images = now, images
    else:
      self._images += images
    self._last = now

  def rate(self) -> Optional[float]:
    """Images/s per replica so far (None before a call with images)."""
    if self._first is None:
      return None
    if self._images and self._last > self._first:
      return self._images / (self._last - self._first) / self._replicas
    if self._first_images and self._first > self._start:
      return self._first_images / (self._first - self._start) / self._replicas
    return None

  def text(self) -> str:
    """The rate for the progress line, '?' before there is one."""
    rate = self.rate()
    return f'{rate:.1f}' if rate else '?'


class ProgressHook(tf.compat.v1.train.SessionRunHook):
  """The Estimator's progress line and `Throughput`.

  Args:
    fetches: scalars to log, by name; `step` (the global step before the
      run's increment, reported plus one) and `batch` (evaluation's images)
      are counted, not logged.
    log_every: log every this many steps (0: never).
    num_cores: replicas the images were spread over.
    record: receives `record_key` (images/s per core) at the end and, when
      training, `train_start_step`.
  """

  def __init__(self, fetches: Dict[str, Any], *, max_step: int = 0,
               log_every: int = 0, images_per_step: int = 0,
               num_cores: int = 1, record: Optional[Dict[str, Any]] = None,
               record_key: Optional[str] = None,
               formats: Optional[Dict[str, Callable[[float], str]]] = None):
    self._fetches, self._max_step = fetches, max_step
    self._log_every, self._per_step, self._cores = (log_every, images_per_step,
                                                    num_cores)
    self._record, self._key, self._formats = record, record_key, formats

  def begin(self):
    self._prev_step = None
    self.throughput = Throughput(self._cores)
    self._line = ProgressLine(self._max_step, self._log_every, self._formats)

  def after_create_session(self, session, coord):
    del coord
    if 'step' in self._fetches:
      self._prev_step = int(session.run(self._fetches['step']))
      if self._record is not None:
        self._record.setdefault('train_start_step', self._prev_step)

  def before_run(self, run_context):
    del run_context
    self.throughput.begin()
    return tf.compat.v1.train.SessionRunArgs(self._fetches)

  def after_run(self, run_context, run_values):
    del run_context
    results = run_values.results
    if 'batch' in results:
      self.throughput.add(int(results['batch']))
      return
    step = int(results['step']) + 1
    self.throughput.add(max(0, step - self._prev_step) * self._per_step)
    self._prev_step = step
    if self._log_every:
      values = {k: float(v) for k, v in results.items() if k != 'step'}
      self._line.update(step, values, self.throughput.text
                        if self._per_step else lambda: None)

  def end(self, session):
    del session
    rate = self.throughput.rate()
    if rate is not None and self._record is not None:
      self._record[self._key] = rate
    if self._log_every and self._prev_step is not None:
      # What a silent minute after the last line was: the session closing.
      logging.info('step %d/%d: closing the session (its last summaries and '
                   'input pipeline)', self._prev_step, self._max_step)


class HostCallHook(tf.compat.v1.train.SessionRunHook):
  """Runs a host_call's `host_fn` with every step, as TPUEstimator does off
  TPU, on the rows every replica gave `add_row`."""

  def __init__(self, host_fn: Callable[..., Any], step: tf.Tensor):
    self._host_fn, self._step, self._rows = host_fn, step, []

  def add_row(self, row: tf.Tensor, first: bool) -> None:
    """A replica's row (before `begin`); the first replica's is written."""
    self._rows.insert(0 if first else len(self._rows), row)

  def begin(self):
    self._outputs = self._host_fn(self._step, tf.concat(self._rows, 0))
    self._init_ops = summary_ops_v2.summary_writer_initializer_op()
    self._flush_ops = [summary_ops_v2.legacy_raw_flush(writer=op.inputs[0])
                       for op in self._init_ops]

  def after_create_session(self, session, coord):
    del coord
    session.run(self._init_ops)

  def before_run(self, run_context):
    del run_context
    return tf.compat.v1.train.SessionRunArgs(self._outputs)

  def end(self, session):
    session.run(self._flush_ops)


class _SummariesOnlyFileWriter(tf.compat.v1.summary.FileWriter):
  """A v1 `FileWriter` that drops graphs and meta graphs, nothing else."""

  def add_graph(self, graph, global_step=None, graph_def=None):
    del graph, global_step, graph_def

  def add_meta_graph(self, meta_graph_def, global_step=None):
    del meta_graph_def, global_step


def summaries_only_writer(logdir: str) -> tf.compat.v1.summary.FileWriter:
  """The process's cached v1 `FileWriter` of `logdir` (TF's hooks take it
  in `begin`), made one that writes no graph unless already cached. Call it
  in the model_fn, before the monitored session starts."""
  cache = writer_cache.FileWriterCache
  with cache._lock:  # pylint: disable=protected-access
    writers = cache._cache  # pylint: disable=protected-access
    if logdir not in writers:
      writers[logdir] = _SummariesOnlyFileWriter(logdir)
    return writers[logdir]


class CheckpointSaverHook(tf.compat.v1.train.CheckpointSaverHook):
  """TF's checkpoint saver hook (at session creation, every `save_steps`
  steps, at the end) without graph def, meta graph, graph.pbtxt or .meta
  file. An Estimator given it makes no saver hook of its own."""

  def __init__(self, checkpoint_dir: str, save_steps: int,
               steps_per_run: int = 1):
    super().__init__(checkpoint_dir, save_steps=save_steps,
                     save_graph_def=False)
    self._set_steps_per_run(steps_per_run)  # A TPU loop's steps.
    summaries_only_writer(checkpoint_dir)

  def after_create_session(self, session, coord):
    del coord
    global_step = session.run(self._global_step_tensor)
    # The checkpoint saved here is the state at step `global_step`.
    self._save(session, global_step)
    self._timer.update_last_triggered_step(global_step)
