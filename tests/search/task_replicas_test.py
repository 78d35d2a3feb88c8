"""`--engine=distribute --replicas=2`: the controller learns from the mean.

In a process of its own (the CPU is split into two logical devices before
TF starts): `distribute.strategy_for(job, 2)`, a `SearchTask` built under
it and one search step of each replica (RL delay 0, no warm-up: the
controller learns at step 0), each replica's controller gradient captured
where `steps.controller_train_op` takes it. The logits after the step are,
on both replicas' copies, the hand computation of
tests/search/steps_test.py (`replicated.first_adam_step`: Adam, beta1 0, on
the mean gradient and the mean squared gradient). On any TF; ~1 min.
"""

import json
import os
import sys
import tempfile
import textwrap
from unittest import mock

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from tunas_tf.controller import optimizer as controller_optimizer
from tunas_tf.runtime import distribute
from tunas_tf.search import runner
from tunas_tf.search import task as task_lib
from tests.testing import replicated
from tests.testing import searches
from tests.testing import forked

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_FLAGS = ('--engine=distribute', '--replicas=2', '--train_batch_size=16',
          '--max_steps=4', '--rl_delay_steps_fraction=0',
          '--increase_ops_warmup_steps_fraction=0',
          '--increase_filters_warmup_steps_fraction=0',
          '--rl_learning_rate=1.0')


def _flat(values) -> np.ndarray:
  return np.concatenate([np.reshape(v, [-1]) for v in values])


def one_step(model_dir: str):
  """One step on 2 CPU replicas: {'grads': per replica, 'lr', 'before',
  'after': per replica copy}, the logits flat in the controller's order."""
  config = searches.search_config(model_dir, *_FLAGS)
  strategy = distribute.strategy_for(config.job, config.replicas)
  assert strategy.num_replicas_in_sync == 2
  task = task_lib.SearchTask(config)
  with strategy.scope():
    objects = task.build()
  logits = objects['controller'].trainable_variables
  copies = lambda: [
      _flat(v.numpy() for v in per_replica)
      for per_replica in zip(*(strategy.experimental_local_results(v)
                               for v in logits))]
  before = copies()
  dataset = strategy.distribute_datasets_from_function(
      lambda context: distribute.dataset_fn(task, False)(context, 0))
  grads = {}  # replica id -> its controller gradients (one call each).
  gradients = controller_optimizer.gradients

  def replica_id() -> int:
    return int(tf.get_static_value(
        tf.distribute.get_replica_context().replica_id_in_sync_group))

  def capture(loss, variables, transform=None):
    found = gradients(loss, variables, transform)
    grads[replica_id()] = [
        tf.zeros_like(v) if g is None else g
        for g, v in zip(found, variables)]
    return found

  def replica_step(inputs):
    scalars = task.step(objects, inputs, tf.constant(0, tf.int64))
    with tf.control_dependencies(list(scalars.values())):  # After updates.
      return (tf.concat([tf.reshape(g, [-1]) for g in grads[replica_id()]],
                        0),
              tf.identity(scalars['rlcontroller/learning_rate']))

  @tf.function(autograph=False)
  def step(iterator):
    return strategy.run(replica_step, args=(next(iterator),))

  # Under the search's Grappler settings, as the engine's loop runs.
  with mock.patch.object(controller_optimizer, 'gradients', capture), (
      distribute.grappler_without(runner.distribute_grappler_off())):
    grads_out, lr_out = step(iter(dataset))
  local = strategy.experimental_local_results
  return {'grads': [g.numpy().tolist() for g in local(grads_out)],
          'lr': [float(lr) for lr in local(lr_out)],
          'before': [c.tolist() for c in before],
          'after': [c.tolist() for c in copies()]}


_RUN = textwrap.dedent('''
    import json, sys
    from tests.search import task_replicas_test as t
    print(json.dumps(t.one_step(sys.argv[1])))
''')


class TwoReplicasTest(absltest.TestCase):

  def test_controller_update_is_adam_on_the_mean_gradient(self):
    done = forked.run_one(
        [sys.executable, '-c', _RUN, tempfile.mkdtemp()], cwd=_ROOT,
        timeout=900,
        env=dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL='3'))
    self.assertEqual(done.returncode, 0, done.stderr[-3000:])
    found = json.loads(done.stdout.strip().splitlines()[-1])
    g = np.array(found['grads'])
    self.assertEqual(g.shape[0], 2)
    # The replicas drew different architectures: their gradients differ, so
    # the mean of the squares is not the square of the mean.
    self.assertGreater(np.abs((g**2).mean(axis=0) - g.mean(axis=0)**2).max(),
                       1e-6)
    lr, = set(found['lr'])
    self.assertGreater(lr, 0.0)
    before, = {tuple(c) for c in found['before']}
    want = np.array(before) + replicated.first_adam_step(lr, g)
    # Which a step on one replica's gradient alone would miss.
    self.assertGreater(np.abs(replicated.first_adam_step(lr, g[:1]) -
                              replicated.first_adam_step(lr, g)).max(), 0.01)
    for copy in found['after']:  # Each replica's copy took the same step.
      np.testing.assert_allclose(copy, want, rtol=1e-4, atol=1e-7)
    self.assertGreater(np.abs(np.array(found['after'][0]) - before).max(),
                       0.0)


if __name__ == '__main__':
  absltest.main()
