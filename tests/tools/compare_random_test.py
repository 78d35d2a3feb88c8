"""Tests for tools/compare_random and tools/extract_architecture on a tiny search."""

import contextlib
import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile

from absl import flags
from absl.testing import absltest
import pytest

from tunas_tf import architecture
from tunas_tf import files
from tunas_tf.cost_model import linear
from tunas_tf.runtime import resume
from tunas_tf.search import config as config_lib
from tunas_tf.search import extract
from tunas_tf.search_space import mobile
from tunas_tf.search_space import spec_io
from tunas_tf.search import compare
from tunas_tf.tools import extract_architecture
from tunas_tf.train_eval import runner as train_eval_runner
from tests.testing import searches
from tests.testing import tiny_tfds
from tests.testing import train_eval_runs


_search_config = searches.search_config


class CompareRandomTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.search_dir = searches.finished_search()
    cls.searched = architecture.read(
        os.path.join(cls.search_dir, architecture.FILE_NAME))

  def test_end_to_end_and_resume(self):
    output_dir = tempfile.mkdtemp()
    train_flags = ['--max_steps=3', '--train_batch_size=16',
                   '--eval_batch_size=120', '--noexport']
    results = compare.compare(self.search_dir, output_dir, 2,
                                     cost_tolerance=0.3, seed=1,
                                     train_eval_flags=train_flags)
    self.assertEqual([r['name'] for r in results],
                     ['searched', 'random_0', 'random_1'])
    with open(os.path.join(self.search_dir, 'architecture.json')) as f:
      searched = json.load(f)
    self.assertEqual(results[0]['indices'], searched['indices'])
    # The random architectures are costed with the search's own cost model.
    config = config_lib.read(self.search_dir)
    self.assertEqual(config.cost_model, 'macs')
    macs_model = config.resolved_cost_model
    self.assertEqual(macs_model.kind, linear.MACS)
    for r in results:
      self.assertBetween(r['top1'], 0.0, 1.0)
      self.assertBetween(r['estimated_cost'],
                         searched['estimated_cost'] * 0.7 - 1e-6,
                         searched['estimated_cost'] * 1.3 + 1e-6)
      self.assertAlmostEqual(r['estimated_cost'],
                             linear.estimate_cost_of_indices(
                                 r['indices'], macs_model),
                             places=3)
      self.assertEqual(r['macs'], round(r['estimated_cost']), r)
      with open(os.path.join(r['run_dir'], 'metrics.json')) as f:
        self.assertEqual(json.load(f)['global_step'], 3)
    self.assertEqual(files.read_json(os.path.join(output_dir,
                                                  'results.json')), results)
    self.assertIn('searched top-1', compare.summary(results))
    plot = os.path.join(output_dir, 'compare_random.png')
    compare.plot(results, plot,
                        **compare.plot_context(self.search_dir))
    self.assertGreater(os.path.getsize(plot), 1000)
    self.assertEqual(compare.plot_context(self.search_dir),
                     {'units': 'MACs', 'num_test': 360,
                      'target': config_lib.read(
                          self.search_dir).rl_cost_model_target})
    # Started again, it trains nothing (a failing train_eval would show).
    again = compare.compare(self.search_dir, output_dir, 2,
                                   cost_tolerance=0.3, seed=1,
                                   train_eval_flags=['--no_such_flag'])
    self.assertEqual(again, results)
    # A finished run of another architecture under a run's name is refused,
    # not reused (an output directory kept after the search changed).
    config_path = os.path.join(results[1]['run_dir'], 'config.json')
    stored = files.read_json(config_path)
    stored['indices'] = results[2]['indices']
    files.write_json(stored, config_path)
    with self.assertRaisesRegex(
        ValueError, r"random_0 holds a finished training with indices "
        r"'[0-9:]+', not random_0's '[0-9:]+': remove it"):
      compare.compare(self.search_dir, output_dir, 2,
                             cost_tolerance=0.3, seed=1,
                             train_eval_flags=['--no_such_flag'])

  def test_extract_is_the_json_of_the_record(self):
    search_dir, searched = self.search_dir, self.searched
    self.assertEqual(extract.extract(search_dir),
                     searched.to_json())
    config = config_lib.read(search_dir)
    self.assertEqual(searched.global_step, config.max_global_step)
    self.assertEqual(searched.max_global_step, config.max_global_step)
    self.assertEqual(searched.cost_model, 'macs')
    job = config.job
    self.assertEqual(searched.data, {
        'dataset': job.dataset, 'image_size': job.image_size,
        'num_classes': job.num_classes, 'num_channels': job.num_channels,
        'preprocessing': job.preprocessing,
        'validation_examples': config.validation_examples})
    self.assertEqual(searched.data['dataset'], 'digits')
    self.assertLen(searched.probabilities, len(searched.indices))
    self.assertEqual(architecture.read(
        os.path.join(search_dir, 'architecture.json')), searched)

  def test_extract_within_a_cost_band(self):
    config = config_lib.read(self.search_dir)
    target = config.rl_cost_model_target
    argmax_cost = self.searched.estimated_cost
    # A band the argmax is in: the argmax, recorded as such.
    tolerance = abs(argmax_cost / target - 1) + 0.01
    inside = extract.search_architecture(self.search_dir,
                                         cost_tolerance=tolerance)
    self.assertEqual(inside.indices, self.searched.indices)
    self.assertEqual(inside.argmax_indices, self.searched.indices_string)
    self.assertEqual(inside.cost_tolerance, tolerance)
    # A target the argmax misses: the most likely architecture in the band.
    moved = searches.copy_finished_search('moved')
    stored = files.read_json(os.path.join(moved, 'config.json'))
    stored['rl_cost_model_target'] = argmax_cost * 1.5
    files.write_json(stored, os.path.join(moved, 'config.json'))
    other = extract.search_architecture(moved, cost_tolerance=0.1)
    self.assertNotEqual(other.indices, self.searched.indices)
    self.assertEqual(other.argmax_indices, self.searched.indices_string)
    self.assertBetween(other.estimated_cost, argmax_cost * 1.5 * 0.9,
                       argmax_cost * 1.5 * 1.1)
    self.assertAlmostEqual(other.estimated_cost,
                           linear.estimate_cost_of_indices(
                               list(other.indices), config.resolved_cost_model),
                           places=3)
    # Optimal at least against single changes: each change of one decision
    # to a more likely choice leaves the band.
    model = config.resolved_cost_model
    for k, path in enumerate(other.probabilities):
      probs = other.probabilities[path]
      for choice, p in enumerate(probs):
        if p > probs[other.indices[k]]:
          changed = list(other.indices)
          changed[k] = choice
          cost = linear.estimate_cost_of_indices(changed, model)
          self.assertFalse(argmax_cost * 1.35 <= cost <= argmax_cost * 1.65,
                           (path, choice, cost))
    path = os.path.join(moved, 'architecture.json')
    architecture.write(other, path)
    self.assertEqual(architecture.read(path), other)
    with self.assertRaisesRegex(ValueError, r'--cost_tolerance must be in'):
      extract.search_architecture(moved, cost_tolerance=0.0)
    # The tool writes the same record and says how much less likely it is.
    values = flags.FlagValues()
    extract_architecture.define_flags(values)
    values(['extract_architecture', f'--model_dir={moved}',
            '--cost_tolerance=0.1'])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      extract_architecture.main(['extract_architecture'], values)
    self.assertEqual(architecture.read(path), other)
    ratio = 1.0
    for k, probs in enumerate(other.probabilities.values()):
      ratio *= probs[other.indices[k]] / probs[self.searched.indices[k]]
    self.assertLess(ratio, 1.0)
    self.assertIn(f'The argmax {self.searched.indices_string} is outside 0.1 '
                  'of the target; this is the most likely architecture '
                  f'within it, {ratio:.3g} times as likely', out.getvalue())

  def test_a_moved_run_directory_keeps_its_checkpoint(self):
    moved = os.path.join(tempfile.mkdtemp(), 'moved')
    shutil.move(searches.copy_finished_search('run'), moved)
    path = os.path.join(moved, architecture.FILE_NAME)
    # The file names the checkpoint in the directory it is in now, which
    # restores.
    name = os.path.basename(self.searched.checkpoint)
    read = architecture.read(path)
    self.assertEqual(read.checkpoint, os.path.join(moved, name))
    self.assertIsNone(resume.unreadable_reason(read.checkpoint))
    self.assertEqual(resume.checkpoint_step(read.checkpoint),
                     self.searched.global_step)
    self.assertEqual(
        dataclasses.replace(read, checkpoint=self.searched.checkpoint),
        self.searched)
    # Extracted again there: the same record, relative in the file.
    values = flags.FlagValues()
    extract_architecture.define_flags(values)
    values(['extract_architecture', f'--model_dir={moved}'])
    with contextlib.redirect_stdout(io.StringIO()):
      extract_architecture.main(['extract_architecture'], values)
    self.assertEqual(files.read_json(path)['checkpoint'], name)
    self.assertEqual(architecture.read(path), read)
    # train_eval takes the architecture and starts from the search's weights.
    metrics = train_eval_runner.run(train_eval_runs.config(
        f'--architecture={path}', f'--init_from_search={moved}',
        f'--model_dir={os.path.join(moved, "train")}', '--max_steps=2',
        '--noexport', *train_eval_runs.TINY))
    self.assertEqual(metrics['global_step'], 2)

  def test_says_when_the_cost_is_off_target(self):
    cost = self.searched.estimated_cost
    run = searches.copy_finished_search('off_target')
    config_path = os.path.join(run, 'config.json')

    def extract_with_target(target):
      stored = files.read_json(config_path)
      stored['rl_cost_model_target'] = target
      files.write_json(stored, config_path)
      values = flags.FlagValues()
      extract_architecture.define_flags(values)
      values(['extract_architecture', f'--model_dir={run}'])
      out = io.StringIO()
      with contextlib.redirect_stdout(out):
        extract_architecture.main(['extract_architecture'], values)
      return out.getvalue().splitlines()

    # cost / (1.5 cost) - 1 = -33.3%.
    far = extract_with_target(cost * 1.5)
    line = extract.cost_miss_line(cost, cost * 1.5, 'MACs')
    self.assertIn('33.3% under', line)
    self.assertIn(f'Note: {line}', far)
    self.assertNotIn('Note:', '\n'.join(extract_with_target(cost * 1.03)))

  def test_summary_line(self):
    results = [{'name': n, 'estimated_cost': 1e6, 'top1': t, 'indices': '0:1'}
               for n, t in [('searched', 0.87), ('random_0', 0.80),
                            ('random_1', 0.90), ('random_2', 0.85)]]
    last = compare.summary(results).splitlines()[-1]
    # Mean 0.85, sample std 0.05 (the population std would be 0.0408).
    self.assertEqual(last, 'searched top-1 0.8700; random 0.8500 +- 0.0500 '
                     '(n=3); the searched architecture beats 2 of 3')
    one = compare.summary(results[:2]).splitlines()[-1]
    self.assertIn('random 0.8000 +- 0.0000 (n=1)', one)

  def test_bad_input(self):
    with self.assertRaisesRegex(ValueError, '--num_random must be > 0'):
      compare.compare(self.search_dir, tempfile.mkdtemp(), 0)
    empty = tempfile.mkdtemp()
    with self.assertRaisesRegex(ValueError, 'No config.json in'):
      compare.compare(empty, tempfile.mkdtemp(), 1)
    no_cost = tempfile.mkdtemp()
    for name in ('config.json', 'model_spec.json'):
      shutil.copy(os.path.join(self.search_dir, name), no_cost)
    uncosted = architecture.Architecture(self.searched.ssd,
                                         self.searched.indices)
    architecture.write(uncosted, os.path.join(no_cost, 'architecture.json'))
    with self.assertRaisesRegex(ValueError, "has no 'estimated_cost'"):
      compare.compare(no_cost, tempfile.mkdtemp(), 1)
    failing = compare.compare
    with self.assertRaisesRegex(ValueError,
                                r'train_eval failed for searched in .*'
                                r'no_such_flag'):
      failing(self.search_dir, tempfile.mkdtemp(), 1, cost_tolerance=0.3,
              train_eval_flags=['--no_such_flag'])


class ExtractArchitectureTest(absltest.TestCase):

  def test_directory_errors(self):
    empty = tempfile.mkdtemp()
    with self.assertRaisesRegex(ValueError, 'No config.json in'):
      extract.extract(empty)
    config = _search_config(empty)
    config_lib.write_or_check(
        config, spec_io.dumps(mobile.get_search_space('digits_search')))
    with self.assertRaisesRegex(ValueError, 'No checkpoint in'):
      extract.extract(empty)
    with self.assertRaisesRegex(ValueError, 'Cannot read checkpoint'):
      extract.extract(empty, os.path.join(empty, 'model.ckpt-9'))

  def test_command_line_error_is_one_line(self):
    done = subprocess.run(
        [sys.executable, '-m', 'tunas_tf.tools.extract_architecture',
         f'--model_dir={tempfile.mkdtemp()}'], capture_output=True, text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
    self.assertNotEqual(done.returncode, 0)
    self.assertEqual(done.stderr.strip().splitlines()[-1][:40],
                     'extract_architecture: No config.json in ')


class PlotContextTest(absltest.TestCase):

  def test_a_tfds_search_gives_its_test_split_size(self):
    # A TFDS dataset needs the search's hold-out to be described at all.
    data_dir = tempfile.mkdtemp()
    tiny_tfds.TinyImages(data_dir=data_dir).download_and_prepare()
    search_dir = tempfile.mkdtemp()
    config = searches.search_config(
        search_dir, '--dataset=tiny_images', f'--data_dir={data_dir}',
        '--nodownload', '--validation_examples=8', '--train_batch_size=4',
        '--rl_batch_size_multiplier=1', '--max_steps=3')
    config_lib.write(config, spec_io.dumps(mobile.get_search_space(
        config.ssd)), None)
    self.assertEqual(compare.plot_context(search_dir),
                     {'units': 'MACs', 'num_test': 6,
                      'target': config.rl_cost_model_target})


if __name__ == '__main__':
  absltest.main()
