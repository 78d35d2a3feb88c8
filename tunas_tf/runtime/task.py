"""What a binary trains and evaluates, written once for every engine (after
Model Garden's `Task`): a task builds the objects a checkpoint holds, steps
them and makes its dataset, holding no state; it never knows its engine."""

from __future__ import annotations

from typing import (Any, Callable, Dict, List, Mapping, NamedTuple, Optional,
                    Protocol, Tuple)

import tensorflow as tf

from tunas_tf.data import streams

# The progress line's scalars, by name, and how each is written.
ProgressFormats = Mapping[str, Callable[[float], str]]
# (variable, value) pairs an engine assigns before the first step.
Values = List[Tuple[tf.Variable, Any]]
# The objects `Task.build` made (those a checkpoint holds), by name.
Objects = Mapping[str, Any]


class Trained(NamedTuple):
  """What an engine's `train` did: the steps it took (`start_step` up to
  `step`) and the training images/s per replica (None if unmeasured)."""
  start_step: int
  step: int
  images_per_sec: Optional[float]


class Task(Protocol):
  """A binary's training, for any engine.

  Attributes:
    train_batch_size: the global training batch (over every replica).
    finite_scalars: {scalar name: what it is in a message}: the scalars of
      `step` checked finite on the host (`runtime.guards`).
    progress: the progress line's scalars and their text.
  """

  train_batch_size: int
  finite_scalars: Mapping[str, str]
  progress: ProgressFormats

  def build(self) -> Objects:
    """Makes every variable the step uses (once per replica graph, or once
    under a strategy's scope); the objects a checkpoint holds, by name."""

  def initial_values(self, objects: Objects) -> Values:
    """What a run restoring no checkpoint starts `objects` from, beyond the
    seeded initial values (e.g. weights inherited from a search)."""

  def step(self, objects: Objects, inputs: Any, global_step: tf.Tensor
           ) -> Dict[str, tf.Tensor]:
    """One replica's step of `objects` on its batch (NHWC images); its
    scalars by name (float32 scalars or vectors of static length), each
    after every update, `model/loss` among them. `global_step`: the int64
    step being taken; the engine increments it after the step."""

  def write_summaries(self, scalars: Mapping[str, Any], step: Any
                      ) -> List[Any]:
    """Summaries of the task's own beyond its scalars, written from a
    step's `scalars` (a vector `name` as `name/0`, ...) under the default
    writer, in a graph (the ops) or eagerly; may be none."""

  def dataset(self, batch_size: int, pipeline: streams.Pipeline,
              start_step: int) -> tf.data.Dataset:
    """The batches of `pipeline`'s replicas, `batch_size` images each, from
    the step `start_step` on: (features, labels)."""


class EvaluatedTask(Task, Protocol):
  """A task that is also evaluated: the engine sums `evaluation_step`'s
  per-example values over one pass (`eval_examples`) of `eval_dataset` in
  float64 and `aggregate`s the sums; `eval_batch_size` is global."""

  eval_batch_size: int
  eval_examples: int

  def build_evaluation(self, checkpoint: Optional[str]) -> Tuple[Any, Values]:
    """Makes the evaluated network; it and the values its variables take
    (from `checkpoint`, or without one the task's own)."""

  def evaluation_step(self, evaluated: Any, inputs: Any
                      ) -> Dict[str, tf.Tensor]:
    """Per-example float32 [N] values of a batch through `evaluated`, by
    name, each 0 on the padding of a TPU's last batch."""

  def aggregate(self, sums: Mapping[str, float]) -> Dict[str, float]:
    """The metrics of a pass from its sums of `evaluation_step`'s values."""

  def eval_dataset(self, batch_size: int, pad: bool) -> tf.data.Dataset:
    """One ordered pass in batches of `batch_size`; with `pad`, every batch
    full (static shapes, TPU), the last one padded."""


def infeed(dataset: tf.data.Dataset, use_tpu: bool) -> tf.data.Dataset:
  """A task's dataset as the engine feeds it: on TPU every image of the
  features HWCN (the layout TPU infeed is sent in), which `from_infeed`
  turns back."""
  if not use_tpu:
    return dataset
  hwcn = lambda images: tf.transpose(images, [1, 2, 3, 0])
  return dataset.map(lambda features, labels: (
      tf.nest.map_structure(hwcn, features), labels))


def from_infeed(inputs: Any, use_tpu: bool) -> Any:
  """`infeed`'s (features, labels) as the task's step takes them (NHWC, the
  transpose on the device)."""
  if not use_tpu:
    return inputs
  features, labels = inputs
  nhwc = lambda images: tf.transpose(images, [3, 0, 1, 2])
  return tf.nest.map_structure(nhwc, features), labels
