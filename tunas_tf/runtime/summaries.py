"""Every scalar to TensorBoard through the TPUEstimator's host_call, on TPU
and off it alike."""

from __future__ import annotations

import collections
from typing import Any, Callable, List, Mapping, Optional

import tensorflow as tf

from tunas_tf.runtime import guards


def vector_tags(name: str, length: int) -> List[str]:
  """The tags a vector summary `name` of `length` values is written under:
  `{name}/0` ... (either engine)."""
  return [f'{name}/{j}' for j in range(length)]


def host_call(summaries: 'collections.OrderedDict[str, tf.Tensor]',
              global_step: tf.Tensor, model_dir: str, every_n_steps: int,
              write_more: Optional[Callable[[Mapping[str, Any], Any],
                                            List[Any]]] = None,
              check: Optional[guards.FiniteHook] = None):
  """(host_fn, tensors) writing the first replica's `summaries` (float32
  scalars, or vectors as `{name}/0` ...) every `every_n_steps` steps, with
  `write_more(values by tag, step)`; host_fn returns whether it wrote. The
  scalars `check` checks are queued every step (`FiniteHook.enqueue`).

  Raises:
    ValueError: a value neither a scalar nor a vector of static length, or a
      name `check` checks that is not a scalar of `summaries`.
  """
  parts, start, tags, scalars, width = [], {}, [], [], 0  # start: by ref.
  for name, value in summaries.items():
    value = tf.convert_to_tensor(value)
    shape = value.shape
    if shape.rank not in (0, 1) or not shape.is_fully_defined():
      raise ValueError(f'summary {name!r}: a scalar or a vector of static '
                       f'length, got shape {shape}')
    if value.ref() not in start:  # Each distinct tensor once.
      start[value.ref()], width = width, width + shape.num_elements()
      parts.append(value)
    column = start[value.ref()]
    if shape.rank:
      tags += [(tag, column + j)
               for j, tag in enumerate(vector_tags(name, shape[0]))]
    else:
      tags.append((name, column))
      scalars.append(name)
  checked = list(check.finite) if check else []
  guards.check_names(checked, scalars)

  def host_fn(step, values):
    step = tf.cast(step[0], tf.int64)
    writer = tf.summary.create_file_writer(model_dir)
    columns = [dict(tags)[name] for name in checked]
    queued = [check.enqueue(step, tf.gather(values, columns, axis=1))
              ] if checked else []

    def write():
      row = tf.unstack(values[0], num=width)
      tagged = {tag: row[i] for tag, i in tags}
      with writer.as_default():
        written = [tf.summary.scalar(tag, value, step=step)
                   for tag, value in tagged.items()]
        if write_more is not None:
          written += write_more(tagged, step)
      with tf.control_dependencies(written):
        return tf.constant(True)

    with tf.control_dependencies(queued):
      return tf.cond(tf.equal(step % every_n_steps, 0), write,
                     lambda: tf.constant(False))

  values = tf.reshape(tf.concat(
      [tf.reshape(tf.cast(p, tf.float32), [-1]) for p in parts], 0), [1, width])
  return host_fn, [tf.reshape(tf.cast(global_step, tf.int64), [1]), values]


def write_scalars(logdir: str, step: int,
                  values: Mapping[str, Optional[float]]) -> None:
  """`values` (None ones left out) as scalar summaries at `step` in
  `logdir`, eagerly (e.g. an evaluation's, in model_dir/eval)."""
  writer = tf.summary.create_file_writer(logdir)
  with writer.as_default():
    for name, value in values.items():
      if value is not None:
        tf.summary.scalar(name, float(value), step=step)
  writer.close()
