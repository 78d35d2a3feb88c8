"""Tests for tools/measure_latency (library functions and command line)."""

import csv
import json
import os
import subprocess
import sys
import tempfile
from unittest import mock

from absl.testing import absltest
import numpy as np
import pytest

from tunas_tf import files
from tunas_tf.cost_model import latency_csv
from tunas_tf.cost_model import random_search
from tunas_tf.tools import measure_latency

SSD = 'digits_search'  # 8x8x1 images, 10 classes: small and fast to build.
FAST = dict(warmup_runs=1, runs=3)


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
    self.assertEqual([row[0] for row in result['rows']], architectures)
    rows = _rows(output)
    self.assertEqual(rows[0], ['indices', 'latency_ms', 'spread_ms'])
    self.assertEqual([row[0] for row in rows[1:]], architectures)
    for _, latency, spread in rows[1:]:
      self.assertGreater(float(latency), 0.0)
      self.assertLess(float(latency), 1000.0)
      self.assertGreaterEqual(float(spread), 0.0)
    with open(latency_csv.settings_path(output)) as f:
      self.assertEqual(json.load(f)['backend'], 'tflite')

    # A killed run may leave a cut-short last line: it is dropped, and
    # everything measured is skipped (nothing is rebuilt or re-timed).
    with open(output) as f:
      complete = f.read()
    with open(output, 'a') as f:
      f.write('0:1:2:0,0.12')
    again = measure_latency.measure_to_csv(SSD, architectures, output, **FAST)
    self.assertEqual(again, {'rows': [], 'skipped': 2})
    with open(output) as f:
      self.assertEqual(f.read(), complete)

    # A longer list measures only what is new, appended after the old rows.
    more = architectures + random_search.sample_indices(SSD, 3, seed=4)[2:]
    third = measure_latency.measure_to_csv(SSD, more, output, **FAST)
    self.assertEqual(third['skipped'], 2)
    self.assertEqual([row[0] for row in third['rows']], more[2:])
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
      f.write('indices,latency_ms,spread_ms\n0:1:0,1.0,0.1\n')
    with self.assertRaisesRegex(ValueError, 'line 2.*expected 18 indices'):
      measure_latency.measure_to_csv(SSD, architectures, other_space, **FAST)

    # Only a header, cut before its newline: kept, rows go on the next line.
    lone_header = os.path.join(directory, 'header.csv')
    with open(lone_header, 'w') as f:
      f.write('indices,latency_ms,spread_ms')
    self.assertEqual(latency_csv.read_for_append(lone_header, SSD), [])
    with open(lone_header) as f:
      self.assertEqual(f.read(), 'indices,latency_ms,spread_ms\n')

    measured_with_tf = os.path.join(directory, 'tf.csv')
    with open(measured_with_tf, 'w') as f:
      f.write('indices,latency_ms,spread_ms\n')
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
        (dict(runs=0), 'runs must be an int >= 1'),
        (dict(warmup_runs=-1), 'warmup_runs must be an int >= 0'),
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


class BuildAndTimeTest(absltest.TestCase):

  @pytest.mark.numerics
  def test_tflite_and_tf_compute_the_same_network(self):
    indices = random_search.sample_indices(SSD, 1, seed=5)[0]
    tflite = measure_latency.build_runner(SSD, indices, 'tflite')
    tf_run = measure_latency.build_runner(SSD, indices, 'tf')
    tflite_logits, tf_logits = tflite(), tf_run()
    self.assertEqual(tflite_logits.shape, (1, 10))
    self.assertGreater(np.abs(tf_logits).max(), 0.0)
    # One image, inference-mode batch norm; TFLite's kernels sum in their
    # own order: measured 3.4e-8 (oneDNN's and Eigen's kernels for TF).
    np.testing.assert_allclose(tflite_logits, tf_logits, atol=1e-4)
    median, spread = measure_latency.time_runs(tf_run, warmup_runs=1, runs=3)
    self.assertGreater(median, 0.0)
    self.assertGreaterEqual(spread, 0.0)

  def test_time_runs_reports_median_and_interquartile_range(self):
    delays = iter([0.0] * 2 + [0.001, 0.002, 0.003, 0.004, 0.020])
    fake_clock = [0.0]

    def run():
      fake_clock[0] += next(delays)

    with mock.patch.object(measure_latency.time, 'perf_counter',
                           lambda: fake_clock[0]):
      median, spread = measure_latency.time_runs(run, warmup_runs=2, runs=5)
    self.assertAlmostEqual(median, 3.0)   # ms
    self.assertAlmostEqual(spread, 2.0)   # 4 ms - 2 ms


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
    result = self._run(f'--ssd={SSD}', '--num=1', '--seed=2',
                       '--warmup_runs=1', '--runs=3', f'--output={output}')
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    rows = _rows(output)
    self.assertEqual(rows[0], ['indices', 'latency_ms', 'spread_ms'])
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


if __name__ == '__main__':
  absltest.main()
