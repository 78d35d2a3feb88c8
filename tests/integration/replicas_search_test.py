"""`train_search --replicas=2` on CPU: two replicas on two CPU devices.

The search graph is built once per replica (about twice a one-replica
search's start), so one search, resumed once, serves every end-to-end check.
The per-replica math (samples, means, identical copies) is tested on small
graphs in tests/runtime/replicas_test.py, tests/search/steps_test.py and
tests/controller/optimizer_test.py.
"""

import os
import tempfile

from absl.testing import absltest
import numpy as np
import pytest
import tensorflow as tf

from tunas_tf.runtime import estimator
from tunas_tf.search import config as config_lib
from tunas_tf.search import extract
from tunas_tf.search import runner
from tunas_tf.search import task as task_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema
from tests.testing import searches

# 6 steps of 16 images (8 per replica), cut back to step 4 and resumed: RL
# delay 3 of 6 steps, warm-ups 1 and 3, summaries every step, checkpoints
# every 2 (5 kept).
_FLAGS = ('--replicas=2', '--train_batch_size=16', '--keep_checkpoint_max=5',
          '--rl_delay_steps_fraction=0.5',
          '--increase_ops_warmup_steps_fraction=0.25',
          '--increase_filters_warmup_steps_fraction=0.5',
          '--tpu_iterations_per_loop=1', '--save_checkpoints_steps=2',
          '--rl_learning_rate=1.0')


def _checkpoint_names(path):
  return sorted(name for name, _ in tf.train.list_variables(path))


@pytest.mark.estimator
class ReplicatedSearchTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model_dir = os.path.join(tempfile.mkdtemp(), 'search')
    cls.config = searches.search_config(cls.model_dir, '--max_steps=6',
                                        *_FLAGS)
    runner.run_search(cls.config)
    # As if the run had been killed before saving step 6 (a restart may not
    # lengthen a search): checkpoint 6 gone, the checkpoint file at 4.
    for name in os.listdir(cls.model_dir):
      if name.startswith('model.ckpt-6.'):
        os.remove(os.path.join(cls.model_dir, name))
    cls.first_checkpoints = ['model.ckpt-0', 'model.ckpt-2', 'model.ckpt-4']
    tf.compat.v1.train.update_checkpoint_state(
        cls.model_dir, cls.first_checkpoints[-1],
        all_model_checkpoint_paths=cls.first_checkpoints)
    cls.first_step = searches.global_step(cls.model_dir)
    runner.run_search(cls.config)
    cls.events = searches.events(cls.model_dir)

  def test_runs_checkpoints_and_resumes(self):
    self.assertEqual(self.config.replicas, 2)
    self.assertEqual(self.first_step, 4)
    self.assertEqual(searches.global_step(self.model_dir), 6)
    self.assertEqual(config_lib.read(self.model_dir).replicas, 2)
    # One summary row per step (the first replica's), across the restart.
    self.assertEqual(sorted(self.events['rlcontroller/reward']),
                     list(range(6)))
    # Step 4 ran after the restart on the restored state: the logits it
    # logged (read before its update) are checkpoint 4's, and had moved.
    saved = tf.train.load_checkpoint(os.path.join(self.model_dir,
                                                  'model.ckpt-4'))
    spec = mobile.get_search_space('digits_search')
    moved = 0.0
    for path, oneof in schema.flatten_with_paths(spec):
      logits = saved.get_tensor('rl_controller/logits/' + path)
      moved += float(np.abs(logits).sum())
      for j in range(len(oneof.choices)):
        self.assertAlmostEqual(self.events[f'rlpathlogits/{path}/{j}'][4],
                               logits[j], places=6)
    self.assertGreater(moved, 0.0)
    # One events file of summaries per run: the first replica's writer.
    self.assertLen([f for f in os.listdir(self.model_dir)
                    if f.endswith('.v2')], 2)

  def test_checkpoint_names_are_those_of_one_replica(self):
    names = _checkpoint_names(self.model_dir)
    self.assertEmpty([n for n in names if 'replica' in n])
    self.assertEqual(names, _checkpoint_names(searches.finished_search()))

  def test_extract_architecture(self):
    result = extract.pick(self.model_dir)[0].to_json()
    self.assertEqual(result['global_step'], 6)
    spec = mobile.get_search_space('digits_search')
    self.assertEqual(schema.flatten(schema.prune(spec, result['indices'])),
                     [])

  def test_input_fn_gives_each_replica_its_share(self):
    # The Estimator calls input_fn once, without a batch size, and hands
    # each replica the next element.
    input_fn = lambda start: estimator.task_input_fn(
        task_lib.SearchTask(self.config), self.config.job,
        self.config.replicas, start)({})
    dataset = input_fn(0)
    features, labels = dataset.element_spec
    self.assertEqual(features['train'].shape, [8, 8, 8, 1])
    self.assertEqual(features['validation'].shape, [32, 8, 8, 1])
    self.assertEqual(labels['train'].shape, [8, 10])
    # Resumed at step 2, it goes on with the 5th per-replica batch (2 steps
    # of 2 replicas), and the replicas' batches differ.
    whole = list(dataset.take(6).as_numpy_iterator())
    resumed = list(input_fn(2).take(2).as_numpy_iterator())
    for mine, expected in zip(resumed, whole[4:]):
      for side in ('train', 'validation'):
        np.testing.assert_array_equal(mine[0][side], expected[0][side])
    self.assertFalse(np.array_equal(whole[0][0]['train'],
                                    whole[1][0]['train']))


class BadReplicasTest(absltest.TestCase):

  def test_refused_in_one_line_with_nothing_written(self):
    for args, message in (
        (['--replicas=0'], '--replicas must be an integer >= 1, got 0'),
        (['--replicas=2', '--tpu=my-tpu'],
         '--replicas is for CPU/GPU: on TPU the replica count comes from'),
        (['--replicas=1', '--tpu=my-tpu'], '--replicas is for CPU/GPU'),
        (['--replicas=3'], '--train_batch_size=16 does not split across '
         '--replicas=3'),
        (['--replicas=32'], '--train_batch_size=16 does not split across '
         '--replicas=32'),
    ):
      model_dir = tempfile.mkdtemp()
      line = searches.refusal_line(f'--model_dir={model_dir}',
                                   '--train_batch_size=16', '--max_steps=4',
                                   *args)
      self.assertTrue(line.startswith('train_search: '), line)
      self.assertIn(message, line)
      self.assertNotIn('\n', line)
      self.assertEqual(os.listdir(model_dir), [], args)


if __name__ == '__main__':
  absltest.main()
