"""End-to-end tests of `train_eval` on digits: a few steps each, CPU."""

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

from absl import flags
from absl.testing import absltest
import numpy as np
import tensorflow as tf

from tunas_tf import train_eval
from tunas_tf import train_search
from tunas_tf.cost_model import macs as macs_lib
from tunas_tf.data import datasets
from tunas_tf.graph import from_spec
from tunas_tf.graph import model as model_lib
from tunas_tf.models import supernet as supernet_lib
from tunas_tf.search import runner
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema
from tunas_tf.tools import extract_architecture

_SEARCH = ['--max_steps=8', '--train_batch_size=16',
           '--rl_delay_steps_fraction=0.5',
           '--increase_ops_warmup_steps_fraction=0.25',
           '--increase_filters_warmup_steps_fraction=0.5',
           '--tpu_iterations_per_loop=4', '--save_checkpoints_steps=8',
           '--rl_learning_rate=1.0']
_TINY = ['--train_batch_size=32', '--eval_batch_size=50',
         '--save_checkpoints_steps=10', '--log_every_steps=10',
         '--base_learning_rate=1.0', '--tpu_iterations_per_loop=5']


def _flags(*args):
  values = flags.FlagValues()
  train_eval.define_flags(values)
  values(['train_eval'] + list(args))
  return values


def _config(*args):
  return train_eval.config_from_flags(_flags(*args))


def _read_json(path):
  with open(path) as f:
    return json.load(f)


def _values(checkpoint):
  """{name: array} of a checkpoint's weights (no slots, no shadows)."""
  reader = tf.train.load_checkpoint(checkpoint)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()
          if name.startswith(('blocks/', 'classifier/')) and
          not name.rsplit('/', 1)[-1].startswith(
              ('RMSProp', train_eval.EMA_SUFFIX))}


class TrainEvalTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    root = tempfile.mkdtemp()
    # A short search to inherit from and to take the architecture of.
    cls.search_dir = os.path.join(root, 'search')
    search_values = flags.FlagValues()
    train_search.define_flags(search_values)
    search_values(['train_search', f'--model_dir={cls.search_dir}'] + _SEARCH)
    runner.run_search(train_search.config_from_flags(search_values))
    cls.architecture = os.path.join(cls.search_dir, 'architecture.json')
    with open(cls.architecture, 'w') as f:
      json.dump(extract_architecture.extract(cls.search_dir), f)
    cls.indices = _read_json(cls.architecture)['indices']
    # Train 20 steps (with an EMA of the weights), then resume to 40.
    cls.model_dir = os.path.join(root, 'train')
    common = [f'--architecture={cls.architecture}',
              f'--model_dir={cls.model_dir}', '--moving_average_decay=0.9'
              ] + _TINY
    cls.first = train_eval.run(_config(*common, '--max_steps=20',
                                       '--noexport'))
    cls.config = _config(*common, '--max_steps=40')
    cls.metrics = train_eval.run(cls.config)
    cls.root = root

  def test_metrics_json_has_every_key_with_sane_values(self):
    stored = _read_json(os.path.join(self.model_dir, 'metrics.json'))
    for key in train_eval.METRIC_KEYS:
      self.assertIn(key, stored)
    for metrics in (self.first, stored):
      self.assertBetween(metrics['top1'], 0.0, 1.0)
      self.assertBetween(metrics['top5'], metrics['top1'], 1.0)
      self.assertGreater(metrics['loss'], 0.0)
      self.assertGreater(metrics['train_images_per_sec'], 0.0)
      self.assertGreater(metrics['eval_images_per_sec'], 0.0)
    self.assertEqual(self.first['global_step'], 20)
    self.assertEqual(stored['global_step'], 40)
    # 40 steps at LR 1.0 per 256 learn the digits well beyond chance.
    self.assertGreater(stored['top1'], 0.5)
    arch = schema.prune(mobile.get_search_space('digits_search'),
                        self.indices)
    self.assertEqual(stored['macs'], macs_lib.count_macs(arch, 8, 10, 1))
    graph, constants = from_spec.graph_from_spec(arch, 10, input_channels=1)
    model = model_lib.Model(graph, constants)
    model(tf.zeros([1, 8, 8, 1]))
    self.assertEqual(stored['params'], model_lib.count_params(model))
    self.assertGreater(stored['params'], 0)

  def test_resume_continues_from_the_checkpoint(self):
    self.assertEqual(self.first['train_start_step'], 0)
    self.assertEqual(self.metrics['train_start_step'], 20)
    self.assertEqual(
        int(tf.train.load_checkpoint(self.model_dir).get_tensor(
            'global_step')), 40)
    stored = _read_json(os.path.join(self.model_dir, 'config.json'))
    self.assertEqual(stored['max_steps'], 40)

  def test_a_finished_run_started_again_only_evaluates(self):
    metrics = train_eval.run(dataclasses.replace(self.config, export=False))
    self.assertEqual(metrics['global_step'], 40)
    self.assertNotIn('train_start_step', metrics)
    self.assertAlmostEqual(metrics['top1'], self.metrics['top1'], places=6)

  def test_changed_training_settings_are_refused_naming_the_field(self):
    for flag, field in (('--base_learning_rate=0.5', 'base_learning_rate'),
                        ('--moving_average_decay=0', 'moving_average_decay'),
                        ('--train_batch_size=16', 'train_batch_size')):
      args = [f'--architecture={self.architecture}',
              f'--model_dir={self.model_dir}', '--moving_average_decay=0.9',
              '--max_steps=40'] + _TINY + [flag]
      with self.assertRaisesRegex(ValueError, f': {field} is '):
        train_eval.run(_config(*args))
    other = ':'.join(['0'] * len(self.indices.split(':')))
    with self.assertRaisesRegex(ValueError, ': indices is '):
      train_eval.run(_config(
          f'--indices={other}', f'--model_dir={self.model_dir}',
          '--moving_average_decay=0.9', '--max_steps=40', *_TINY))

  def test_batch_norm_statistics_and_weight_averages_are_checkpointed(self):
    reader = tf.train.load_checkpoint(self.model_dir)
    names = reader.get_variable_to_shape_map()
    moving = [n for n in names if n.endswith('/moving_mean')]
    self.assertNotEmpty(moving)
    self.assertTrue(any(np.any(reader.get_tensor(n) != 0) for n in moving))
    kernel = 'classifier/kernel'
    shadow = f'{kernel}/{train_eval.EMA_SUFFIX}'
    self.assertIn(shadow, names)
    self.assertFalse(np.allclose(reader.get_tensor(kernel),
                                 reader.get_tensor(shadow)))

  def test_exports_give_the_trained_networks_predictions(self):
    images = datasets.digits_arrays()['test'][0][:7]
    arch = train_eval.build_architecture(self.config)
    estimator = train_eval.make_estimator(
        self.config, train_eval.make_model_fn(self.config, arch, {},
                                              initialize=False))
    expected = np.stack([p['logits'] for p in estimator.predict(
        lambda params: tf.data.Dataset.from_tensor_slices(images).batch(
            params.get('batch_size', 50)))])
    export = self.metrics['export']
    loaded = tf.saved_model.load(export['saved_model'])
    served = loaded.signatures['serving_default'](
        images=tf.constant(images))['logits'].numpy()
    np.testing.assert_allclose(served, expected, atol=1e-4)
    with open(export['tflite'], 'rb') as f:
      interpreter = tf.lite.Interpreter(model_content=f.read())
    index = interpreter.get_input_details()[0]['index']
    interpreter.resize_tensor_input(index, list(images.shape))
    interpreter.allocate_tensors()
    interpreter.set_tensor(index, images)
    interpreter.invoke()
    lite = interpreter.get_tensor(interpreter.get_output_details()[0]['index'])
    np.testing.assert_allclose(lite, expected, atol=1e-4)

  def test_one_shot_accuracy_equals_the_supernets(self):
    model_dir = os.path.join(self.root, 'one_shot')
    metrics = train_eval.run(_config(
        f'--architecture={self.architecture}', f'--model_dir={model_dir}',
        f'--init_from_search={self.search_dir}', '--eval_only', *_TINY))
    self.assertTrue(metrics['one_shot'])
    self.assertEqual(metrics['global_step'], 0)
    self.assertFalse(os.path.exists(os.path.join(model_dir, 'export')))
    # The supernet in sampled mode with the same weights and batches.
    space = mobile.get_search_space('digits_search')
    net = supernet_lib.Supernet(space, 10, mode='sampled', input_channels=1)
    reader = tf.train.load_checkpoint(self.search_dir)
    for name, variable in net.variables_by_name().items():
      variable.assign(reader.get_tensor(name))
    values = schema.parse_indices(self.indices)
    position = iter(values)
    sampled = schema.map_oneofs_with_paths(
        lambda _, o: schema.OneOf(o.choices, o.tag,
                                  tf.one_hot(next(position), len(o.choices))),
        space)
    correct = total = 0
    for images, labels in datasets.eval_dataset('digits', 'test', 10, 50):
      logits = net(sampled, images, training=False)
      correct += int(np.sum(np.argmax(logits, -1) == np.argmax(labels, -1)))
      total += int(images.shape[0])
    self.assertEqual(total, 360)
    self.assertAlmostEqual(metrics['top1'], correct / total, delta=1e-4)

  def test_freeze_inherited_trains_only_fresh_variables(self):
    model_dir = os.path.join(self.root, 'frozen')
    # 12 classes: the classifier cannot be inherited (10 in the search).
    train_eval.run(_config(
        f'--architecture={self.architecture}', f'--model_dir={model_dir}',
        f'--init_from_search={self.search_dir}', '--freeze_inherited',
        '--num_classes=12', '--max_steps=5', '--noexport', *_TINY))
    search = _values(tf.train.latest_checkpoint(self.search_dir))
    start = _values(os.path.join(model_dir, 'model.ckpt-0'))
    end = _values(os.path.join(model_dir, 'model.ckpt-5'))
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

  def test_bad_input_is_refused(self):
    model_dir = os.path.join(self.root, 'bad')
    cases = [
        (['--ssd=no_such_space'], 'no_such_space'),
        (['--indices=1:x:2'], 'not a non-negative integer'),
        (['--indices=0:1'], 'expected 18 indices'),
        ([f'--architecture={self.root}/missing.json'], 'Cannot read'),
        ([f'--init_from_search={self.root}', f'--indices={self.indices}'],
         'holds no checkpoint'),
        (['--eval_only', f'--indices={self.indices}'], 'no checkpoint to'),
    ]
    bad_json = os.path.join(self.root, 'bad.json')
    with open(bad_json, 'w') as f:
      f.write('{"ssd": "digits_search", ')
    cases.append(([f'--architecture={bad_json}'], 'not valid JSON'))
    no_indices = os.path.join(self.root, 'no_indices.json')
    with open(no_indices, 'w') as f:
      json.dump({'ssd': 'digits_search'}, f)
    cases.append(([f'--architecture={no_indices}'], "no string 'indices'"))
    for args, message in cases:
      with self.assertRaisesRegex(ValueError, message):
        train_eval.run(_config(f'--model_dir={model_dir}', *args))
    self.assertFalse(os.path.exists(os.path.join(model_dir, 'config.json')))

  def test_a_killed_run_resumes_and_finishes_with_the_same_step_count(self):
    model_dir = os.path.join(self.root, 'killed')
    args = [f'--architecture={self.architecture}', f'--model_dir={model_dir}',
            '--max_steps=400', '--noexport'] + _TINY
    process = subprocess.Popen(
        [sys.executable, '-m', 'tunas_tf.train_eval'] + args,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'})
    try:
      deadline = time.time() + 120
      step = 0
      while time.time() < deadline and process.poll() is None:
        latest = tf.train.latest_checkpoint(model_dir) if os.path.isdir(
            model_dir) else None
        step = int(latest.rsplit('-', 1)[1]) if latest else 0
        if step > 0:
          break
        time.sleep(0.2)
    finally:
      process.kill()
      process.wait()
    self.assertBetween(step, 10, 390)
    metrics = train_eval.run(_config(*args))
    self.assertEqual(metrics['global_step'], 400)
    self.assertGreaterEqual(metrics['train_start_step'], step)

  def test_filters_multiplier_scales_the_widths(self):
    base = _config(f'--architecture={self.architecture}', '--model_dir=x')
    wide = _config(f'--architecture={self.architecture}', '--model_dir=x',
                   '--filters_multiplier=2')
    narrow_arch = train_eval.build_architecture(base)
    wide_arch = train_eval.build_architecture(wide)
    self.assertEqual([2 * b.filters for b in narrow_arch.blocks],
                     [b.filters for b in wide_arch.blocks])
    self.assertGreater(train_eval.count_macs(wide, wide_arch),
                       2 * train_eval.count_macs(base, narrow_arch))
    self.assertGreater(train_eval.count_params(wide, wide_arch),
                       train_eval.count_params(base, narrow_arch))

  def test_command_line_error_is_one_line(self):
    result = subprocess.run(
        [sys.executable, '-m', 'tunas_tf.train_eval',
         f'--model_dir={self.root}/cli', '--ssd=digits_search',
         '--indices=0:1'],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'})
    self.assertNotEqual(result.returncode, 0)
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    self.assertTrue(lines[-1].startswith('train_eval: --indices='), lines)
    self.assertIn('expected 18 indices', lines[-1])


if __name__ == '__main__':
  absltest.main()
