"""Tests of `search.task`: a digits_search search on the distribute engine,
on any TF.

One process of its own (op determinism is process-wide) runs 6 steps, two
per loop, a checkpoint every 2; then resumes a copy of its step-4
checkpoint to step 6. The RL delay is the first 2 steps; a 12 KB SRAM limit
binds most samples (digits_search at 8 px needs 8-27 KB, median 15), a 48 KB
flash limit about half (16-206 KB, median near 60).
"""

import glob
import os
import shutil
import sys
import tempfile
import textwrap

from absl import flags
from absl.testing import absltest
import numpy as np
import tensorflow as tf

from tunas_tf import train_search
from tunas_tf.data import datasets
from tunas_tf.runtime import lifecycle
from tunas_tf.runtime import preemption
from tunas_tf.search import runner
from tunas_tf.search import steps
from tunas_tf.search import task as task_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema
from tests.testing import searches
from tests.testing import forked

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_DIGITS = datasets.DatasetInfo(
    'digits', 8, 1, 10,
    {'search_train': 1078, 'search_validation': 359, 'test': 360})
_STEPS = 6


def _config(model_dir: str):
  values = flags.FlagValues()
  train_search.define_flags(values)
  values(['train_search', f'--model_dir={model_dir}',
          f'--max_steps={_STEPS}', '--train_batch_size=16',
          '--tpu_iterations_per_loop=2', '--save_checkpoints_steps=2',
          '--log_every_steps=2', '--deterministic', '--engine=distribute',
          '--rl_delay_steps_fraction=0.34',
          '--increase_ops_warmup_steps_fraction=0.34',
          '--increase_filters_warmup_steps_fraction=0.34', '--sram_kb=12',
          '--flash_kb=48'])
  return train_search.config_from_flags(values, _DIGITS)


def _search(model_dir: str) -> int:
  config = _config(model_dir)
  return runner.make_engine(config).train(
      task_lib.SearchTask(config), max_steps=config.max_global_step,
      stop=preemption.StopRequest(), run_name='the search').step


def run_and_resume(root: str) -> None:
  """`root`/full: 6 steps; `root`/resumed: its step-4 checkpoint resumed."""
  full, resumed = os.path.join(root, 'full'), os.path.join(root, 'resumed')
  lifecycle.use_determinism(_config(full).job)
  assert _search(full) == _STEPS
  os.makedirs(resumed)
  for path in glob.glob(os.path.join(full, 'model.ckpt-4.*')):
    shutil.copy(path, resumed)
  with open(os.path.join(resumed, 'checkpoint'), 'w') as f:
    f.write('model_checkpoint_path: "model.ckpt-4"\n')
  assert _search(resumed) == _STEPS


_RUN = textwrap.dedent('''
    import sys
    from tests.search import task_test as t
    t.run_and_resume(sys.argv[1])
''')


def _tags(model_dir: str):
  tags = set()
  for path in glob.glob(os.path.join(model_dir, 'events*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      tags.update(value.tag for value in event.summary.value)
  return tags


def _variables(checkpoint: str, prefix: str = ''):
  reader = tf.train.load_checkpoint(checkpoint)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()
          if name.startswith(prefix) and name.endswith('VARIABLE_VALUE')}


class SearchTaskTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    root = tempfile.mkdtemp()
    process = forked.run_one(
        [sys.executable, '-c', _RUN, root], cwd=_ROOT, timeout=1200,
        env=dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL='3'))
    assert process.returncode == 0, process.stderr[-3000:]
    cls.full = os.path.join(root, 'full')
    cls.resumed = os.path.join(root, 'resumed')

  def test_runs_to_max_steps(self):
    self.assertEqual(
        os.path.basename(tf.train.latest_checkpoint(self.full)),
        f'model.ckpt-{_STEPS}')
    step = _variables(os.path.join(self.full, 'model.ckpt-6'), 'global_step')
    self.assertEqual(list(step.values()), [_STEPS])

  def test_writes_the_estimator_paths_scalars(self):
    expected = set(searches.scalar_tags())
    self.assertEqual(expected - _tags(self.full), set())

  def test_the_accuracy_of_a_sample_over_a_limit_is_scaled(self):
    seen = searches.events(self.full)
    arenas = seen['rlcontroller/estimated_arena']
    flashes = seen['rlcontroller/estimated_flash']
    self.assertNotEmpty(arenas)
    for step, arena in arenas.items():
      accuracy = seen['rlcontroller/validation_accuracy'][step]
      self.assertAlmostEqual(
          seen['rlcontroller/reward'][step] -
          seen['rlcontroller/cost_adjustment'][step],
          accuracy * min(1.0, 12 * 1024 / arena) * min(
              1.0, 48 * 1024 / flashes[step]), places=5)
    # The limits bind.
    self.assertGreater(max(arenas.values()), 12 * 1024)
    self.assertGreater(max(flashes.values()), 48 * 1024)

  def test_controller_learns_after_the_rl_delay(self):
    at = lambda step: _variables(
        os.path.join(self.full, f'model.ckpt-{step}'), 'controller/')
    self.assertNotEmpty(at(2))
    for value in at(2).values():
      np.testing.assert_array_equal(value, np.zeros_like(value))
    self.assertTrue(any(np.any(value != 0) for value in at(6).values()))

  def test_resumed_search_gives_the_same_bits(self):
    full = _variables(os.path.join(self.full, 'model.ckpt-6'))
    resumed = _variables(os.path.join(self.resumed, 'model.ckpt-6'))
    self.assertEqual(sorted(full), sorted(resumed))
    self.assertTrue(any(k.startswith('supernet/') for k in full))
    self.assertTrue(any('.OPTIMIZER_SLOT/model_optimizer/rms/' in k
                        for k in full))
    for name, value in full.items():
      if name.startswith('save_counter'):
        continue
      np.testing.assert_array_equal(value, resumed[name], err_msg=name)


def _estimator_masks(config, step: int):
  """The masks the Estimator path's graph samples at `step`."""
  spec = mobile.get_search_space(config.ssd)
  with tf.Graph().as_default():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    p_ops, p_filters = steps.warmup_probabilities(global_step, config)
    sampled, _ = steps.sample_architecture(
        spec, p_ops, p_filters, steps.make_controller(spec),
        seed=steps.sample_seed(config.job.seed, global_step))
    masks = [oneof.mask for oneof in schema.flatten(sampled)]
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      session.run(global_step.assign(step))
      return session.run(masks)


class SampleTest(absltest.TestCase):

  def test_the_estimator_paths_sample_at_the_same_step(self):
    config = _config(tempfile.mkdtemp())
    spec = mobile.get_search_space(config.ssd)
    controller = steps.make_controller(spec)

    @tf.function
    def sample(step):
      p_ops, p_filters = steps.warmup_probabilities(step, config)
      sampled, _ = steps.sample_architecture(
          spec, p_ops, p_filters, controller,
          seed=steps.sample_seed(config.job.seed, step))
      return [oneof.mask for oneof in schema.flatten(sampled)]

    for step in (0, 1):
      ours = sample(tf.constant(step, tf.int64))
      for mine, theirs in zip(ours, _estimator_masks(config, step)):
        np.testing.assert_array_equal(mine.numpy(), theirs)


class ProgressTest(absltest.TestCase):

  def test_several_pairs_say_whose_turn_the_step_was(self):
    one = searches.search_config('/tmp/unused')
    self.assertIn('rlcontroller/estimated_cost',
                  task_lib.progress_formats(one))
    several = searches.search_config('/tmp/unused',
                                     '--rl_cost_model_target=1e5,2e5')
    formats = task_lib.progress_formats(several)
    # The step's cost and reward are one pair's of several: not shown.
    self.assertEqual(sorted(formats), ['rlcontroller/pair',
                                       'rlcontroller/validation_accuracy'])
    self.assertEqual(formats['rlcontroller/pair'](2.0), 'pair 2')


class StatelessTest(absltest.TestCase):

  def test_build_and_step_leave_the_task_as_it_was(self):
    task = task_lib.SearchTask(_config(tempfile.mkdtemp()))
    before = dict(vars(task))
    with tf.Graph().as_default():
      objects = task.build()
      images, labels = tf.zeros([4, 8, 8, 1]), tf.one_hot(range(4), 10)
      scalars = task.step(objects, ({'train': images, 'validation': images},
                                    {'train': labels, 'validation': labels}),
                          tf.constant(0, tf.int64))
    self.assertIn('model/loss', scalars)
    self.assertEqual(vars(task), before)


if __name__ == '__main__':
  absltest.main()
