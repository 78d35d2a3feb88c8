"""Standalone training and evaluation as a `runtime.task.EvaluatedTask`: the
network, RMSProp and the weights' EMA, named as TF's optimizer and
`ExponentialMovingAverage` name them, starting from the search's weights
with `init_from_search`."""

from __future__ import annotations

import functools
from typing import Any, Dict, List, Mapping, Optional, Tuple

import tensorflow as tf

from tunas_tf.data import streams
from tunas_tf.graph import inherit
from tunas_tf.layers import dropout as dropout_lib
from tunas_tf.layers import schedules
from tunas_tf.runtime import precision
from tunas_tf.runtime import replicas
from tunas_tf.runtime import task as task_lib
from tunas_tf.search_space import ops as spec_ops
from tunas_tf.train_eval import data
from tunas_tf.train_eval import evaluate
from tunas_tf.train_eval import network
from tunas_tf.train_eval import steps
from tunas_tf.train_eval.config import TrainEvalConfig

# The scalars of the progress line, and how it writes them (as the
# Estimator's `loss=... lr=...`).
PROGRESS = {'model/loss': lambda v: f'loss={v:.4g}',
            'model/learning_rate': lambda v: f'lr={v:.4g}'}


class _Shadows(tf.Module):
  """The EMA's shadow variables, one per trained variable, in its order,
  each starting at its variable's initial value (in a graph, the tensor
  its initializer assigns, so that no initializer reads another variable)."""

  def __init__(self, var_list: List[tf.Variable]):
    super().__init__(name='moving_average')
    eager = tf.executing_eagerly()
    with replicas.identical_variables():
      self.variables_list = [
          tf.Variable(v.read_value() if eager else v.initial_value,
                      trainable=False,
                      name=f'{_name(v)}/{inherit.EMA_SUFFIX}')
          for v in var_list]


def _name(variable: tf.Variable) -> str:
  """A variable's name without ':0'."""
  return variable.name.split(':')[0]


class TrainEvalTask:
  """The standalone network's variables, training step, batches and
  evaluation; `arch` from `network.build_architecture`, `inheritance` the
  search's weights or None."""

  def __init__(self, config: TrainEvalConfig, arch: spec_ops.ConvTowerSpec,
               inheritance: Optional[inherit.Inheritance] = None):
    self._config, self._arch = config, arch
    self._inheritance = inheritance
    self.train_batch_size = config.train_batch_size
    self.eval_batch_size = config.eval_batch_size
    self.finite_scalars = {'model/loss': 'loss'}
    self.progress = PROGRESS
    self._dtype = precision.compute_dtype(config.use_bfloat16,
                                          config.job.use_tpu)

  def _variables(self, model) -> steps.TrainVariables:
    """What `model`'s optimizer updates and what it inherits
    (`steps.variables_to_train`)."""
    return steps.variables_to_train(model, self._inheritance,
                                    self._config.freeze_inherited)

  def build(self) -> Dict[str, Any]:
    """Makes every variable (RMSProp's slots and the EMA's shadows too, so
    the step, traced once, makes none); the objects to checkpoint, by name.
    ValueError as `steps.variables_to_train`."""
    config = self._config
    model = network.build_model(config, self._arch)
    var_list = self._variables(model).var_list
    objects = {'model': model,
               'optimizer': replicas.rmsprop(config.momentum, var_list)}
    if config.moving_average_decay > 0:
      objects['moving_average'] = _Shadows(var_list)
    return objects

  def initial_values(self, objects: task_lib.Objects
                     ) -> List[Tuple[tf.Variable, Any]]:
    """The inherited values (`init_from_search`) and, with an EMA, the
    same values for their shadows, so that the two start equal."""
    variables = self._variables(objects['model'])
    pairs = list(variables.inherited)
    if 'moving_average' in objects:
      shadow = {v.ref(): s for v, s in zip(
          variables.var_list, objects['moving_average'].variables_list)}
      pairs += [(shadow[v.ref()], value) for v, value in variables.inherited
                if v.ref() in shadow]
    return pairs

  def write_summaries(self, scalars: Mapping[str, Any], step: Any
                      ) -> List[Any]:
    """None beyond the step's scalars."""
    del scalars, step
    return []

  def step(self, objects: task_lib.Objects, inputs: Any,
           global_step: tf.Tensor) -> Dict[str, tf.Tensor]:
    """One training step of `objects` on this replica's batch (smoothed
    cross-entropy plus L2, RMSProp, then the EMA at decay min(decay,
    (1 + n) / (10 + n)), n the step after it); its scalars by name."""
    config, model = self._config, objects['model']
    var_list = self._variables(model).var_list
    images, labels = inputs
    images = tf.cast(images, self._dtype)
    logits = tf.cast(model(
        images, training=True,
        dropout_seed=dropout_lib.step_seed(config.job.seed, global_step)),
                     tf.float32)
    loss = steps.losses(model, labels, logits, config)
    learning_rate = schedules.cosine_decay_with_linear_warmup(
        config.learning_rate_scaled, global_step, config.max_global_step,
        config.warmup_steps)
    optimizer = replicas.averaging_optimizer(
        objects['optimizer'].at(learning_rate))
    grads_and_vars = [(g, v) for g, v in optimizer.compute_gradients(
        loss.total, var_list=var_list) if g is not None]
    update = optimizer.apply_gradients(grads_and_vars)
    if 'moving_average' in objects:
      with tf.control_dependencies([update]):
        update = self._update_shadows(
            objects['moving_average'].variables_list, var_list, global_step)
    with tf.control_dependencies([update]):
      return {'model/loss': tf.identity(loss.total),
              'model/empirical_loss': tf.identity(loss.empirical),
              'model/regularization_loss': tf.identity(loss.regularization),
              'model/learning_rate': tf.identity(learning_rate)}

  def _update_shadows(self, shadows: List[tf.Variable],
                      var_list: List[tf.Variable], global_step: tf.Tensor
                      ) -> tf.Operation:
    """`ExponentialMovingAverage.apply`'s update of `shadows` (those of
    `var_list`), its `num_updates` the global step after the update."""
    updates = tf.cast(global_step + 1, tf.float32)
    decay = tf.minimum(tf.constant(self._config.moving_average_decay,
                                   tf.float32),
                       (1.0 + updates) / (10.0 + updates))
    return tf.group([shadow.assign_sub((shadow - variable) * (1.0 - decay))
                     for shadow, variable in zip(shadows, var_list)])

  def dataset(self, batch_size: int, pipeline: streams.Pipeline,
              start_step: int) -> tf.data.Dataset:
    """The batches of `pipeline`'s replicas from `start_step` on
    (`data.train_dataset`), the same on either engine."""
    return precision.cast_input(
        data.train_dataset(self._config, batch_size, start_step, pipeline),
        self._config.use_bfloat16)

  @functools.cached_property
  def eval_examples(self) -> int:
    return data.eval_examples(self._config)

  def build_evaluation(self, checkpoint: Optional[str]
                       ) -> Tuple[Any, task_lib.Values]:
    """The evaluated network (one-shot without `checkpoint`) and its values
    (`evaluate.restored_values`)."""
    model = network.build_model(self._config, self._arch,
                                one_shot=checkpoint is None)
    return model, evaluate.restored_values(model, checkpoint,
                                           self._inheritance)

  def evaluation_step(self, evaluated: Any, inputs: Any
                      ) -> Dict[str, tf.Tensor]:
    images, labels = inputs
    return evaluate.example_values(evaluated, images, labels, self._config)

  def aggregate(self, sums: Mapping[str, float]) -> Dict[str, float]:
    return evaluate.aggregate(sums)

  def eval_dataset(self, batch_size: int, pad: bool) -> tf.data.Dataset:
    """`data.eval_dataset`'s pass: images float32, or bfloat16 with
    `--use_bfloat16=true`; labels float32."""
    return precision.cast_input(data.eval_dataset(self._config, batch_size,
                                                  pad),
                                self._config.use_bfloat16)
