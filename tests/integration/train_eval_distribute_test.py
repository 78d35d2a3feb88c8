"""Tests of train_eval on the distribute engine (`trainer.py`, `evaluate.py`,
`runner.run`), on any TF: `runs.trained_distribute()` and runs beside it,
and `python -m tunas_tf.train_eval --engine=distribute` resumed exactly.

Inheritance is in distribute_inherit_test.py, the agreement with the
Estimator engine in engines_test.py.
"""

import dataclasses
import glob
import os
import shutil
import sys
import tempfile

from absl.testing import absltest
import numpy as np
import pytest
import tensorflow as tf

from tests.testing import searches
from tests.testing import train_eval_runs as runs
from tunas_tf.io import lite
from tunas_tf.data import datasets
from tunas_tf.graph import inherit
from tunas_tf.runtime import resume
from tunas_tf.train_eval import network
from tunas_tf.train_eval import runner
from tests.testing import forked


def _args(model_dir: str, *extra: str):
  return [*runs.PINNED, f'--model_dir={model_dir}', '--engine=distribute',
          '--moving_average_decay=0.9', *runs.TINY, *extra]


class DistributeRunTest(absltest.TestCase):
  """`runs.trained_distribute()`: 20 steps, then resumed to 40."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    trained = runs.trained_distribute()
    cls.root, cls.model_dir = trained.root, trained.model_dir
    cls.first, cls.config, cls.metrics = (trained.first, trained.config,
                                          trained.metrics)

  def _on_a_copy(self, **changes):
    """The resumed run's config, on a copy of its directory, changed."""
    model_dir = os.path.join(tempfile.mkdtemp(), 'copy')
    shutil.copytree(self.model_dir, model_dir)
    job = dataclasses.replace(self.config.job, model_dir=model_dir)
    return dataclasses.replace(self.config, job=job, export=False, **changes)

  def test_metrics_json_has_every_key_with_sane_values(self):
    stored = runs.read_json(os.path.join(self.model_dir, 'metrics.json'))
    self.assertEqual(stored, self.metrics)
    for key in runner.METRIC_KEYS:
      self.assertIn(key, stored)
    for metrics in (self.first, stored):
      self.assertBetween(metrics['top1'], 0.0, 1.0)
      self.assertBetween(metrics['top5'], metrics['top1'], 1.0)
      self.assertGreater(metrics['loss'], 0.0)
      self.assertGreater(metrics['train_images_per_sec'], 0.0)
      self.assertGreater(metrics['eval_images_per_sec'], 0.0)
      self.assertFalse(metrics['one_shot'])
    self.assertEqual((self.first['global_step'], stored['global_step']),
                     (20, 40))
    # 360 test images: top1 and top5 are counts over them.
    for key in ('top1', 'top5'):
      self.assertAlmostEqual(stored[key] * 360, round(stored[key] * 360),
                             places=6)
    # Measured 0.49 after 40 steps (chance 0.1; the Estimator's run of
    # `runs.PINNED` measures 0.15-0.41, its batch norm statistics unsettled).
    self.assertGreater(stored['top1'], 0.1)

  def test_config_records_the_engine_and_checkpoints_are_model_ckpt_n(self):
    stored = runs.read_json(os.path.join(self.model_dir, 'config.json'))
    self.assertEqual(stored['engine'], 'distribute')
    self.assertEqual(stored['max_steps'], 40)
    latest = tf.train.latest_checkpoint(self.model_dir)
    self.assertEqual(os.path.basename(latest), 'model.ckpt-40')
    self.assertEqual(resume.checkpoint_step(latest), 40)

  def test_checkpoint_names_are_the_estimators(self):
    values = resume.reader(tf.train.latest_checkpoint(self.model_dir))
    names = values.get_variable_to_shape_map()
    for suffix in ('', '/RMSProp', '/RMSProp_1',
                   f'/{inherit.EMA_SUFFIX}'):
      self.assertIn(f'classifier/kernel{suffix}', names)
      self.assertIn(f'blocks/0/layers/0/conv_k3/bn/gamma{suffix}', names)
    for name in ('global_step', 'blocks/0/layers/0/conv_k3/bn/moving_mean'):
      self.assertIn(name, names)
    self.assertNotIn(f'blocks/0/layers/0/conv_k3/bn/moving_mean/'
                     f'{inherit.EMA_SUFFIX}', names)
    kernel = values.get_tensor('classifier/kernel')
    shadow = values.get_tensor(f'classifier/kernel/{inherit.EMA_SUFFIX}')
    self.assertFalse(np.allclose(kernel, shadow))

  def test_training_loss_falls_well_under_chance(self):
    # The scalars of the steps 0, 5, ... (0-based), as the Estimator's.
    self.assertEqual(runs.TRAIN_TAGS - runs.tags(self.model_dir), set())
    losses = runs.training_losses(self.model_dir)
    self.assertEqual(sorted(losses), list(range(0, 40, 5)))
    # Chance is ln(10) = 2.30; measured 1.18 and 1.23 at the last two.
    self.assertLess(np.mean([losses[30], losses[35]]), 0.7 * np.log(10))

  def test_eval_summaries_have_the_estimators_tags(self):
    self.assertEqual(runs.tags(os.path.join(self.model_dir, 'eval')),
                     runs.EVAL_TAGS)
    top1 = searches.events(os.path.join(self.model_dir, 'eval'))['top1']
    self.assertEqual(top1, {20: pytest.approx(self.first['top1']),
                            40: pytest.approx(self.metrics['top1'])})

  def test_resume_continues_from_the_step(self):
    self.assertEqual(self.first['train_start_step'], 0)
    self.assertEqual(self.metrics['train_start_step'], 20)
    # The resumed session logged steps 20-35 only, once each.
    steps = []
    for path in glob.glob(os.path.join(self.model_dir, 'events*')):
      for record in tf.data.TFRecordDataset(path):
        event = tf.compat.v1.Event.FromString(record.numpy())
        if any(v.tag == 'model/loss' for v in event.summary.value):
          steps.append(event.step)
    self.assertEqual(sorted(steps), list(range(0, 40, 5)))

  def test_a_finished_run_started_again_only_evaluates(self):
    metrics = runner.run(self._on_a_copy())
    self.assertEqual(metrics['global_step'], 40)
    self.assertNotIn('train_start_step', metrics)
    self.assertAlmostEqual(metrics['top1'], self.metrics['top1'], places=6)
    self.assertAlmostEqual(metrics['loss'], self.metrics['loss'], places=5)
    # The training rate of the run that trained is kept.
    self.assertEqual(metrics['train_images_per_sec'],
                     self.metrics['train_images_per_sec'])

  def test_eval_only_evaluates_the_latest_checkpoint(self):
    metrics = runner.run(self._on_a_copy(eval_only=True,
                                         eval_split='search_validation'))
    self.assertEqual(metrics['global_step'], 40)
    self.assertFalse(metrics['one_shot'])
    # 359 images of the search's hold-out (trained on: better than test).
    self.assertAlmostEqual(metrics['top1'] * 359, round(metrics['top1'] * 359),
                           places=6)
    self.assertBetween(metrics['top1'], 0.1, 1.0)

  def test_a_restart_on_the_other_engine_is_refused_in_one_line(self):
    args = [a for a in _args(self.model_dir, '--max_steps=40')
            if a != '--engine=distribute']
    with self.assertRaisesRegex(
        ValueError, "^[^\n]*: engine is 'distribute'[^\n]*'estimator'"):
      runner.run(runs.config(*args, '--engine=estimator'))

  def test_the_int8_export_is_full_integer_and_scored_on_the_test_split(
      self):
    images, labels = datasets.digits_arrays()['test']
    logits, details = runs.tflite_logits(
        self.metrics['export']['tflite_int8'], images, delegates=False)
    self.assertEqual([d['dtype'] for d in details], [np.uint8, np.int8])
    for name in ('tflite', 'tflite_int8'):  # The SavedModel's signature.
      with open(self.metrics['export'][name], 'rb') as f:
        self.assertEqual(lite.interpreter(f.read()).get_signature_list(), {
            'serving_default': {'inputs': ['images'], 'outputs': ['logits']}})
    # Its top-1 on the test split, computed here from the arrays: the run's
    # evaluation of it (its order, labels, quantized input) agrees.
    self.assertEqual(self.metrics['int8_top1'],
                     np.mean(np.argmax(logits, -1) == labels))

  @pytest.mark.numerics
  def test_the_float32_exports_give_the_evaluated_networks_predictions(self):
    images = datasets.digits_arrays()['test'][0][:7]
    expected = runs.evaluated_logits(self.config, images)
    export = self.metrics['export']
    loaded = tf.saved_model.load(export['saved_model'])
    served = loaded.signatures['serving_default'](
        images=tf.constant(images))['logits'].numpy()
    # The same weights (EMA) and inference-mode batch norm, no batch
    # dependence: the SavedModel ran the evaluation's ops (measured equal
    # under Eigen's kernels, 6.1e-7 apart under oneDNN's) and TFLite its own
    # kernels (at most 1.1e-6 on logits of ~2; TF 2.15 and 2.21, both
    # kernels).
    np.testing.assert_allclose(served, expected, atol=1e-5)
    tflite_logits, _ = runs.tflite_logits(export['tflite'], images)
    np.testing.assert_allclose(tflite_logits, expected, atol=1e-4)

  @pytest.mark.numerics
  def test_the_int8_export_approximates_the_evaluated_network(self):
    images = datasets.digits_arrays()['test'][0]
    expected = runs.evaluated_logits(self.config, images)
    logits, details = runs.tflite_logits(
        self.metrics['export']['tflite_int8'], images, delegates=False)
    step = details[1]['quantization'][0]
    # Each int8 layer rounds its output to half a step of its range, and the
    # errors of ~20 layers partly cancel: measured 0.8 output steps on
    # average (7 at worst); a wrong scale or a dropped layer errs by the
    # logits' size (~250 steps).
    self.assertLess(np.mean(np.abs(logits - expected)), 2 * step)

  def test_nan_loss_stops_in_one_line_without_saving_it(self):
    # A huge learning rate: finite weights after step 0, a NaN loss at 1.
    model_dir = os.path.join(self.root, 'nan')
    with self.assertRaisesRegex(
        ValueError, r'^The loss is -?(nan|inf) at step 1: train_eval stopped '
        r'without saving it; the last good checkpoint is .*model.ckpt-1$'):
      runner.run(runs.config(*_args(
          model_dir, '--max_steps=4', '--noexport',
          '--base_learning_rate=1e30', '--save_checkpoints_steps=1',
          '--tpu_iterations_per_loop=1')))
    state = tf.train.get_checkpoint_state(model_dir)
    self.assertEqual(
        [os.path.basename(p) for p in state.all_model_checkpoint_paths],
        ['model.ckpt-0', 'model.ckpt-1'])
    self.assertFalse(os.path.exists(os.path.join(model_dir, 'metrics.json')))



_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# 6 deterministic steps, two per loop, a checkpoint every 2; dropout, path
# dropout and an EMA, all resumed exactly.
_EXACT = ('--engine=distribute', '--deterministic', '--max_steps=6',
          '--tpu_iterations_per_loop=2', '--save_checkpoints_steps=2',
          '--dropout_rate=0.2', '--path_dropout_rate=0.2',
          '--moving_average_decay=0.9', '--train_batch_size=32',
          '--eval_batch_size=360', '--base_learning_rate=1.0', '--noexport')


class ResumeTest(absltest.TestCase):

  def _run(self, model_dir: str) -> None:
    """`python -m tunas_tf.train_eval` of `_EXACT` into `model_dir` (its
    own process: op determinism cannot be turned off)."""
    done = forked.run_one(
        [sys.executable, '-m', 'tunas_tf.train_eval', *runs.PINNED,
         f'--model_dir={model_dir}', *_EXACT], timeout=600, cwd=_ROOT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
    self.assertEqual(done.returncode, 0, done.stderr[-3000:])

  def test_a_resumed_run_ends_as_an_uninterrupted_one(self):
    root = tempfile.mkdtemp()
    full, resumed = os.path.join(root, 'full'), os.path.join(root, 'resumed')
    self._run(full)
    os.makedirs(resumed)
    for path in glob.glob(os.path.join(full, 'model.ckpt-4.*')) + [
        os.path.join(full, 'config.json')]:
      shutil.copy(path, resumed)
    with open(os.path.join(resumed, 'checkpoint'), 'w') as f:
      f.write('model_checkpoint_path: "model.ckpt-4"\n')
    self._run(resumed)
    expected = runs.read_json(os.path.join(full, 'metrics.json'))
    metrics = runs.read_json(os.path.join(resumed, 'metrics.json'))
    self.assertEqual((expected['train_start_step'],
                      metrics['train_start_step']), (0, 4))
    for key in ('top1', 'top5', 'loss', 'global_step'):
      self.assertEqual(metrics[key], expected[key], key)
    ours = resume.reader(os.path.join(resumed, 'model.ckpt-6'))
    theirs = resume.reader(os.path.join(full, 'model.ckpt-6'))
    names = [n for n in theirs.get_variable_to_shape_map()
             if not n.startswith('save_counter')]
    self.assertIn(f'classifier/kernel/{inherit.EMA_SUFFIX}', names)
    for name in names:
      np.testing.assert_array_equal(ours.get_tensor(name),
                                    theirs.get_tensor(name), err_msg=name)


if __name__ == '__main__':
  absltest.main()
