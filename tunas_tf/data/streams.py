"""The training streams: batches that are a pure function of (seed, position),
so a resumed run reads what an uninterrupted one read, whichever replicas
and hosts read it (docs/restarting.md)."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Tuple

import tensorflow as tf

from tunas_tf.data import unreadable


# The second word of a stream's key: each stream of a run has its own order.
SEARCH_TRAIN_STREAM = 0
SEARCH_VALIDATION_STREAM = 1
TRAIN_EVAL_STREAM = 2


class Pipeline(NamedTuple):
  """Which per-replica batches of each step one input pipeline yields:
  `batches` of the step's `count * batches`, from `index * batches` on.
  `Pipeline()` one replica, `Pipeline(0, 1, N)` one input_fn for N replicas,
  `Pipeline(host, hosts, cores per host)` TPUEstimator's per-host input."""
  index: int = 0
  count: int = 1
  batches: int = 1

  @property
  def replicas(self) -> int:
    """Per-replica batches per step, all pipelines together."""
    return self.count * self.batches


def _epoch_seed(key: tf.Tensor, epoch: tf.Tensor) -> tf.Tensor:
  """The shuffle seed (int64 scalar) of one epoch of the stream `key`."""
  return tf.random.stateless_uniform(
      [], tf.random.experimental.stateless_fold_in(key, epoch),
      minval=None, maxval=None, dtype=tf.int64)


# TF's seeds are taken modulo this (`_truncate_seed`).
_MAXINT32 = 2**31 - 1


def _shuffle(data: tf.data.Dataset, buffer: int, graph_seed: int,
             op_seed: tf.Tensor) -> tf.data.Dataset:
  """`data.shuffle(buffer, seed=op_seed, reshuffle_each_iteration=False)` as
  a graph of graph-level seed `graph_seed` makes it, wherever made (eagerly
  `Dataset.shuffle` would take another graph-level seed than the Estimator's).
  """
  seed = tf.constant(graph_seed % _MAXINT32, tf.int64)
  seed2 = tf.cast(op_seed, tf.int64) % _MAXINT32
  seed2 = tf.where(tf.logical_and(tf.equal(seed, 0), tf.equal(seed2, 0)),
                   tf.constant(_MAXINT32, tf.int64), seed2)
  specs = tf.nest.flatten(data.element_spec)
  variant = tf.raw_ops.ShuffleDatasetV3(
      input_dataset=tf.data.experimental.to_variant(data),
      buffer_size=tf.constant(buffer, tf.int64), seed=seed, seed2=seed2,
      seed_generator=tf.raw_ops.DummySeedGenerator(),
      output_types=[spec.dtype for spec in specs],
      output_shapes=[spec.shape for spec in specs],
      reshuffle_each_iteration=False)
  return tf.data.experimental.from_variant(variant, data.element_spec)


def keyed_batches(examples: tf.data.Dataset, num_examples: int,
                  batch_size: int, *, key: Tuple[int, int],
                  start_step: int = 0, pipeline: Pipeline = Pipeline(),
                  prepare: Optional[Callable[..., Any]] = None,
                  shuffle_buffer: Optional[int] = None,
                  checked: Optional[str] = None) -> tf.data.Dataset:
  """An endless stream of batches, a pure function of `key` and position.

  Example p is example p mod N of epoch p // N, each epoch a permutation
  drawn from (seed, epoch), `prepare`'s seed from (key, p). Step s takes
  per-replica batches [s * R, (s + 1) * R), R = `pipeline.replicas`; the
  examples before `start_step` are skipped undecoded.

  Args:
    examples: an unbatched dataset of `num_examples` in a fixed order.
    key: (seed, stream), the stream's key (`*_STREAM`).
    prepare: (example, int64 [2] seed) -> the example to batch; None: as is.
    shuffle_buffer: default N (a uniform permutation of each epoch).
    checked: None, or the split's name: an example `prepare` fails on stops
      the stream, naming it (`unreadable.checked`).

  Raises:
    ValueError: for fewer examples than one batch, a negative start, or a
      pipeline index outside its count.
  """
  if num_examples < batch_size:
    raise ValueError(f'{num_examples} examples are fewer than one batch of '
                     f'{batch_size}')
  if start_step < 0:
    raise ValueError(f'start_step must be >= 0, got {start_step}')
  if not 0 <= pipeline.index < pipeline.count or pipeline.batches < 1:
    raise ValueError(f'Bad pipeline {pipeline}')
  graph_seed = int(key[0])
  key = tf.constant(key, tf.int64)
  buffer = min(num_examples, shuffle_buffer or num_examples)
  start = start_step * pipeline.replicas * batch_size

  def ordered(data):
    """(position, element) of `data` in the stream's order from `start`."""
    stream = tf.data.Dataset.counter(start // num_examples).flat_map(
        lambda epoch: _shuffle(data, buffer, graph_seed,
                               _epoch_seed(key, epoch)))
    stream = stream.skip(start % num_examples).enumerate(start)
    if pipeline.count > 1:  # This pipeline's runs of `batches` batches.
      run = pipeline.batches * batch_size
      stream = stream.filter(
          lambda p, _: tf.equal(p // run % pipeline.count, pipeline.index))
    return stream

  prepare = prepare or (lambda example, seed: example)

  def prepared(p, example):
    return prepare(example, tf.random.experimental.stateless_fold_in(key, p))

  if checked is None:
    stream = ordered(examples).map(prepared,
                                   num_parallel_calls=tf.data.AUTOTUNE)
  else:  # The same shuffles of the indices (a shuffle's order depends on
    # its seed and length only) give each position's index and step.
    stream = ordered(examples).map(lambda p, example: (p, prepared(p, example)),
                                   num_parallel_calls=tf.data.AUTOTUNE)
    step_examples = pipeline.replicas * batch_size
    expected = ordered(tf.data.Dataset.range(num_examples)).map(
        lambda p, index: (p, index, p // step_examples))
    stream = unreadable.checked(stream, expected, checked, finite=False)
  return stream.batch(batch_size, drop_remainder=True)
