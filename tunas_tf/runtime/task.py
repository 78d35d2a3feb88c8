"""What a binary trains, written once for every engine: the `Task` protocol.

After Model Garden's `Task`: a task builds the objects a checkpoint holds,
takes one per-replica step and returns its scalars, and makes its dataset;
an engine (`runtime.estimator.task_model_fn`, `runtime.distribute.train`)
is an adapter that drives any task. What only one engine needs lives in
that engine: the global step's increment, HWCN infeed on TPU (`to_hwcn`,
`from_hwcn`, applied by both adapters around the task), host_call, hooks.
Nothing in a task knows which engine runs it.
"""

from __future__ import annotations

from typing import (Any, Callable, Dict, List, Mapping, Protocol, Sequence,
                    Tuple)

import tensorflow as tf

from tunas_tf.data import streams

# The progress line's scalars, by name, and how each is written.
ProgressFormats = Mapping[str, Callable[[float], str]]


class Task(Protocol):
  """A binary's training, for any engine.

  Attributes:
    train_batch_size: the global training batch (over every replica).
    finite_scalars: {scalar name: what it is in a message}: the scalars of
      `step` that must stay finite; a run stops in one line when one is
      not (`runtime.guards`).
    progress: the progress line's scalars and their text.
    decisions: (path, choice labels) of the controller's decisions whose
      logits `step` returns as `rlpathlogits/{path}` (the probability
      summaries, `runtime.summaries.write_probabilities`); empty for none.
  """

  train_batch_size: int
  finite_scalars: Mapping[str, str]
  progress: ProgressFormats
  decisions: Sequence[Tuple[str, Sequence[str]]]

  def build(self) -> Mapping[str, Any]:
    """Makes every variable the step uses; returns the objects a
    checkpoint holds, by name (the distribute engine's object names; the
    Estimator's checkpoints name the variables themselves).

    Called once per replica graph (the Estimator's model_fn) or once under
    the strategy's scope (the distribute engine), before `step`.
    """

  def initial_values(self) -> List[Tuple[tf.Variable, Any]]:
    """(variable, value) pairs of `build`'s variables that a run restoring
    no checkpoint starts from (e.g. weights inherited from a search); the
    engine assigns them once, before the first step. Empty for none."""

  def step(self, inputs: Any, global_step: tf.Tensor) -> Dict[str, tf.Tensor]:
    """One replica's step on its batch `inputs` (the dataset's element, NHWC
    images); its scalars by name, float32 scalars or vectors of static
    length, each computed after every update of the step, `model/loss`
    among them (the Estimator's loss).

    `global_step` is the scalar int64 step being taken, read once before
    any update; the engine increments it after the step.
    """

  def dataset(self, batch_size: int, pipeline: streams.Pipeline,
              start_step: int) -> tf.data.Dataset:
    """The batches of `pipeline`'s replicas, `batch_size` images each (per
    replica), from the step `start_step` on: (features, labels)."""


def to_hwcn(images: tf.Tensor) -> tf.Tensor:
  """A batch of NHWC images as HWCN, the layout TPU infeed is sent in (a
  layout hint for XLA)."""
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
