"""Tests for tools/compare_random: what it adds to each run's metrics.json."""

import json
import os
import tempfile

from absl.testing import absltest

from tunas_tf.cost_model import provenance
from tunas_tf.tools import compare_random


class RecordMeasuredTest(absltest.TestCase):

  def test_each_runs_metrics_json_holds_its_measured_latency_and_where(self):
    runs = [os.path.join(tempfile.mkdtemp(), name) for name in 'ab']
    for run in runs:
      os.makedirs(run)
      with open(os.path.join(run, 'metrics.json'), 'w') as f:
        json.dump({'top1': 0.5}, f)
    measured_with = provenance.Provenance(
        'digits_search', 8, 10, 1, 'command', 'phone', device_command='x',
        precision='int8')
    compare_random.record_measured(
        [{'run_dir': run, 'measured_ms': ms}
         for run, ms in zip(runs, (0.15, 0.2))], measured_with)
    for run, ms in zip(runs, (0.15, 0.2)):
      with open(os.path.join(run, 'metrics.json')) as f:
        self.assertEqual(json.load(f), {
            'top1': 0.5, 'measured_latency_ms': ms, 'measured_on': 'phone',
            'measured_precision': 'int8'})


if __name__ == '__main__':
  absltest.main()
