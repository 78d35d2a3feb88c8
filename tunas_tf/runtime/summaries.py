"""Every scalar to TensorBoard through the TPUEstimator's host_call.

`host_call` packs the step's scalars (and the controller's logits, written
as probabilities, entropies and a heat map) into one row the host writes
every n steps, on TPU and off it alike; it also queues the scalars
`guards.FiniteHook` checks.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple

import tensorflow as tf

from tunas_tf.runtime import guards


def vector_tags(name: str, length: int) -> List[str]:
  """The tags a vector summary `name` of `length` values is written under:
  `{name}/0` ... (either engine)."""
  return [f'{name}/{j}' for j in range(length)]


def host_call(summaries: 'collections.OrderedDict[str, tf.Tensor]',
              global_step: tf.Tensor, model_dir: str, every_n_steps: int,
              decisions: Sequence[Tuple[str, Sequence[str]]] = (),
              finite: Sequence[str] = ()):
  """(host_fn, tensors) writing `summaries` every `every_n_steps` steps.

  Each value is a float32 scalar, written under its name, or a float32
  vector of static length k, written as `{name}/0` ... `{name}/{k-1}`. The
  step sends one [1, n] row (each distinct tensor once); host_fn splits and
  writes the first replica's row (TPU: rows of every core) inside one
  `tf.cond`, and returns whether it wrote. For `decisions` ((path, choice
  labels) of the `rlpathlogits/{path}` logits) it also writes
  `write_probabilities`. The scalars named in `finite` (every replica's) are
  queued every step for `guards.FiniteHook`.

  Raises:
    ValueError: for a value that is neither a scalar nor a vector of static
      length, a decision without its logits, or a `finite` name that is not
      a scalar of `summaries`.
  """
  scalars, vectors = [], []  # The distinct tensors, in order of appearance.
  slot = {}  # Tensor reference -> (is_vector, index in its list).
  named = []  # (name, tensor reference) in `summaries`' order.
  for name, value in summaries.items():
    value = tf.convert_to_tensor(value)
    shape = value.shape
    if shape.rank not in (0, 1) or not shape.is_fully_defined():
      raise ValueError(f'summary {name!r}: a scalar or a vector of static '
                       f'length, got shape {shape}')
    if value.ref() not in slot:
      group = vectors if shape.rank else scalars
      slot[value.ref()] = (bool(shape.rank), len(group))
      group.append(tf.cast(value, tf.float32))
    named.append((name, value.ref()))
  # Columns of the row: the scalars, then each vector's elements.
  starts, width = [], len(scalars)
  for vector in vectors:
    starts.append(width)
    width += vector.shape.num_elements()
  tags = []  # (tag, column), in `summaries`' order.
  for name, ref in named:
    is_vector, i = slot[ref]
    if is_vector:
      tags.extend((tag, starts[i] + j) for j, tag in enumerate(
          vector_tags(name, vectors[i].shape.num_elements())))
    else:
      tags.append((name, i))

  columns = dict(tags)
  for path, labels in decisions:
    if f'rlpathlogits/{path}/{len(labels) - 1}' not in columns:
      raise ValueError(f'decision {path!r}: no rlpathlogits/{path} summary '
                       f'of {len(labels)} logits')
  guards.check_names(finite, [name for name, ref in named if not slot[ref][0]])

  def host_fn(step, values):
    step = tf.cast(step[0], tf.int64)
    writer = tf.summary.create_file_writer(model_dir)
    queued = [guards.queue_finite(step, tf.gather(
        values, [columns[name] for name in finite], axis=1))] if finite else []

    def write():
      row = tf.unstack(values[0], num=width)
      with writer.as_default():
        written = [tf.summary.scalar(tag, row[i], step=step)
                   for tag, i in tags]
        if decisions:
          written += write_probabilities(
              decisions, lambda tag: row[columns[tag]], step)
      with tf.control_dependencies(written):
        return tf.constant(True)

    with tf.control_dependencies(queued):
      return tf.cond(tf.equal(step % every_n_steps, 0), write,
                     lambda: tf.constant(False))

  parts = ([tf.stack(scalars)] if scalars else []) + vectors
  values = tf.reshape(tf.concat(parts, axis=0), [1, width])
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


def write_probabilities(decisions: Sequence[Tuple[str, Sequence[str]]],
                        value: Callable[[str], Any], step: Any
                        ) -> List[Any]:
  """`host_call`'s probability, entropy and heat-map summaries (see there),
  under the default writer, from `value(tag)`: the scalar summary `tag`
  (`rlpathlogits/{path}/{j}`) of the step. In a graph or eagerly (the
  distribute engine's host)."""
  written, rows = [], []
  width = max(len(labels) for _, labels in decisions)
  for path, labels in decisions:
    logits = tf.stack([tf.cast(value(f'rlpathlogits/{path}/{j}'), tf.float32)
                       for j in range(len(labels))])
    probs = tf.nn.softmax(logits)
    written += [tf.summary.scalar(f'rlprobs/{path}/{label}', probs[j],
                                  step=step)
                for j, label in enumerate(labels)]
    entropy = -tf.reduce_sum(probs * tf.nn.log_softmax(logits))
    written.append(tf.summary.scalar(f'rlentropy/{path}', entropy, step=step))
    rows.append(tf.pad(probs, [[0, width - len(labels)]], constant_values=-1))
  written.append(tf.summary.image('rlprobs_heatmap',
                                  _heatmap(tf.stack(rows))[None], step=step))
  return written


def _heatmap(probs: tf.Tensor, cell: int = 12) -> tf.Tensor:
  """[D, C] probabilities (-1: no such choice) -> an RGB image in [0, 1]."""
  white = tf.constant([1.0, 1.0, 1.0])
  blue = tf.constant([0.03, 0.19, 0.42])
  p = tf.clip_by_value(probs, 0.0, 1.0)[..., None]
  rgb = white + p * (blue - white)
  rgb = tf.where((probs < 0)[..., None], tf.fill(tf.shape(rgb), 0.75), rgb)
  return tf.repeat(tf.repeat(rgb, cell, axis=0), 2 * cell, axis=1)
