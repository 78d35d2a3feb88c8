"""End-to-end tests of `train_eval.runner.run` on digits: a few steps, CPU."""

import dataclasses
import glob
import os
import tempfile
from unittest import mock

from absl.testing import absltest
import numpy as np
import pytest
import tensorflow as tf

from tests.testing import train_eval_runs as runs
from tunas_tf.cost_model import macs as macs_lib
from tunas_tf.data import datasets
from tunas_tf.graph import from_spec
from tunas_tf.graph import inherit
from tunas_tf.graph import model as model_lib
from tunas_tf.runtime import estimator
from tunas_tf.runtime import preemption
from tunas_tf.search import oneshot
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema
from tunas_tf.train_eval import data
from tunas_tf.train_eval import network
from tunas_tf.train_eval import runner
from tunas_tf.train_eval import task as task_lib


class ResultLineTest(absltest.TestCase):

  def test_every_rate_is_rounded_alike(self):
    # A top-5 of 17 / 18 images read as float32, as evaluation gives it.
    metrics = {'top1': 0.6027777791023254, 'top5': 0.9444444179534912,
               'loss': 1.23456789, 'params': 12345, 'macs': 67890,
               'global_step': 20}
    self.assertEqual(runner.result_line(metrics),
                     'top1 0.6028  top5 0.9444  loss 1.2346  params 12345  '
                     'MACs 67890  (step 20)')
    # With the int8 export: its top-1, and the drop in points (100 x
    # (0.5972 - 0.6028) = -0.56).
    metrics['int8_top1'] = 0.5972222222222222
    self.assertEqual(runner.result_line(metrics),
                     'top1 0.6028  top5 0.9444  loss 1.2346  params 12345  '
                     'MACs 67890  int8 top1 0.5972 (-0.56 points)  (step 20)')
    # TFLite Micro's figures, measured (and estimated), in KB of 1,024.
    metrics['micro'] = {'arena_measured': 2048, 'arena_bytes': 2560,
                        'flash_measured': 10240, 'flash_bytes': None,
                        'note': 'x'}
    self.assertIn('(-0.56 points)  TFLite Micro arena 2.0 KB (est. 2.5 KB)  '
                  'flash 10.0 KB  (x)  (step 20)', runner.result_line(metrics))

  def test_the_printed_json_holds_the_digits_float32_carries(self):
    metrics = {'top1': 0.25, 'top5': 0.7222222089767456,
               'loss': 2.171067476272583, 'params': 20578, 'macs': 201408,
               'train_images_per_sec': 1856.310247775004,
               'eval_images_per_sec': None, 'global_step': 20,
               'not_printed': 1.0}
    printed = runner.printed_metrics(metrics)
    self.assertEqual(printed, {
        'top1': 0.25, 'top5': 0.7222222, 'loss': 2.1710675, 'params': 20578,
        'macs': 201408, 'train_images_per_sec': 1856.3,
        'eval_images_per_sec': None, 'global_step': 20})
    for key in ('top1', 'top5', 'loss'):  # The same float32 values.
      self.assertEqual(np.float32(printed[key]), np.float32(metrics[key]))
    # With the int8 export, its top-1 too (the last key).
    printed = runner.printed_metrics(dict(metrics,
                                          int8_top1=0.5972222222222222))
    self.assertEqual(list(printed)[-1], 'int8_top1')
    self.assertEqual(printed['int8_top1'], 0.5972222)


def _assert_well_under_chance(test, losses):
  """The train-batch loss of the last two logged steps of a 40-step run of
  `runs.PINNED`, averaged, is under 0.7 ln(10) = 1.61 (chance is ln(10) =
  2.30; measured 1.05-1.30)."""
  test.assertLess(np.mean([losses[30], losses[35]]), 0.7 * np.log(10))


@pytest.mark.estimator
class RunTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    trained = runs.trained()
    cls.root = trained.root
    cls.model_dir = trained.model_dir
    cls.first, cls.config, cls.metrics = (trained.first, trained.config,
                                          trained.metrics)

  def test_metrics_json_has_every_key_with_sane_values(self):
    stored = runs.read_json(os.path.join(self.model_dir, 'metrics.json'))
    for key in runner.METRIC_KEYS:
      self.assertIn(key, stored)
    for metrics in (self.first, stored):
      self.assertBetween(metrics['top1'], 0.0, 1.0)
      self.assertBetween(metrics['top5'], metrics['top1'], 1.0)
      self.assertGreater(metrics['loss'], 0.0)
      self.assertGreater(metrics['train_images_per_sec'], 0.0)
      self.assertGreater(metrics['eval_images_per_sec'], 0.0)
    self.assertEqual(self.first['global_step'], 20)
    self.assertEqual(stored['global_step'], 40)
    arch = schema.prune(mobile.get_search_space('digits_search'),
                        runs.PINNED_INDICES)
    self.assertEqual(stored['macs'], macs_lib.count_macs(arch, 8, 10, 1))
    graph, constants = from_spec.graph_from_spec(arch, 10, input_channels=1)
    model = model_lib.Model(graph, constants)
    model(tf.zeros([1, 8, 8, 1]))
    self.assertEqual(stored['params'], model_lib.count_params(model))
    self.assertGreater(stored['params'], 0)

  def test_a_padded_last_batch_counts_every_example_once(self):
    # TPU's eval input (full batches, the last one padded with zero-label
    # examples), evaluated here on CPU beside the unpadded pass.
    config = self.config
    examples = data.eval_examples(config)
    self.assertEqual(examples, 360)
    batches = list(data.eval_dataset(config, 7, pad=True))
    self.assertLen(batches, 52)  # ceil(360 / 7)
    for images, labels in batches:
      self.assertEqual((images.shape[0], labels.shape[0]), (7, 7))
    labels = np.concatenate([b[1].numpy() for b in batches])
    self.assertEqual(labels.sum(), 360)
    np.testing.assert_array_equal(
        np.concatenate([b[0].numpy() for b in batches])[360:],
        np.zeros([4, 8, 8, 1]))
    # The Estimator's evaluation of the run's checkpoint in batches of 7,
    # padded or not.
    task = task_lib.TrainEvalTask(config, network.build_architecture(config))
    results = []
    for pad in (False, True):
      with mock.patch.object(task, 'eval_dataset', lambda *args, pad=pad,
                             make=task.eval_dataset: make(7, pad)):
        results.append(estimator.EstimatorEngine(config.job).evaluate(
            task, checkpoint=tf.train.latest_checkpoint(self.model_dir),
            stop=preemption.StopRequest(), run_name='train_eval'))
    for key in ('top1', 'top5', 'cross_entropy', 'loss'):
      # Sums in float64 of the same 360 values (up to float32 rounding in
      # other batch shapes' kernels).
      self.assertAlmostEqual(results[1][key], results[0][key], delta=1e-6)
    self.assertAlmostEqual(results[0]['top1'], self.metrics['top1'],
                           delta=1e-6)

  def test_training_loss_falls_well_under_chance(self):
    # The pinned architecture's train-batch loss starts at chance.
    losses = runs.training_losses(self.model_dir)
    self.assertEqual(sorted(losses), list(range(0, 40, 5)))
    self.assertAlmostEqual(losses[0], np.log(10), delta=0.1)
    _assert_well_under_chance(self, losses)

  def test_resume_continues_from_the_checkpoint(self):
    self.assertEqual(self.first['train_start_step'], 0)
    self.assertEqual(self.metrics['train_start_step'], 20)
    self.assertEqual(
        int(tf.train.load_checkpoint(self.model_dir).get_tensor(
            'global_step')), 40)
    stored = runs.read_json(os.path.join(self.model_dir, 'config.json'))
    self.assertEqual(stored['max_steps'], 40)

  def test_events_files_hold_no_graph(self):
    for directory in (self.model_dir, os.path.join(self.model_dir, 'eval')):
      kinds = set()
      for path in glob.glob(os.path.join(directory, 'events*')):
        for record in tf.data.TFRecordDataset(path):
          kinds.add(tf.compat.v1.Event.FromString(record.numpy())
                    .WhichOneof('what'))
      self.assertIn('summary', kinds, directory)
      self.assertEmpty(kinds & {'graph_def', 'meta_graph_def'}, directory)
      self.assertEqual(glob.glob(os.path.join(directory, '*.meta')) +
                       glob.glob(os.path.join(directory, '*.pbtxt')), [])

  def test_a_finished_run_started_again_only_evaluates(self):
    metrics = runner.run(dataclasses.replace(self.config, export=False))
    self.assertEqual(metrics['global_step'], 40)
    self.assertNotIn('train_start_step', metrics)
    self.assertAlmostEqual(metrics['top1'], self.metrics['top1'], places=6)

  def test_changed_training_settings_are_refused_naming_the_field(self):
    for flag, field in (('--base_learning_rate=0.5', 'base_learning_rate'),
                        ('--moving_average_decay=0', 'moving_average_decay'),
                        ('--train_batch_size=16', 'train_batch_size')):
      args = [*runs.PINNED, f'--model_dir={self.model_dir}',
              '--moving_average_decay=0.9', '--max_steps=40'] + runs.TINY + [
                  flag]
      with self.assertRaisesRegex(ValueError, f': {field} is '):
        runner.run(runs.config(*args))
    other = ':'.join(['0'] * len(runs.PINNED_INDICES.split(':')))
    with self.assertRaisesRegex(ValueError, ': indices is '):
      runner.run(runs.config(
          '--ssd=digits_search', f'--indices={other}',
          f'--model_dir={self.model_dir}',
          '--moving_average_decay=0.9', '--max_steps=40', *runs.TINY))

  def test_path_dropout_trains_and_counts_the_plain_network(self):
    # PINNED keeps blocks/2/layers/1 (a path dropout op) and skips
    # blocks/3/layers/1; evaluation and the counts see the plain network.
    model_dir = os.path.join(self.root, 'path_dropout')
    metrics = runner.run(runs.config(
        *runs.PINNED, f'--model_dir={model_dir}', '--max_steps=2',
        '--noexport', *runs.TINY, '--path_dropout_rate=0.5'))
    self.assertEqual(metrics['global_step'], 2)
    self.assertTrue(np.isfinite(metrics['loss']))
    self.assertEqual((metrics['params'], metrics['macs']),
                     (self.metrics['params'], self.metrics['macs']))
    stored = runs.read_json(os.path.join(model_dir, 'config.json'))
    self.assertEqual(stored['path_dropout_rate'], 0.5)

  def test_nan_loss_stops_in_one_line_without_saving_it(self):
    # A huge learning rate: finite weights after step 0, a NaN loss at 1.
    model_dir = os.path.join(self.root, 'nan')
    with self.assertRaisesRegex(
        ValueError, r'^The loss is -?(nan|inf) at step 1: train_eval stopped '
        r'without saving it; the last good checkpoint is .*model.ckpt-1$'):
      runner.run(runs.config(
          *runs.PINNED, f'--model_dir={model_dir}',
          '--max_steps=4', '--noexport', *runs.TINY,
          '--base_learning_rate=1e30', '--save_checkpoints_steps=1'))
    state = tf.train.get_checkpoint_state(model_dir)
    self.assertEqual(
        [os.path.basename(p) for p in state.all_model_checkpoint_paths],
        ['model.ckpt-0', 'model.ckpt-1'])
    self.assertFalse(os.path.exists(os.path.join(model_dir, 'metrics.json')))

  def test_batch_norm_statistics_and_weight_averages_are_checkpointed(self):
    reader = tf.train.load_checkpoint(self.model_dir)
    names = reader.get_variable_to_shape_map()
    moving = [n for n in names if n.endswith('/moving_mean')]
    self.assertNotEmpty(moving)
    self.assertTrue(any(np.any(reader.get_tensor(n) != 0) for n in moving))
    kernel = 'classifier/kernel'
    shadow = f'{kernel}/{inherit.EMA_SUFFIX}'
    self.assertIn(shadow, names)
    self.assertFalse(np.allclose(reader.get_tensor(kernel),
                                 reader.get_tensor(shadow)))


@pytest.mark.estimator
class Bfloat16Test(absltest.TestCase):
  """Apart from RunTest: the numerics pass runs it without RunTest's
  shared training. The Estimator's runs (their checkpoints' names)."""

  @pytest.mark.numerics
  @pytest.mark.bfloat16
  def test_bfloat16_training_tracks_its_float32_twin(self):
    # The pinned architecture trained in bfloat16 on CPU (`true`; `ontpu`
    # would compute in float32 here), then exported in float32; and its
    # float32 twin (the same flags, weight decay and batches).
    losses, root = {}, tempfile.mkdtemp()
    for precision in ('false', 'true'):
      model_dir = os.path.join(root, f'bfloat16_{precision}')
      config = runs.config(*runs.PINNED, f'--model_dir={model_dir}',
                           f'--use_bfloat16={precision}', '--max_steps=40',
                           '--weight_decay=3e-5', *runs.TINY,
                           *([] if precision == 'true' else ['--noexport']))
      self.assertEqual(config.use_bfloat16, precision)
      metrics = runner.run(config)
      self.assertEqual(metrics['global_step'], 40)
      self.assertTrue(np.isfinite(metrics['loss']))
      losses[precision] = runs.training_losses(model_dir)
    # Each logged train-batch loss within 0.15 of the float32 run's, and
    # well under chance: bfloat16 rounding moved them by at most 0.038
    # (seeds 0-4, Eigen's and oneDNN's kernels), and a bfloat16 run that did
    # not learn would miss by ~1.
    self.assertEqual(sorted(losses['true']), sorted(losses['false']))
    for step, loss in losses['true'].items():
      self.assertAlmostEqual(loss, losses['false'][step], delta=0.15,
                             msg=step)
    _assert_well_under_chance(self, losses['true'])
    reader = tf.train.load_checkpoint(model_dir)
    dtypes = reader.get_variable_to_dtype_map()
    self.assertTrue(any(n.endswith('/moving_mean') for n in dtypes))
    self.assertTrue(any(n.endswith('/RMSProp') for n in dtypes))
    self.assertEqual({d for n, d in dtypes.items() if n != 'global_step'},
                     {tf.float32})
    served = tf.saved_model.load(metrics['export']['saved_model'])
    logits = served.signatures['serving_default'](
        images=tf.zeros([2, 8, 8, 1]))['logits']
    self.assertEqual((logits.dtype, logits.shape), (tf.float32, (2, 10)))


@pytest.mark.estimator
class InitFromSearchTest(absltest.TestCase):
  """Runs that inherit the shared search's weights."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    search = runs.search()
    cls.root, cls.search_dir = search.root, search.search_dir
    cls.architecture, cls.indices = search.architecture, search.indices

  # Not marked `numerics` (it needs the shared search): the logits it rests
  # on are compared, under every kernel, in tests/graph/from_spec_test.py.
  def test_one_shot_accuracy_equals_the_supernets(self):
    model_dir = os.path.join(self.root, 'one_shot')
    metrics = runner.run(runs.config(
        f'--architecture={self.architecture}', f'--model_dir={model_dir}',
        f'--init_from_search={self.search_dir}', '--eval_only', *runs.TINY))
    self.assertTrue(metrics['one_shot'])
    self.assertEqual(metrics['global_step'], 0)
    self.assertFalse(os.path.exists(os.path.join(model_dir, 'export')))
    # The supernet in sampled mode with the same weights and batches
    # (`search.oneshot`): the graph module's pruned network with inherited
    # weights must compute what the masked supernet does.
    [expected] = oneshot.accuracies(self.search_dir, [self.indices],
                                    split=datasets.TEST, batch_size=50)
    # A count over the whole test split (360 images).
    self.assertAlmostEqual(expected * 360, round(expected * 360), places=6)
    self.assertAlmostEqual(metrics['top1'], expected, delta=1e-4)

  def test_freeze_inherited_trains_only_fresh_variables(self):
    model_dir = os.path.join(self.root, 'frozen')
    # 12 classes: the classifier cannot be inherited (10 in the search; so
    # other than the architecture's, which needs --allow_other_data).
    runner.run(runs.config(
        f'--architecture={self.architecture}', f'--model_dir={model_dir}',
        f'--init_from_search={self.search_dir}', '--freeze_inherited',
        '--num_classes=12', '--allow_other_data', '--max_steps=5',
        '--noexport', *runs.TINY))
    search = runs.weights(tf.train.latest_checkpoint(self.search_dir))
    start = runs.weights(os.path.join(model_dir, 'model.ckpt-0'))
    end = runs.weights(os.path.join(model_dir, 'model.ckpt-5'))
    inherited = 0
    for name, value in end.items():
      if name.startswith('classifier/') or 'moving_' in name:
        continue
      old = search[name][tuple(slice(0, n) for n in value.shape)]
      np.testing.assert_array_equal(start[name], old, err_msg=name)
      np.testing.assert_array_equal(value, old, err_msg=name)
      inherited += 1
    self.assertGreater(inherited, 10)
    for name in ('classifier/kernel', 'classifier/bias'):
      self.assertEqual(end[name].shape[-1], 12)
      self.assertFalse(np.array_equal(start[name], end[name]), name)
    moving = [n for n in end if n.endswith('moving_mean')]
    self.assertTrue(any(not np.array_equal(start[n], end[n]) for n in moving))


if __name__ == '__main__':
  absltest.main()
