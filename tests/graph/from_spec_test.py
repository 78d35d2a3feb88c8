"""Tests for graph/from_spec.py: architecture spec -> Graph, supernet weights.

* A pruned architecture's graph, with the supernet's weights inherited, gives
  the supernet's logits for the one-hot sample of that architecture
  (digits_search and cifar_search: largest, smallest, skipped layers,
  non-maximal widths).
* Its variables are exactly those of a supernet built on the architecture
  (same names, same shapes).
* Reference models build and run; specs the graph cannot express are refused.
"""

from typing import Dict, List, Sequence

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from tunas_tf.graph import from_spec
from tunas_tf.graph import inherit
from tunas_tf.graph import ir
from tunas_tf.graph import model as model_lib
from tunas_tf.models import supernet as supernet_lib
from tunas_tf.search_space import filters
from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema

OpType = ir.OpType
OneOf = schema.OneOf
Supernet = supernet_lib.Supernet
graph_from_spec = from_spec.graph_from_spec

# digits_search, in visit order (see schema.flatten_with_paths).
_DIGITS_INDICES = [
    1,        # blocks/0/filters: 16 of (8, 16, 24, 32)
    0,        # blocks/1/layers/0/kernel_size: 3
    0,        # blocks/1/filters: 8 of (8, 16)
    1, 0, 0,  # blocks/2/layers/0: kernel 5, expansion x3
    2, 1, 0,  # blocks/2/layers/1: kernel 7, x6, the bottleneck (residual)
    2,        # blocks/2/filters: 24 of (8, 16, 24, 32)
    2, 1, 0,  # blocks/3/layers/0: kernel 7, x6
    0, 0, 1,  # blocks/3/layers/1: skipped (Zero)
    1,        # blocks/3/filters: 24 of (16, ..., 64)
    2,        # blocks/4/filters: 48 of (32, ..., 128)
]
_SPACES = {'digits_search': (1, 8), 'cifar_search': (3, 32)}  # channels, px
# The graph model and the supernet run the same TF ops on the same values:
# their logits were equal to the bit under oneDNN's and Eigen's kernels. The
# bound leaves float32 reassociation (eps x depth x fan-in, ~1e-6) to a
# kernel that fuses them otherwise.
TOL = 1e-5


def _sampled(space, indices: Sequence[int]):
  """`space` with one-hot masks (Tensors) for `indices` on every OneOf."""
  paths = [path for path, _ in schema.flatten_with_paths(space)]
  masks = {path: tf.one_hot(i, len(oneof.choices))
           for path, i, oneof in zip(paths, indices, schema.flatten(space))}
  return schema.with_masks(space, masks)


def _architectures(name: str, space) -> Dict[str, List[int]]:
  """Largest, smallest and three random architectures (fixed seeds)."""
  archs = {'largest': schema.extreme_indices(space, True),
           'smallest': schema.extreme_indices(space, False)}
  if name == 'digits_search':
    archs['hand_picked'] = list(_DIGITS_INDICES)
  rng = np.random.default_rng(7)
  for k in range(3 if name == 'cifar_search' else 2):
    archs[f'random_{k}'] = [int(rng.integers(n))
                            for n in schema.num_choices(space)]
  return archs


def _images(size: int, channels: int, seed: int) -> tf.Tensor:
  """8 normally distributed images. The two paths sum in different orders;
  batch norm on batch statistics (the stateless graph, the supernet in
  training mode) over 8 images and a last stage of 2x2 or more (32+
  numbers per channel) keeps that rounding near float32's eps, where over
  few numbers it amplifies it without bound."""
  return tf.random.stateless_normal([8, size, size, channels], [seed, 5])


def _is_skip(oneof, index):
  return isinstance(oneof.choices[index], ops.ZeroSpec)


def _variable_shapes(model: model_lib.Model) -> Dict[str, tuple]:
  return {f'{op}/{var}': tuple(v.shape.as_list())
          for op, group in model.op_variables.items()
          for var, v in group.items()}


@pytest.mark.numerics
class OneShotEquivalenceTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters('digits_search', 'cifar_search')
  def test_inherited_graph_gives_the_supernets_logits(self, name):
    space = mobile.get_search_space(name)
    channels, size = _SPACES[name]
    net = Supernet(space, 10, mode='sampled', input_channels=channels, seed=3)
    images = _images(size, channels, 6)
    archs = _architectures(name, space)
    oneofs = schema.flatten(space)
    # The architectures cover skipped layers and non-maximal widths.
    chosen = [(o, i) for indices in archs.values()
              for o, i in zip(oneofs, indices)]
    self.assertTrue(any(_is_skip(o, i) for o, i in chosen))
    self.assertTrue(any(o.tag == schema.FILTERS_TAG and len(o.choices) > 1 and
                        o.choices[i] != max(o.choices) for o, i in chosen))
    old_params = inherit.supernet_params(net)
    for label, indices in archs.items():
      with self.subTest(arch=label):
        expected = net(_sampled(space, indices), images, training=False)
        graph, constants = graph_from_spec(schema.prune(space, indices), 10,
                                           input_channels=channels)
        model = model_lib.Model(graph, constants, stateless_batch_norm=True,
                                seed=0)
        before = model(images, training=False)  # Builds; fresh weights.
        self.assertNotAllClose(before, expected, rtol=1e-3, atol=1e-3)
        inherited, fresh = inherit.inherit_params(
            model_lib.get_params(model), old_params)
        self.assertEqual(fresh, {})
        self.assertEqual(inherit.find_mismatches(
            model_lib.get_params(model), old_params), [])
        self.assertEqual(inherit.inherit_from_supernet(model, net), {})
        self.assertEqual(sorted(model_lib.get_params(model)),
                         sorted(inherited))
        logits = model(images, training=False)
        self.assertEqual(logits.shape, (8, 10))
        self.assertAllClose(logits, expected, rtol=TOL, atol=TOL)

  def test_inherit_from_supernet_builds_an_unbuilt_model(self):
    space = mobile.get_search_space('digits_search')
    net = Supernet(space, 10, input_channels=1, seed=1)
    graph, constants = graph_from_spec(
        schema.prune(space, _DIGITS_INDICES), 10, input_channels=1)
    model = model_lib.Model(graph, constants, stateless_batch_norm=True)
    self.assertFalse(model.built)
    self.assertEqual(inherit.inherit_from_supernet(model, net, strict=True),
                     {})
    self.assertTrue(model.built)
    images = _images(8, 1, 2)
    self.assertAllClose(model(images),
                        net(_sampled(space, _DIGITS_INDICES), images),
                        rtol=TOL, atol=TOL)
    # The widest kernels are sliced: block 2 is 24 of 32 channels wide.
    kernel = model.op_variables['blocks/2/layers/1/project']['kernel']
    widest = net.variables_by_name()['blocks/2/layers/1/project/kernel']
    self.assertEqual(tuple(kernel.shape), (1, 1, 144, 24))
    self.assertEqual(tuple(widest.shape), (1, 1, 192, 32))
    self.assertAllEqual(kernel, widest[:, :, :144, :24])

  def test_dropout_is_an_op_before_the_classifier(self):
    space = mobile.get_search_space('digits_search')
    net = Supernet(space, 10, input_channels=1, seed=1)
    arch = schema.prune(space, _DIGITS_INDICES)
    graph, constants = graph_from_spec(arch, 10, input_channels=1,
                                       dropout_rate=0.5)
    dropout = graph.op('classifier/dropout')
    self.assertEqual(dropout.type, OpType.DROPOUT)
    self.assertEqual(graph.op('classifier').input_names,
                     ('classifier/dropout:0',))
    model = model_lib.Model(graph, constants, stateless_batch_norm=True)
    inherit.inherit_from_supernet(model, net, strict=True)
    images = _images(8, 1, 4)
    expected = net(_sampled(space, _DIGITS_INDICES), images, training=False)
    self.assertAllClose(model(images, training=False), expected, rtol=TOL,
                        atol=TOL)
    self.assertNotAllClose(model(images, training=True), expected)


class PathDropoutTest(tf.test.TestCase):

  def _digits(self, **kwargs):
    space = mobile.get_search_space('digits_search')
    return graph_from_spec(schema.prune(space, _DIGITS_INDICES), 10,
                           input_channels=1, **kwargs)

  def test_only_kept_skippable_layers_get_a_whole_tensor_dropout(self):
    skippable = mobile.skippable_layers(
        mobile.get_search_space('digits_search'))
    self.assertEqual(skippable, ('blocks/2/layers/1', 'blocks/3/layers/1'))
    graph, constants = self._digits(path_dropout_rate=0.5,
                                    skippable_layers=skippable)
    # blocks/2/layers/1 kept its bottleneck; blocks/3/layers/1 is skipped.
    dropouts = [op for op in graph.ops if op.type == OpType.DROPOUT]
    self.assertEqual([op.name for op in dropouts],
                     ['blocks/2/layers/1/path_dropout'])
    self.assertEqual(dropouts[0].op_kwargs, {'rate': 0.5,
                                             'whole_tensor': True})
    self.assertEqual(dropouts[0].input_names,
                     ('blocks/2/layers/1/project/bn:0',))
    self.assertEqual(graph.op('blocks/2/layers/1/add').input_names,
                     ('blocks/2/layers/1/path_dropout:0',
                      'blocks/2/layers/0/project/bn:0'))
    self.assertEmpty([op.name for op in graph.ops
                      if op.name.startswith('blocks/3/layers/1/')])
    # Training: the branch is all dropped or all scaled by 1 / (1 - 0.5);
    # evaluating: the graph without path dropout.
    model = model_lib.Model(graph, constants, stateless_batch_norm=True,
                            seed=0)
    plain = model_lib.Model(*self._digits(), stateless_batch_norm=True,
                            seed=0)
    images = _images(8, 1, 2)
    self.assertAllEqual(model(images), plain(images))
    kept = set()
    for step in range(8):
      values = model.call_all(images, training=True,
                              dropout_seed=tf.constant([0, step], tf.int64))
      branch = values['blocks/2/layers/1/project/bn:0'].numpy()
      dropped = values['blocks/2/layers/1/path_dropout:0'].numpy()
      kept.add(bool(dropped.any()))
      self.assertAllClose(dropped, 2.0 * branch if dropped.any()
                          else np.zeros_like(branch))
    self.assertEqual(kept, {False, True})

  def test_rate_zero_or_no_skippable_layers_add_nothing(self):
    plain, _ = self._digits()
    skippable = ('blocks/2/layers/1', 'blocks/3/layers/1')
    self.assertEqual(self._digits(skippable_layers=skippable)[0], plain)
    # Without path dropout a non-residual layer may be named too.
    self.assertEqual(
        self._digits(skippable_layers=['blocks/2/layers/0'])[0], plain)
    self.assertEqual(self._digits(path_dropout_rate=0.5)[0], plain)

  def test_residual_layers_not_named_get_nothing(self):
    # A reference model: residual layers, none skippable unless named.
    spec = mobile.get_search_space('mobilenet_v3_large')
    graph, _ = graph_from_spec(spec, 10, path_dropout_rate=0.2,
                               skippable_layers=['blocks/1/layers/1'])
    self.assertEqual(
        [op.name for op in graph.ops if op.type == OpType.DROPOUT],
        ['blocks/1/layers/1/path_dropout'])
    self.assertIn('blocks/2/layers/1/add', [op.name for op in graph.ops])

  def test_bad_arguments_are_refused_naming_them(self):
    for kwargs, message in (
        ({'path_dropout_rate': 1.0}, r'path_dropout_rate must be in \[0, 1\)'),
        ({'path_dropout_rate': -0.1}, 'path_dropout_rate must be in'),
        ({'skippable_layers': ['blocks/9/layers/0', 'blocks/2/layers/1']},
         r"skippable_layers \['blocks/9/layers/0'\] are not layers"),
        ({'skippable_layers': ['blocks/2/layers/0'],
          'path_dropout_rate': 0.5},
         r"\['blocks/2/layers/0'\] are not residual layers"),
        ({'skippable_layers': 'blocks/2/layers/1'}, 'got the string')):
      with self.assertRaisesRegex(ValueError, message, msg=kwargs):
        self._digits(**kwargs)


class NamingTest(tf.test.TestCase, parameterized.TestCase):

  def test_ops_are_named_by_position_and_role(self):
    space = mobile.get_search_space('digits_search')
    graph, constants = graph_from_spec(schema.prune(space, _DIGITS_INDICES),
                                       10, input_channels=1)
    self.assertEqual(graph.input_names, ('input',))
    self.assertEqual(graph.output_names, ('logits',))
    self.assertEqual(constants, {'num_classes': 10})
    types = {op.name: op.type for op in graph.ops}
    expected = {
        'blocks/0/layers/0/conv_k3': OpType.CONV,
        'blocks/0/layers/0/conv_k3/bn': OpType.BATCH_NORM,
        'blocks/0/layers/1/relu': OpType.RELU,
        'blocks/1/layers/0/depthwise_k3': OpType.DEPTHWISE_CONV,
        'blocks/1/layers/0/depthwise_k3/relu': OpType.RELU,
        'blocks/1/layers/0/project/bn': OpType.BATCH_NORM,
        'blocks/2/layers/0/expand': OpType.CONV,
        'blocks/2/layers/0/expand/bn': OpType.BATCH_NORM,
        'blocks/2/layers/0/depthwise_k5': OpType.DEPTHWISE_CONV,
        'blocks/2/layers/1/depthwise_k7': OpType.DEPTHWISE_CONV,
        'blocks/2/layers/1/add': OpType.ADD,
        'blocks/4/layers/2/pool': OpType.GLOBAL_AVG_POOL,
        'classifier': OpType.CONV,
        'logits': OpType.GLOBAL_AVG_POOL,
    }
    for op_name, op_type in expected.items():
      self.assertEqual(types.get(op_name), op_type, msg=op_name)
    # The skipped layer and the first block's first layer's residual: no ops.
    self.assertEmpty([n for n in types if n.startswith('blocks/3/layers/1/')])
    self.assertNotIn('blocks/2/layers/0/add', types)
    # Widths: expansion x3 of the 8-wide input; stride 2 on the depthwise.
    self.assertEqual(graph.op('blocks/2/layers/0/expand').op_kwargs['features'],
                     filters.scale_filters(8, 3.0, 8))
    self.assertEqual(
        graph.op('blocks/2/layers/0/depthwise_k5').op_kwargs['strides'], 2)
    self.assertEqual(graph.op('blocks/2/layers/1/add').input_names,
                     ('blocks/2/layers/1/project/bn:0',
                      'blocks/2/layers/0/project/bn:0'))

  @parameterized.parameters(('digits_search', 1), ('mobilenet_v3_large', 3),
                            ('proxylessnas_mobile', 3))
  def test_variables_are_a_supernets_of_the_architecture(self, name,
                                                         channels):
    space = mobile.get_search_space(name)
    arch = (schema.prune(space, _DIGITS_INDICES) if name == 'digits_search'
            else space)
    fixed = Supernet(arch, 10, input_channels=channels, seed=0)
    graph, constants = graph_from_spec(arch, 10, input_channels=channels)
    model = model_lib.Model(graph, constants, stateless_batch_norm=True)
    model(tf.zeros([1, 1, 1, channels]))
    self.assertEqual(
        _variable_shapes(model),
        {name: tuple(v.shape.as_list())
         for name, v in fixed.variables_by_name().items()})

  def test_supernet_params_splits_names_at_the_last_slash(self):
    values = {'blocks/0/layers/0/conv_k3/bn/gamma': np.ones([2]),
              'classifier/bias': tf.Variable([1.0, 2.0])}
    params = inherit.supernet_params(values)
    self.assertEqual(sorted(params), ['blocks/0/layers/0/conv_k3/bn',
                                      'classifier'])
    self.assertAllEqual(params['classifier']['bias'], [1.0, 2.0])
    self.assertEqual(params['classifier']['bias'].dtype, np.float32)
    with self.assertRaisesRegex(ValueError, "'kernel'"):
      inherit.supernet_params({'kernel': np.ones([1])})
    with self.assertRaisesRegex(ValueError, 'variables_by_name'):
      inherit.supernet_params([1, 2])


class ReferenceModelTest(tf.test.TestCase):

  def test_proxylessnas_mobile_runs_at_224(self):
    spec = mobile.get_search_space('proxylessnas_mobile')
    graph, constants = graph_from_spec(spec, 1001)
    model = model_lib.Model(graph, constants, seed=0)  # Moving averages.
    logits = model(tf.random.stateless_uniform([1, 224, 224, 3], [0, 1]))
    self.assertEqual(logits.shape, (1, 1001))
    self.assertTrue(np.all(np.isfinite(logits)))
    # 4.08M parameters with 1001 classes (Cai et al. report 4.1M).
    self.assertBetween(model_lib.count_params(model), 4.0e6, 4.2e6)

  @pytest.mark.numerics
  def test_mobilenet_v3_large_equals_the_supernet_of_the_fixed_spec(self):
    # Squeeze-excite, swish6 and a conv with a bias after global pooling.
    spec = mobile.get_search_space('mobilenet_v3_large')
    net = Supernet(spec, 10, seed=2)
    graph, constants = graph_from_spec(spec, 10)
    self.assertEqual(graph.op('blocks/2/layers/0/se/mul').type, OpType.MUL)
    self.assertEqual(graph.op('blocks/7/layers/0/conv_k1').op_kwargs[
        'use_bias'], True)
    model = model_lib.Model(graph, constants, stateless_batch_norm=True)
    self.assertEqual(inherit.inherit_from_supernet(model, net, strict=True),
                     {})
    # The supernet's swish6 multiplies by 1/6 and the graph's H_SWISH divides
    # by 6: last-bit differences, which a batch norm over 2 values (1x1
    # maps at 32 px, batch 2) amplified to 3e-3; at 64 px (2x2 maps) with 8
    # images the logits were equal under oneDNN's and Eigen's kernels.
    images = _images(64, 3, 3)
    self.assertAllClose(model(images), net(spec, images), rtol=TOL,
                        atol=TOL)


class ErrorTest(tf.test.TestCase):

  def test_a_search_space_is_refused_naming_the_path(self):
    space = mobile.get_search_space('digits_search')
    with self.assertRaisesRegex(ValueError,
                                r"18 OneOf\(s\), at 'blocks/0/filters'"):
      graph_from_spec(space, 10, input_channels=1)

  def test_a_partly_pruned_spec_is_refused_naming_the_path(self):
    spec = ops.ConvTowerSpec((ops.Block((
        ops.ConvSpec(3, 1), ops.ActivationSpec('relu'),
        ops.ConvSpec(OneOf((1, 3), schema.OP_TAG), 1)), 8),), 8)
    with self.assertRaisesRegex(ValueError, 'blocks/0/layers/2/kernel_size'):
      graph_from_spec(spec, 10)

  def test_a_zero_outside_a_residual_is_refused(self):
    spec = ops.ConvTowerSpec((ops.Block((ops.ConvSpec(3, 1), ops.ZeroSpec()),
                                        8),), 8)
    with self.assertRaisesRegex(ValueError, 'blocks/0/layers/1: a ZeroSpec'):
      graph_from_spec(spec, 10)

  def test_bad_arguments_are_refused(self):
    spec = mobile.get_search_space('mobilenet_v2')
    with self.assertRaisesRegex(ValueError, 'num_classes'):
      graph_from_spec(spec, 0)
    with self.assertRaisesRegex(ValueError, 'input_channels'):
      graph_from_spec(spec, 10, input_channels=0)
    with self.assertRaisesRegex(ValueError, 'dropout_rate'):
      graph_from_spec(spec, 10, dropout_rate=1.0)
    with self.assertRaisesRegex(ValueError, 'ConvTowerSpec'):
      graph_from_spec(spec.blocks[0], 10)

  def test_strict_inheritance_refuses_a_foreign_supernet(self):
    digits = Supernet(mobile.get_search_space('digits_search'), 10,
                      input_channels=1, seed=0)
    space = mobile.get_search_space('cifar_search')
    graph, constants = graph_from_spec(
        schema.prune(space, schema.extreme_indices(space, True)), 10)
    model = model_lib.Model(graph, constants, stateless_batch_norm=True)
    model(tf.zeros([1, 1, 1, 3]))
    with self.assertRaisesRegex(ValueError, 'not inherited'):
      inherit.inherit_from_supernet(model, digits, strict=True)
    fresh = inherit.inherit_from_supernet(model, digits)
    self.assertIn('kernel', fresh['blocks/0/layers/0/conv_k3'])  # 3 channels.
    self.assertIn('blocks/4/layers/2/project', fresh)  # Not in digits.


if __name__ == '__main__':
  tf.test.main()
