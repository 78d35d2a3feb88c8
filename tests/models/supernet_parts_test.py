"""Every part type, three ways: masked supernet == sampled supernet == graph.

One list of cases, one test: each case is a tiny search space (a stem conv,
the part under test, the classifier head) with width choices, sampled one
hot at non-maximal widths. For each, the masked and sampled supernets (same
weights) and the standalone graph of the pruned architecture
(`graph_from_spec`, weights inherited, stateless batch norm) give the same
logits, and the same L2 term (the supernet's and train_eval's).

The whole-network cases (digits_search, cifar_search, a v3-like space, warm-up
masks, gradients) stay in `supernet_equivalence_test` and `from_spec_test`.
"""

import pytest
import tensorflow as tf
from absl.testing import parameterized

from tunas_tf.graph import from_spec
from tunas_tf.graph import inherit
from tunas_tf.graph import model as model_lib
from tunas_tf.models import supernet as supernet_lib
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema
from tunas_tf.train_eval import steps as train_eval_steps

pytestmark = pytest.mark.numerics

OneOf = schema.OneOf
OP, FILTERS = schema.OP_TAG, schema.FILTERS_TAG
# The paths sum in different orders (masked mode adds zeroed channels and
# kernel libraries block sums their own way): float32 rounding (eps 1.2e-7)
# over a few layers of sums of up to ~10^2 terms, on logits of magnitude ~1.
# Batch norm is well conditioned here: 8 normal images of 8x8 (4x4 after a
# stride of 2), so 128+ numbers per channel. Measured under Eigen's kernels:
# masked vs sampled 1.4e-6 at most, the graph equal to the sampled supernet.
LOGITS_TOL = 1e-5
# The same squares summed in another order (relative eps x log2 of ~10^4).
REGULARIZER_RTOL = 1e-5
WEIGHT_DECAY = 0.1
CHANNELS, SIZE, BATCH, CLASSES = 3, 8, 8, 5


def _bottleneck(se, activation, strides=1):
  return ops.DepthwiseBottleneckSpec(
      OneOf((3, 5), OP),
      OneOf((ops.FilterMultiplier(1.0), ops.FilterMultiplier(3.0)), FILTERS),
      se, strides, ops.ActivationSpec(activation))


# (name, layers of the part's block, skip): `skip` picks the ZeroSpec of a
# skippable layer; other op choices take their last (largest) choice, and
# every filters choice its smallest (not the widest) value.
_CASES = (
    ('conv_kernel_choice', (ops.ConvSpec(OneOf((1, 3), OP), 1),), False),
    ('conv_stride_2', (ops.ConvSpec(3, 2),), False),
    ('conv_without_batch_norm', (ops.ConvSpec(1, 1, use_batch_norm=False),),
     False),
    ('separable', (ops.SeparableConvSpec(OneOf((3, 5), OP), 1,
                                         ops.ActivationSpec(ops.RELU)),),
     False),
    ('bottleneck_without_se', (_bottleneck(False, ops.RELU6),), False),
    ('bottleneck_with_se', (_bottleneck(True, ops.SWISH6),), False),
    ('bottleneck_se_choice_stride_2',
     (_bottleneck(OneOf((False, True), OP), ops.RELU, strides=2),), False),
    ('relu', (ops.ConvSpec(3, 1), ops.ActivationSpec(ops.RELU)), False),
    ('relu6', (ops.ConvSpec(3, 1), ops.ActivationSpec(ops.RELU6)), False),
    ('swish6', (ops.ConvSpec(3, 1), ops.ActivationSpec(ops.SWISH6)), False),
    ('sigmoid', (ops.ConvSpec(3, 1), ops.ActivationSpec(ops.SIGMOID)), False),
    ('residual', (ops.ConvSpec(1, 1),
                  ops.ResidualSpec(_bottleneck(True, ops.RELU))), False),
    ('residual_choice_kept',
     (ops.ConvSpec(1, 1),
      ops.ResidualSpec(OneOf((_bottleneck(False, ops.RELU), ops.ZeroSpec()),
                             OP))), False),
    ('skip_zero',
     (ops.ConvSpec(1, 1),
      ops.ResidualSpec(OneOf((_bottleneck(False, ops.RELU), ops.ZeroSpec()),
                             OP))), True),
    ('global_pool_then_head_conv',
     (ops.ConvSpec(1, 1), ops.ActivationSpec(ops.SWISH6),
      ops.GlobalAveragePoolSpec(), ops.ConvSpec(1, 1, use_batch_norm=False),
      ops.ActivationSpec(ops.SWISH6)), False),
)


def _space(layers):
  """A 3x3 stem (width 8 or 16) and relu, then `layers` (width 8 or 16)."""
  return ops.ConvTowerSpec((
      ops.Block((ops.ConvSpec(3, 1), ops.ActivationSpec(ops.RELU)),
                OneOf((8, 16), FILTERS)),
      ops.Block(tuple(layers), OneOf((8, 16), FILTERS))), 8)


def _indices(space, skip):
  indices = []
  for oneof in schema.flatten(space):
    kinds = [isinstance(c, ops.ZeroSpec) for c in oneof.choices]
    if any(kinds):
      indices.append(kinds.index(True) if skip else kinds.index(False))
    elif oneof.tag == FILTERS:
      indices.append(0)
    else:
      indices.append(len(oneof.choices) - 1)
  return indices


class PartAgreementTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(*_CASES)
  def test_masked_sampled_and_graph_agree(self, layers, skip):
    space = _space(layers)
    indices = _indices(space, skip)
    masks = [tf.one_hot(i, n)
             for i, n in zip(indices, schema.num_choices(space))]
    sampled = schema.with_masks(space, masks)
    images = tf.random.stateless_normal([BATCH, SIZE, SIZE, CHANNELS], [3, 1])
    nets = {mode: supernet_lib.Supernet(space, CLASSES, mode=mode,
                                        input_channels=CHANNELS, seed=5)
            for mode in supernet_lib.MODES}
    values = nets['masked'].variables_by_name()
    # Logits of magnitude ~1 (the N(0, 0.01) classifier gives ~0.01), so
    # that the tolerance below is a relative one too.
    values['classifier/kernel'].assign(values['classifier/kernel'] * 100.0)
    for name, variable in nets['sampled'].variables_by_name().items():
      variable.assign(values[name])
    logits, regs = {}, {}
    for mode, net in nets.items():
      logits[mode] = net(sampled, images, training=False)
      regs[mode] = net.regularization_loss(sampled, WEIGHT_DECAY)
    graph, constants = from_spec.graph_from_spec(
        schema.prune(space, indices), CLASSES, input_channels=CHANNELS)
    model = model_lib.Model(graph, constants, stateless_batch_norm=True)
    self.assertEqual(inherit.inherit_from_supernet(model, nets['sampled']),
                     {})
    logits['graph'] = model(images, training=False)
    regs['graph'] = train_eval_steps.regularization_loss(model, WEIGHT_DECAY)

    self.assertEqual(logits['graph'].shape, (BATCH, CLASSES))
    for other in ('masked', 'graph'):
      self.assertAllClose(logits[other], logits['sampled'], rtol=0,
                          atol=LOGITS_TOL, msg=other)
      self.assertAllClose(regs[other], regs['sampled'],
                          rtol=REGULARIZER_RTOL, atol=0, msg=other)
    self.assertGreater(float(regs['sampled']), 0.0)


if __name__ == '__main__':
  tf.test.main()
