"""Tests for tools/fit_cost_model (library functions and command line)."""

import json
import os
import sys
import tempfile

from absl.testing import absltest
import numpy as np

from tunas_tf.io import files
from tunas_tf.cost_model import block_table
from tunas_tf.cost_model import fit as fit_lib
from tunas_tf.cost_model import linear as cost_linear
from tunas_tf.cost_model import macs
from tunas_tf.latency import rows as rows_lib
from tunas_tf.search import random_search
from tunas_tf.tools import fit_cost_model
from tests.testing import forked
from tests.testing import latency as testing_latency

SSD = testing_latency.SSD
HEADER = testing_latency.HEADER
_write_csv = testing_latency.write_csv
_synthetic = testing_latency.synthetic


def _env():
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')


class FitTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.directory = tempfile.mkdtemp()
    cls.indices, cls.latencies, cls.exact = _synthetic(800, seed=0)
    cls.csv = os.path.join(cls.directory, 'latency.csv')
    _write_csv(cls.csv, cls.indices, cls.latencies)
    cls.result = fit_cost_model.fit_csv(cls.csv, SSD, seed=0)

  def test_recovers_a_linear_latency_and_beats_the_constant(self):
    holdout = self.result['coefficients']['holdout']
    self.assertEqual(holdout['num_held_out'], 160)
    self.assertEqual(holdout['num_train'], 640)
    self.assertLess(holdout['mape_percent'], 1.0)
    self.assertLess(holdout['max_ape_percent'], 10.0)
    # Costs vary several-fold: the constant predictor is far worse.
    self.assertGreater(holdout['constant_mape_percent'], 20.0)
    self.assertGreater(holdout['constant_max_ape_percent'],
                       holdout['max_ape_percent'])
    predictions = self.result['predictions']
    self.assertEqual(self.result['indices'], self.indices)
    self.assertLess(np.mean(np.abs(predictions - self.exact) / self.exact),
                    0.01)

  def test_written_json_is_a_cost_model_that_reproduces_the_fit(self):
    path = os.path.join(self.directory, 'coefficients.json')
    files.write_json(self.result['coefficients'], path)
    with open(path) as f:
      written = json.load(f)
    self.assertEqual(written['units'], 'ms')
    self.assertEqual(written['ssd'], SSD)
    self.assertEqual(written['num_rows'], 800)
    self.assertEqual(written['source_csv'], os.path.abspath(self.csv))
    self.assertIn(written['alpha'], fit_lib.ALPHAS)
    model = cost_linear.load_coefficients(path, SSD)
    self.assertEqual(model.num_features, 744)
    fitted = cost_linear.get_cost_model(SSD, path)
    self.assertEqual(fitted.kind, cost_linear.FITTED)
    for row in range(0, 800, 40):
      self.assertAlmostEqual(
          cost_linear.estimate_cost_of_indices(self.indices[row], fitted),
          self.result['predictions'][row], places=9)
    # Any architecture, measured or not, gets about its linear latency.
    fresh = random_search.sample_architectures(SSD, 5, seed=99,
                                               cost_model='macs')
    for entry in fresh:
      estimate = cost_linear.estimate_cost_of_indices(entry['indices'],
                                                      fitted)
      self.assertAlmostEqual(estimate / (entry['estimated_cost'] / 1e4), 1.0,
                             delta=0.1)

  def test_provenance_is_recorded_and_checked_against_the_input(self):
    csv = os.path.join(self.directory, 'measured.csv')
    _write_csv(csv, self.indices[:100], self.latencies[:100])
    result = fit_cost_model.fit_csv(csv, SSD, seed=0)
    self.assertEqual(result['coefficients']['measured_with'],
                     testing_latency.SETTINGS)
    path = os.path.join(self.directory, 'measured.json')
    files.write_json(result['coefficients'], path)
    model = cost_linear.get_cost_model(SSD, path, image_size=8,
                                       num_classes=10, input_channels=1)
    self.assertEqual(model.measured_with.num_threads, 1)
    for shape, message in ((dict(image_size=32), 'image_size=8, not 32'),
                           (dict(num_classes=100), 'num_classes=10, not 100'),
                           (dict(input_channels=3),
                            'input_channels=1, not 3')):
      with self.assertRaisesRegex(ValueError, 'was measured with ' + message +
                                  ': measure and fit one at this input'):
        cost_linear.get_cost_model(SSD, path, **shape)
    # Without its provenance a model is refused wherever an input is given.
    del result['coefficients']['measured_with']
    path = os.path.join(self.directory, 'unmeasured.json')
    files.write_json(result['coefficients'], path)
    cost_linear.get_cost_model(SSD, path)
    with self.assertRaisesRegex(ValueError, 'does not say how its latencies '
                                'were measured .*input \\(image_size=8\\)'):
      cost_linear.get_cost_model(SSD, path, image_size=8)

  def test_split_seed_changes_the_score_not_the_final_fit(self):
    other = fit_lib.fit(SSD, self.indices, self.latencies, seed=1)
    first = self.result['coefficients']
    second = other['coefficients']
    self.assertNotEqual(first['holdout']['mape_percent'],
                        second['holdout']['mape_percent'])
    np.testing.assert_allclose(first['kernel'], second['kernel'])
    self.assertAlmostEqual(first['bias'], second['bias'])


class BadInputTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.directory = tempfile.mkdtemp()
    self.indices, self.latencies, _ = _synthetic(12, seed=3)

  def _fit(self, name, indices=None, latencies=None, header=HEADER,
           holdout_fraction=0.2, settings=testing_latency.SETTINGS):
    path = os.path.join(self.directory, name)
    _write_csv(path, self.indices if indices is None else indices,
               self.latencies if latencies is None else latencies, header,
               settings)
    return fit_cost_model.fit_csv(path, SSD,
                                  holdout_fraction=holdout_fraction)

  def test_a_small_good_csv_fits(self):
    result = self._fit('good.csv')
    self.assertEqual(result['coefficients']['num_rows'], 12)
    self.assertEqual(result['coefficients']['holdout']['num_held_out'], 2)

  def test_each_bad_csv_is_refused_with_a_clear_message(self):
    wrong_count = list(self.indices)
    wrong_count[4] = wrong_count[4] + ':0'
    out_of_range = list(self.indices)
    out_of_range[2] = '9:' + out_of_range[2].split(':', 1)[1]
    text_latency = list(self.latencies)
    text_latency[3] = 'fast'
    negative = list(self.latencies)
    negative[0] = -1.0
    cases = [
        (dict(header='arch,ms,spread'), 'missing .*indices'),
        (dict(header='indices,spread_ms'), r"missing \['latency_ms'\]"),
        (dict(indices=wrong_count), 'line 6: .*expected 18 indices'),
        (dict(indices=out_of_range), 'line 4: .*out of range'),
        (dict(latencies=text_latency), "line 5: latency_ms 'fast' is not a "
                                       'number'),
        (dict(latencies=negative), 'line 2: .*not a positive'),
        (dict(indices=self.indices[:9], latencies=self.latencies[:9]),
         'too few rows: 9 measurements, need at least 10'),
        (dict(holdout_fraction=0.05), 'too few rows: 12.*holds out 1'),
        (dict(holdout_fraction=1.0), r'holdout_fraction must be in \(0, 1\)'),
        (dict(settings=None), r'bad9.csv has no bad9.csv.settings.json '
         'beside it: nothing says how its rows were measured'),
        (dict(settings=dict(testing_latency.SETTINGS, backend='onnx')),
         r"settings.json: unknown backend 'onnx'"),
        (dict(settings=dict(testing_latency.SETTINGS, image_size=None)),
         r"settings.json: field 'image_size' is None, expected an int"),
        (dict(settings=dict(testing_latency.SETTINGS, threads=1)),
         r"settings.json has unknown fields \['threads'\]"),
    ]
    for i, (kwargs, message) in enumerate(cases):
      with self.assertRaisesRegex(ValueError, message, msg=str(kwargs)):
        self._fit(f'bad{i}.csv', **kwargs)

  def test_a_block_table_measured_otherwise_is_refused(self):
    for name, settings, message in (
        ('tf.csv', dict(testing_latency.SETTINGS, backend='tf'),
         "backend='tf', not 'tflite' as the networks of .*good.csv were"),
        ('table.csv', None, 'table.csv has no table.csv.settings.json')):
      table = os.path.join(self.directory, name)
      _write_csv(table, ['u0123456789abcdef'], [0.5], 'block,latency_ms,spread_ms',
                 settings)
      with self.assertRaisesRegex(ValueError, message):
        fit_cost_model.fit_csv(self._fit_path('good.csv'), SSD,
                               block_csv=table)
    # Other CPUs are the same device.
    table = os.path.join(self.directory, 'cpu1.csv')
    _write_csv(table, ['u0123456789abcdef'], [0.5], 'block,latency_ms,spread_ms',
               dict(testing_latency.SETTINGS, cpus=[1]))
    with self.assertRaisesRegex(ValueError, 'the block table has no entry'):
      fit_cost_model.fit_csv(self._fit_path('good.csv'), SSD,
                             block_csv=table)
    # int8 networks with a float32 table.
    networks = os.path.join(self.directory, 'int8.csv')
    _write_csv(networks, self.indices, self.latencies,
               settings=dict(testing_latency.SETTINGS, precision='int8'))
    with self.assertRaisesRegex(ValueError, "precision='float32', not 'int8' "
                                'as the networks of .*int8.csv were'):
      fit_cost_model.fit_csv(networks, SSD, block_csv=table)

  def _fit_path(self, name):
    path = os.path.join(self.directory, name)
    _write_csv(path, self.indices, self.latencies)
    return path

  def test_missing_or_empty_file(self):
    with self.assertRaisesRegex(ValueError, 'cannot read'):
      fit_cost_model.fit_csv(os.path.join(self.directory, 'none.csv'), SSD)
    empty = os.path.join(self.directory, 'empty.csv')
    open(empty, 'w').close()
    with self.assertRaisesRegex(ValueError, 'is empty'):
      fit_cost_model.fit_csv(empty, SSD)

  def test_another_space_is_refused(self):
    path = os.path.join(self.directory, 'latency.csv')
    _write_csv(path, self.indices, self.latencies)
    with self.assertRaisesRegex(ValueError, "line 2: .*expected 34 indices.*"
                                "not an architecture of 'cifar_search'"):
      fit_cost_model.fit_csv(path, 'cifar_search')


class CommandLineTest(absltest.TestCase):

  def _run(self, *args):
    return forked.run_one(
        [sys.executable, '-m', 'tunas_tf.tools.fit_cost_model', *args],
        env=_env())

  def test_writes_coefficients_and_refuses_bad_csv(self):
    directory = tempfile.mkdtemp()
    indices, latencies, _ = _synthetic(40, seed=5)
    good = os.path.join(directory, 'latency.csv')
    _write_csv(good, indices, latencies)
    output = os.path.join(directory, 'model', 'coefficients.json')
    result = self._run(f'--ssd={SSD}', f'--csv={good}', f'--output={output}')
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    self.assertIn('MAPE', result.stdout)
    self.assertIn('constant predictor', result.stdout)
    model = cost_linear.load_coefficients(output, SSD)
    self.assertEqual(model.units, 'ms')

    bad = os.path.join(directory, 'bad.csv')
    latencies = list(latencies)
    latencies[7] = 'n/a'
    _write_csv(bad, indices, latencies)
    result = self._run(f'--ssd={SSD}', f'--csv={bad}',
                       f'--output={output}.2')
    self.assertNotEqual(result.returncode, 0)
    last = result.stderr.strip().splitlines()[-1]
    self.assertTrue(last.startswith('fit_cost_model: '), last)
    self.assertIn("line 9: latency_ms 'n/a' is not a number", last)
    self.assertFalse(os.path.exists(output + '.2'))

  def test_a_poor_fit_is_refused_in_one_line(self):
    directory = tempfile.mkdtemp()
    indices, _, _ = _synthetic(30, seed=5)
    flat = os.path.join(directory, 'flat.csv')
    _write_csv(flat, indices, 1.0 + 0.1 * np.random.RandomState(1).rand(30))
    output = os.path.join(directory, 'coefficients.json')
    result = self._run(f'--ssd={SSD}', f'--csv={flat}', f'--output={output}')
    self.assertNotEqual(result.returncode, 0)
    self.assertIn('within +-10%', result.stdout)  # The figures, then why.
    last = result.stderr.strip().splitlines()[-1]
    self.assertRegex(last, r'^fit_cost_model: refused: .*measure about 40 '
                     r'more architectures.*\(--allow_poor_fit writes it')
    self.assertFalse(os.path.exists(output))
    result = self._run(f'--ssd={SSD}', f'--csv={flat}', f'--output={output}',
                       '--allow_poor_fit')
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    self.assertIn('Warning: ', result.stdout)
    self.assertTrue(os.path.exists(output))

  def test_a_fit_short_of_the_bar_is_refused_saying_how_many_rows_to_add(self):
    # Rows 15% noisy: a fit far better than a constant, but only half of
    # its 6 held-out rows within +-10%.
    directory = tempfile.mkdtemp()
    indices, latencies, _ = _synthetic(30, seed=1, noise=0.15)
    noisy = os.path.join(directory, 'noisy.csv')
    _write_csv(noisy, indices, latencies)
    output = os.path.join(directory, 'coefficients.json')
    result = self._run(f'--ssd={SSD}', f'--csv={noisy}', f'--output={output}')
    self.assertNotEqual(result.returncode, 0)
    self.assertRegex(result.stdout, r'[\d.]+% within \+-5%, 50% within '
                     r'\+-10%, no rank figure on 6 rows \(fewer than 10\)')
    lines = result.stderr.strip().splitlines()
    self.assertLen(lines, 1, result.stderr)
    self.assertRegex(lines[0], r'^fit_cost_model: refused: 50% of the 6 '
                     r'held-out rows are within \+-10%, under the bar of 80%; '
                     r'measure about 40 more architectures')
    self.assertFalse(os.path.exists(output))


  def test_a_fit_within_the_rows_timing_noise_advises_the_device(self):
    # The same 15% noisy rows, whose rounds say so (IQR 40% of 5 rounds:
    # 16.6% noise): no more rows, a quieter device.
    directory = tempfile.mkdtemp()
    indices, latencies, _ = _synthetic(30, seed=1, noise=0.15)
    noisy = os.path.join(directory, 'noisy.csv')
    _write_csv(noisy, indices, latencies)  # Its settings beside it.
    with open(noisy, 'w') as f:
      f.write('indices,latency_ms,spread_ms,repeats\n' + ''.join(
          f'{i},{v},{0.4 * v},5\n' for i, v in zip(indices, latencies)))
    output = os.path.join(directory, 'coefficients.json')
    result = self._run(f'--ssd={SSD}', f'--csv={noisy}', f'--output={output}')
    self.assertNotEqual(result.returncode, 0)
    self.assertRegex(result.stderr.strip(), r"^fit_cost_model: refused: 50% "
                     r".* the device's timing is the limit, not the rows: "
                     r".* own timing noise 16.6% .*\(--allow_poor_fit")
    self.assertNotIn('measure about', result.stderr)


class BlockTableEndToEndTest(absltest.TestCase):
  """measure_latency --block_table through a fake device, then the fit."""

  def _run(self, *commands):
    """Each (tool, args...) in turn, from one process that imported
    TensorFlow once (`forked`)."""
    return forked.run([['-m', f'tunas_tf.tools.{tool}', *args]
                       for tool, *args in commands], env=_env())

  def test_table_from_a_fake_device_fits_and_is_a_cost_model(self):
    directory = tempfile.mkdtemp()
    # Prints benchmark_model's line with (file size / 1000) us: a unit's
    # latency grows with its weights, as on a device.
    device = f'{testing_latency.fake_device_script(directory)} {{model}}'
    table = os.path.join(directory, 'table.csv')
    networks = os.path.join(directory, 'networks.csv')
    output = os.path.join(directory, 'table.json')
    common = ('--num=10', '--repeats=2', '--interleave=100',
              f'--device_command={device}', f'--model_cache={directory}/m')
    fit = ('fit_cost_model', f'--ssd={SSD}', f'--csv={networks}',
           f'--block_csv={table}', f'--output={output}')
    # 10 networks; the units they use, each built alone; the fit.
    networks_run, table_run, result = self._run(
        ('measure_latency', f'--ssd={SSD}', f'--output={networks}', *common),
        ('measure_latency', f'--ssd={SSD}', '--block_table',
         f'--output={table}', *common), fit)
    self.assertEqual(networks_run.returncode, 0, networks_run.stderr[-2000:])
    self.assertEqual(table_run.returncode, 0, table_run.stderr[-2000:])
    self.assertRegex(table_run.stdout, r'measured \d+ block-table units')
    measured = rows_lib.read(table, SSD, rows_lib.BLOCK_COLUMNS)[0]

    # The space needs more: one line naming a missing unit, nothing written.
    self.assertNotEqual(result.returncode, 0)
    lines = result.stderr.strip().splitlines()
    self.assertLen(lines, 1, result.stderr)
    self.assertRegex(lines[0], r'^fit_cost_model: the block table has no '
                     r'entry for u[0-9a-f]{16} \(blocks/.*measure_latency '
                     '--block_table appends what is missing')
    self.assertFalse(os.path.exists(output))

    # The units no network here uses (converting the space's 322 would take
    # minutes) from a stand-in: 1 us each. Held-out networks use only
    # measured units, so the figures below are the device's.
    units = block_table.units_of(SSD, macs.resolve_input(SSD))
    with rows_lib.appender(table, rows_lib.BLOCK_COLUMNS) as write_row:
      for key in units:
        if key not in measured:
          write_row((key, 0.001, 0.0, 2, 0, 0.0))
    listed = os.path.join(directory, 'archs.json')
    result, listing = self._run(
        fit, ('random_architectures', f'--ssd={SSD}', '--num=3',
              f'--cost_model={output}', f'--output={listed}'))
    self.assertEqual(result.returncode, 0, result.stderr[-2000:])
    self.assertIn('322 table entries', result.stdout)
    with open(output) as f:
      written = json.load(f)
    self.assertEqual(written['form'], 'block_table')
    self.assertEqual(written['measured_with']['backend'], 'command')
    # A network's file is its units' weights and one header, where each
    # unit's file has a header of its own: the correction's per-unit term
    # takes those off, so the held-out networks are close.
    self.assertLess(written['holdout']['mape_percent'], 5.0)
    self.assertEqual(listing.returncode, 0, listing.stderr[-2000:])
    self.assertIn(' ms', listing.stdout)

if __name__ == '__main__':
  absltest.main()
