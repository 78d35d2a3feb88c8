"""A stored image that cannot be decoded stops the run in one line naming
the split, the example's index and the step; nothing is skipped silently."""

from __future__ import annotations

import contextlib
import re
from typing import Iterator, Optional, Tuple

import tensorflow as tf

_MARKER = 'tunas_tf: unreadable example'
_FAILURE = re.compile(re.escape(_MARKER) +
                      r'\] \[(.*?)\] \[(-?\d+)\] \[(-?\d+)\]')


def checked(prepared: tf.data.Dataset, expected: tf.data.Dataset, what: str,
            finite: bool) -> tf.data.Dataset:
  """`prepared`'s elements, whose iterator raises InvalidArgumentError at the
  first position `prepared` dropped (its preparation failed).

  Args:
    prepared: (position, element) in order of position.
    expected: (position, index, step) of every position `prepared` should
      yield, with the example's stored index and the step reading it (-1).
    what: the split, for the message.
    finite: whether the streams end (one pass).
  """
  prepared = prepared.ignore_errors(log_warning=True)
  if finite:  # A last element that failed meets this one and fails too.
    sentinel = tf.nest.map_structure(  # Unknown dimensions 0.
        lambda spec: tf.zeros([d or 0 for d in spec.shape.as_list()],
                              spec.dtype), prepared.element_spec)
    sentinel = (tf.constant(-1, tf.int64),) + tuple(sentinel[1:])
    prepared = prepared.concatenate(tf.data.Dataset.from_tensors(sentinel))

  def check(expected_element, prepared_element):
    position, index, step = expected_element
    ok = tf.equal(position, prepared_element[0])
    assertion = tf.debugging.Assert(
        ok, [_MARKER, what, tf.cast(index, tf.int64),
             tf.cast(step, tf.int64)], name='check_readable')
    with tf.control_dependencies([assertion]):
      return tf.nest.map_structure(tf.identity, prepared_element[1])

  return tf.data.Dataset.zip((expected, prepared)).map(
      check, num_parallel_calls=tf.data.AUTOTUNE)


def failure(error: Exception) -> Optional[Tuple[str, int, int]]:
  """(split, index, step) of a `checked` failure in `error`, else None."""
  match = _FAILURE.search(str(error))
  if not match:
    return None
  # The assertion prints strings with quotes and backslashes escaped.
  what = re.sub(r'\\([\'"\\])', r'\1', match.group(1))
  return what, int(match.group(2)), int(match.group(3))


def stop_line(error: Exception, run: str,
              model_dir: Optional[str] = None) -> Optional[str]:
  """The one line of a run stopped by an undecodable image (`error`), or None;
  `run` names what stopped, `model_dir` (a training run's) where the same
  command resumes."""
  found = failure(error)
  if found is None:
    return None
  what, index, step = found
  when = f', read for step {step},' if step >= 0 else ''
  line = (f'example {index} of {what} (counting from 0 in its stored order)'
          f'{when} cannot be read or decoded as an image '
          f'(TF_CPP_MIN_LOG_LEVEL=1 logs TF\'s reason): {run} stopped there')
  if model_dir is not None:
    latest = tf.train.latest_checkpoint(model_dir)
    line += (' without saving the steps since its last checkpoint '
             f'({latest or "none was saved"}); repair the image (or '
             're-prepare the dataset), then run the same command to resume')
  else:
    line += '; repair the image (or re-prepare the dataset) and run it again'
  return line


@contextlib.contextmanager
def stops_in_one_line(run: str, model_dir: Optional[str] = None
                      ) -> Iterator[None]:
  """Around an Estimator's `train` or `evaluate`: an undecodable image
  becomes a one-line ValueError (`stop_line`); other errors pass."""
  try:
    yield
  except tf.errors.InvalidArgumentError as e:
    line = stop_line(e, run, model_dir)
    if line is None:
      raise
    raise ValueError(line) from None
