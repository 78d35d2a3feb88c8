"""Tests for latency/rows: one set of rules to read, the appender,
a measuring pass into the CSV and the files of indices it reads."""

import csv
import json
import os
import tempfile

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from tunas_tf.io import files
from tunas_tf.cost_model import macs
from tunas_tf.cost_model import provenance
from tunas_tf.graph import inference
from tunas_tf.latency import device as device_lib
from tunas_tf.latency import protocol as protocol_lib
from tunas_tf.latency import rows as rows_lib
from tunas_tf.search import random_search
from tunas_tf.search_space import sample

SSD = 'digits_search'  # 18 decisions.
HEADER = 'indices,latency_ms,spread_ms'  # What fit_cost_model reads.
FULL = 'indices,latency_ms,spread_ms,repeats,remeasured,load'  # Appended.
COLUMNS = FULL.split(',')
SETTINGS = {'ssd': SSD, 'image_size': 8, 'num_classes': 10,
            'input_channels': 1, 'backend': 'tflite', 'num_threads': 1,
            'cpus': [0], 'device': 'a CPU'}
PROVENANCE = provenance.Provenance(**SETTINGS)
# A measuring pass kept short (2 rounds of 2 runs, no warm-up to speak of),
# its rows finished in a fixed order (no rounds added to spread rows).
FAST = dict(protocol=protocol_lib.Protocol(repeats=2, runs=2, warmup_runs=0,
                                           max_warmup_runs=2, max_spread=1.0),
            builder=inference.builder)


def _rows(path):
  with open(path, newline='') as f:
    return list(csv.reader(f))


class ReadTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.directory = tempfile.mkdtemp()
    self.indices = sample.sample_indices(SSD, 4, seed=3)

  def _write(self, text, name='latency.csv'):
    path = os.path.join(self.directory, name)
    with open(path, 'w') as f:
      f.write(text)
    return path

  def test_reads_canonical_indices_and_latencies(self):
    rows = [f' {self.indices[0]} ,1.5,0.1', '', ' , , ',
            f'{self.indices[1]},2.5,0.2']
    path = self._write('\n'.join([HEADER] + rows) + '\n')
    indices, latencies = rows_lib.read(path, SSD)
    self.assertEqual(indices, self.indices[:2])
    np.testing.assert_array_equal(latencies, [1.5, 2.5])
    # Other columns and orders: only indices and latency_ms are needed.
    path = self._write(f'latency_ms,note,indices\n3.0,x,{self.indices[2]}\n',
                       'other.csv')
    self.assertEqual(rows_lib.read(path, SSD)[0], self.indices[2:3])

  def test_each_bad_csv_is_refused_naming_file_and_line(self):
    good = self.indices[0]
    cases = [
        ('arch,ms,spread\n', 'missing .*indices'),
        ('indices,spread_ms\n', r"missing \['latency_ms'\]"),
        (f'{HEADER}\n{good},1.0\n', 'line 2: expected 3 columns, got 2'),
        (f'{HEADER}\n{good},1.0,0\n{good}:0,1.0,0\n',
         'line 3: .*expected 18 indices'),
        (f'{HEADER}\n9:{good.split(":", 1)[1]},1.0,0\n',
         'line 2: .*out of range'),
        (f'{HEADER}\n{good},fast,0\n', "line 2: latency_ms 'fast' is not a "
                                       'number'),
        (f'{HEADER}\n{good},-1,0\n', 'line 2: .*not a positive'),
        (f'{HEADER}\n{good},nan,0\n', 'line 2: .*not a positive'),
    ]
    for i, (text, message) in enumerate(cases):
      path = self._write(text, f'bad{i}.csv')
      with self.assertRaisesRegex(ValueError, message, msg=text):
        rows_lib.read(path, SSD)
    with self.assertRaisesRegex(ValueError, 'cannot read'):
      rows_lib.read(os.path.join(self.directory, 'none.csv'), SSD)
    with self.assertRaisesRegex(ValueError, 'is empty'):
      rows_lib.read(self._write('', 'empty.csv'), SSD)
    path = self._write(f'{HEADER}\n{good},1.0,0\n', 'digits.csv')
    with self.assertRaisesRegex(ValueError, "line 2: .*expected 34 indices.*"
                                "not an architecture of 'cifar_search'"):
      rows_lib.read(path, 'cifar_search')

  def test_a_block_table_csv_has_unit_keys(self):
    key = 'u' + '0123456789abcdef'
    path = self._write(f'block,latency_ms\n{key},0.25\n', 'table.csv')
    self.assertEqual(rows_lib.read(path, SSD, rows_lib.BLOCK_COLUMNS),
                     ([key], [0.25]))
    for text, message in (
        (f'block,latency_ms\n{self.indices[0]},0.25\n',
         'line 2: .*is not a block-table key'),
        (f'{HEADER}\n{self.indices[0]},1.0,0\n', r"missing \['block'\]")):
      path = self._write(text, 'bad_table.csv')
      with self.assertRaisesRegex(ValueError, message):
        rows_lib.read(path, SSD, rows_lib.BLOCK_COLUMNS)


class AppendTest(absltest.TestCase):

  def test_appender_writes_what_read_and_read_for_append_read(self):
    path = os.path.join(tempfile.mkdtemp(), 'sub', 'latency.csv')
    self.assertEqual(rows_lib.read_for_append(path, SSD), [])
    indices = sample.sample_indices(SSD, 3, seed=1)
    with rows_lib.appender(path) as write_row:
      write_row((indices[0], 1.25, 0.5, 5, 0, 0.5))
    with rows_lib.appender(path) as write_row:
      write_row((indices[1], 2.0, 0.25, 6, 1, 1.0))
    with open(path) as f:
      self.assertEqual(f.read(), f'{FULL}\n{indices[0]},1.250000,0.500000,5,0,'
                       f'0.500000\n{indices[1]},2.000000,0.250000,6,1,'
                       '1.000000\n')
    with rows_lib.appender(path) as write_row:
      with self.assertRaisesRegex(ValueError, 'a row has 6 values'):
        write_row((indices[2], 1.0, 0.1))
    self.assertEqual(rows_lib.read_for_append(path, SSD), indices[:2])
    got, latencies = rows_lib.read(path, SSD)
    self.assertEqual(got, indices[:2])
    np.testing.assert_array_equal(latencies, [1.25, 2.0])

    # A cut-short last line is dropped from the file.
    with open(path) as f:
      complete = f.read()
    with open(path, 'a') as f:
      f.write(indices[2][:5])
    self.assertEqual(rows_lib.read_for_append(path, SSD), indices[:2])
    with open(path) as f:
      self.assertEqual(f.read(), complete)

  def test_remote_csv_is_appended_resumed_and_read(self):
    # TF's in-memory filesystem stands in for Cloud Storage.
    path = f'ram://latency_csv_test-{os.getpid()}/sub/latency.csv'
    indices = sample.sample_indices(SSD, 3, seed=1)
    self.assertEqual(rows_lib.read_for_append(path, SSD), [])
    with rows_lib.appender(path) as write_row:
      write_row((indices[0], 1.25, 0.5, 5, 0, 0.5))
    with rows_lib.appender(path) as write_row:
      write_row((indices[1], 2.0, 0.25, 6, 1, 1.0))
    complete = (f'{FULL}\n{indices[0]},1.250000,0.500000,5,0,0.500000\n'
                f'{indices[1]},2.000000,0.250000,6,1,1.000000\n')
    with tf.io.gfile.GFile(path, 'a') as f:  # A run killed mid-row.
      f.write(indices[2][:5])
    self.assertEqual(rows_lib.read_for_append(path, SSD), indices[:2])
    with tf.io.gfile.GFile(path) as f:
      self.assertEqual(f.read(), complete)
    self.assertEqual(rows_lib.read(path, SSD)[0], indices[:2])
    with tf.io.gfile.GFile(rows_lib.settings_path(path), 'w') as f:
      f.write(json.dumps(dict(SETTINGS, backend='tf')))
    with self.assertRaisesRegex(ValueError, "backend='tf', not 'tflite'"):
      rows_lib.check_provenance(path, PROVENANCE)

  def test_read_for_append_needs_the_exact_header(self):
    directory = tempfile.mkdtemp()
    wrong = os.path.join(directory, 'wrong.csv')
    with open(wrong, 'w') as f:
      f.write('indices,latency\n0:0,1.0\n')
    with self.assertRaisesRegex(ValueError, "header 'indices,latency'"):
      rows_lib.read_for_append(wrong, SSD)
    with open(wrong) as f:
      self.assertEqual(f.read(), 'indices,latency\n0:0,1.0\n')  # Untouched.
    older = os.path.join(directory, 'older.csv')  # Read, not appended to.
    with open(older, 'w') as f:
      f.write(HEADER + '\n')
    with self.assertRaisesRegex(ValueError, 'fit_cost_model still reads it'):
      rows_lib.read_for_append(older, SSD)
    lone_header = os.path.join(directory, 'header.csv')
    with open(lone_header, 'w') as f:
      f.write(FULL)
    self.assertEqual(rows_lib.read_for_append(lone_header, SSD), [])
    with open(lone_header) as f:
      self.assertEqual(f.read(), FULL + '\n')

  def test_provenance_is_read_and_checked(self):
    path = os.path.join(tempfile.mkdtemp(), 'latency.csv')
    with open(path, 'w') as f:
      f.write(HEADER + '\n')
    self.assertEqual(rows_lib.settings_path(path), path + '.settings.json')
    with self.assertRaisesRegex(ValueError, 'latency.csv has no '
                                'latency.csv.settings.json beside it'):
      rows_lib.read_provenance(path)
    # The settings file's notes are not provenance; its keys are.
    files.write_json(dict(SETTINGS, protocol={'repeats': 5}), path +
                     '.settings.json')
    self.assertEqual(rows_lib.read_provenance(path), PROVENANCE)
    rows_lib.check_provenance(path, PROVENANCE)
    for change, message in ((dict(cpus=[1]), r'cpus=\(0,\), not \(1,\)'),
                            (dict(image_size=16), 'image_size=8, not 16')):
      with self.assertRaisesRegex(ValueError, message + ' .*choose another '
                                  '--output'):
        rows_lib.check_provenance(path, provenance.Provenance(
            **dict(SETTINGS, **change)))
    with open(path + '.settings.json', 'w') as f:
      f.write('{"ssd": ')
    with self.assertRaisesRegex(ValueError, 'cannot read .*settings.json'):
      rows_lib.read_provenance(path)


class MeasureToCsvTest(absltest.TestCase):

  def test_measures_appends_and_resumes(self):
    output = os.path.join(tempfile.mkdtemp(), 'out', 'latency.csv')
    architectures = sample.sample_indices(SSD, 2, seed=3)
    result = rows_lib.measure_to_csv(SSD, architectures, output, **FAST)
    self.assertEqual(result['skipped'], 0)
    self.assertIsNone(result['error'])
    self.assertGreaterEqual(result['noise'], 0.0)
    # Each row comes when its rounds are done: the second round visits the
    # second architecture first.
    finished = architectures[::-1]
    self.assertEqual([row.indices for row in result['rows']], finished)
    rows = _rows(output)
    self.assertEqual(rows[0], COLUMNS)
    self.assertEqual([row[0] for row in rows[1:]], finished)
    for _, median, spread, repeats, _, load in rows[1:]:
      self.assertGreater(float(median), 0.0)
      self.assertLess(float(median), 1000.0)
      self.assertGreaterEqual(float(spread), 0.0)
      self.assertGreaterEqual(int(repeats), 2)
      self.assertGreaterEqual(float(load), 0.0)
    self.assertGreaterEqual(result['visits'], 4)  # 2 rounds each, or more.
    with open(rows_lib.settings_path(output)) as f:
      settings = json.load(f)
    self.assertEqual(settings['backend'], 'tflite')
    self.assertEqual(settings['num_threads'], 1)
    self.assertEqual(settings['protocol']['repeats'], 2)
    measured = rows_lib.read_provenance(output)
    self.assertEqual((measured.ssd, measured.shape, measured.precision),
                     (SSD, macs.resolve_input(SSD), 'float32'))
    self.assertTrue(settings['cpus'])
    self.assertLen(os.listdir(os.path.join(
        output + '.models', 'digits_search_8px_10c_1ch')), 2)

    # A killed run may leave a cut-short last line: it is dropped, and
    # everything measured is skipped (nothing is rebuilt or re-timed).
    with open(output) as f:
      complete = f.read()
    with open(output, 'a') as f:
      f.write('0:1:2:0,0.12')
    again = rows_lib.measure_to_csv(SSD, architectures, output, **FAST)
    self.assertEqual((again['rows'], again['skipped']), ([], 2))
    with open(output) as f:
      self.assertEqual(f.read(), complete)

    # A longer list measures only what is new, appended after the old rows.
    more = architectures + sample.sample_indices(SSD, 3, seed=4)[2:]
    third = rows_lib.measure_to_csv(SSD, more, output, **FAST)
    self.assertEqual(third['skipped'], 2)
    self.assertEqual([row.indices for row in third['rows']], more[2:])
    rows = _rows(output)
    self.assertEqual([row[0] for row in rows[1:]], finished + more[2:])
    self.assertEqual(rows[1:3], [r.split(',') for r in
                                 complete.splitlines()[1:]])

  def test_a_reference_is_calibrated_recorded_and_shared(self):
    directory = tempfile.mkdtemp()
    output = os.path.join(directory, 'latency.csv')
    architectures = sample.sample_indices(SSD, 2, seed=3)
    reference = rows_lib.reference_architecture(SSD)
    rows_lib.measure_to_csv(SSD, architectures[:1], output,
                            reference=reference, **FAST)
    measured = rows_lib.read_provenance(output)
    self.assertEqual(measured.reference, reference)
    self.assertGreater(measured.reference_ms, 0.0)
    # Resumed: the recorded scale, not a new calibration.
    rows_lib.measure_to_csv(SSD, architectures, output, reference=reference,
                            **FAST)
    self.assertEqual(rows_lib.read_provenance(output), measured)
    self.assertLen(_rows(output), 3)
    # The block table's units against the same network and scale.
    table = os.path.join(directory, 'table.csv')
    rows_lib.measure_to_csv(
        SSD, architectures[:1], table, reference=reference,
        reference_ms=measured.reference_ms,
        unit_builder=inference.unit_builder, **FAST)
    self.assertIsNone(rows_lib.read_provenance(table).difference(measured))
    # Another scale, or none, is not added to these rows.
    for more, message in ((dict(reference=reference, reference_ms=1e3),
                           'reference_ms=.*, not 1000.0'),
                          ({}, 'reference=.*, not None')):
      with self.assertRaisesRegex(ValueError, message):
        rows_lib.measure_to_csv(SSD, architectures + [reference], output,
                                **more, **FAST)
    with self.assertRaisesRegex(ValueError, 'the reference: .*expected 18'):
      rows_lib.measure_to_csv(SSD, architectures, output, reference='0:1',
                              **FAST)

  def test_existing_csv_with_wrong_header_or_settings_is_refused(self):
    directory = tempfile.mkdtemp()
    architectures = sample.sample_indices(SSD, 1, seed=0)
    wrong = os.path.join(directory, 'wrong.csv')
    with open(wrong, 'w') as f:
      f.write('indices,latency\n0:0,1.0\n')
    with self.assertRaisesRegex(ValueError, "header 'indices,latency'"):
      rows_lib.measure_to_csv(SSD, architectures, wrong, **FAST)
    with open(wrong) as f:
      self.assertEqual(f.read(), 'indices,latency\n0:0,1.0\n')  # Untouched.

    other_space = os.path.join(directory, 'other.csv')
    with open(other_space, 'w') as f:
      f.write(','.join(COLUMNS) + '\n0:1:0,1.0,0.1,2,0,0.5\n')
    with self.assertRaisesRegex(ValueError, 'line 2.*expected 18 indices'):
      rows_lib.measure_to_csv(SSD, architectures, other_space, **FAST)

    measured_with_tf = os.path.join(directory, 'tf.csv')
    row = sample.sample_indices(SSD, 1, seed=1)[0] + ',1.0,0.1,2,0,0.5\n'
    with open(measured_with_tf, 'w') as f:
      f.write(','.join(COLUMNS) + '\n' + row)
    with self.assertRaisesRegex(ValueError, 'has no tf.csv.settings.json'):
      rows_lib.measure_to_csv(SSD, architectures, measured_with_tf, **FAST)
    files.write_json(dict(SETTINGS, backend='tf'),
                     rows_lib.settings_path(measured_with_tf))
    with self.assertRaisesRegex(ValueError, "backend='tf', not 'tflite'"):
      rows_lib.measure_to_csv(SSD, architectures, measured_with_tf, **FAST)
    # int8 rows appended to float32 ones, and back, on this host.
    for recorded, asked in (('float32', 'int8'), ('int8', 'float32')):
      files.write_json(dict(SETTINGS, **device_lib.host_settings(
          'tflite', 1, recorded)), rows_lib.settings_path(measured_with_tf))
      with self.assertRaisesRegex(ValueError, f"precision='{recorded}', not "
                                  f"'{asked}'"):
        rows_lib.measure_to_csv(SSD, architectures, measured_with_tf,
                                precision=asked, **FAST)
    with open(measured_with_tf) as f:
      self.assertEqual(f.read(), ','.join(COLUMNS) + '\n' + row)

  def test_bad_arguments(self):
    output = os.path.join(tempfile.mkdtemp(), 'latency.csv')
    good = sample.sample_indices(SSD, 1)
    cases = [
        (dict(ssd='nope'), 'Unknown search space'),
        (dict(backend='onnx'), "Unknown backend 'onnx'"),
        (dict(protocol=protocol_lib.Protocol(runs=0)),
         'runs must be an integer >= 1'),
        (dict(num_threads=0), 'num_threads must be an integer >= 1'),
        (dict(architectures=['0:1']), 'architecture 0: .*expected 18'),
        (dict(image_size=0), 'image_size must be a positive int'),
    ]
    for overrides, message in cases:
      kwargs = dict(ssd=SSD, architectures=good, output=output, **FAST)
      kwargs.update(overrides)
      with self.assertRaisesRegex(ValueError, message):
        rows_lib.measure_to_csv(**kwargs)
    self.assertFalse(os.path.exists(output))
    with self.assertRaisesRegex(ValueError, 'num must be a positive int'):
      sample.sample_indices(SSD, 0)


class SecondsLeftTest(absltest.TestCase):

  def test_from_the_rows_own_seconds_and_the_pass_overhead(self):
    rows = [protocol_lib.Row(str(i), 1.0, 0.0, 2, 0, 0.0, (), seconds)
            for i, seconds in enumerate((2.0, 4.0))]
    # 10 architectures at 3 s each; 20 s spent on architectures (the two
    # rows and others under way) in 25 s: 25% more besides them.
    self.assertEqual(rows_lib.seconds_left(rows, 10, 25.0, 20.0),
                     3.0 * 10 * 1.25 - 25.0)
    self.assertEqual(rows_lib.seconds_left(rows, 10, 50.0, 40.0), 0.0)


class ReadIndicesFileTest(absltest.TestCase):

  def test_reads_json_and_text(self):
    directory = tempfile.mkdtemp()
    kept = random_search.sample_architectures(SSD, 3, seed=1)
    as_json = os.path.join(directory, 'archs.json')
    files.write_json(kept + kept[:1], as_json)
    expected = [k['indices'] for k in kept]
    self.assertEqual(rows_lib.read_indices_file(as_json, SSD),
                     expected)  # Duplicates dropped.
    as_text = os.path.join(directory, 'archs.txt')
    with open(as_text, 'w') as f:
      f.write('# measured on the laptop\n\n' + '\n'.join(expected) + '\n')
    self.assertEqual(rows_lib.read_indices_file(as_text, SSD), expected)
    single = os.path.join(directory, 'architecture.json')
    files.write_json({'indices': expected[1], 'ssd': SSD}, single)
    self.assertEqual(rows_lib.read_indices_file(single, SSD),
                     expected[1:2])

  def test_bad_entries_are_named(self):
    directory = tempfile.mkdtemp()
    bad_text = os.path.join(directory, 'bad.txt')
    good = sample.sample_indices(SSD, 1)[0]
    with open(bad_text, 'w') as f:
      f.write(good + '\n0:9\n')
    with self.assertRaisesRegex(ValueError, 'line 2: .*expected 18 indices'):
      rows_lib.read_indices_file(bad_text, SSD)
    bad_json = os.path.join(directory, 'bad.json')
    with open(bad_json, 'w') as f:
      json.dump([{'cost': 1.0}], f)
    with self.assertRaisesRegex(ValueError, 'entry 0 has no "indices"'):
      rows_lib.read_indices_file(bad_json, SSD)
    with self.assertRaisesRegex(ValueError, 'cannot read'):
      rows_lib.read_indices_file(os.path.join(directory, 'no'), SSD)


if __name__ == '__main__':
  absltest.main()
