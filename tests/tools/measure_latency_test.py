"""Tests for tools/measure_latency (library functions and command line)."""

import csv
import json
import os
import subprocess
import sys
import tempfile

from absl.testing import absltest

from tunas_tf import files
from tunas_tf.cost_model import adaptive
from tunas_tf.cost_model import latency
from tunas_tf.cost_model import latency_csv
from tunas_tf.cost_model import random_search
from tunas_tf.tools import measure_latency
from tests.testing import latency as testing_latency

SSD = 'digits_search'  # 8x8x1 images, 10 classes: small and fast to build.
FAST = dict(protocol=latency.Protocol(repeats=2, runs=2, warmup_runs=0,
                                      max_warmup_runs=2))
COLUMNS = ['indices', 'latency_ms', 'spread_ms', 'repeats', 'remeasured',
           'load']


def _rows(path):
  with open(path, newline='') as f:
    return list(csv.reader(f))


def _env():
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')


class MeasureToCsvTest(absltest.TestCase):

  def test_measures_appends_and_resumes(self):
    output = os.path.join(tempfile.mkdtemp(), 'out', 'latency.csv')
    architectures = random_search.sample_indices(SSD, 2, seed=3)
    result = measure_latency.measure_to_csv(SSD, architectures, output, **FAST)
    self.assertEqual(result['skipped'], 0)
    self.assertIsNone(result['error'])
    self.assertGreaterEqual(result['noise'], 0.0)
    self.assertEqual([row.indices for row in result['rows']], architectures)
    rows = _rows(output)
    self.assertEqual(rows[0], COLUMNS)
    self.assertEqual([row[0] for row in rows[1:]], architectures)
    for _, median, spread, repeats, _, load in rows[1:]:
      self.assertGreater(float(median), 0.0)
      self.assertLess(float(median), 1000.0)
      self.assertGreaterEqual(float(spread), 0.0)
      self.assertGreaterEqual(int(repeats), 2)
      self.assertGreaterEqual(float(load), 0.0)
    with open(latency_csv.settings_path(output)) as f:
      settings = json.load(f)
    self.assertEqual(settings['backend'], 'tflite')
    self.assertEqual(settings['num_threads'], 1)
    self.assertEqual(settings['protocol']['repeats'], 2)
    self.assertTrue(settings['cpus'])
    self.assertLen(os.listdir(os.path.join(
        output + '.models', 'digits_search_8px_10c_1ch')), 2)

    # A killed run may leave a cut-short last line: it is dropped, and
    # everything measured is skipped (nothing is rebuilt or re-timed).
    with open(output) as f:
      complete = f.read()
    with open(output, 'a') as f:
      f.write('0:1:2:0,0.12')
    again = measure_latency.measure_to_csv(SSD, architectures, output, **FAST)
    self.assertEqual((again['rows'], again['skipped']), ([], 2))
    with open(output) as f:
      self.assertEqual(f.read(), complete)

    # A longer list measures only what is new, appended after the old rows.
    more = architectures + random_search.sample_indices(SSD, 3, seed=4)[2:]
    third = measure_latency.measure_to_csv(SSD, more, output, **FAST)
    self.assertEqual(third['skipped'], 2)
    self.assertEqual([row.indices for row in third['rows']], more[2:])
    rows = _rows(output)
    self.assertEqual([row[0] for row in rows[1:]], more)
    self.assertEqual(rows[1:3], [r.split(',') for r in
                                 complete.splitlines()[1:]])

  def test_existing_csv_with_wrong_header_or_settings_is_refused(self):
    directory = tempfile.mkdtemp()
    architectures = random_search.sample_indices(SSD, 1, seed=0)
    wrong = os.path.join(directory, 'wrong.csv')
    with open(wrong, 'w') as f:
      f.write('indices,latency\n0:0,1.0\n')
    with self.assertRaisesRegex(ValueError, "header 'indices,latency'"):
      measure_latency.measure_to_csv(SSD, architectures, wrong, **FAST)
    with open(wrong) as f:
      self.assertEqual(f.read(), 'indices,latency\n0:0,1.0\n')  # Untouched.

    other_space = os.path.join(directory, 'other.csv')
    with open(other_space, 'w') as f:
      f.write(','.join(COLUMNS) + '\n0:1:0,1.0,0.1,2,0,0.5\n')
    with self.assertRaisesRegex(ValueError, 'line 2.*expected 18 indices'):
      measure_latency.measure_to_csv(SSD, architectures, other_space, **FAST)

    # Only a header, cut before its newline: kept, rows go on the next line.
    lone_header = os.path.join(directory, 'header.csv')
    with open(lone_header, 'w') as f:
      f.write(','.join(COLUMNS))
    self.assertEqual(latency_csv.read_for_append(lone_header, SSD), [])
    with open(lone_header) as f:
      self.assertEqual(f.read(), ','.join(COLUMNS) + '\n')

    measured_with_tf = os.path.join(directory, 'tf.csv')
    with open(measured_with_tf, 'w') as f:
      f.write(','.join(COLUMNS) + '\n')
    with open(latency_csv.settings_path(measured_with_tf), 'w') as f:
      json.dump({'ssd': SSD, 'backend': 'tf'}, f)
    with self.assertRaisesRegex(ValueError, "backend='tf', not 'tflite'"):
      measure_latency.measure_to_csv(SSD, architectures, measured_with_tf,
                                     **FAST)

  def test_bad_arguments(self):
    output = os.path.join(tempfile.mkdtemp(), 'latency.csv')
    good = random_search.sample_indices(SSD, 1)
    cases = [
        (dict(ssd='nope'), 'Unknown search space'),
        (dict(backend='onnx'), "unknown backend 'onnx'"),
        (dict(protocol=latency.Protocol(runs=0)), 'runs must be an int >= 1'),
        (dict(num_threads=0), 'num_threads must be an int >= 1'),
        (dict(architectures=['0:1']), 'architecture 0: .*expected 18'),
        (dict(image_size=0), 'image_size must be a positive int'),
    ]
    for overrides, message in cases:
      kwargs = dict(ssd=SSD, architectures=good, output=output, **FAST)
      kwargs.update(overrides)
      with self.assertRaisesRegex(ValueError, message):
        measure_latency.measure_to_csv(**kwargs)
    self.assertFalse(os.path.exists(output))
    with self.assertRaisesRegex(ValueError, 'num must be a positive int'):
      random_search.sample_indices(SSD, 0)


class ReadIndicesFileTest(absltest.TestCase):

  def test_reads_json_and_text(self):
    directory = tempfile.mkdtemp()
    kept = random_search.sample_architectures(SSD, 3, seed=1)
    as_json = os.path.join(directory, 'archs.json')
    files.write_json(kept + kept[:1], as_json)
    expected = [k['indices'] for k in kept]
    self.assertEqual(measure_latency.read_indices_file(as_json, SSD),
                     expected)  # Duplicates dropped.
    as_text = os.path.join(directory, 'archs.txt')
    with open(as_text, 'w') as f:
      f.write('# measured on the laptop\n\n' + '\n'.join(expected) + '\n')
    self.assertEqual(measure_latency.read_indices_file(as_text, SSD), expected)
    single = os.path.join(directory, 'architecture.json')
    files.write_json({'indices': expected[1], 'ssd': SSD},
                                    single)
    self.assertEqual(measure_latency.read_indices_file(single, SSD),
                     expected[1:2])

  def test_bad_entries_are_named(self):
    directory = tempfile.mkdtemp()
    bad_text = os.path.join(directory, 'bad.txt')
    good = random_search.sample_indices(SSD, 1)[0]
    with open(bad_text, 'w') as f:
      f.write(good + '\n0:9\n')
    with self.assertRaisesRegex(ValueError, 'line 2: .*expected 18 indices'):
      measure_latency.read_indices_file(bad_text, SSD)
    bad_json = os.path.join(directory, 'bad.json')
    with open(bad_json, 'w') as f:
      json.dump([{'cost': 1.0}], f)
    with self.assertRaisesRegex(ValueError, 'entry 0 has no "indices"'):
      measure_latency.read_indices_file(bad_json, SSD)
    with self.assertRaisesRegex(ValueError, 'cannot read'):
      measure_latency.read_indices_file(os.path.join(directory, 'no'), SSD)


class CommandLineTest(absltest.TestCase):

  def _run(self, *args):
    return subprocess.run(
        [sys.executable, '-m', 'tunas_tf.tools.measure_latency', *args],
        capture_output=True, text=True, env=_env())

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
                     random_search.sample_indices(SSD, 1, seed=2))
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

  def test_a_fake_device_end_to_end(self):
    directory = tempfile.mkdtemp()
    script = testing_latency.fake_device_script(directory)
    first = os.path.join(directory, 'first.csv')
    result = self._device_pass(directory, first, script)
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    self.assertIn('with device command', result.stdout)
    rows = _rows(first)
    self.assertEqual([row[0] for row in rows[1:]],
                     random_search.sample_indices(SSD, 3, seed=2))
    models = os.path.join(first + '.models', 'digits_search_8px_10c_1ch')
    for row in rows[1:]:  # The fake device's figure: file size / 1e6 ms.
      size = os.path.getsize(os.path.join(models,
                                          row[0].replace(':', '-') + '.tflite'))
      self.assertAlmostEqual(float(row[1]), size / 1e6, places=6)
    with open(latency_csv.settings_path(first)) as f:
      self.assertEqual(json.load(f)['backend'], 'command')
    # A second pass compared with the first: the same figures (0.00%).
    second = os.path.join(directory, 'second.csv')
    result = self._device_pass(directory, second, script, 3,
                               f'--compare_with={first}',
                               f'--model_cache={first}.models')
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    self.assertIn('0.00% median relative difference over 3 architectures',
                  result.stdout)

  def test_most_informative_picks_what_the_rows_lack(self):
    directory = tempfile.mkdtemp()
    script = testing_latency.fake_device_script(directory)
    output = os.path.join(directory, 'latency.csv')
    self.assertEqual(self._device_pass(directory, output, script, 2)
                     .returncode, 0)
    result = self._device_pass(directory, output, script, 2,
                               '--most_informative')
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    first = random_search.sample_indices(SSD, 2, seed=2)
    picks = adaptive.most_informative(SSD, first, 2, seed=2)
    self.assertEqual([row[0] for row in _rows(output)[1:]], first + picks)

  def test_a_device_that_disappears_keeps_the_rows_measured(self):
    directory = tempfile.mkdtemp()
    # Two architectures of two rounds each, then the device is gone.
    script = testing_latency.fake_device_script(directory, fail_after=4)
    output = os.path.join(directory, 'latency.csv')
    result = self._device_pass(directory, output, script, 4)
    self.assertNotEqual(result.returncode, 0)
    last = result.stderr.strip().splitlines()[-1]
    self.assertRegex(last, r'^measure_latency: device command for .* exited '
                     r'with 1: error: no devices/emulators found; the 2 rows '
                     r'measured before it are in ')
    self.assertEqual([row[0] for row in _rows(output)[1:]],
                     random_search.sample_indices(SSD, 4, seed=2)[:2])

  def test_unparsable_output_and_bad_commands_end_in_one_line(self):
    directory = tempfile.mkdtemp()
    chatty = testing_latency.fake_device_script(directory,
                                                output='Average: {size} us')
    for n, (command, message) in enumerate((
        (chatty, 'no "Inference \\(avg\\): N" line .*last line '
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
