"""Tests for the coupled one-hot cost-model features."""

import random

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tunas_tf.controller import reinforce
from tunas_tf.cost_model import features
from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema
from tunas_tf.search_space.schema import FILTERS_TAG, OP_TAG, OneOf

_LAYER = 'blocks/0/layers/0'


def _one_layer(layer):
  """One block of plain width 32 (so no filter mask) holding `layer`."""
  return ops.ConvTowerSpec((ops.Block((layer,), 32),), filters_base=8)


def _with_masks(spec, masks_by_path, as_tensor=False):
  def mask(path, _):
    value = np.asarray(masks_by_path[path], np.float32)
    return tf.constant(value) if as_tensor else value
  return schema.with_masks(spec, mask)


def _random_indices(spec, seed):
  rng = random.Random(seed)
  return [rng.randrange(n) for n in schema.num_choices(spec)]


def _to_numpy_masks(sampled):
  return schema.with_masks(sampled, lambda _, o: np.asarray(o.mask))


# The feature-layout cases of the original's mobile_cost_model_test.py.
_CONV5 = ops.ConvSpec(kernel_size=5, strides=1)
_CONV_K = ops.ConvSpec(kernel_size=OneOf((3, 5, 7), OP_TAG), strides=1)
_SEP_K = ops.SeparableConvSpec(kernel_size=OneOf((3, 5, 7), OP_TAG), strides=1)
_CONV_K2 = ops.ConvSpec(kernel_size=OneOf((3, 5), OP_TAG), strides=1)
_K = f'{_LAYER}/choices/1/kernel_size'
_K1 = f'{_LAYER}/choices/0/kernel_size'
_K2 = f'{_LAYER}/choices/1/kernel_size'
_FEATURE_CASES = (
    ('zero_only', OneOf((ops.ZeroSpec(),), OP_TAG), {_LAYER: [1]}, [1]),
    ('zero_or_conv_0', OneOf((ops.ZeroSpec(), _CONV5), OP_TAG),
     {_LAYER: [1, 0]}, [1, 0]),
    ('zero_or_conv_1', OneOf((ops.ZeroSpec(), _CONV5), OP_TAG),
     {_LAYER: [0, 1]}, [0, 1]),
    ('zero_or_zero_0', OneOf((ops.ZeroSpec(), ops.ZeroSpec()), OP_TAG),
     {_LAYER: [1, 0]}, [1, 0]),
    ('zero_or_zero_1', OneOf((ops.ZeroSpec(), ops.ZeroSpec()), OP_TAG),
     {_LAYER: [0, 1]}, [0, 1]),
    ('child_zero_k3', OneOf((ops.ZeroSpec(), _CONV_K), OP_TAG),
     {_LAYER: [1, 0], _K: [1, 0, 0]}, [1, 0, 0, 0]),
    ('child_zero_k5', OneOf((ops.ZeroSpec(), _CONV_K), OP_TAG),
     {_LAYER: [1, 0], _K: [0, 1, 0]}, [1, 0, 0, 0]),
    ('child_zero_k7', OneOf((ops.ZeroSpec(), _CONV_K), OP_TAG),
     {_LAYER: [1, 0], _K: [0, 0, 1]}, [1, 0, 0, 0]),
    ('child_conv_k3', OneOf((ops.ZeroSpec(), _CONV_K), OP_TAG),
     {_LAYER: [0, 1], _K: [1, 0, 0]}, [0, 1, 0, 0]),
    ('child_conv_k5', OneOf((ops.ZeroSpec(), _CONV_K), OP_TAG),
     {_LAYER: [0, 1], _K: [0, 1, 0]}, [0, 0, 1, 0]),
    ('child_conv_k7', OneOf((ops.ZeroSpec(), _CONV_K), OP_TAG),
     {_LAYER: [0, 1], _K: [0, 0, 1]}, [0, 0, 0, 1]),
    ('two_children_sep_k3', OneOf((_SEP_K, _CONV_K2), OP_TAG),
     {_LAYER: [1, 0], _K1: [1, 0, 0], _K2: [1, 0]}, [1, 0, 0, 0, 0]),
    ('two_children_sep_k5', OneOf((_SEP_K, _CONV_K2), OP_TAG),
     {_LAYER: [1, 0], _K1: [0, 1, 0], _K2: [1, 0]}, [0, 1, 0, 0, 0]),
    ('two_children_sep_k7', OneOf((_SEP_K, _CONV_K2), OP_TAG),
     {_LAYER: [1, 0], _K1: [0, 0, 1], _K2: [1, 0]}, [0, 0, 1, 0, 0]),
    ('two_children_conv_k3', OneOf((_SEP_K, _CONV_K2), OP_TAG),
     {_LAYER: [0, 1], _K1: [1, 0, 0], _K2: [1, 0]}, [0, 0, 0, 1, 0]),
    ('two_children_conv_k5', OneOf((_SEP_K, _CONV_K2), OP_TAG),
     {_LAYER: [0, 1], _K1: [1, 0, 0], _K2: [0, 1]}, [0, 0, 0, 0, 1]),
)


class FeaturesTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(*_FEATURE_CASES)
  def test_features_reference_cases(self, layer, masks, expected):
    spec = _one_layer(layer)
    numpy_features = features.features(_with_masks(spec, masks))
    self.assertIsInstance(numpy_features, np.ndarray)
    self.assertEqual(numpy_features.dtype, np.float32)
    self.assertAllEqual(numpy_features, expected)
    tensor_features = features.features(_with_masks(spec, masks, True))
    self.assertEqual(tensor_features.dtype, tf.float32)
    self.assertAllEqual(tensor_features, expected)

  def test_features_coupling_order_by_hand(self):
    # Block 0: conv k{3,5}, width {8,16}: kron(out0, k) -> 4 features.
    # Block 1: conv to width {16,24,32} from out0: kron(out1, out0) -> 6;
    #          activation: kron(out1, out1) -> 9.   Total 19.
    spec = ops.ConvTowerSpec((
        ops.Block((ops.ConvSpec(OneOf((3, 5), OP_TAG), 1),),
                  OneOf((8, 16), FILTERS_TAG)),
        ops.Block((ops.ConvSpec(3, 1), ops.ActivationSpec('relu')),
                  OneOf((16, 24, 32), FILTERS_TAG)),
    ), filters_base=8)
    self.assertEqual(features.feature_length(spec), 19)
    # Visit order: kernel, width 0, width 1. Pick k5, 16, 32.
    values = features.features(features.attach_one_hot_masks(spec, [1, 1, 2]))
    # Block 0: (out 1, k 1) -> 1*2+1 = 3. Block 1 layer 0: (out 2, in 1) ->
    # 4 + 2*2+1 = 9. Layer 1: (out 2, in 2) -> 4 + 6 + 2*3+2 = 18.
    self.assertEqual(np.flatnonzero(values).tolist(), [3, 9, 18])

  @parameterized.named_parameters(
      ('proxylessnas', 'proxylessnas_search', 144),
      ('enlarged', 'proxylessnas_enlarged_search', 5983),
      ('v3_like', 'mobilenet_v3_like_search', 29068))
  def test_feature_length_released_spaces(self, ssd, length):
    spec = mobile.get_search_space(ssd)
    self.assertEqual(features.feature_length(spec), length)
    values = features.features(
        features.attach_one_hot_masks(spec, _random_indices(spec, 0)))
    self.assertEqual(values.shape, (length,))

  @parameterized.parameters(*sorted(mobile.SEARCH_SPACES))
  def test_features_tensor_and_numpy_paths_agree(self, ssd):
    spec = mobile.get_search_space(ssd)
    masked = features.attach_one_hot_masks(spec, _random_indices(spec, 1))
    numpy_features = features.features(masked)
    as_tensors = schema.with_masks(masked, lambda _, o: tf.constant(o.mask))
    tensor_features = features.features(as_tensors)
    # Reference models have no OneOf, hence no tensor: NumPy [1.0] then.
    if schema.flatten(spec):
      self.assertTrue(tf.is_tensor(tensor_features))
    self.assertEqual(tensor_features.dtype, tf.float32)
    self.assertLen(tensor_features.shape, 1)
    self.assertAllEqual(tensor_features, numpy_features)
    self.assertLen(numpy_features, features.feature_length(spec))

  def test_features_warmup_mixture_paths_agree(self):
    spec = mobile.proxylessnas_enlarged_search()
    tf.random.set_seed(0)
    sampled, _ = reinforce.independent_sample(
        spec, increase_ops_probability=1.0, increase_filters_probability=0.5)
    tensor_features = features.features(sampled)
    numpy_features = features.features(_to_numpy_masks(sampled))
    self.assertAllClose(tensor_features, numpy_features)
    # Uniform op masks: fractional features, e.g. 1/3 * 1/2 for a bottleneck.
    self.assertGreater(np.sum((numpy_features > 0) & (numpy_features < 1)), 0)

  def test_features_without_oneofs(self):
    values = features.features(mobile.mobilenet_v2())
    self.assertAllEqual(values, [1.0])
    self.assertEqual(features.feature_length(mobile.mobilenet_v2()), 1)

  def test_layer_features(self):
    layer = _with_masks(OneOf((ops.ZeroSpec(), _CONV_K), OP_TAG),
                        {'': [0, 1], 'choices/1/kernel_size': [0, 0, 1]})
    self.assertAllEqual(features.layer_features(layer), [0, 0, 0, 1])
    self.assertEqual(features.layer_feature_length(layer), 4)

  def test_features_missing_mask(self):
    spec = _one_layer(OneOf((ops.ZeroSpec(), _CONV5), OP_TAG))
    with self.assertRaisesRegex(ValueError,
                                "OneOf at 'blocks/0/layers/0' has no mask"):
      features.features(spec)

  @parameterized.named_parameters(('numpy', False), ('tensor', True))
  def test_features_wrong_mask_length(self, as_tensor):
    spec = _with_masks(_one_layer(OneOf((ops.ZeroSpec(), _CONV5), OP_TAG)),
                       {_LAYER: [1, 0, 0]}, as_tensor)
    with self.assertRaisesRegex(ValueError,
                                "mask at 'blocks/0/layers/0' has shape"):
      features.features(spec)

  def test_features_not_a_tower(self):
    with self.assertRaisesRegex(ValueError, 'expected a ConvTowerSpec'):
      features.features([OneOf((1, 2), OP_TAG)])

  def test_attach_one_hot_masks(self):
    spec = [OneOf((1, 2, 3), OP_TAG), OneOf((4, 5), FILTERS_TAG)]
    masked = features.attach_one_hot_masks(spec, '2:0')
    self.assertAllEqual(masked[0].mask, [0, 0, 1])
    self.assertAllEqual(masked[1].mask, [1, 0])
    self.assertIsNone(spec[0].mask)  # The input is not mutated.

  def test_attach_one_hot_masks_errors(self):
    spec = mobile.proxylessnas_search()
    with self.assertRaisesRegex(ValueError, 'expected 73 indices .* got 72'):
      features.attach_one_hot_masks(spec, [0] * 72)
    indices = [0] * 73
    indices[1] = 3
    with self.assertRaisesRegex(
        ValueError, r"index 3 at position 1 \(path 'blocks/1/layers/0/"
        r"kernel_size'\) is out of range; allowed 0..2"):
      features.attach_one_hot_masks(spec, indices)

  @parameterized.parameters(*sorted(mobile.SEARCH_SPACES))
  def test_batched_features_rows_are_each_architectures(self, ssd):
    spec = mobile.get_search_space(ssd)
    indices = [_random_indices(spec, seed) for seed in range(4)] + [
        schema.extreme_indices(spec, largest) for largest in (False, True)]
    batch = features.batched_features(spec, indices)
    self.assertEqual(batch.dtype, np.float32)
    self.assertEqual(batch.shape, (6, features.feature_length(spec)))
    for row, one in zip(batch, indices):  # Exact: products of 0s and 1s.
      self.assertAllEqual(
          row, features.features(features.attach_one_hot_masks(spec, one)))
    if schema.flatten(spec):  # Else every row is the constant [1].
      self.assertGreater(len({tuple(row) for row in batch}), 1)
    self.assertEqual(features.batched_features(spec, []).shape,
                     (0, features.feature_length(spec)))

  def test_batched_mixture_masks_give_each_rows_features(self):
    # Warm-up-like mixtures, not one-hot: every product shows. Row b of the
    # features is exactly the features of the masks' rows b.
    spec = mobile.proxylessnas_enlarged_search()
    rng = np.random.RandomState(0)
    batched = schema.with_masks(spec, lambda _, o: rng.uniform(
        size=[3, len(o.choices)]).astype(np.float32))
    values = features.features(batched)
    self.assertEqual(values.shape, (3, features.feature_length(spec)))
    layer = batched.blocks[1].layers[0]
    self.assertLen(features.layer_features(layer), 3)
    for b in range(3):
      row = schema.with_masks(batched, lambda _, o, b=b: o.mask[b])
      self.assertAllEqual(values[b], features.features(row))
      self.assertAllEqual(features.layer_features(layer)[b],
                          features.layer_features(row.blocks[1].layers[0]))

  def test_batched_masks_of_another_batch(self):
    # The kernel's mask comes first in visit order: it sets the batch, 1.
    spec = _with_masks(_one_layer(OneOf((ops.ZeroSpec(), _CONV_K), OP_TAG)),
                       {_LAYER: [[1, 0], [0, 1]], _K: [[1, 0, 0]]})
    with self.assertRaisesRegex(
        ValueError, r"mask at 'blocks/0/layers/0' has shape \(2, 2\); "
        r'expected \[1, 2\] \(one row per architecture'):
      features.features(spec)

  def test_attach_batched_one_hot_masks(self):
    spec = [OneOf((1, 2, 3), OP_TAG), OneOf((4, 5), FILTERS_TAG)]
    masked = features.attach_batched_one_hot_masks(spec, ['2:0', (1, 1)])
    self.assertAllEqual(masked[0].mask, [[0, 0, 1], [0, 1, 0]])
    self.assertAllEqual(masked[1].mask, [[1, 0], [0, 1]])
    self.assertEqual(masked[1].mask.dtype, np.float32)
    self.assertIsNone(spec[0].mask)  # The input is not mutated.
    empty = features.attach_batched_one_hot_masks(spec, [])
    self.assertEqual(empty[0].mask.shape, (0, 3))

  def test_attach_batched_one_hot_masks_errors_are_prunes(self):
    spec = mobile.proxylessnas_search()
    out_of_range = [0] * 73
    out_of_range[1] = 3
    for bad in ([0] * 72, out_of_range, '0:x'):
      with self.assertRaises(ValueError) as pruned:
        schema.prune(spec, bad)
      for attach in (
          lambda bad=bad: features.attach_one_hot_masks(spec, bad),
          lambda bad=bad: features.attach_batched_one_hot_masks(
              spec, [[0] * 73, bad]),
          lambda bad=bad: features.batched_features(spec, [bad, [0] * 73])):
        with self.assertRaises(ValueError) as attached:
          attach()
        self.assertEqual(str(attached.exception), str(pruned.exception))


if __name__ == '__main__':
  tf.test.main()
