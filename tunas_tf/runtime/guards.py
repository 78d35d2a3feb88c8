"""A NaN or Inf stops a run in one line, before anything saves it.

`check_finite` asserts, in the graph, that a step's values are finite (off
TPU); an update made to depend on it never runs on a NaN. Around an
Estimator's `train`, `stops_in_one_line` turns that failure (or TF's
NaN-loss check on TPU) into one line naming the value, the step and the last
good checkpoint; `non_finite_line` says the same of a value the host found
non-finite (`runtime.distribute`, where XLA dropped the assertions).
"""

from __future__ import annotations

import contextlib
import re
from typing import Iterator, List, Optional, Tuple

import tensorflow as tf

# The first datum of the assertions of `check_finite`, found again in the
# error by `non_finite_failure`.
_NON_FINITE = 'tunas_tf non-finite'
_NON_FINITE_ERROR = re.compile(
    _NON_FINITE + r'\] \[([^\]]*)\] \[(-?\d+)\] \[([^\]]*)\]')


def check_finite(name: str, values: List[tf.Tensor], global_step: tf.Tensor,
                 use_tpu: bool) -> List[tf.Operation]:
  """An assertion that every element of `values` is finite (off TPU).

  An update made to depend on it never runs on a NaN or Inf: the session
  run fails with an error that `non_finite_failure` reads (`name`, the step,
  the first value), before the update and before any hook saves. On TPU it
  is empty (XLA drops assertions; the Estimator's NaN-loss hook remains).

  Args:
    name: what the values are, for the message ('model loss', 'reward').
    values: float Tensors; the first should be a scalar (it is reported).
    global_step: the step (reported).
    use_tpu: whether the graph runs on TPU.

  Returns:
    The assertion ops (control dependencies), empty on TPU.
  """
  if use_tpu:
    return []
  finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(v))
                          for v in values])
  return [tf.debugging.Assert(
      finite, [_NON_FINITE, name, tf.cast(global_step, tf.int64), values[0]],
      name=f"check_finite_{name.replace(' ', '_')}")]


def non_finite_failure(error: Exception) -> Optional[Tuple[str, int, str]]:
  """(name, step, value) of a `check_finite` failure, or None."""
  match = _NON_FINITE_ERROR.search(str(error))
  if not match:
    return None
  return match.group(1), int(match.group(2)), match.group(3)


def _stop_line(error: Exception, model_dir: str, run: str) -> Optional[str]:
  """The one line of a run stopped on a NaN or Inf, or None for another error.

  Args:
    error: what the Estimator's train raised: a `check_finite` failure or
      TF's `NanLossDuringTrainingError`.
    model_dir: the run's directory (its newest checkpoint is named).
    run: what stopped, e.g. 'the search'.
  """
  failure = non_finite_failure(error)
  if failure is None:
    if not isinstance(error, tf.compat.v1.train.NanLossDuringTrainingError):
      return None
    what = 'NaN loss during training'
  else:
    name, step, value = failure
    what = f'The {name} is {value} at step {step}'
  return _line(what, model_dir, run)


def _line(what: str, model_dir: str, run: str) -> str:
  latest = tf.train.latest_checkpoint(model_dir)
  return (f'{what}: {run} stopped without saving it; the last good '
          f'checkpoint is {latest or "none (none was saved)"}')


def non_finite_line(name: str, value: float, step: int, model_dir: str,
                    run: str) -> str:
  """The line of a value found non-finite on the host (where the graph has
  no `check_finite`: XLA drops assertions), worded as a `check_finite` stop:
  'The reward is nan at step 7: the search stopped without saving it; the
  last good checkpoint is DIR/model.ckpt-6'."""
  return _line(f'The {name} is {value} at step {step}', model_dir, run)


@contextlib.contextmanager
def stops_in_one_line(model_dir: str, run: str) -> Iterator[None]:
  """Around an Estimator's `train`: a NaN or Inf stop (`check_finite`, or
  TF's NaN-loss check on TPU) becomes a ValueError of one line naming the
  step and the last good checkpoint of `model_dir`; other errors pass.

  Args:
    model_dir: the run's directory.
    run: what stopped, for the line, e.g. 'the search' or 'train_eval'.
  """
  try:
    yield
  except (tf.errors.InvalidArgumentError,
          tf.compat.v1.train.NanLossDuringTrainingError) as e:
    line = _stop_line(e, model_dir, run)
    if line is None:
      raise
    raise ValueError(line) from None
