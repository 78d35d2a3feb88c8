"""Tests for the linear cost model: released, macs and JSON coefficients."""

import dataclasses
import itertools
import json
import os
import tempfile
from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tunas_tf.controller import reinforce
from tunas_tf.cost_model import features
from tunas_tf.cost_model import linear
from tunas_tf.cost_model import macs
from tunas_tf.search_space import mobile
from tunas_tf.search_space import sample
from tunas_tf.search_space import schema

# The original's MobileCostModelTest.test_estimate_cost_integration_test
# (tunas/mobile_cost_model_test.py): assertNear(cost, 84.0, err=1.0).
_TEST_VECTOR = (
    '0:0:0:1:0:0:0:0:1:0:0:1:0:0:1:0:1:1:0:1:0:0:1:0:0:0:0:0:0:2:1:0:1:1:0:'
    '2:1:0:2:1:0:0:1:1:0:0:0:0:1:0:0:1:0:0:0:1:1:0:2:0:0:0:0:0:1:0:0:0:2:1:0:'
    '0:0')
_PROXYLESSNAS = 'proxylessnas_search'
_RELEASED = linear.get_cost_model(_PROXYLESSNAS)
_RELEASED_SPACES = ('proxylessnas_search', 'proxylessnas_enlarged_search',
                    'mobilenet_v3_like_search')


def _bottleneck_indices(sepconv_kernel, op):
  """Indices of proxylessnas_search with every bottleneck at op index `op`."""
  return mobile.proxylessnas_search_indices([sepconv_kernel] + [op] * 21)


class LinearTest(tf.test.TestCase, parameterized.TestCase):

  def _write(self, content, name='model.json'):
    path = os.path.join(tempfile.mkdtemp(dir=self.get_temp_dir()), name)
    with open(path, 'w') as f:
      f.write(content if isinstance(content, str) else json.dumps(content))
    return path

  def _coefficients(self, **changes):
    data = dict(ssd=_PROXYLESSNAS, units='ms', num_features=144,
                kernel=[1.0] * 144, bias=2.0)
    data.update(changes)
    return data

  def test_estimate_cost_of_indices_test_vector(self):
    cost = linear.estimate_cost_of_indices(_TEST_VECTOR, _RELEASED)
    self.assertNear(cost, 84.0, 1.0)
    self.assertNear(cost, 84.0167, 1e-3)  # This implementation's value.
    as_list = [int(i) for i in _TEST_VECTOR.split(':')]
    self.assertEqual(linear.estimate_cost_of_indices(as_list, _RELEASED),
                     cost)

  def test_estimate_cost_of_indices_reference_points(self):
    # The released coefficients give: ProxylessNAS-Mobile ~84.4 ms; smallest
    # (all k3/e3, every optional layer skipped) ~30.9 ms; all k7/e6
    # bottlenecks ~209.1 ms.
    mobile_indices = mobile.proxylessnas_search_indices(
        mobile.PROXYLESSNAS_MOBILE_OPS)
    self.assertNear(
        linear.estimate_cost_of_indices(mobile_indices, _RELEASED),
        84.416, 1e-3)
    smallest = schema.extreme_indices(mobile.proxylessnas_search(), False)
    self.assertEqual(smallest, mobile.proxylessnas_search_indices(
        [0] + [0, 6, 6, 6] * 5 + [0]))
    self.assertNear(linear.estimate_cost_of_indices(smallest, _RELEASED),
                    30.936, 1e-3)
    # 209.1 ms keeps the separable conv at 3x3; the largest by rule
    # (schema.extreme_indices) also takes its 7x7 kernel: 219.1 ms.
    self.assertNear(linear.estimate_cost_of_indices(
        _bottleneck_indices(0, 5), _RELEASED), 209.112, 1e-3)
    largest = schema.extreme_indices(mobile.proxylessnas_search(), True)
    self.assertEqual(largest, _bottleneck_indices(2, 5))
    self.assertNear(linear.estimate_cost_of_indices(largest, _RELEASED),
                    219.091, 1e-3)

  @parameterized.parameters(*_RELEASED_SPACES)
  def test_released_models_match_feature_length(self, ssd):
    model = linear.get_cost_model(ssd)
    self.assertEqual(model.source.rsplit(os.sep, 1)[-1], f'{ssd}.json')
    self.assertEqual(model.kind, linear.RELEASED)
    self.assertEqual(linear.default_target(model),
                     mobile.space_info(ssd).released_target_ms)
    self.assertEqual(model.num_features,
                     features.feature_length(mobile.get_search_space(ssd)))
    self.assertEqual(model.units, 'simulated Pixel-1 latency, ms')

  def test_get_cost_model_defaults(self):
    self.assertEqual(linear.get_cost_model(_PROXYLESSNAS).units,
                     'simulated Pixel-1 latency, ms')
    self.assertEqual(linear.get_cost_model('digits_search').source,
                     linear.MACS)
    self.assertEqual(linear.get_cost_model(_PROXYLESSNAS, 'macs').units,
                     linear.MACS_UNITS)

  def test_counts_serve_any_precision_released_latencies_only_float32(self):
    # An int8 search may pair MACs (or flash) with a fitted int8 table.
    for kind in (linear.MACS, linear.FLASH):
      counted = linear.get_cost_model('digits_search', kind, precision='int8')
      np.testing.assert_array_equal(
          counted.kernel, linear.get_cost_model('digits_search', kind).kernel)
    with self.assertRaisesRegex(ValueError, "'released' is not of int8"):
      linear.get_cost_model(_PROXYLESSNAS, 'released', precision='int8')

  @parameterized.parameters('proxylessnas_search', 'mobilenet_v3_like_search',
                            'digits_search')
  def test_estimate_cost_tensor_and_python_paths_agree(self, ssd):
    spec = mobile.get_search_space(ssd)
    indices = schema.extreme_indices(spec, largest=True)
    masked = features.attach_one_hot_masks(spec, indices)
    as_tensors = schema.with_masks(masked, lambda _, o: tf.constant(o.mask))
    model = linear.get_cost_model(ssd)
    cost = linear.estimate_cost(features.features(as_tensors), model)
    self.assertEqual(cost.dtype, tf.float32)
    self.assertEqual(cost.shape, [])
    self.assertAllClose(cost, linear.estimate_cost_of_indices(indices, model),
                        rtol=1e-6)

  @parameterized.parameters(None, 'macs')
  def test_estimate_cost_warmup_mixture(self, cost_model):
    tf.random.set_seed(3)
    sampled, _ = reinforce.independent_sample(
        mobile.proxylessnas_search(), increase_ops_probability=1.0)
    model = linear.get_cost_model(_PROXYLESSNAS, cost_model)
    cost = linear.estimate_cost(features.features(sampled), model)
    numpy_masks = schema.with_masks(sampled, lambda _, o: np.asarray(o.mask))
    expected = (features.features(numpy_masks).astype(np.float64) @
                model.kernel + model.bias)
    self.assertAllClose(cost, expected, rtol=1e-6)
    # All ops at 1/n: the cost is the mean over each layer's alternatives,
    # strictly between the smallest and the largest architecture.
    low, high = (linear.estimate_cost_of_indices(
        schema.extreme_indices(mobile.proxylessnas_search(), largest), model)
                 for largest in (False, True))
    self.assertBetween(float(cost), low, high)

  def test_estimate_cost_in_v1_graph(self):
    with tf.Graph().as_default():
      sampled, _ = reinforce.independent_sample(
          mobile.digits_search(), tf.constant(0.0), tf.constant(1.0))
      model = linear.get_cost_model('digits_search')
      cost = linear.estimate_cost(features.features(sampled), model)
      largest = schema.extreme_indices(mobile.digits_search(), True)
      with self.session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        value, masks = sess.run(
            [cost, [o.mask for o in schema.flatten(sampled)]])
    indices = [int(np.argmax(m)) for m in masks]
    self.assertAllClose(value, linear.estimate_cost_of_indices(
        indices, model), rtol=1e-6)
    # Filter warm-up at 1: every width and expansion is the largest.
    for index, want, oneof in zip(indices, largest,
                                  schema.flatten(mobile.digits_search())):
      if oneof.tag == schema.FILTERS_TAG:
        self.assertEqual(index, want)

  def test_estimate_cost_batch(self):
    spec = mobile.proxylessnas_search()
    rows = [features.features(features.attach_one_hot_masks(
        spec, schema.extreme_indices(spec, largest))) for largest in (0, 1)]
    costs = linear.estimate_cost(np.stack(rows), _RELEASED)
    self.assertEqual(costs.shape, [2])
    self.assertAllClose(costs, [30.936, 219.091], atol=1e-3)

  @parameterized.parameters(*sorted(mobile.SEARCH_SPACES))
  def test_estimate_costs_of_indices_are_one_at_a_time(self, ssd):
    model = linear.get_cost_model(ssd)  # Released where it exists, else macs.
    spec = mobile.get_search_space(ssd)
    indices = sample.sample_indices(ssd, 8, seed=3) + [
        schema.extreme_indices(spec, largest) for largest in (False, True)]
    costs = linear.estimate_costs_of_indices(indices, model)
    self.assertEqual(costs.dtype, np.float64)
    # Exactly: the same features, and each row's float64 dot taken alone.
    self.assertEqual(costs.tolist(), [
        linear.estimate_cost_of_indices(i, model) for i in indices])
    if schema.flatten(spec):
      self.assertGreater(costs[-1], costs[-2])  # Largest over smallest.
    # Chunks of 3 rows (8 + 2 = 3 + 3 + 3 + 1) give the same numbers.
    with mock.patch.object(linear, '_FEATURES_PER_CHUNK',
                           3 * model.num_features):
      self.assertEqual(
          linear.estimate_costs_of_indices(indices, model).tolist(),
          costs.tolist())

  def test_estimate_costs_of_indices_bad_lists(self):
    good = [0] * 73
    for bad, message in (
        ('0:0:0', r'prune: expected 73 indices \(one per OneOf\), got 3'),
        ([0, 7] + [0] * 71, r"prune: index 7 at position 1 \(path "
         r"'blocks/1/layers/0/kernel_size'\) is out of range; allowed 0..2")):
      with self.assertRaisesRegex(ValueError, f'^{message}$'):
        linear.estimate_costs_of_indices([good, bad, good], _RELEASED)
    self.assertEqual(linear.estimate_costs_of_indices([], _RELEASED).shape,
                     (0,))
    with self.assertRaisesRegex(
        TypeError, 'estimate_costs_of_indices: expected a LinearCostModel'):
      linear.estimate_costs_of_indices([good], _PROXYLESSNAS)

  def test_estimate_cost_of_indices_macs(self):
    spec = mobile.get_search_space('digits_search')
    indices = schema.extreme_indices(spec, largest=True)
    pruned = schema.prune(spec, indices)
    self.assertEqual(
        linear.estimate_cost_of_indices(
            indices, linear.get_cost_model('digits_search', 'macs')),
        macs.count_macs(pruned, 8, 10, input_channels=1))
    self.assertEqual(
        linear.estimate_cost_of_indices(indices, linear.get_cost_model(
            'digits_search', 'macs', image_size=16, num_classes=3,
            input_channels=3)),
        macs.count_macs(pruned, 16, 3, input_channels=3))

  def test_estimate_cost_reference_model_macs(self):
    self.assertEqual(
        linear.estimate_cost_of_indices(
            [], linear.get_cost_model('mobilenet_v2', 'macs')),
        300_775_552)
    self.assertAllClose(
        linear.estimate_cost(features.features(mobile.mobilenet_v2()),
                             linear.get_cost_model('mobilenet_v2')),
        300_775_552, rtol=1e-7)

  def test_coefficients_json_path(self):
    path = self._write(self._coefficients())
    indices = schema.extreme_indices(mobile.proxylessnas_search(), False)
    # One feature on per layer block with more than one feature: 3 (sepconv)
    # + 6 mandatory + 15 skippable bottlenecks = 22 ones, plus the bias 2.
    self.assertEqual(
        linear.estimate_cost_of_indices(
            indices, linear.get_cost_model(_PROXYLESSNAS, path)), 24.0)
    self.assertEqual(linear.get_cost_model(_PROXYLESSNAS, path).units, 'ms')

  @parameterized.parameters(('digits_search', 'macs'),
                            ('proxylessnas_search', 'released'),
                            ('mobilenet_v3_like_search', 'released'))
  def test_cost_range_of_monotone_models_is_the_extremes(self, ssd, kind):
    model = linear.get_cost_model(ssd, kind)
    spec = mobile.get_search_space(ssd)
    extremes = linear.estimate_costs_of_indices(
        [schema.extreme_indices(spec, largest) for largest in (False, True)],
        model)
    self.assertAllClose(linear.cost_range(model), extremes, rtol=1e-12)

  def test_cost_range_is_exact_for_any_kernel(self):
    # Three blocks of digits_search (6,912 architectures), a random kernel:
    # the range is the brute force's min and max over all of them.
    full = mobile.get_search_space('digits_search')
    small = dataclasses.replace(full, blocks=full.blocks[:3])
    kernel = np.random.RandomState(0).normal(
        size=features.feature_length(small))
    model = linear.LinearCostModel('digits_search', 'ms', kernel, 0.5, 'x')
    every = list(itertools.product(
        *[range(n) for n in schema.num_choices(small)]))
    with mock.patch.object(mobile, 'get_search_space', return_value=small):
      costs = linear.estimate_costs_of_indices(every, model)
      self.assertAllClose(linear.cost_range(model),
                          (costs.min(), costs.max()), rtol=1e-12)

  def test_a_cost_model_that_hardly_varies_is_refused(self):
    linear.check_varies(_RELEASED)
    linear.check_varies(linear.get_cost_model('digits_search', 'macs'))
    # What a fit that learned a constant looks like: a big bias, tiny
    # coefficients (0.03157..0.03160 ms as in the issue).
    flat = linear.get_cost_model(_PROXYLESSNAS, self._write(
        self._coefficients(kernel=[1e-6] * 144, bias=0.0315)))
    with self.assertRaisesRegex(
        ValueError, r'model\.json hardly varies over \'proxylessnas_search\': '
        r'0\.0315\d*\.\.0\.0315\d* ms from its cheapest to its dearest '
        r'architecture \(\S+% of their mean\).*refit it'):
      linear.check_varies(flat)
    # Costs that vary pass (an all-ones kernel does not: 24 ms for every
    # architecture, one feature on per block).
    linear.check_varies(linear.get_cost_model(_PROXYLESSNAS, self._write(
        self._coefficients(kernel=[float(i % 7) for i in range(144)]))))

  def test_remote_coefficients_json(self):
    # TF's in-memory filesystem stands in for Cloud Storage.
    path = f'ram://linear_test-{os.getpid()}/model.json'
    with tf.io.gfile.GFile(path, 'w') as f:
      f.write(json.dumps(self._coefficients()))
    model = linear.get_cost_model(_PROXYLESSNAS, path)
    self.assertEqual(model.source, path)
    indices = schema.extreme_indices(mobile.proxylessnas_search(), False)
    self.assertEqual(linear.estimate_cost_of_indices(indices, model), 24.0)

  def test_unknown_ssd(self):
    with self.assertRaisesRegex(ValueError, "Unknown search space 'nope'"):
      linear.get_cost_model('nope')
    with self.assertRaisesRegex(TypeError, 'expected a LinearCostModel'):
      linear.estimate_cost(np.ones([3]), 'proxylessnas_search')
    with self.assertRaisesRegex(TypeError, 'expected a LinearCostModel'):
      linear.estimate_cost_of_indices([], 'proxylessnas_search')

  def test_no_released_model(self):
    with self.assertRaisesRegex(
        ValueError, r"No released cost model for search space 'cifar_search';"
        r" released models exist for \['proxylessnas_search', "
        r"'proxylessnas_enlarged_search', 'mobilenet_v3_like_search'\]\. "
        r"Use cost_model='macs'"):
      linear.get_cost_model('cifar_search', 'released')

  def test_unknown_cost_model(self):
    with self.assertRaisesRegex(
        ValueError, r"Unknown cost model 'latency'; expected one of "
        r"\['released', 'macs', 'flash'\] or the path"):
      linear.get_cost_model(_PROXYLESSNAS, 'latency')

  def test_malformed_json(self):
    path = self._write('{"ssd": ')
    with self.assertRaisesRegex(ValueError,
                                f'Cost model {path}: not valid JSON'):
      linear.get_cost_model(_PROXYLESSNAS, path)
    path = self._write([1, 2], 'list.json')
    with self.assertRaisesRegex(ValueError, 'is not a JSON object'):
      linear.get_cost_model(_PROXYLESSNAS, path)

  @parameterized.named_parameters(
      ('ssd', dict(ssd='digits_search'),
       "field 'ssd' is 'digits_search', but the search space is "
       "'proxylessnas_search'"),
      ('num_features', dict(num_features=143),
       "field 'num_features' is 143, but the features of "
       "'proxylessnas_search' have length 144"),
      ('kernel_length', dict(kernel=[1.0] * 143),
       "field 'kernel' has 143 values; expected num_features = 144"),
      ('kernel_value', dict(kernel=[1.0] * 143 + ['x']),
       "field 'kernel' has a non-number 'x' at position 143"),
      ('bias', dict(bias=None), "field 'bias' is None, expected a number"),
      ('units', dict(units=3), "field 'units' is 3, expected a string"))
  def test_mismatched_json(self, changes, message):
    path = self._write(self._coefficients(**changes))
    with self.assertRaisesRegex(ValueError, f'Cost model {path}: {message}'):
      linear.get_cost_model(_PROXYLESSNAS, path)

  def test_missing_field(self):
    data = self._coefficients()
    del data['kernel']
    path = self._write(data)
    with self.assertRaisesRegex(ValueError,
                                f"Cost model {path} has no field 'kernel'"):
      linear.get_cost_model(_PROXYLESSNAS, path)

  def test_rewritten_json_is_reloaded(self):
    path = self._write(self._coefficients(bias=2.0))
    self.assertEqual(linear.load_coefficients(path, _PROXYLESSNAS).bias, 2.0)
    with open(path, 'w') as f:
      json.dump(self._coefficients(bias=5.0), f)
    os.utime(path, ns=(1, 1))  # A new modification time.
    self.assertEqual(linear.load_coefficients(path, _PROXYLESSNAS).bias, 5.0)

  def test_wrong_index_count_and_range(self):
    with self.assertRaisesRegex(ValueError, 'expected 73 indices .* got 3'):
      linear.estimate_cost_of_indices('0:0:0', _RELEASED)
    with self.assertRaisesRegex(ValueError, 'index 7 at position 1 .* out of '
                                'range; allowed 0..2'):
      linear.estimate_cost_of_indices([0, 7] + [0] * 71, _RELEASED)

  def test_estimate_cost_wrong_feature_length(self):
    with self.assertRaisesRegex(
        ValueError, "features have length 10, but the 'proxylessnas_search' "
        'cost model .* expects 144'):
      linear.estimate_cost(np.ones([10], np.float32), _RELEASED)
    with self.assertRaisesRegex(ValueError, 'rank 1 or 2'):
      linear.estimate_cost(np.ones([1, 1, 144]), _RELEASED)


class CostTextTest(tf.test.TestCase):

  def test_units_are_the_models_own(self):
    for ssd, name in ((_PROXYLESSNAS, 'released'), ('digits_search', 'macs')):
      self.assertEqual(linear.cost_units(name), linear.short_units(
          linear.get_cost_model(ssd, name).units))
    for ssd in _RELEASED_SPACES:
      self.assertEqual(linear.get_cost_model(ssd).units, linear.RELEASED_UNITS)
    self.assertEqual(linear.cost_units('released'), 'ms')
    self.assertEqual(linear.cost_units('macs'), 'MACs')
    self.assertEqual(linear.units_suffix('macs'), ' MACs')
    fitted = os.path.join(tempfile.mkdtemp(), 'fitted.json')
    with open(fitted, 'w') as f:
      json.dump({'units': 'ms', 'kernel': []}, f)
    self.assertEqual(linear.cost_units(fitted), 'ms')  # Its own units.
    for gone in (fitted + '.gone', None):
      self.assertEqual(linear.cost_units(gone), linear.UNKNOWN_UNITS)
      self.assertEqual(linear.units_suffix(gone), '')

  def test_thousands_are_grouped_and_small_values_keep_digits(self):
    self.assertEqual(linear.cost_text(2248370.4), '2,248,370')
    self.assertEqual(linear.cost_text(84.25), '84.25')
    self.assertEqual(linear.cost_text(999.5), '999.5')


if __name__ == '__main__':
  tf.test.main()
