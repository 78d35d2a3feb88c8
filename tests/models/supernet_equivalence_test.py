"""The two supernet modes agree; sampled mode skips unchosen work; L2 terms.

* masked == sampled: logits, gradients and the regulariser, for samples with
  a skipped layer, warm-up (uniform) op masks and non-maximal widths.
* A one-hot sample equals the standalone network of the pruned architecture
  whose weights are the leading slices of the supernet's (same names).
* Sampled mode never reads unchosen weights: with every unused branch and
  every channel beyond the sampled widths set to NaN, outputs, regulariser
  and gradients are bit for bit those of the unpoisoned supernet.

The compared paths sum in different orders (masked mode adds zeroed branches
and channels, and each kernel library blocks its sums its own way), so their
outputs agree to rounding, amplified by the network. Training-mode batch norm
over few numbers per channel amplifies it without bound (over 2 numbers its
slope reaches 1 / (2 sqrt(eps)) = 16 per layer), so every comparison here
runs where batch norm is well conditioned: 8 normally distributed images,
and a last stage of 2x2 or more (8 x 2 x 2 = 32 numbers per channel).
"""

import numpy as np
import pytest
import tensorflow as tf

from tunas_tf.models import supernet as supernet_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema
from tests.testing import sampled_specs as helpers

pytestmark = pytest.mark.numerics

Supernet = supernet_lib.Supernet
OneOf = schema.OneOf
OP, FILTERS = schema.OP_TAG, schema.FILTERS_TAG
WEIGHT_DECAY = 0.1  # Large, so that the regulariser shows in the gradients.
BATCH = 8
# Two paths' logits (of magnitude ~0.1-1) and gradients: float32 rounding
# (eps 1.2e-7) over ~20 layers of sums of up to ~10^3 terms. The largest
# differences measured, under Eigen's kernels and oneDNN's (AVX2 and SSE4.1),
# were 4.8e-7 on logits and 2% of the gradient bound (1.2e-6); oneDNN's
# often gave equal logits.
LOGITS_TOL = 1e-5
GRADIENT_RTOL, GRADIENT_ATOL = 1e-4, 1e-5
# The same squares summed in another order: a relative eps times log2 of
# the ~10^5 terms is 2e-6 (measured 8e-8).
REGULARIZER_RTOL = 1e-5

# digits_search, in visit order (see schema.flatten_with_paths):
_DIGITS_INDICES = [
    1,        # blocks/0/filters: 16 of (8, 16, 24, 32)
    0,        # blocks/1/layers/0/kernel_size (uniform below)
    0,        # blocks/1/filters: 8 of (8, 16)
    1, 0, 0,  # blocks/2/layers/0: kernel 5, expansion x3, the bottleneck
    2, 1, 0,  # blocks/2/layers/1: kernel 7, x6, bottleneck (uniform below)
    2,        # blocks/2/filters: 24 of (8, 16, 24, 32)
    2, 1, 0,  # blocks/3/layers/0: kernel 7, x6
    0, 0, 1,  # blocks/3/layers/1: skipped (Zero)
    1,        # blocks/3/filters: 24 of (16, ..., 64)
    2,        # blocks/4/filters: 48 of (32, ..., 128)
]
_DIGITS_WARMUP = {
    'blocks/1/layers/0/kernel_size': helpers.uniform(3),
    'blocks/2/layers/1/layer': helpers.uniform(2),
    'blocks/2/layers/1/layer/choices/0/kernel_size': helpers.uniform(3),
}


def _v3_like_space() -> ops.ConvTowerSpec:
  """The parts of mobilenet_v3_like_search at 8x8 (8 -> 4 -> 2 -> pooled).

  Its stem (kernel 3 or 5, stride 2, swish6), skippable separable conv,
  bottlenecks with searched kernel, expansion and squeeze-excite (relu and
  swish6), a skippable one, and its head: a 1x1 conv with batch norm before
  global pooling and a biased 1x1 conv without one after it. (The space
  itself reaches 1x1 maps at 32 px, 2x2 only at 64 px.)
  """
  swish6 = ops.ActivationSpec(ops.SWISH6)

  def bottleneck(strides, activation):
    return ops.DepthwiseBottleneckSpec(
        kernel_size=OneOf((3, 5, 7), OP),
        expansion_filters=OneOf(tuple(ops.FilterMultiplier(e)
                                      for e in (1.0, 3.0, 6.0)), FILTERS),
        use_squeeze_and_excite=OneOf((False, True), OP),
        strides=strides, activation=ops.ActivationSpec(activation))

  return ops.ConvTowerSpec((
      ops.Block((ops.ConvSpec(OneOf((3, 5), OP), 2), swish6,
                 ops.ResidualSpec(OneOf((ops.SeparableConvSpec(
                     OneOf((3, 5, 7), OP), 1, ops.ActivationSpec(ops.RELU)),
                                         ops.ZeroSpec()), OP))),
                OneOf((8, 16), FILTERS)),
      ops.Block((bottleneck(2, ops.RELU),
                 ops.ResidualSpec(OneOf((bottleneck(1, ops.SWISH6),
                                         ops.ZeroSpec()), OP))),
                OneOf((16, 24), FILTERS)),
      ops.Block((ops.ConvSpec(1, 1), swish6, ops.GlobalAveragePoolSpec()),
                OneOf((32, 48), FILTERS)),
      ops.Block((ops.ConvSpec(1, 1, use_batch_norm=False), swish6),
                OneOf((40, 64), FILTERS))), 8)


def _images(size: int, channels: int, seed: int) -> tf.Tensor:
  """`BATCH` normally distributed images."""
  return tf.random.stateless_normal([BATCH, size, size, channels], [seed, 7])


def _copy_weights(source: Supernet, target: Supernet) -> None:
  """Assigns `source`'s values to `target`'s variables of the same name."""
  values = source.variables_by_name()
  for name, variable in target.variables_by_name().items():
    variable.assign(values[name][tuple(slice(0, d) for d in variable.shape)])


def _step(net, spec, use_tf_function=False):
  """run(masks, images) -> logits, regulariser and {name: gradient} of
  sum(logits * w) + reg; traced once when `use_tf_function`."""

  def step(masks, images):
    sampled = helpers.attach(spec, masks)
    with tf.GradientTape() as tape:
      logits = net(sampled, images, training=True)
      reg = net.regularization_loss(sampled, WEIGHT_DECAY)
      weights = tf.range(1.0, 1.0 + logits.shape[-1]) / 10.0
      loss = tf.reduce_sum(logits * weights) + reg
    grads = tape.gradient(loss, net.trainable_variables,
                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return logits, reg, grads

  if use_tf_function:
    step = tf.function(step, autograph=False)  # As the distribute engine.
  names = list(net.variables_by_name())

  def run(masks, images):
    logits, reg, grads = step(
        {k: tf.constant(v) for k, v in masks.items()}, images)
    return logits, reg, dict(zip(names, grads))

  return run


def _run(net, spec, masks, images, use_tf_function=False):
  """`_step`'s results for one call."""
  return _step(net, spec, use_tf_function)(masks, images)


def _nan_outside(supernet: Supernet, fixed: Supernet) -> None:
  """NaN in every supernet weight the fixed architecture does not use."""
  used = {k: v.shape for k, v in fixed.variables_by_name().items()}
  for name, variable in supernet.variables_by_name().items():
    value = np.full(variable.shape, np.nan, np.float32)
    if name in used:
      keep = tuple(slice(0, d) for d in used[name])
      value[keep] = variable.numpy()[keep]
    variable.assign(value)


class ModesAgreeTest(tf.test.TestCase):

  def _assert_modes_agree(self, spec, masks, images, use_tf_function=False):
    nets = {mode: Supernet(spec, 10, mode=mode, input_channels=images.shape[-1],
                           seed=3) for mode in supernet_lib.MODES}
    _copy_weights(nets['masked'], nets['sampled'])
    results = {mode: _run(net, spec, masks, images, use_tf_function)
               for mode, net in nets.items()}
    (m_logits, m_reg, m_grads), (s_logits, s_reg, s_grads) = (
        results['masked'], results['sampled'])
    self.assertAllClose(m_logits, s_logits, rtol=0, atol=LOGITS_TOL)
    self.assertAllClose(m_reg, s_reg, rtol=REGULARIZER_RTOL, atol=0)
    self.assertGreater(float(m_reg), 0.0)
    self.assertEqual(sorted(m_grads), sorted(s_grads))
    nonzero = 0
    for name in m_grads:
      self.assertAllClose(m_grads[name], s_grads[name], rtol=GRADIENT_RTOL,
                          atol=GRADIENT_ATOL, msg=name)
      nonzero += int(np.any(s_grads[name] != 0))
    return nonzero, len(m_grads)

  def test_digits_search_warmup_skip_and_narrow_widths(self):
    spec = mobile.get_search_space('digits_search')
    masks = helpers.masks_from_indices(spec, _DIGITS_INDICES, _DIGITS_WARMUP)
    nonzero, total = self._assert_modes_agree(spec, masks, _images(8, 1, 1))
    # Unused: the two other depthwise kernels (+ BN) of blocks/2/layers/0 and
    # of blocks/3/layers/0, and the whole skipped blocks/3/layers/1 (expand,
    # three depthwise and project, each with BN): 6 + 6 + 15 variables.
    self.assertEqual(total - nonzero, 27)

  def test_digits_search_in_tf_function(self):
    spec = mobile.get_search_space('digits_search')
    rng = np.random.default_rng(5)
    masks = helpers.masks_from_indices(spec, helpers.random_indices(spec, rng),
                                       _DIGITS_WARMUP)
    self._assert_modes_agree(spec, masks, _images(8, 1, 2),
                             use_tf_function=True)

  def test_v3_like_squeeze_excite_swish6_biases_and_a_skip(self):
    spec = _v3_like_space()
    # The separable conv skipped; both squeeze-excite branches and every
    # kernel of the first bottleneck (warm-up); the second with
    # squeeze-excite; narrower widths but in block 2.
    indices = [1, 0, 1, 0, 0, 1, 0, 2, 2, 1, 0, 0, 1, 0]
    masks = helpers.masks_from_indices(spec, indices, {
        'blocks/1/layers/0/kernel_size': helpers.uniform(3),
        'blocks/1/layers/0/use_squeeze_and_excite': helpers.uniform(2)})
    self.assertEqual([int(masks[f'blocks/{i}/filters'].argmax())
                      for i in range(4)], [0, 0, 1, 0])
    nonzero, total = self._assert_modes_agree(spec, masks, _images(8, 3, 3))
    self.assertLess(nonzero, total)


class SampledSkipsUnchosenWorkTest(tf.test.TestCase):

  def _check(self, spec, indices, images, use_tf_function=False):
    channels = images.shape[-1]
    pruned = schema.prune(spec, indices)
    fixed = Supernet(pruned, 10, input_channels=channels)
    masks = helpers.masks_from_indices(spec, indices)
    for mode in supernet_lib.MODES:
      net = Supernet(spec, 10, mode=mode, input_channels=channels, seed=11)
      _copy_weights(net, fixed)
      expected = fixed(pruned, images, training=True)
      run = _step(net, spec, use_tf_function and mode == 'sampled')
      logits, reg, grads = run(masks, images)
      # A one-hot sample is the standalone net with inherited weights.
      self.assertAllClose(logits, expected, rtol=0, atol=LOGITS_TOL, msg=mode)
    fixed_reg = fixed.regularization_loss(pruned, WEIGHT_DECAY)
    self.assertAllClose(reg, fixed_reg, rtol=REGULARIZER_RTOL, atol=0)
    # `net` is the sampled-mode supernet: poison what it must not read. Its
    # logits, regulariser and gradients are then the same bits (exact: the
    # same ops, or the same traced function, read the same values), and
    # finite.
    _nan_outside(net, fixed)
    poisoned = run(masks, images)
    self.assertAllEqual(poisoned[0], logits)
    self.assertEqual(float(poisoned[1]), float(reg))
    self.assertEqual(sorted(poisoned[2]), sorted(grads))
    for var_name, grad in poisoned[2].items():
      self.assertAllEqual(grad, grads[var_name], msg=var_name)
      self.assertTrue(np.all(np.isfinite(grad)), msg=var_name)
    return pruned

  def test_digits_search_in_tf_function(self):
    spec = mobile.get_search_space('digits_search')
    self._check(spec, _DIGITS_INDICES, _images(8, 1, 4),
                use_tf_function=True)

  def test_cifar_search(self):
    spec = mobile.get_search_space('cifar_search')  # 16 -> 2x2 at the end.
    indices = helpers.random_indices(spec, np.random.default_rng(4))
    self._check(spec, indices, _images(16, 3, 5))

  def test_v3_like_squeeze_excite_and_biases(self):
    spec = _v3_like_space()
    # Kernel 5 stem, separable conv kernel 7, squeeze-excite in both
    # bottlenecks (x6 and x3), narrower widths but in block 2.
    pruned = self._check(spec, [1, 2, 0, 0, 1, 2, 1, 0, 1, 1, 0, 0, 1, 0],
                         _images(8, 3, 6))
    self.assertEqual(repr(pruned).count('use_squeeze_and_excite=True'), 2)


class RegularizationTest(tf.test.TestCase):

  def _tiny(self, mode):
    # conv (kernel 1 or 3, width 8 or 16) -> relu -> pool, on 1 channel.
    spec = ops.ConvTowerSpec((ops.Block((
        ops.ConvSpec(OneOf((1, 3), OP), 1), ops.ActivationSpec('relu'),
        ops.GlobalAveragePoolSpec()), OneOf((8, 16), FILTERS)),), 8)
    net = Supernet(spec, 4, mode=mode, input_channels=1)
    variables = net.variables_by_name()
    variables['blocks/0/layers/0/conv_k1/kernel'].assign(tf.ones([1, 1, 1, 16]))
    variables['blocks/0/layers/0/conv_k3/kernel'].assign(
        2.0 * tf.ones([3, 3, 1, 16]))
    return spec, net, variables

  def test_hand_computed_values(self):
    for mode in supernet_lib.MODES:
      spec, net, _ = self._tiny(mode)
      reg = lambda kernel_mask, filters_mask: net.regularization_loss(
          helpers.attach(spec, {'blocks/0/layers/0/kernel_size': kernel_mask,
                                'blocks/0/filters': filters_mask}),
          WEIGHT_DECAY)
      # Width 8, warm-up: (0.1 / 2) * (0.5 * 8 * 1^2 + 0.5 * 9 * 8 * 2^2).
      self.assertAllClose(reg([0.5, 0.5], [1.0, 0.0]), 0.05 * (4 + 144))
      # Width 16, kernel 3 only: (0.1 / 2) * 9 * 16 * 4.
      self.assertAllClose(reg([0.0, 1.0], [0.0, 1.0]), 0.05 * 576)
      self.assertAllClose(reg([1.0, 0.0], [0.0, 1.0]), 0.05 * 16)

  def test_unused_branch_batch_norm_and_classifier_add_nothing(self):
    for mode in supernet_lib.MODES:
      spec, net, variables = self._tiny(mode)
      for name, variable in variables.items():
        if 'conv_k3/kernel' not in name:  # Unused branch, BN, classifier.
          variable.assign(tf.fill(variable.shape, np.nan))
      sampled = helpers.attach(spec, {
          'blocks/0/layers/0/kernel_size': [0.0, 1.0],
          'blocks/0/filters': [0.0, 1.0]})
      with tf.GradientTape() as tape:
        reg = net.regularization_loss(sampled, WEIGHT_DECAY)
      grads = tape.gradient(reg, net.trainable_variables,
                            unconnected_gradients='zero')
      self.assertAllClose(reg, 0.05 * 576, msg=mode)
      for name, grad in zip(variables, grads):
        # d/dw (wd / 2) w^2 = wd * w = 0.2 on the used kernel, 0 elsewhere.
        expected = 0.2 if name.endswith('conv_k3/kernel') else 0.0
        self.assertAllClose(grad, tf.fill(grad.shape, expected), msg=name)

  def test_shared_variable_takes_the_largest_masked_term(self):
    # Both choices are a 3x3 conv at the same position: one shared kernel.
    spec = ops.ConvTowerSpec((ops.Block((
        OneOf((ops.ConvSpec(3, 1), ops.ConvSpec(3, 1)), OP),), 8),), 8)
    for mode in supernet_lib.MODES:
      net = Supernet(spec, 4, mode=mode, input_channels=1)
      names = list(net.variables_by_name())
      self.assertEqual(names.count('blocks/0/layers/0/conv_k3/kernel'), 1)
      net.variables_by_name()['blocks/0/layers/0/conv_k3/kernel'].assign(
          tf.ones([3, 3, 1, 8]))
      sampled = helpers.attach(spec, {'blocks/0/layers/0': [0.25, 0.75]})
      # max(0.25, 0.75) * 9 * 8, not their sum.
      self.assertAllClose(net.regularization_loss(sampled, WEIGHT_DECAY),
                          0.05 * 0.75 * 72)
      images = tf.random.stateless_normal([2, 4, 4, 1], [0, 0])
      self.assertAllClose(
          net(sampled, images),
          net(helpers.attach(spec, {'blocks/0/layers/0': [0.0, 1.0]}),
              images), atol=1e-6)

  def test_shared_part_is_allocated_at_the_largest_shape(self):
    def bottleneck(scale):
      return ops.DepthwiseBottleneckSpec(3, ops.FilterMultiplier(scale), False,
                                         1)
    spec = ops.ConvTowerSpec((
        ops.Block((ops.ConvSpec(3, 1),), 8),
        ops.Block((OneOf((bottleneck(3.0), bottleneck(6.0)), OP),), 8)), 8)
    net = Supernet(spec, 4, input_channels=1)
    shapes = {k: v.shape.as_list() for k, v in net.variables_by_name().items()}
    self.assertEqual(shapes['blocks/1/layers/0/expand/kernel'], [1, 1, 8, 48])
    self.assertEqual(shapes['blocks/1/layers/0/project/kernel'], [1, 1, 48, 8])
    sampled = helpers.attach(spec, {'blocks/1/layers/0': [1.0, 0.0]})
    self.assertEqual(net(sampled, tf.ones([1, 4, 4, 1])).shape, (1, 4))


if __name__ == '__main__':
  tf.test.main()
