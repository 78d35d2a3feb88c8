"""Tests for the search spaces, reference models and the registry."""

import math

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema
from tunas_tf.search_space import spec_io

_ALL = sorted(mobile.SEARCH_SPACES)
_SEARCH = ('proxylessnas_search', 'proxylessnas_enlarged_search',
           'mobilenet_v3_like_search', 'cifar_search', 'digits_search')
_REFERENCE = ('mobilenet_v2', 'mnasnet_b1', 'proxylessnas_mobile',
              'mobilenet_v3_large')


def _layers(spec):
  return [layer for block in spec.blocks for layer in block.layers]


def _bottlenecks(spec):
  """[(first choice of the layer, is residual)] for bottleneck-like layers."""
  found = []
  for layer in _layers(spec):
    residual = isinstance(layer, ops.ResidualSpec)
    inner = layer.layer if residual else layer
    if isinstance(inner, schema.OneOf):
      inner = inner.choices[0]
    if residual or isinstance(inner, ops.DepthwiseBottleneckSpec):
      found.append((inner, residual))
  return found


class MobileTest(parameterized.TestCase):

  @parameterized.named_parameters(
      # README: ~2.16e21, ~1.39e28, ~8.5e42 (products of all OneOf sizes).
      ('proxylessnas', 'proxylessnas_search', 3 * 6**6 * 12**15, 73),
      ('enlarged', 'proxylessnas_enlarged_search',
       3 * 6**6 * 12**15 * 4 * 4 * 4 * 6 * 7**5, 73),
      ('v3_like', 'mobilenet_v3_like_search',
       (4 * 4 * 6 * 7**5) * 2 * 6 * 36**5 * 72**15, 86),
  )
  def test_search_space_size_and_oneof_count(self, name, size, count):
    spec = mobile.get_search_space(name)
    self.assertEqual(mobile.search_space_size(spec), size)
    self.assertLen(schema.flatten(spec), count)

  def test_readme_sizes(self):
    sizes = [mobile.search_space_size(mobile.get_search_space(n))
             for n in _SEARCH[:3]]
    self.assertAlmostEqual(sizes[0] / 1e21, 2.16, places=2)
    self.assertAlmostEqual(sizes[1] / 1e28, 1.39, places=2)
    self.assertAlmostEqual(sizes[2] / 1e42, 8.5, places=1)

  @parameterized.parameters(*_ALL)
  def test_prune_and_round_trip(self, name):
    spec = mobile.get_search_space(name)
    self.assertEqual(spec_io.loads(spec_io.dumps(spec)), spec)
    rng = np.random.RandomState(0)
    indices = [rng.randint(n) for n in schema.num_choices(spec)]
    pruned = schema.prune(spec, ':'.join(map(str, indices)))
    self.assertEqual(schema.flatten(pruned), [])
    self.assertEqual(spec_io.loads(spec_io.dumps(pruned)), pruned)
    self.assertLen(pruned.blocks, len(spec.blocks))

  @parameterized.parameters(*_REFERENCE)
  def test_reference_models_are_fixed(self, name):
    spec = mobile.get_search_space(name)
    self.assertEqual(schema.flatten(spec), [])
    self.assertEqual(mobile.search_space_size(spec), 1)

  def test_total_stride(self):
    for name in _ALL:
      spec = mobile.get_search_space(name)
      stride = 1
      for layer in _layers(spec):
        inner = layer.layer if isinstance(layer, ops.ResidualSpec) else layer
        if isinstance(inner, schema.OneOf):
          inner = inner.choices[0]
        stride *= getattr(inner, 'strides', 1)
      expected = {224: 32, 32: 8, 8: 4}[mobile.space_info(name).image_size]
      self.assertEqual(stride, expected, name)

  def test_residual_layers_keep_stride_one(self):
    for name in _ALL:
      for layer in _layers(mobile.get_search_space(name)):
        if isinstance(layer, ops.ResidualSpec):
          inner = layer.layer
          for choice in (inner.choices if isinstance(inner, schema.OneOf)
                         else [inner]):
            self.assertEqual(getattr(choice, 'strides', 1), 1, name)

  def test_enlarged_block_filter_choices(self):
    spec = mobile.proxylessnas_enlarged_search()
    self.assertEqual(
        [b.filters.choices for b in spec.blocks],
        [(8, 16, 24, 32)] * 3 + [(16, 24, 32, 40, 48, 64),
                                 (32, 40, 48, 64, 80, 96, 128),
                                 (64, 80, 96, 128, 160, 192, 256),
                                 (128, 160, 192, 256, 320, 384, 512),
                                 (256, 320, 384, 512, 640, 768, 1024),
                                 (512, 640, 768, 1024, 1280, 1536, 2048)])

  def test_proxylessnas_search_layout(self):
    spec = mobile.proxylessnas_search()
    paths = [p for p, _ in schema.flatten_with_paths(spec)]
    self.assertEqual(paths[:6], [
        'blocks/0/filters', 'blocks/1/layers/0/kernel_size', 'blocks/1/filters',
        'blocks/2/layers/0/choices/0/kernel_size',
        'blocks/2/layers/0/choices/0/expansion_filters', 'blocks/2/layers/0'])
    self.assertEqual(paths[8], 'blocks/2/layers/1/layer')
    self.assertEqual(len(_bottlenecks(spec)), 21)
    self.assertEqual(sum(skip for _, skip in _bottlenecks(spec)), 15)

  def test_v3_like_search_layout(self):
    spec = mobile.mobilenet_v3_like_search()
    self.assertEqual(len(_bottlenecks(spec)), 20 + 1)  # 20 + the sepconv.
    head = spec.blocks[-1].layers[0]
    self.assertFalse(head.use_batch_norm)
    self.assertEqual(spec.blocks[0].layers[0].kernel_size.choices, (3, 5))

  @parameterized.named_parameters(
      ('mobilenet_v2', 'mobilenet_v2', mobile.MOBILENET_V2_FILTERS, 16),
      ('mnasnet_b1', 'mnasnet_b1', mobile.MNASNET_B1_FILTERS, 16),
      ('proxylessnas_mobile', 'proxylessnas_mobile',
       mobile.PROXYLESSNAS_MOBILE_FILTERS, 19),
  )
  def test_proxylessnas_reference_models(self, name, widths, num_kept):
    spec = mobile.get_search_space(name)
    self.assertEqual(tuple(b.filters for b in spec.blocks), widths)
    kept = [b for b, _ in _bottlenecks(spec) if not isinstance(b, ops.ZeroSpec)]
    self.assertEqual(len(kept), num_kept)  # Bottlenecks not skipped.

  def test_mobilenet_v2_ops(self):
    first, _ = _bottlenecks(mobile.mobilenet_v2())[0]
    self.assertEqual(first.kernel_size, 3)
    self.assertEqual(first.expansion_filters, ops.FilterMultiplier(6.0))

  def test_mobilenet_v3_large_widths(self):
    spec = mobile.mobilenet_v3_large()
    self.assertEqual([b.filters for b in spec.blocks],
                     [16, 24, 40, 80, 112, 160, 960, 1280])
    expanded = [b.expansion_filters for b, _ in _bottlenecks(spec)
                if isinstance(b, ops.DepthwiseBottleneckSpec)]
    self.assertEqual(expanded, [64, 72, 72, 120, 120, 240, 200, 184, 184, 480,
                                672, 672, 960, 960])

  def test_proxylessnas_search_indices_round_trip(self):
    indices = mobile.proxylessnas_search_indices(mobile.PROXYLESSNAS_MOBILE_OPS)
    self.assertLen(indices, 73)
    self.assertEqual(schema.prune(mobile.proxylessnas_search(), indices),
                     mobile.proxylessnas_mobile())

  def test_proxylessnas_search_indices_errors(self):
    with self.assertRaisesRegex(ValueError, 'Expected 22 op indices, got 2'):
      mobile.proxylessnas_search_indices([0, 1])
    ops_ = list(mobile.MOBILENET_V2_OPS)
    ops_[1] = 6  # The first layer of a block cannot be skipped.
    with self.assertRaisesRegex(ValueError, 'Bottleneck op index 6 not allowed'):
      mobile.proxylessnas_search_indices(ops_)

  def test_small_spaces_have_searched_widths(self):
    for name in ('cifar_search', 'digits_search'):
      spec = mobile.get_search_space(name)
      self.assertTrue(all(len(b.filters.choices) > 1 for b in spec.blocks))
      kernels = {o.choices for o in schema.flatten(spec) if o.choices == (3, 5, 7)}
      self.assertTrue(kernels)

  @parameterized.named_parameters(
      # Blocks 2-6 have three skippable bottlenecks each (layers 1-3).
      ('proxylessnas', 'proxylessnas_search',
       [(b, l) for b in range(2, 7) for l in (1, 2, 3)]),
      ('enlarged', 'proxylessnas_enlarged_search',
       [(b, l) for b in range(2, 7) for l in (1, 2, 3)]),
      # Plus the stem's residual separable conv (block 0, layer 2).
      ('v3_like', 'mobilenet_v3_like_search',
       [(0, 2)] + [(b, l) for b in range(1, 6) for l in (1, 2, 3)]),
      ('cifar', 'cifar_search',
       [(b, l) for b in range(2, 5) for l in (1, 2)]),
      ('digits', 'digits_search', [(2, 1), (3, 1)]),
      ('mobilenet_v2', 'mobilenet_v2', []),
      ('mobilenet_v3_large', 'mobilenet_v3_large', []),
  )
  def test_skippable_layers(self, name, positions):
    spec = mobile.get_search_space(name)
    expected = tuple(f'blocks/{b}/layers/{l}' for b, l in positions)
    self.assertEqual(mobile.skippable_layers(spec), expected)
    for prefix in expected:
      b, l = int(prefix.split('/')[1]), int(prefix.split('/')[3])
      layer = spec.blocks[b].layers[l]
      self.assertIsInstance(layer, ops.ResidualSpec)
      self.assertIn(ops.ZeroSpec(), layer.layer.choices)

  def test_get_search_space_unknown(self):
    with self.assertRaisesRegex(
        ValueError, r"Unknown search space 'resnet'; expected one of \["
        r"'cifar_search', 'digits_search'"):
      mobile.get_search_space('resnet')
    with self.assertRaisesRegex(ValueError, "Unknown search space 'x'"):
      mobile.space_info('x')

  def test_registry_facts(self):
    for name, info in mobile.SEARCH_SPACES.items():
      self.assertEqual(info.name, name)
      self.assertIs(mobile.space_info(name), info)
      self.assertEqual(info.build(), mobile.get_search_space(name))
    released = {name: info.released_target_ms
                for name, info in mobile.SEARCH_SPACES.items()
                if info.has_released_cost_model}
    self.assertEqual(released, {'proxylessnas_search': 84.0,
                                'proxylessnas_enlarged_search': 84.0,
                                'mobilenet_v3_like_search': 57.0})
    self.assertEqual(
        sorted(n for n, i in mobile.SEARCH_SPACES.items()
               if i.mobilenet_v3_like),
        ['mobilenet_v3_large', 'mobilenet_v3_like_search'])
    digits = mobile.space_info('digits_search')
    self.assertEqual((digits.image_size, digits.input_channels,
                      digits.num_classes), (8, 1, 10))
    cifar = mobile.space_info('cifar_search')
    self.assertEqual((cifar.image_size, cifar.input_channels,
                      cifar.num_classes), (32, 3, 10))
    self.assertEqual(mobile.space_info('mobilenet_v2').num_classes, 1001)


if __name__ == '__main__':
  absltest.main()
