"""Tests for latency/device: converted models, benchmark_model's output,
device commands."""

import dataclasses
import os
import tempfile
from unittest import mock

from absl.testing import absltest
import numpy as np

from tunas_tf.io import lite
from tunas_tf.cost_model import block_table
from tunas_tf.cost_model import macs
from tunas_tf.cost_model import provenance
from tunas_tf.graph import inference
from tunas_tf.latency import device as device_lib
from tunas_tf.latency import protocol as protocol_lib
from tunas_tf.search_space import sample
from tests.testing import latency as testing_latency

SSD = 'digits_search'  # 8x8x1 images, 10 classes: small and fast to build.
SHAPE = macs.resolve_input(SSD)
BUILD = inference.builder(SSD, SHAPE)


class ParseTest(absltest.TestCase):

  def test_parse_benchmark_output(self):
    text = ('STARTING!\nInference timings in us: Init: 3518, First inference:'
            ' 1541, Warmup (avg): 1063.5, Inference (avg): 1041.23\n')
    self.assertAlmostEqual(device_lib.parse_benchmark_output(text), 1.04123)
    with self.assertRaisesRegex(device_lib.DeviceError, 'no "Inference '
                                '\\(avg\\): N" line'):
      device_lib.parse_benchmark_output('STARTING!\noops\n')
    with self.assertRaisesRegex(device_lib.DeviceError, 'not a positive'):
      device_lib.parse_benchmark_output('Inference (avg): 0')


class ModelsAndDevicesTest(absltest.TestCase):

  def test_models_are_converted_once(self):
    cache = device_lib.ModelCache(tempfile.mkdtemp(), SSD, SHAPE, BUILD)
    indices = sample.sample_indices(SSD, 1, seed=5)[0]
    with mock.patch.object(device_lib, 'convert',
                           wraps=device_lib.convert) as convert:
      path = cache.get(indices)
      self.assertEqual(cache.get(indices), path)
    self.assertEqual(convert.call_count, 1)
    self.assertIn('digits_search_8px_10c_1ch', path)
    with open(path, 'rb') as f:
      self.assertEqual(f.read(8)[4:], b'TFL3')

  def test_int8_models_are_integer_throughout_and_cached_apart(self):
    directory = tempfile.mkdtemp()
    indices = sample.sample_indices(SSD, 1, seed=5)[0]
    units = block_table.units_of(SSD, SHAPE, [indices])
    key = list(units)[1]  # A body unit: inside a network, int8 on both sides.
    for build, name in ((BUILD, indices), (inference.unit_builder(units), key)):
      cache = device_lib.ModelCache(directory, SSD, SHAPE, build, lite.INT8)
      path = cache.get(name)
      self.assertIn('digits_search_8px_10c_1ch_int8', path)
      self.assertNotEqual(path, device_lib.ModelCache(
          directory, SSD, SHAPE, build).path(name))
      with open(path, 'rb') as f:
        interpreter = lite.interpreter(f.read())
      for details in (interpreter.get_input_details()[0],
                      interpreter.get_output_details()[0]):
        self.assertEqual(details['dtype'], np.int8, name)
      self.assertEqual(device_lib.tflite_runner(path)().dtype, np.int8)

  def test_a_failing_conversion_names_the_architecture(self):
    cache = device_lib.ModelCache(tempfile.mkdtemp(), SSD, SHAPE, BUILD,
                                  lite.INT8)
    indices = sample.sample_indices(SSD, 1, seed=5)[0]
    with mock.patch.object(lite, 'convert', side_effect=ValueError(
        'the int8 TFLite conversion left ops in float32 (no int8 kernel): '
        'CUMSUM')), self.assertRaisesRegex(
            ValueError, f'^converting {indices}: the int8 TFLite conversion '
            'left ops in float32'):
      cache.get(indices)
    self.assertFalse(os.path.exists(cache.path(indices)))

  def test_precisions_a_device_refuses(self):
    directory = tempfile.mkdtemp()
    protocol = protocol_lib.Protocol()
    with self.assertRaisesRegex(ValueError, "Unknown precision 'int4'"):
      device_lib.make_device(SSD, SHAPE, protocol, BUILD,
                             model_cache=directory, precision='int4')
    with self.assertRaisesRegex(ValueError, "^backend 'tf' runs float32 "
                                'only; int8 is timed as TFLite'):
      device_lib.make_device(SSD, SHAPE, protocol, BUILD, backend='tf',
                             precision=lite.INT8)

  def test_measure_one_times_in_the_models_precision(self):
    directory = tempfile.mkdtemp()
    script = testing_latency.fake_device_script(directory)
    indices = sample.sample_indices(SSD, 1, seed=5)[0]
    measured_with = provenance.Provenance(
        ssd=SSD, **dataclasses.asdict(SHAPE), backend='command',
        device='the fake device', device_command=f'{script} {{model}}',
        precision=lite.INT8)
    row = device_lib.measure_one(SSD, indices, measured_with, directory,
                                 inference.builder,
                                 protocol_lib.Protocol(repeats=2))
    # The fake device's latency: the int8 model's size / 1000 us.
    path = device_lib.ModelCache(directory, SSD, SHAPE,
                                 precision=lite.INT8).path(indices)
    self.assertAlmostEqual(row.latency_ms, os.path.getsize(path) / 1e6,
                           places=9)
    # Rows timed against a reference: the ratio to it times its scale
    # (a scale of twice the reference's own time doubles the figure).
    reference = sample.sample_indices(SSD, 1, seed=1)[0]
    scaled = device_lib.measure_one(
        SSD, indices, dataclasses.replace(
            measured_with, reference=reference,
            reference_ms=2 * os.path.getsize(device_lib.ModelCache(
                directory, SSD, SHAPE, BUILD, lite.INT8).get(reference))
            / 1e6), directory, inference.builder,
        protocol_lib.Protocol(repeats=2))
    self.assertAlmostEqual(scaled.latency_ms, 2 * row.latency_ms, places=9)

  def test_command_device_reads_benchmark_model(self):
    directory = tempfile.mkdtemp()
    script = testing_latency.fake_device_script(directory)
    indices = sample.sample_indices(SSD, 2, seed=5)
    device = device_lib.make_device(SSD, SHAPE, protocol_lib.Protocol(), BUILD,
                                    model_cache=directory,
                                    device_command=f'{script} {{model}}')
    self.assertEqual(device.backend, 'command')
    self.assertIn(script, device.settings['device_command'])
    rows = list(protocol_lib.measure(device, indices,
                                     protocol_lib.Protocol(repeats=2)))
    cache = device_lib.ModelCache(directory, SSD, SHAPE, BUILD)
    for row in rows:  # The fake device's latency: file size / 1000 us.
      size = os.path.getsize(cache.path(row.indices))
      self.assertAlmostEqual(row.latency_ms, size / 1e6, places=9)
      self.assertEqual(row.repeats, 2)

  def test_bad_commands_are_named(self):
    directory = tempfile.mkdtemp()
    indices = sample.sample_indices(SSD, 1, seed=5)
    protocol = protocol_lib.Protocol(repeats=2)
    for command, message in (
        ('adb push model.tflite', 'has no {model}'),
        ("sh -c 'unclosed {model}", 'does not parse'),
    ):
      with self.assertRaisesRegex(ValueError, message):
        device_lib.make_device(SSD, SHAPE, protocol, BUILD,
                               model_cache=directory, device_command=command)
    for command, message in (
        ('/no/such/benchmark {model}', "'/no/such/benchmark' not found"),
        ('echo {model}', 'no "Inference \\(avg\\): N" line .*: stderr '
         "'\\(none\\)', stdout '/.*\\.tflite'$"),
        ('false {model}', "exited with 1: stderr '\\(none\\)', stdout "
         "'\\(none\\)'$"),
        # adb's way: a banner on stdout, what went wrong on stderr.
        ('sh -c \'echo STARTING!; printf "a\\nb\\nc\\nadb: device offline'
         '\\n" >&2; exit 1\' {model}', "exited with 1: stderr 'b \\| c \\| "
         "adb: device offline', stdout 'STARTING!'$"),
        ("sh -c 'echo STARTING!; exec sleep 10' {model}", 'no answer within '
         "0.5 s \\(device gone\\?\\): stderr '\\(none\\)', stdout "
         "'STARTING!'$"),
    ):
      device = device_lib.make_device(SSD, SHAPE, protocol, BUILD,
                                      model_cache=directory,
                                      device_command=command,
                                      command_timeout=0.5)
      with self.assertRaisesRegex(device_lib.DeviceError, message):
        list(protocol_lib.measure(device, indices, protocol))


if __name__ == '__main__':
  absltest.main()
