"""Tests for tools/extract_architecture --measure_latency (closing the loop).

A search with a fitted latency model of a fake device, then the searched
architecture measured on that device and held against the prediction and
the target. The fake device's latency is its model file's size / 1e6 ms,
so the printed figure is checked exactly.
"""

import os
import re
import subprocess
import sys
import tempfile

from absl.testing import absltest

from tunas_tf import architecture
from tunas_tf import files
from tunas_tf.cost_model import fit
from tunas_tf.cost_model import latency
from tunas_tf.cost_model import linear
from tunas_tf.cost_model import macs
from tunas_tf.search import compare
from tests.testing import latency as testing_latency
from tests.testing import searches

SSD = testing_latency.SSD


def _extract(*args):
  return subprocess.run(
      [sys.executable, '-m', 'tunas_tf.tools.extract_architecture', *args],
      capture_output=True, text=True, env=searches.QUIET)


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
    done = subprocess.run(
        searches.search_command(model_dir, f'--cost_model={model_path}',
                                *searches.SHORT_SEARCH_FLAGS),
        capture_output=True, text=True, env=searches.QUIET)
    self.assertEqual(done.returncode, 0, done.stderr[-3000:])
    self.assertRegex(done.stderr + done.stdout, r'cost [\d.]+ ms \(target ')

    result = _extract(f'--model_dir={model_dir}', '--measure_latency')
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    searched = architecture.read(os.path.join(model_dir,
                                              architecture.FILE_NAME))
    cache = latency.ModelCache(os.path.join(model_dir, 'latency_models'), SSD,
                               macs.resolve_input(SSD))  # Paths only.
    measured = os.path.getsize(cache.path(searched.indices_string)) / 1e6
    predicted = linear.estimate_cost_of_indices(
        searched.indices, linear.get_cost_model(SSD, model_path))
    line = result.stdout.strip().splitlines()[-1]
    self.assertEqual(line, latency.closing_line(
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
    cache = latency.ModelCache(os.path.join(directory, 'compare_models'), SSD,
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
        latency.closing_line(1.1, 1.0, 1.0, 'a phone'),
        'Measured 1.1 ms on a phone: predicted 1 ms (+10.0%), target 1 ms '
        '(+10.0%)')
    self.assertEqual(latency.closing_line(0.9, 1.0, None, 'x'),
                     'Measured 0.9 ms on x: predicted 1 ms (-10.0%)')


if __name__ == '__main__':
  absltest.main()
