"""Tests for tools/measure_latency's command line (its library:
tests/latency/rows_test.py)."""

import csv
import json
import os
import shutil
import sys
import tempfile

from absl.testing import absltest

from tunas_tf.latency import adaptive
from tunas_tf.latency import protocol as protocol_lib
from tunas_tf.latency import rows as rows_lib
from tunas_tf.search_space import sample
from tests.testing import latency as testing_latency
from tests.testing import forked

SSD = 'digits_search'  # 8x8x1 images, 10 classes: small and fast to build.
FAST = dict(protocol=protocol_lib.Protocol(repeats=2, runs=2, warmup_runs=0,
                                           max_warmup_runs=2))
COLUMNS = ['indices', 'latency_ms', 'spread_ms', 'repeats', 'remeasured',
           'load']


def _rows(path):
  with open(path, newline='') as f:
    return list(csv.reader(f))


def _env():
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')


class CommandLineTest(absltest.TestCase):

  def _run(self, *args):
    return forked.run_one(
        [sys.executable, '-m', 'tunas_tf.tools.measure_latency', *args],
        env=_env())

  def test_measures_and_refuses_a_wrong_header(self):
    directory = tempfile.mkdtemp()
    output = os.path.join(directory, 'latency.csv')
    result = self._run(f'--ssd={SSD}', '--num=1', '--seed=2', '--repeats=2',
                       '--warmup_runs=1', '--runs=3', f'--output={output}')
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    self.assertIn('noise of this pass: ', result.stdout)
    rows = _rows(output)
    self.assertEqual(rows[0], COLUMNS)
    self.assertEqual([row[0] for row in rows[1:]],
                     sample.sample_indices(SSD, 1, seed=2))
    self.assertGreater(float(rows[1][1]), 0.0)

    wrong = os.path.join(directory, 'wrong.csv')
    with open(wrong, 'w') as f:
      f.write('arch,ms\n')
    result = self._run(f'--ssd={SSD}', '--num=1', f'--output={wrong}')
    self.assertNotEqual(result.returncode, 0)
    last = result.stderr.strip().splitlines()[-1]
    self.assertTrue(last.startswith('measure_latency: '), last)
    self.assertIn("header 'arch,ms'", last)

  def test_a_block_table_takes_no_most_informative_pick(self):
    output = os.path.join(tempfile.mkdtemp(), 'table.csv')
    result = self._run(f'--ssd={SSD}', '--block_table', '--num=2',
                       '--most_informative', f'--output={output}')
    self.assertNotEqual(result.returncode, 0)
    lines = result.stderr.strip().splitlines()
    self.assertLen(lines, 1, result.stderr)
    self.assertRegex(lines[0], '^measure_latency: --most_informative picks '
                     'networks for the linear fit')
    self.assertFalse(os.path.exists(output))

  def _device_pass(self, directory, output, script, num=3, *extra):
    return self._run(f'--ssd={SSD}', f'--num={num}', '--seed=2', '--repeats=2',
                     '--interleave=1', f'--output={output}',
                     f'--device_command={script} {{model}}', *extra)

  def test_ctrl_c_mid_pass_keeps_the_rows_in_one_line_and_resumes(self):
    directory = tempfile.mkdtemp()
    output = os.path.join(directory, 'stopped.csv')
    # Two rows of 2 rounds each, then Ctrl-C during the third's first.
    script = testing_latency.fake_device_script(directory, interrupt_at=4)
    result = self._device_pass(directory, output, script)
    self.assertEqual(result.returncode, 130, result.stderr[-2000:])
    self.assertEqual(result.stderr.strip().splitlines()[-1],
                     f'measure_latency: stopped by SIGINT: the rows measured '
                     f'so far are in {output}; the same command measures the '
                     'rest')
    self.assertNotIn('Traceback', result.stderr)
    self.assertLen(_rows(output), 3)  # The header and the two rows.
    result = self._device_pass(directory, output, script)
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    self.assertIn('measured 1 architectures (2 already in', result.stdout)
    self.assertIn(', 2 device calls', result.stdout)  # Its rounds agree.

  def test_the_same_device_through_another_spelling_or_name_appends(self):
    directory = tempfile.mkdtemp()
    script = testing_latency.fake_device_script(directory)
    output = os.path.join(directory, 'rows.csv')
    self.assertEqual(self._device_pass(directory, output, script, 1
                                       ).returncode, 0)
    # '//' in its path: the same command, the same device.
    spelled = script.replace('/fake_device.py', '/.//fake_device.py')
    result = self._device_pass(directory, output, spelled, 2)
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    self.assertLen(_rows(output), 3)
    # Named, another command is the same device under the same name only.
    named = os.path.join(directory, 'named.csv')
    other = os.path.join(directory, 'other_device.py')
    shutil.copy(script, other)
    for command, name, num, code in ((script, 'phone', 1, 0),
                                     (other, 'phone', 2, 0),
                                     (other, 'tablet', 3, 1)):
      result = self._device_pass(directory, named, command, num,
                                 f'--device_name={name}')
      self.assertEqual(result.returncode, code, result.stderr[-2000:])
    self.assertIn("device='phone', not 'tablet'", result.stderr)
    self.assertLen(_rows(named), 3)
    with open(rows_lib.settings_path(named)) as f:
      self.assertEqual(json.load(f)['device'], 'phone')

  def test_a_fake_device_end_to_end(self):
    directory = tempfile.mkdtemp()
    script = testing_latency.fake_device_script(directory)
    first = os.path.join(directory, 'first.csv')
    result = self._device_pass(directory, first, script)
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    self.assertIn('with device command', result.stdout)
    rows = _rows(first)
    self.assertEqual([row[0] for row in rows[1:]],
                     sample.sample_indices(SSD, 3, seed=2))
    models = os.path.join(first + '.models', 'digits_search_8px_10c_1ch')
    for row in rows[1:]:  # The fake device's figure: file size / 1e6 ms.
      size = os.path.getsize(os.path.join(models,
                                          row[0].replace(':', '-') + '.tflite'))
      self.assertAlmostEqual(float(row[1]), size / 1e6, places=6)
    with open(rows_lib.settings_path(first)) as f:
      self.assertEqual(json.load(f)['backend'], 'command')
    # A second pass compared with the first: the same figures (0.00%).
    second = os.path.join(directory, 'second.csv')
    result = self._device_pass(directory, second, script, 3,
                               f'--compare_with={first}',
                               f'--model_cache={first}.models')
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    self.assertIn('0.00% median relative difference over 3 architectures',
                  result.stdout)

  def test_a_reference_on_a_fake_device_and_its_scale_shared(self):
    directory = tempfile.mkdtemp()
    script = testing_latency.fake_device_script(directory)
    first = os.path.join(directory, 'first.csv')
    result = self._device_pass(directory, first, script, 2, '--reference')
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    measured = rows_lib.read_provenance(first)
    reference = rows_lib.reference_architecture(SSD)
    self.assertEqual(measured.reference, reference)
    models = os.path.join(first + '.models', 'digits_search_8px_10c_1ch')
    size = lambda indices: os.path.getsize(os.path.join(
        models, indices.replace(':', '-') + '.tflite'))
    self.assertAlmostEqual(measured.reference_ms, size(reference) / 1e6)
    for row in _rows(first)[1:]:  # size / reference size x its scale.
      self.assertAlmostEqual(float(row[1]), size(row[0]) / 1e6, places=9)
    # Another CSV takes the scale from the first; only with --reference.
    second = os.path.join(directory, 'second.csv')
    result = self._device_pass(directory, second, script, 2,
                               f'--reference_from={first}')
    self.assertEqual(result.stderr.strip().splitlines(),
                     ['measure_latency: --reference_from takes the scale of '
                      'a --reference; add --reference'])
    result = self._device_pass(directory, second, script, 2, '--reference',
                               f'--reference_from={first}',
                               f'--compare_with={first}')
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    self.assertIn('0.00% median relative difference', result.stdout)
    self.assertIsNone(rows_lib.read_provenance(second).difference(measured))
    plain = os.path.join(directory, 'plain.csv')
    result = self._device_pass(directory, plain, script, 1)
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    result = self._device_pass(directory, second, script, 2, '--reference',
                               f'--reference_from={plain}')
    self.assertEqual(result.stderr.strip().splitlines()[-1],
                     f'measure_latency: {plain} was measured without a '
                     'reference: nothing to take from it')

  def test_int8_models_on_a_fake_device_and_no_float32_rows_after_them(self):
    directory = tempfile.mkdtemp()
    script = testing_latency.fake_device_script(directory)
    output = os.path.join(directory, 'int8.csv')
    result = self._device_pass(directory, output, script, 2,
                               '--precision=int8')
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    self.assertIn('with device command, int8', result.stdout)
    with open(rows_lib.settings_path(output)) as f:
      self.assertEqual(json.load(f)['precision'], 'int8')
    models = os.path.join(output + '.models', 'digits_search_8px_10c_1ch_int8')
    for row in _rows(output)[1:]:  # The int8 models' sizes / 1e6 ms.
      size = os.path.getsize(os.path.join(models,
                                          row[0].replace(':', '-') + '.tflite'))
      self.assertAlmostEqual(float(row[1]), size / 1e6, places=6)
    result = self._device_pass(directory, output, script, 3)
    self.assertNotEqual(result.returncode, 0)
    lines = result.stderr.strip().splitlines()
    self.assertRegex(lines[-1], r"^measure_latency: .*int8.csv was measured "
                     r"with precision='int8', not 'float32' .*; add "
                     r'--precision=int8 to add to it, or choose another '
                     r'--output$')
    self.assertLen(_rows(output), 3)  # Nothing appended.

  def test_most_informative_picks_what_the_rows_lack(self):
    directory = tempfile.mkdtemp()
    script = testing_latency.fake_device_script(directory)
    output = os.path.join(directory, 'latency.csv')
    self.assertEqual(self._device_pass(directory, output, script, 2)
                     .returncode, 0)
    result = self._device_pass(directory, output, script, 2,
                               '--most_informative')
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    first = sample.sample_indices(SSD, 2, seed=2)
    picks = adaptive.most_informative(SSD, first, 2, seed=2)
    self.assertEqual([row[0] for row in _rows(output)[1:]], first + picks)

  def test_a_device_that_disappears_keeps_every_row_finished(self):
    directory = tempfile.mkdtemp()
    # Three architectures visited in turn (the default --interleave), two
    # rounds: a b c, then b c a. The device is gone at its sixth call (a's
    # second), when b and c are done: their rows are kept.
    script = testing_latency.fake_device_script(directory, fail_after=5)
    output = os.path.join(directory, 'latency.csv')
    result = self._run(f'--ssd={SSD}', '--num=3', '--seed=2', '--repeats=2',
                       f'--output={output}',
                       f'--device_command={script} {{model}}')
    self.assertNotEqual(result.returncode, 0)
    lines = result.stderr.strip().splitlines()
    self.assertRegex(lines[-1], r"^measure_latency: device command for .* "
                     r"exited with 1: stderr 'error: no devices/emulators "
                     r"found', stdout 'STARTING!'; the 2 rows measured before "
                     r'it are in ')
    a, b, c = sample.sample_indices(SSD, 3, seed=2)
    self.assertIn(a, lines[-1])
    self.assertEqual([row[0] for row in _rows(output)[1:]], [b, c])

  def test_unparsable_output_and_bad_commands_end_in_one_line(self):
    directory = tempfile.mkdtemp()
    chatty = testing_latency.fake_device_script(directory,
                                                output='Average: {size} us')
    for n, (command, message) in enumerate((
        (chatty, 'no "Inference \\(avg\\): N" line .*stdout '
         "'Average: "),
        ('/no/such/adb', "'/no/such/adb' not found; the 0 rows"),
    )):
      output = os.path.join(directory, f'latency{n}.csv')
      result = self._device_pass(directory, output, command, 1)
      self.assertNotEqual(result.returncode, 0)
      last = result.stderr.strip().splitlines()[-1]
      self.assertRegex(last, '^measure_latency: ' + '.*' + message)
    result = self._run(f'--ssd={SSD}', '--num=1', f'--output={output}',
                       '--device_command=adb shell benchmark_model')
    self.assertIn('has no {model}', result.stderr.strip().splitlines()[-1])


if __name__ == '__main__':
  absltest.main()
