"""Tests for cost_model/latency: the timing protocol, models, device commands.

The protocol runs on fake devices whose latencies and disturbances are
scripted, so nothing here depends on this machine's timing.
"""

import os
import tempfile
from unittest import mock

from absl.testing import absltest

from tunas_tf.cost_model import latency
from tunas_tf.cost_model import macs
from tunas_tf.graph import inference
from tunas_tf.search_space import sample
from tests.testing import latency as testing_latency

SSD = 'digits_search'  # 8x8x1 images, 10 classes: small and fast to build.
SHAPE = macs.resolve_input(SSD)
BUILD = inference.builder(SSD, SHAPE)


class _Scripted:
  """A fake device: each architecture's visits return scripted
  (ms, disturbance) pairs in turn; `log` records the visits' order."""

  def __init__(self, script):
    self.script = {k: list(v) for k, v in script.items()}
    self.log = []

  def device(self):
    def open_one(indices):
      def visit(first):
        self.log.append((indices, first))
        return self.script[indices].pop(0)
      return visit
    return latency.Device('fake', {}, open_one)


class ProtocolTest(absltest.TestCase):

  def test_rounds_are_interleaved_and_rows_are_medians(self):
    fake = _Scripted({'a': [(1.0, 0), (1.2, 0), (1.1, 0)],
                      'b': [(2.0, 0), (2.0, 0), (2.2, 0)],
                      'c': [(5.0, 0), (5.0, 0), (5.0, 0)]})
    protocol = latency.Protocol(repeats=3, interleave=2, max_spread=1.0)
    rows = list(latency.measure(fake.device(), ['a', 'b', 'c'], protocol))
    # Chunks of two, each round visits both (rotated), the first visit warms.
    self.assertEqual(fake.log, [('a', True), ('b', True), ('b', False),
                                ('a', False), ('a', False), ('b', False),
                                ('c', True), ('c', False), ('c', False)])
    self.assertEqual([r.indices for r in rows], ['a', 'b', 'c'])
    self.assertAlmostEqual(rows[0].latency_ms, 1.1)
    self.assertAlmostEqual(rows[0].spread_ms, 0.1)  # 1.15 - 1.05
    self.assertEqual(rows[0].rounds, (1.0, 1.2, 1.1))
    self.assertEqual([r.repeats for r in rows], [3, 3, 3])
    self.assertEqual([r.remeasured for r in rows], [0, 0, 0])

  def test_disturbed_visits_and_spread_rows_are_measured_again(self):
    # 'a': its second visit lost 30% of its time: dropped and redone.
    # 'b': rounds 1, 3, 1 spread out (IQR 1 > 5% of 1): rounds are added
    # until the spread is small.
    fake = _Scripted({'a': [(1.0, 0.0), (9.0, 0.3), (1.0, 0.01), (1.0, 0.0)],
                      'b': [(1.0, 0), (3.0, 0), (1.0, 0), (1.0, 0),
                            (1.0, 0), (1.0, 0)]})
    protocol = latency.Protocol(repeats=3, interleave=2, max_retries=3)
    a, b = latency.measure(fake.device(), ['a', 'b'], protocol)
    self.assertEqual(a.rounds, (1.0, 1.0, 1.0))
    self.assertEqual(a.remeasured, 1)
    self.assertEqual(b.rounds, (1.0, 3.0, 1.0, 1.0, 1.0))
    self.assertEqual(b.remeasured, 2)
    self.assertEqual(b.latency_ms, 1.0)

  def test_retries_are_bounded(self):
    fake = _Scripted({'a': [(float(i), 0.5) for i in range(1, 20)]})
    protocol = latency.Protocol(repeats=2, max_retries=2)
    (row,) = latency.measure(fake.device(), ['a'], protocol)
    self.assertEqual(row.remeasured, 2)  # Then kept as measured.
    self.assertEqual(row.repeats, 2)
    self.assertLen(fake.log, 4)

  def test_noise_figures(self):
    self.assertAlmostEqual(latency.halves_difference([1.0, 1.1, 1.0, 1.1]),
                           0.1 / 1.05)
    rows = [latency.Row('a', 1, 0, 4, 0, 0, (1.0, 1.1, 1.0, 1.1)),
            latency.Row('b', 1, 0, 2, 0, 0, (2.0, 2.0)),
            latency.Row('c', 1, 0, 2, 0, 0, (1.0, 3.0))]
    self.assertAlmostEqual(latency.pass_noise(rows), 0.1 / 1.05)
    self.assertIsNone(latency.pass_noise([]))
    difference, count = latency.passes_difference(
        {'a': 1.0, 'b': 2.0, 'c': 4.0, 'x': 9.0},
        {'a': 1.1, 'b': 2.0, 'c': 4.0, 'y': 1.0})
    self.assertEqual(count, 3)
    self.assertAlmostEqual(difference, 0.0)  # Median of 0.095, 0, 0.
    with self.assertRaisesRegex(ValueError, 'share no architecture'):
      latency.passes_difference({'a': 1.0}, {'b': 1.0})

  def test_bad_protocol(self):
    for protocol, message in (
        (latency.Protocol(repeats=1), 'repeats must be an int >= 2'),
        (latency.Protocol(runs=0), 'runs must be an int >= 1'),
        (latency.Protocol(max_disturbance=0.0), r'max_disturbance must be '
         r'in \(0, 1\]')):
      with self.assertRaisesRegex(ValueError, message):
        list(latency.measure(_Scripted({}).device(), ['a'], protocol))


class TimingTest(absltest.TestCase):

  def test_time_runs_reports_median_iqr_and_disturbance(self):
    delays = iter([0.001, 0.002, 0.003, 0.004, 0.020])
    wall, cpu = [0.0], [0.0]

    def run():
      step = next(delays)
      wall[0] += step
      cpu[0] += step / 2  # Half of the time went to someone else.

    with mock.patch.object(latency.time, 'perf_counter', lambda: wall[0]):
      median, spread, disturbance = latency.time_runs(run, runs=5,
                                                      clock=lambda: cpu[0])
    self.assertTrue(latency.gc.isenabled())  # Off only while timing.
    self.assertAlmostEqual(median, 3.0)   # ms
    self.assertAlmostEqual(spread, 2.0)   # 4 ms - 2 ms
    self.assertAlmostEqual(disturbance, 0.5)

  def test_warm_up_stops_when_stable(self):
    delays = iter([0.010] * 3 + [0.005] * 3 + [0.005] * 3 + [1.0] * 30)
    clock = [0.0]

    def run():
      clock[0] += next(delays)

    with mock.patch.object(latency.time, 'perf_counter', lambda: clock[0]):
      self.assertEqual(latency.warm_up(run, 3, 30, 0.02), 9)
      self.assertEqual(latency.warm_up(run, 3, 4, 0.02), 4)  # Capped.

  def test_parse_benchmark_output(self):
    text = ('STARTING!\nInference timings in us: Init: 3518, First inference:'
            ' 1541, Warmup (avg): 1063.5, Inference (avg): 1041.23\n')
    self.assertAlmostEqual(latency.parse_benchmark_output(text), 1.04123)
    with self.assertRaisesRegex(latency.DeviceError, "no \"Inference "
                                "\\(avg\\): N\" line.*last line 'oops'"):
      latency.parse_benchmark_output('STARTING!\noops\n')
    with self.assertRaisesRegex(latency.DeviceError, 'not a positive'):
      latency.parse_benchmark_output('Inference (avg): 0')


class ModelsAndDevicesTest(absltest.TestCase):

  def test_models_are_converted_once(self):
    cache = latency.ModelCache(tempfile.mkdtemp(), SSD, SHAPE, BUILD)
    indices = sample.sample_indices(SSD, 1, seed=5)[0]
    with mock.patch.object(latency, 'convert',
                           wraps=latency.convert) as convert:
      path = cache.get(indices)
      self.assertEqual(cache.get(indices), path)
    self.assertEqual(convert.call_count, 1)
    self.assertIn('digits_search_8px_10c_1ch', path)
    with open(path, 'rb') as f:
      self.assertEqual(f.read(8)[4:], b'TFL3')

  def test_command_device_reads_benchmark_model(self):
    directory = tempfile.mkdtemp()
    script = testing_latency.fake_device_script(directory)
    indices = sample.sample_indices(SSD, 2, seed=5)
    device = latency.make_device(SSD, SHAPE, latency.Protocol(), BUILD,
                                 model_cache=directory,
                                 device_command=f'{script} {{model}}')
    self.assertEqual(device.backend, 'command')
    self.assertIn(script, device.settings['device_command'])
    rows = list(latency.measure(device, indices, latency.Protocol(repeats=2)))
    cache = latency.ModelCache(directory, SSD, SHAPE, BUILD)
    for row in rows:  # The fake device's latency: file size / 1000 us.
      size = os.path.getsize(cache.path(row.indices))
      self.assertAlmostEqual(row.latency_ms, size / 1e6, places=9)
      self.assertEqual(row.repeats, 2)

  def test_bad_commands_are_named(self):
    directory = tempfile.mkdtemp()
    indices = sample.sample_indices(SSD, 1, seed=5)
    protocol = latency.Protocol(repeats=2)
    for command, message in (
        ('adb push model.tflite', 'has no {model}'),
        ("sh -c 'unclosed {model}", 'does not parse'),
    ):
      with self.assertRaisesRegex(ValueError, message):
        latency.make_device(SSD, SHAPE, protocol, BUILD,
                            model_cache=directory, device_command=command)
    for command, message in (
        ('/no/such/benchmark {model}', "'/no/such/benchmark' not found"),
        ('echo {model}', 'no "Inference \\(avg\\): N" line'),
        ('false {model}', 'exited with 1: \\(no output\\)'),
        ("sh -c 'sleep 10' {model}", 'no answer within 0.5 s \\(device '
         'gone\\?\\)'),
    ):
      device = latency.make_device(SSD, SHAPE, protocol, BUILD,
                                   model_cache=directory,
                                   device_command=command,
                                   command_timeout=0.5)
      with self.assertRaisesRegex(latency.DeviceError, message):
        list(latency.measure(device, indices, protocol))


if __name__ == '__main__':
  absltest.main()
