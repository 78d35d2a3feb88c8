"""Tests for cost_model/block_table: the per-unit latency table."""

import json
import os
import tempfile

from absl.testing import absltest
import numpy as np

from tunas_tf.io import files
from tunas_tf.cost_model import block_table
from tunas_tf.cost_model import features
from tunas_tf.cost_model import fit
from tunas_tf.cost_model import linear
from tunas_tf.cost_model import macs
from tunas_tf.latency import protocol as protocol_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import sample
from tunas_tf.search_space import schema

SSD = 'digits_search'
SHAPE = macs.resolve_input(SSD)


def _fake_timings(units):
  """A deterministic 'device': each unit costs 1 us + its MACs / 1e4 us,
  read through `protocol_lib.measure` as a real pass would."""
  values = {key: 1e-3 + _unit_macs(unit) / 1e7 for key, unit in units.items()}

  def open_one(key):
    return lambda first: (values[key], 0.0)

  device = protocol_lib.Device('fake', {}, open_one)
  rows = protocol_lib.measure(
      device, list(units),
      protocol_lib.Protocol(repeats=2, interleave=len(units)))
  return {row.indices: row.latency_ms for row in rows}


def _unit_macs(unit):
  # Without the classifier: num_classes 1 counts a 1-wide head, close enough.
  return macs.count_macs(unit.spec, unit.image_size, unit.num_classes or 1,
                         unit.input_channels)


def _network(table, indices, scale=1.3, per_unit=0.002, offset=0.01):
  """A whole network 'measured' as the corrected table says it is."""
  units = block_table.architecture_units(
      schema.prune(mobile.get_search_space(SSD), indices), SHAPE)
  return (scale * sum(table[unit.key] for _, unit in units) +
          per_unit * len(units) + offset)


class BlockTableTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.units = block_table.units_of(SSD, SHAPE)
    cls.table = _fake_timings(cls.units)
    cls.indices = sample.sample_indices(SSD, 40, seed=7)
    cls.latencies = [_network(cls.table, i) for i in cls.indices]

  def test_the_linear_form_is_the_table_sum_exactly(self):
    # Every space small enough to enumerate: the kernel's entries are the
    # architecture's units, whatever the table holds.
    for ssd in ('digits_search', 'cifar_search', 'proxylessnas_search'):
      shape = macs.resolve_input(ssd)
      rng = np.random.RandomState(0)
      table = {key: float(rng.uniform(1, 2))
               for key in block_table.units_of(ssd, shape)}
      kernel, bias = block_table.linear_form(ssd, shape, table)
      space = mobile.get_search_space(ssd)
      for indices in sample.sample_indices(ssd, 10, seed=1) + [
          schema.extreme_indices(space, largest) for largest in (False, True)]:
        values = features.features(features.attach_one_hot_masks(
            space, indices)).astype(np.float64)
        units = block_table.architecture_units(
            schema.prune(space, indices), shape)
        # Sums of ~20 numbers in another order: float64 rounding only.
        self.assertAlmostEqual(values @ kernel + bias, sum(
            table[unit.key] for _, unit in units), places=10)

  def test_units_are_measured_once_and_named(self):
    self.assertLen(self.units, 322)  # digits_search at 8 px.
    keys = [key for key in self.units]
    self.assertLen(set(keys), len(keys))
    for key in keys:
      self.assertEqual(block_table.check_key(key), key)
    # Two architectures that differ in a decision share their other units.
    first = sample.sample_indices(SSD, 1, seed=3)[0]
    values = schema.parse_indices(first)
    last = len(schema.flatten(mobile.get_search_space(SSD))[-1].choices)
    values[-1] = (values[-1] + 1) % last
    used = block_table.units_of(SSD, SHAPE, [first, values])
    self.assertLess(len(used), 2 * len(block_table.units_of(SSD, SHAPE,
                                                           [first])))
    unit = next(iter(self.units.values()))
    self.assertRegex(unit.describe(), r'^blocks/0/layers/0 at 8x8x1 -> \d+: ')

  def test_fit_recovers_the_correction_and_predicts_held_out_networks(self):
    result = fit.fit_table(SSD, self.table, self.indices, self.latencies,
                           shape=SHAPE, train_rows=10)
    coefficients = result['coefficients']
    holdout = coefficients['holdout']
    self.assertEqual(coefficients['form'], 'block_table')
    self.assertEqual((holdout['num_train'], holdout['num_held_out']), (10, 8))
    # The networks are exactly the corrected sum: float64 rounding only.
    self.assertLess(holdout['mape_percent'], 1e-6)
    self.assertEqual(holdout['within10_percent'], 100.0)
    self.assertGreater(holdout['uncorrected_mape_percent'], 10.0)
    for name, value in (('scale', 1.3), ('per_unit', 0.002), ('offset', 0.01)):
      self.assertAlmostEqual(coefficients['correction'][name], value, places=9)
    summary = fit.summary(coefficients)
    self.assertIn('322 table entries', summary)
    self.assertNotIn('alpha', summary)

  def test_json_round_trip(self):
    result = fit.fit_table(SSD, self.table, self.indices, self.latencies,
                           shape=SHAPE)
    path = os.path.join(tempfile.mkdtemp(), 'table.json')
    files.write_json(result['coefficients'], path)
    model = linear.get_cost_model(SSD, path)
    self.assertEqual((model.kind, model.units), (linear.FITTED, 'ms'))
    for row in (0, 17, 39):
      self.assertAlmostEqual(
          linear.estimate_cost_of_indices(self.indices[row], model),
          self.latencies[row], places=9)
    with open(path) as f:
      self.assertEqual(json.load(f)['table'], self.table)
    linear.check_varies(model)  # The search takes it.

  def test_correction_without_a_count_column(self):
    correction = block_table.fit_correction(
        [1.0, 2.0, 3.0], [4, 4, 4], [2.5, 4.5, 6.5])
    self.assertEqual(correction['per_unit'], 0.0)
    self.assertAlmostEqual(correction['scale'], 2.0)
    self.assertAlmostEqual(correction['offset'], 0.5)

  def test_bad_input(self):
    key, unit = next(iter(self.units.items()))
    partial = {k: v for k, v in self.table.items() if k != key}
    with self.assertRaisesRegex(
        ValueError, f'^the block table has no entry for {key} '
        rf'\({unit.describe()}\), which digits_search at 8 px needs; '
        r'measure it \(tools/measure_latency --block_table'):
      fit.fit_table(SSD, partial, self.indices, self.latencies, shape=SHAPE)
    for bad in ('u123', 'x' * 17, 'U' + 'a' * 16):
      with self.assertRaisesRegex(ValueError, 'not a block-table key'):
        block_table.check_key(bad)

  def test_loader_refuses_a_broken_table_document(self):
    coefficients = fit.fit_table(SSD, self.table, self.indices,
                                 self.latencies, shape=SHAPE)['coefficients']
    cases = [
        ({'form': 'tree'}, "unknown form 'tree'"),
        ({'table': None}, "field 'table' must be a non-empty object"),
        ({'table': {'u' + '0' * 16: -1}}, "field 'table' has -1 for"),
        ({'correction': {'scale': 1}}, "field 'correction' must be an "
                                       'object of numbers'),
    ]
    for change, message in cases + [(None, "has no field 'correction'")]:
      document = dict(coefficients)
      if change is None:
        del document['correction']
      else:
        document.update(change)
      path = os.path.join(tempfile.mkdtemp(), 'table.json')
      files.write_json(document, path)
      with self.assertRaisesRegex(ValueError, message):
        linear.get_cost_model(SSD, path)


if __name__ == '__main__':
  absltest.main()
