"""Tests for tools/extract_architecture.

--measure_latency (closing the loop): a search with a fitted latency model
of a fake device, then the searched architecture measured on that device and
held against the prediction and the target. The fake device's latency is its
model file's size / 1e6 ms, so the printed figure is checked exactly.

On copies of the shared finished search: the most likely architecture
within a cost band (the default) or the argmax (--argmax), a moved run
directory, the off-target note, and a bad directory in one line.
"""

import contextlib
import dataclasses
import io
import os
import re
import shutil
import sys
import tempfile

from absl import flags
from absl.testing import absltest
import numpy as np

from tunas_tf import architecture
from tunas_tf.io import files
from tunas_tf.cost_model import fit
from tunas_tf.cost_model import linear
from tunas_tf.cost_model import macs
from tunas_tf.cost_model import memory
from tunas_tf.latency import device as device_lib
from tunas_tf.runtime import resume
from tunas_tf.search import compare
from tunas_tf.search import config as config_lib
from tunas_tf.search import extract
from tunas_tf.search import oneshot
from tunas_tf.search_space import mobile
from tunas_tf.tools import extract_architecture
from tunas_tf.train_eval import runner as train_eval_runner
from tests.testing import latency as testing_latency
from tests.testing import searches
from tests.testing import train_eval_runs
from tests.testing import forked

SSD = testing_latency.SSD


def _extract(*args):
  return forked.run_one(
      [sys.executable, '-m', 'tunas_tf.tools.extract_architecture', *args],
      env=searches.QUIET)


class MeasureLatencyTest(absltest.TestCase):

  def test_the_searched_architecture_is_measured_on_the_models_device(self):
    directory = tempfile.mkdtemp()
    script = testing_latency.fake_device_script(directory)
    indices, latencies, _ = testing_latency.synthetic(60, seed=0)
    coefficients = fit.fit(SSD, indices, latencies)['coefficients']
    command = f'{script} {{model}}'
    coefficients['measured_with'] = {
        'ssd': SSD, 'image_size': 8, 'num_classes': 10, 'input_channels': 1,
        'backend': 'command', 'device_command': command,
        'device': 'the fake device'}
    model_path = os.path.join(directory, 'fitted.json')
    files.write_json(coefficients, model_path)
    model_dir = os.path.join(directory, 'search')
    done = forked.run_one(
        searches.search_command(model_dir, f'--cost_model={model_path}',
                                *searches.SHORT_SEARCH_FLAGS),
        env=searches.QUIET)
    self.assertEqual(done.returncode, 0, done.stderr[-3000:])
    self.assertRegex(done.stderr + done.stdout, r'cost [\d.]+ ms \(target ')

    result = _extract(f'--model_dir={model_dir}', '--measure_latency',
                      '--oneshot=0')
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    searched = architecture.read(os.path.join(model_dir,
                                              architecture.FILE_NAME))
    cache = device_lib.ModelCache(
        os.path.join(model_dir, 'latency_models'), SSD,
        macs.resolve_input(SSD))  # Paths only.
    measured = os.path.getsize(cache.path(searched.indices_string)) / 1e6
    predicted = linear.estimate_cost_of_indices(
        searched.indices, linear.get_cost_model(SSD, model_path))
    line = result.stdout.strip().splitlines()[-1]
    self.assertEqual(line, device_lib.closing_line(
        measured, predicted, searched.cost_target, 'the fake device'))
    self.assertRegex(line, r'^Measured [\d.]+ ms on the fake device: '
                     r'predicted [\d.]+ ms \([+-]\d+\.\d%\), target [\d.]+ '
                     r'ms \([+-]\d+\.\d%\)$')

    # compare_random ranks its runs by latency measured on the same device.
    runs = [{'name': name, 'indices': i, 'estimated_cost': 1.0, 'top1': 0.5}
            for name, i in (('searched', searched.indices_string),
                            ('random_0', indices[0]), ('random_1', indices[1]))]
    measured = compare.add_measured_latency(
        runs, model_dir, os.path.join(directory, 'compare_models'))
    cache = device_lib.ModelCache(
        os.path.join(directory, 'compare_models'), SSD,
        macs.resolve_input(SSD))
    for run in measured:
      self.assertAlmostEqual(
          run['measured_ms'],
          os.path.getsize(cache.path(run['indices'])) / 1e6, places=9)
    table = compare.by_measured_latency(measured).splitlines()
    fastest = min(measured, key=lambda r: r['measured_ms'])
    self.assertTrue(table[1].startswith(fastest['name']), table)

  def test_a_model_without_a_device_is_refused(self):
    model_dir = searches.copy_finished_search()  # macs: nothing to measure.
    result = _extract(f'--model_dir={model_dir}', '--measure_latency')
    self.assertNotEqual(result.returncode, 0)
    last = result.stderr.strip().splitlines()[-1]
    self.assertTrue(re.match(
        r'^extract_architecture: --measure_latency: cost model macs does not '
        r'say how its latencies were measured', last), last)

  def test_closing_line(self):
    self.assertEqual(
        device_lib.closing_line(1.1, 1.0, 1.0, 'a phone'),
        'Measured 1.1 ms on a phone: predicted 1 ms (+10.0%), target 1 ms '
        '(+10.0%)')
    self.assertEqual(device_lib.closing_line(0.9, 1.0, None, 'x'),
                     'Measured 0.9 ms on x: predicted 1 ms (-10.0%)')


class ExtractArchitectureToolTest(absltest.TestCase):
  """The tool on copies of the shared finished search."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.search_dir = searches.finished_search()
    cls.searched = searches.finished_architecture()

  def _main(self, *args):
    """The tool's printed lines, run in this process."""
    values = flags.FlagValues()
    extract_architecture.define_flags(values)
    values(['extract_architecture', *args])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
      extract_architecture.main(['extract_architecture'], values)
    return out.getvalue().splitlines()

  def test_extract_within_a_cost_band(self):
    config = config_lib.read(self.search_dir)
    argmax = extract.pick(self.search_dir, cost_tolerance=None)[0]
    argmax_cost = argmax.estimated_cost
    # A target the argmax misses: the most likely architecture in the band.
    moved = searches.copy_finished_search('moved')
    stored = files.read_json(os.path.join(moved, 'config.json'))
    stored['rl_cost_model_target'] = argmax_cost * 1.5
    files.write_json(stored, os.path.join(moved, 'config.json'))
    other, line = extract.pick(moved, cost_tolerance=0.1)
    self.assertNotEqual(other.indices, argmax.indices)
    self.assertEqual(other.argmax_indices, argmax.indices_string)
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
      extract.pick(moved, cost_tolerance=0.0)[0]
    # The tool writes the same record and says which it took.
    self.assertIn(line, self._main(f'--model_dir={moved}',
                                   '--cost_tolerance=0.1', '--oneshot=0'))
    self.assertEqual(architecture.read(path), other)
    self.assertRegex(line, r'^Took the most likely architecture within 10% of '
                     r'the target .* times as likely \(--argmax takes it\)$')
    # By default, within 5%, the best of the band's likeliest and 49 draws
    # by one-shot accuracy; with --argmax, the argmax.
    printed = self._main(f'--model_dir={moved}')
    band_line = extract.pick(moved)[1].removeprefix('Took ')  # Kept or not.
    self.assertTrue(any(line.endswith(band_line) for line in printed))
    self.assertRegex('\n'.join(printed), r"(One-shot accuracy kept it|Took "
                     r'[\d:]+ by one-shot accuracy), the best of 50 in the '
                     r'band \(the most likely and 49 drawn')
    self.assertEqual(architecture.read(path).oneshot, extract.ONESHOT)
    self.assertBetween(architecture.read(path).estimated_cost,
                       argmax_cost * 1.5 * 0.95, argmax_cost * 1.5 * 1.05)
    printed = self._main(f'--model_dir={moved}', '--argmax')
    self.assertIn('Took the argmax of each decision (--argmax)', printed)
    # TFLite Micro's arena and flash of the int8 network beside the cost.
    memory_line = memory.memory_text(argmax.spec, macs.resolve_input(
        argmax.ssd, argmax.image_size, argmax.num_classes,
        argmax.num_channels))
    self.assertRegex(memory_line, r'arena [\d.]+ KB, flash [\d.]+ KB$')
    self.assertIn(memory_line, printed)
    self.assertIn('Note: ' + extract.cost_miss_line(
        argmax_cost, argmax_cost * 1.5, 'MACs', argmax=True), printed)
    self.assertEqual(architecture.read(path).indices, argmax.indices)

  def test_oneshot_takes_the_best_of_the_band_by_one_shot_accuracy(self):
    config = config_lib.read(self.search_dir)
    argmax = extract.pick(self.search_dir, cost_tolerance=None)[0]
    moved = searches.copy_finished_search('oneshot')
    stored = files.read_json(os.path.join(moved, 'config.json'))
    stored['rl_cost_model_target'] = argmax.estimated_cost * 1.5
    files.write_json(stored, os.path.join(moved, 'config.json'))
    likeliest, _ = extract.pick(moved, cost_tolerance=0.1)
    chosen, line = extract.pick(moved, cost_tolerance=0.1, oneshot=4)
    # The candidates: the likeliest in the band, then the draws.
    spec = mobile.get_search_space(config.ssd)
    logits = extract.read_logits(resume.resume_point(moved).checkpoint, spec)
    costs_of = lambda b: linear.estimate_costs_of_indices(
        [list(v) for v in b], config.resolved_cost_model)
    band = extract.cost_band(config_lib.read(moved), 0.1)
    drawn = extract.samples_in_band(list(logits.values()), costs_of, *band, 4)
    candidates = [tuple(likeliest.indices)] + [
        v for v in drawn if v != tuple(likeliest.indices)][:3]
    scores = oneshot.accuracies(moved, candidates)
    self.assertEqual(tuple(chosen.indices),
                     candidates[int(np.argmax(scores))])
    self.assertTrue(band[0] <= chosen.estimated_cost <= band[1])
    self.assertEqual((chosen.oneshot, likeliest.oneshot),
                     (len(candidates), None))
    best, said = extract.oneshot_line(
        candidates, scores, config.validation_examples,
        tuple(argmax.indices))
    self.assertIn(said, line.splitlines())
    self.assertEqual(line.splitlines()[0 if best else -1], said)
    self.assertIn(said, self._main(
        f'--model_dir={moved}', '--cost_tolerance=0.1', '--oneshot=4'))
    self.assertEqual(
        architecture.read(os.path.join(moved, 'architecture.json')), chosen)
    # A hold-out it cannot read: one line, and --oneshot=0 needs none.
    unread = dict(stored, dataset='fashion_mnist_local',
                  data_dir=tempfile.mkdtemp())
    files.write_json(unread, os.path.join(moved, 'config.json'))
    with self.assertRaisesRegex(ValueError, (
        r"^Unknown dataset 'fashion_mnist_local'.* \(the one-shot step reads "
        r"the search's hold-out: --oneshot=0 extracts without it\)$")):
      extract.pick(moved, cost_tolerance=0.1, oneshot=4)
    self.assertEqual(extract.pick(moved, cost_tolerance=0.1)[0].indices,
                     likeliest.indices)
    # No architecture in the band: the argmax, and the line says so.
    stored['rl_cost_model_target'] = argmax.estimated_cost * 1e6
    files.write_json(stored, os.path.join(moved, 'config.json'))
    fallback, line = extract.pick(moved, oneshot=4)
    self.assertEqual((fallback.indices, fallback.oneshot),
                     (argmax.indices, None))
    self.assertEqual(line.splitlines()[-1], '--oneshot=4 not applied: no '
                     'architecture in the band to start from')
    stored['enable_cost_model'] = False
    files.write_json(stored, os.path.join(moved, 'config.json'))
    _, line = extract.pick(moved, oneshot=4)
    self.assertEqual(line.splitlines()[-1],
                     '--oneshot=4 not applied: no cost band to draw in')

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
    values(['extract_architecture', f'--model_dir={moved}', '--oneshot=0'])
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
    cost = extract.pick(self.search_dir,
                        cost_tolerance=None)[0].estimated_cost
    run = searches.copy_finished_search('off_target')
    config_path = os.path.join(run, 'config.json')

    def extract_with_target(target):
      stored = files.read_json(config_path)
      stored['rl_cost_model_target'] = target
      files.write_json(stored, config_path)
      return self._main(f'--model_dir={run}', '--argmax')

    # cost / (1.5 cost) - 1 = -33.3%.
    far = extract_with_target(cost * 1.5)
    line = extract.cost_miss_line(cost, cost * 1.5, 'MACs', argmax=True)
    self.assertIn('33.3% under', line)
    self.assertIn(f'Note: {line}', far)
    self.assertNotIn('Note:', '\n'.join(extract_with_target(cost * 1.03)))

  def test_the_searchs_limits_are_the_default_and_never_exceeded(self):
    run = searches.copy_finished_search('sram')
    stored = files.read_json(os.path.join(run, 'config.json'))
    # 7.58 KB SRAM, 15.52 KB flash: digits_search's smallest architecture
    # alone fits at 8 px.
    files.write_json(dict(stored, sram_kb=7.58, flash_kb=15.52),
                     os.path.join(run, 'config.json'))
    output = os.path.join(run, 'limited.json')
    with self.assertRaisesRegex(SystemExit, '--flash_kb must be > 0, got 0'):
      self._main(f'--model_dir={run}', f'--output={output}', '--flash_kb=0')
    for flags, message in (
        ((), r'a [\d.]+ KB tensor arena \(TFLite Micro, estimated\), '
         r'[\d.]+% over --sram_kb=7.58'),
        (('--sram_kb=1000',), r'a [\d.]+ KB int8 model \(flash, estimated\), '
         r'[\d.]+% over --flash_kb=15.52')):
      with self.assertRaises(SystemExit) as refused:
        self._main(f'--model_dir={run}', f'--output={output}', *flags)
      self.assertRegex(str(refused.exception), r'^extract_architecture: the '
                       f'architecture needs {message}; nothing written$')
      self.assertFalse(os.path.exists(output))
    # The flags override the search's limits.
    self.assertIn('Written to', self._main(
        f'--model_dir={run}', f'--output={output}', '--sram_kb=1000',
        '--flash_kb=1000')[-1])
    written = files.read_json(output)
    self.assertLessEqual(written['arena_bytes'], 1000 * 1024)
    self.assertGreater(written['flash_bytes'], 15.52 * 1024)

  def test_command_line_error_is_one_line(self):
    done = forked.run_one(
        [sys.executable, '-m', 'tunas_tf.tools.extract_architecture',
         f'--model_dir={tempfile.mkdtemp()}'],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
    self.assertNotEqual(done.returncode, 0)
    self.assertEqual(done.stderr.strip().splitlines()[-1][:40],
                     'extract_architecture: No config.json in ')


if __name__ == '__main__':
  absltest.main()
