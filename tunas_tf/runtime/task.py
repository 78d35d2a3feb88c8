"""What a binary trains and evaluates, written once for every engine.

After Model Garden's `Task`: a task builds the objects a checkpoint holds,
takes one per-replica step and returns its scalars, and makes its dataset;
an `EvaluatedTask` also evaluates, per example, and aggregates the sums.
An engine (`runtime.engine`) drives any task; what only one engine needs
(the global step's increment, HWCN infeed on TPU, host_call, hooks) lives in
its adapter. Nothing in a task knows which engine runs it.
"""

from __future__ import annotations

from typing import (Any, Callable, Dict, List, Mapping, NamedTuple, Optional,
                    Protocol, Sequence, Tuple)

import tensorflow as tf

from tunas_tf.data import streams

# The progress line's scalars, by name, and how each is written.
ProgressFormats = Mapping[str, Callable[[float], str]]
# (variable, value) pairs an engine assigns before the first step.
Values = List[Tuple[tf.Variable, Any]]


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
    decisions: (path, choice labels) of the controller's decisions whose
      logits `step` returns as `rlpathlogits/{path}`; empty for none.
  """

  train_batch_size: int
  finite_scalars: Mapping[str, str]
  progress: ProgressFormats
  decisions: Sequence[Tuple[str, Sequence[str]]]

  def build(self) -> Mapping[str, Any]:
    """Makes every variable the step uses (once per replica graph, or once
    under a strategy's scope); the objects a checkpoint holds, by name."""

  def initial_values(self) -> Values:
    """What a run restoring no checkpoint starts from, beyond the seeded
    initial values (e.g. weights inherited from a search); may be empty."""

  def step(self, inputs: Any, global_step: tf.Tensor) -> Dict[str, tf.Tensor]:
    """One replica's step on its batch (NHWC images); its scalars by name
    (float32 scalars or vectors of static length), each after every update,
    `model/loss` among them. `global_step`: the int64 step being taken; the
    engine increments it after the step."""

  def dataset(self, batch_size: int, pipeline: streams.Pipeline,
              start_step: int) -> tf.data.Dataset:
    """The batches of `pipeline`'s replicas, `batch_size` images each, from
    the step `start_step` on: (features, labels)."""


class EvaluatedTask(Task, Protocol):
  """A task that is also evaluated (Model Garden's `validation_step` and
  `aggregate_logs`): the engine sums `evaluation_step`'s per-example values
  over one pass of `eval_dataset`, in float64, and `aggregate`s the sums.

  Attributes:
    eval_batch_size: the global evaluation batch.
    eval_examples: the examples of one pass.
  """

  eval_batch_size: int
  eval_examples: int

  def build_evaluation(self, checkpoint: Optional[str]) -> Values:
    """Makes the evaluated network; the values its variables take (from
    `checkpoint`, or without one the task's own)."""

  def evaluation_step(self, inputs: Any) -> Dict[str, tf.Tensor]:
    """Per-example float32 [N] values of a batch, by name, each 0 on the
    padding of a TPU's last batch."""

  def aggregate(self, sums: Mapping[str, float]) -> Dict[str, float]:
    """The metrics of a pass from its sums of `evaluation_step`'s values."""

  def eval_dataset(self, batch_size: int, pad: bool) -> tf.data.Dataset:
    """One ordered pass in batches of `batch_size`; with `pad`, every batch
    full (static shapes, TPU), the last one padded."""


def to_hwcn(images: tf.Tensor) -> tf.Tensor:
  """A batch of NHWC images as HWCN, the layout TPU infeed is sent in."""
  return tf.transpose(images, [1, 2, 3, 0])


def from_hwcn(images: tf.Tensor) -> tf.Tensor:
  """`to_hwcn`'s images back as NHWC, on the device."""
  return tf.transpose(images, [3, 0, 1, 2])


def infeed(dataset: tf.data.Dataset, use_tpu: bool) -> tf.data.Dataset:
  """A task's dataset as the engine feeds it: on TPU every image of the
  features HWCN (`to_hwcn`), which `from_infeed` turns back."""
  if not use_tpu:
    return dataset
  return dataset.map(
      lambda features, labels: (tf.nest.map_structure(to_hwcn, features),
                                labels))


def from_infeed(inputs: Any, use_tpu: bool) -> Any:
  """`infeed`'s (features, labels) as the task's step takes them."""
  if not use_tpu:
    return inputs
  features, labels = inputs
  return tf.nest.map_structure(from_hwcn, features), labels
