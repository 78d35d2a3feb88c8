"""A TF1 graph with N replicas on N CPU devices, as the Estimator builds it.

`--replicas=N` runs the search's model_fn once per replica under
`tf.distribute.MirroredStrategy` inside `Estimator.train`. These helpers build
the same situation without an Estimator, for small unit tests: a graph under
the strategy's scope (with the Estimator's loss scaling for v1 optimizers),
`run` to build a step per replica, and a session whose CPU is split into N
devices (`device_count`, as `estimator.make_estimator` does; TF's process-wide
device list is not touched, so these run in any test process). Also the hand
computation of the controller's first step on N replicas (`first_adam_step`).
"""

import contextlib
from typing import Any, Callable, Iterator, List

import numpy as np
import tensorflow as tf


@contextlib.contextmanager
def graph(num_replicas: int) -> Iterator[tf.distribute.Strategy]:
  """A new default graph under an N-replica strategy on /cpu:0..N-1."""
  with tf.Graph().as_default():
    # Made in the graph: eagerly, it would also place eager variables on
    # CPU devices that only the session has (replicas.mirrored_strategy).
    strategy = tf.distribute.MirroredStrategy(
        devices=[f'/cpu:{i}' for i in range(num_replicas)],
        cross_device_ops=tf.distribute.ReductionToOneDevice())
    # What Estimator.train enters around the model_fn (estimator.py:1273).
    with strategy.scope(), \
        strategy._scale_loss_for_estimator_enabled():  # pylint: disable=protected-access
      tf.compat.v1.random.set_random_seed(0)
      yield strategy


def run(strategy: tf.distribute.Strategy, step_fn: Callable[[int], Any]):
  """Builds `step_fn(replica_id)` once per replica (replica context),
  unconverted by autograph, as `estimator.distributed_model_fn` builds the
  model_fn."""

  @tf.autograph.experimental.do_not_convert
  def per_replica():
    context = tf.distribute.get_replica_context()
    return step_fn(int(tf.get_static_value(context.replica_id_in_sync_group)))

  return strategy.extended.call_for_each_replica(per_replica)


def local(strategy: tf.distribute.Strategy, value: Any) -> List[Any]:
  """The per-replica parts of a value `run` returned (or of a variable)."""
  return list(strategy.experimental_local_results(value))


def session(num_replicas: int) -> tf.compat.v1.Session:
  """A session of the default graph with the CPU split into N devices."""
  return tf.compat.v1.Session(config=tf.compat.v1.ConfigProto(
      device_count={'CPU': num_replicas}))


def first_adam_step(learning_rate: float, grads: 'np.ndarray',
                    beta2: float = 0.999, epsilon: float = 1e-8
                    ) -> 'np.ndarray':
  """The controller's first Adam step (beta1 0) given replica i's gradient
  `grads[i]` (float64, by hand): -lr sqrt(1 - beta2) mean g /
  (sqrt((1 - beta2) mean g^2) + epsilon), the square taken before the mean.
  """
  grads = np.asarray(grads, np.float64)
  mean_g, mean_g2 = grads.mean(axis=0), (grads**2).mean(axis=0)
  return (-learning_rate * np.sqrt(1 - beta2) * mean_g /
          (np.sqrt((1 - beta2) * mean_g2) + epsilon))
