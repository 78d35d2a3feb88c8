"""Replicas: which one this is, and means over them, in a TPU, a
`tf.distribute` or no replica context (docs/scaling.md). The one module that
imports `tf.distribute` internals."""

from __future__ import annotations

import contextlib
import copy
from typing import Iterator, List, Optional, Sequence, Tuple

import tensorflow as tf
from tensorflow.compiler.tf2xla.python import xla  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.tpu import tpu_function  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.training.saving import saveable_object  # pylint: disable=g-direct-tensorflow-import

_ONLY_FIRST = tf.VariableAggregation.ONLY_FIRST_REPLICA


def _tpu_replicas() -> int:
  """The TPU replica count inside a TPU computation (TPUEstimator's shard
  context, whose `tf.distribute` context says one replica), else 0."""
  return int(tpu_function.get_tpu_context().number_of_shards or 0)


def _distribute_context() -> tf.distribute.ReplicaContext:
  context = tf.distribute.get_replica_context()
  if context is None:
    raise ValueError('replicas: called in a cross-replica context; call it '
                     'in the per-replica step (the model_fn)')
  return context


def replica_id() -> tf.Tensor:
  """Scalar int32 in [0, replicas): the replica the step is built for,
  the same in every run of a set-up, so randomness keyed on it repeats.
  ValueError in a `tf.distribute` cross-replica context."""
  if _tpu_replicas() > 1:
    return xla.replica_id()
  if _tpu_replicas():
    return tf.constant(0, tf.int32)
  return tf.cast(_distribute_context().replica_id_in_sync_group, tf.int32)


def means(values: Sequence[tf.Tensor]) -> List[tf.Tensor]:
  """The mean over replicas of each float tensor in `values`, in one
  reduction, without a gradient; ValueError in a `tf.distribute`
  cross-replica context."""
  values = [tf.stop_gradient(tf.convert_to_tensor(v)) for v in values]
  tpu = _tpu_replicas()
  if tpu:
    return [tf.compat.v1.tpu.cross_replica_sum(v) / tf.cast(tpu, v.dtype)
            if tpu > 1 else v for v in values]
  context = _distribute_context()
  if context.num_replicas_in_sync == 1 or not values:
    return values

  def reduce(strategy, *per_replica):
    return strategy.extended.batch_reduce_to(
        tf.distribute.ReduceOp.MEAN, [(v, v) for v in per_replica])

  # `ReplicaContext.all_reduce` fails in graph mode (TF 2.15: its
  # custom_gradient rejects variables); merge_call is what it does inside.
  return list(context.merge_call(reduce, args=tuple(values)))


def mean(value: tf.Tensor) -> tf.Tensor:
  """The mean over replicas of `value` (see `means`)."""
  return means([value])[0]


def averaging_optimizer(optimizer: tf.compat.v1.train.Optimizer
                        ) -> tf.compat.v1.train.Optimizer:
  """`optimizer`, made to apply the mean over replicas of the gradients
  (`CrossShardOptimizer` on TPU). ValueError under `tf.distribute` with
  several replicas where it would sum them: neither a `MeanRMSProp` nor in
  `Estimator.train` after a mean-reduced loss."""
  if _tpu_replicas() and not tf.distribute.has_strategy():
    return tf.compat.v1.tpu.CrossShardOptimizer(optimizer)
  if isinstance(optimizer, MeanRMSProp):
    return optimizer
  if _distribute_context().num_replicas_in_sync > 1:
    from tensorflow.python.distribute import distribute_utils  # pylint: disable=g-direct-tensorflow-import,g-import-not-at-top
    if distribute_utils.get_loss_reduction() != tf.distribute.ReduceOp.MEAN:
      raise ValueError('replicas.averaging_optimizer: the v1 optimizer would '
                       'sum the replicas\' gradients (outside Estimator.train '
                       'or after a SUM loss)')
  return optimizer


@contextlib.contextmanager
def identical_variables() -> Iterator[None]:
  """Variables created inside are updated alike by every replica (under
  `tf.distribute`, ONLY_FIRST_REPLICA: the value must come from `means`)."""
  strategy = tf.distribute.get_strategy()
  if _tpu_replicas() or strategy.num_replicas_in_sync == 1:
    yield
    return

  def creator(next_creator, **kwargs):
    if kwargs.get('aggregation') in (None, tf.VariableAggregation.NONE):
      kwargs['aggregation'] = _ONLY_FIRST
    return next_creator(**kwargs)

  with tf.variable_creator_scope(creator):
    yield


def is_first_replica() -> bool:
  """Whether this is the first replica's step (always, off `tf.distribute`):
  what one copy of a `MirroredStrategy` step builds checks it."""
  if _tpu_replicas():
    return True
  replica_id = tf.get_static_value(
      _distribute_context().replica_id_in_sync_group)
  return replica_id is None or int(replica_id) == 0


def mirrored_strategy(devices: Sequence[str]) -> tf.distribute.Strategy:
  """`MirroredStrategy` over `devices` (from `replica_devices`), for a graph:
  on CPU devices reducing through one device. (Made eagerly it would place
  variables on devices only a session's `device_count` creates.)"""
  cross_device_ops = None
  if all('cpu' in d.lower() for d in devices):
    cross_device_ops = tf.distribute.ReductionToOneDevice()
  with tf.Graph().as_default():
    return tf.distribute.MirroredStrategy(devices=list(devices),
                                          cross_device_ops=cross_device_ops)


def replica_devices(count: int) -> Tuple[List[str], int]:
  """(devices of `count` replicas, CPU devices a session needs): the first
  `count` GPUs, or the CPU split in `count` (a v1 session's `device_count`).
  ValueError for fewer GPUs than `count`."""
  gpus = tf.config.list_physical_devices('GPU')
  if gpus:
    if len(gpus) < count:
      raise ValueError(f'--replicas={count} needs {count} GPUs, found '
                       f'{len(gpus)}')
    return [f'/gpu:{i}' for i in range(count)], 1
  return [f'/cpu:{i}' for i in range(count)], count


class _FirstCopySaveable(saveable_object.SaveableObject):
  """A mirrored variable saved as its first copy, restored into every copy."""

  def __init__(self, variable, name: str):
    self._copies = list(variable.values)
    first = self._copies[0]
    spec = saveable_object.SaveSpec(first.read_value, '', name,
                                    dtype=first.dtype, device=first.device)
    super().__init__(first, [spec], name)

  def restore(self, restored_tensors, restored_shapes):
    del restored_shapes
    tensor, = restored_tensors
    assigns = []
    for each in self._copies:
      with tf.device(each.device):
        assigns.append(each.assign(tensor, read_value=False))
    return tf.group(assigns)


def saver(**saver_kwargs) -> tf.compat.v1.train.Saver:
  """A `Saver` (`saver_kwargs` but `var_list`) writing each mirrored
  variable once under its own name and restoring it into every replica's
  copy, so one-replica and N-replica checkpoints restore each other."""
  graph = tf.compat.v1.get_default_graph()
  saveables, copies = [], set()
  for variable in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES):
    if isinstance(variable, tf.distribute.DistributedValues):
      copies.update(id(c) for c in variable.values)
      name = variable.values[0].name.split(':')[0]
      saveables.append(_FirstCopySaveable(variable, name))
  plain = [v for v in graph.get_collection(
      tf.compat.v1.GraphKeys.GLOBAL_VARIABLES) +
           graph.get_collection(tf.compat.v1.GraphKeys.SAVEABLE_OBJECTS)
           if id(v) not in copies and
           not isinstance(v, tf.distribute.DistributedValues)]
  return tf.compat.v1.train.Saver(var_list=saveables + plain, **saver_kwargs)


class MeanRMSProp(tf.compat.v1.train.RMSPropOptimizer):
  """RMSProp on the mean gradient over `tf.distribute` replicas (the loss
  scaled by 1/N, `apply_gradients` summing), in the Estimator or a custom
  loop; each update gives its learning rate (`at`)."""

  @staticmethod
  def _scale_loss(loss_value):
    count = tf.distribute.get_strategy().num_replicas_in_sync
    return loss_value * (1.0 / count) if count > 1 else loss_value

  def at(self, learning_rate: tf.Tensor) -> 'MeanRMSProp':
    """This optimizer at `learning_rate` (a step's float32 scalar) for one
    update: a view sharing its slots."""
    view = copy.copy(self)
    view._learning_rate = learning_rate  # pylint: disable=protected-access
    return view


def _no_learning_rate():
  raise ValueError('MeanRMSProp: an update without its learning rate; apply '
                   'optimizer.at(learning_rate)')


def rmsprop(momentum: float,
            var_list: Optional[Sequence[tf.Variable]] = None) -> MeanRMSProp:
  """Both binaries' RMSProp of the weights: TF1's (decay 0.9, epsilon 1.0)
  on the mean gradient, applied as `at(learning_rate)` through
  `averaging_optimizer`. With `var_list` its slots are made now, so a step
  traced once (`tf.function`) makes no variable."""
  optimizer = MeanRMSProp(_no_learning_rate, decay=0.9, momentum=momentum,
                          epsilon=1.0)
  if var_list is not None:
    with tf.name_scope(optimizer.get_name()):
      optimizer._create_slots(list(var_list))  # pylint: disable=protected-access
  return optimizer
