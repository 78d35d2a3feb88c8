"""Tests for models/supernet.py: building, running, naming, modes, errors."""

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from tunas_tf.models import supernet as supernet_lib
from tunas_tf.runtime import estimator as estimator_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema
from tests.testing import sampled_specs

Supernet = supernet_lib.Supernet
OneOf = schema.OneOf
OP, FILTERS = schema.OP_TAG, schema.FILTERS_TAG

_BIG = ('proxylessnas_search', 'proxylessnas_enlarged_search',
        'mobilenet_v3_like_search', 'mobilenet_v2', 'mnasnet_b1',
        'proxylessnas_mobile', 'mobilenet_v3_large')


def _channels(name):
  return 1 if name == 'digits_search' else 3


def _tiny_spec(kernel_sizes=(1, 3), widths=(8, 16)):
  """One conv layer (kernel choice, width choice) + relu + pool; 1 channel."""
  return ops.ConvTowerSpec((ops.Block((
      ops.ConvSpec(OneOf(kernel_sizes, OP), 1),
      ops.ActivationSpec('relu'),
      ops.GlobalAveragePoolSpec()), OneOf(widths, FILTERS)),), 8)


class BuildAndRunTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(*_BIG)
  def test_big_spaces_and_models_run_at_224_batch_1(self, name):
    spec = mobile.get_search_space(name)
    net = Supernet(spec, num_classes=7, seed=0)
    masks = sampled_specs.masks_from_indices(
        spec, sampled_specs.random_indices(spec, np.random.default_rng(1)))
    sampled = sampled_specs.attach(spec, masks) if masks else spec
    size = mobile.space_info(name).image_size
    logits = net(sampled, tf.random.normal([1, size, size, 3], seed=2),
                 training=True)
    self.assertEqual(logits.shape, (1, 7))
    self.assertEqual(logits.dtype, tf.float32)
    self.assertAllInRange(logits, -1e3, 1e3)  # Finite.

  @parameterized.product(name=('cifar_search', 'digits_search'),
                         mode=('masked', 'sampled'))
  def test_small_spaces_run_in_both_modes_at_batch_2(self, name, mode):
    spec = mobile.get_search_space(name)
    net = Supernet(spec, 10, mode=mode, input_channels=_channels(name),
                   seed=0)
    size = mobile.space_info(name).image_size
    rng = np.random.default_rng(3)
    images = rng.uniform(size=[2, size, size, _channels(name)])
    for _ in range(2):
      sampled = sampled_specs.attach(spec, sampled_specs.masks_from_indices(
          spec, sampled_specs.random_indices(spec, rng)))
      logits = net(sampled, images.astype(np.float32), training=True)
      self.assertEqual(logits.shape, (2, 10))
      self.assertTrue(np.all(np.isfinite(logits)))
      self.assertGreater(float(net.regularization_loss(sampled, 4e-5)), 0.0)

  @pytest.mark.numerics
  def test_fixed_spec_runs_without_masks_in_both_modes(self):
    spec = mobile.get_search_space('mobilenet_v2')
    self.assertEmpty(schema.flatten(spec))
    images = tf.random.normal([1, 32, 32, 3], seed=0)
    logits = {}
    for mode in ('masked', 'sampled'):
      net = Supernet(spec, 5, mode=mode, seed=4)
      logits[mode] = net(spec, images)
    # Inference-mode batch norm: the modes ran the same ops on the same
    # values (measured equal under oneDNN's and Eigen's kernels).
    self.assertAllClose(logits['masked'], logits['sampled'], atol=1e-5)


class NamingTest(tf.test.TestCase):

  def test_digits_search_names_and_widest_shapes(self):
    net = Supernet(mobile.get_search_space('digits_search'), 10,
                   input_channels=1)
    shapes = {k: v.shape.as_list() for k, v in net.variables_by_name().items()}
    # Block widths: 0 -> 32 max, 1 -> 16, 2 -> 32, 3 -> 64, 4 -> 128.
    expected = {
        'blocks/0/layers/0/conv_k3/kernel': [3, 3, 1, 32],
        'blocks/0/layers/0/conv_k3/bn/gamma': [32],
        'blocks/0/layers/0/conv_k3/bn/beta': [32],
        'blocks/1/layers/0/depthwise_k7/kernel': [7, 7, 32, 1],
        'blocks/1/layers/0/depthwise_k7/bn/beta': [32],
        'blocks/1/layers/0/project/kernel': [1, 1, 32, 16],
        # Expansion x6 of the widest input: scale_filters(16, 6, 8) = 96.
        'blocks/2/layers/0/expand/kernel': [1, 1, 16, 96],
        'blocks/2/layers/0/depthwise_k5/kernel': [5, 5, 96, 1],
        'blocks/2/layers/1/expand/kernel': [1, 1, 32, 192],
        'blocks/2/layers/1/depthwise_k3/bn/gamma': [192],
        'blocks/2/layers/1/project/kernel': [1, 1, 192, 32],
        'blocks/4/layers/0/conv_k1/kernel': [1, 1, 64, 128],
        'classifier/kernel': [1, 1, 128, 10],
        'classifier/bias': [10],
    }
    for name, shape in expected.items():
      self.assertEqual(shapes[name], shape, msg=name)
    # 2 conv layers + 1 separable + 4 bottlenecks, each part with BN.
    self.assertLen(shapes, 3 * 2 + 3 * 4 + 4 * (3 * 2 + 3 * 3) + 2)
    self.assertLen(net.trainable_variables, len(shapes))
    self.assertEqual(net.trainable_variables[0].name,
                     'blocks/0/layers/0/conv_k3/kernel:0')

  def test_v3_like_names_include_se_and_bias_without_batch_norm(self):
    net = Supernet(mobile.get_search_space('mobilenet_v3_like_search'), 10)
    shapes = {k: v.shape.as_list() for k, v in net.variables_by_name().items()}
    # Block 1 (base 16): widths up to 32, input up to 32; x6 -> 192;
    # SE hidden make_divisible(0.25 * 192, 8) = 48.
    self.assertEqual(shapes['blocks/1/layers/1/se/reduce/kernel'],
                     [1, 1, 192, 48])
    self.assertEqual(shapes['blocks/1/layers/1/se/reduce/bias'], [48])
    self.assertEqual(shapes['blocks/1/layers/1/se/expand/kernel'],
                     [1, 1, 48, 192])
    self.assertEqual(shapes['blocks/0/layers/0/conv_k5/kernel'],
                     [5, 5, 3, 32])
    self.assertEqual(shapes['blocks/0/layers/2/depthwise_k7/kernel'],
                     [7, 7, 32, 1])
    self.assertIn('blocks/7/layers/0/conv_k1/bias', shapes)
    self.assertNotIn('blocks/7/layers/0/conv_k1/bn/gamma', shapes)

  def test_checkpoint_round_trip(self):
    spec = _tiny_spec()
    saved = Supernet(spec, 3, input_channels=1, seed=1)
    path = tf.train.Checkpoint(net=saved).save(
        self.get_temp_dir() + '/ckpt')
    restored = Supernet(spec, 3, input_channels=1, seed=2)
    tf.train.Checkpoint(net=restored).restore(path).assert_consumed()
    for name, variable in saved.variables_by_name().items():
      self.assertAllEqual(restored.variables_by_name()[name], variable)

  def test_initial_values(self):
    net = Supernet(mobile.get_search_space('cifar_search'), 10, seed=0)
    variables = net.variables_by_name()
    kernel = variables['blocks/5/layers/0/conv_k1/kernel'].numpy()
    fan_in = kernel.shape[2]
    self.assertAllClose(np.std(kernel), np.sqrt(2.0 / fan_in), rtol=0.05)
    depthwise = variables['blocks/3/layers/1/depthwise_k7/kernel'].numpy()
    self.assertAllClose(np.std(depthwise), np.sqrt(2.0 / 49), rtol=0.05)
    self.assertAllClose(np.std(variables['classifier/kernel']), 0.01,
                        rtol=0.1)
    self.assertAllEqual(variables['blocks/0/layers/0/conv_k3/bn/gamma'],
                        np.ones([32]))
    self.assertAllEqual(variables['classifier/bias'], np.zeros([10]))
    # Seeded values are reproducible.
    again = Supernet(mobile.get_search_space('cifar_search'), 10, seed=0)
    self.assertAllEqual(again.variables_by_name()['classifier/kernel'],
                        variables['classifier/kernel'])


class SemanticsTest(tf.test.TestCase):

  def _net_and_images(self, spec, seed=0):
    net = Supernet(spec, 3, input_channels=1, seed=seed)
    images = tf.random.stateless_normal([2, 5, 5, 1], [seed, 1])
    return net, images

  def test_uniform_op_mask_is_the_average_of_the_branches(self):
    # The head after the last nonlinearity (pool, 1x1 conv, mean) is linear;
    # with the switch after relu it is not, so compare the layer-level sum on
    # a spec whose only switch feeds the linear head directly.
    spec = ops.ConvTowerSpec((ops.Block((
        ops.ConvSpec(OneOf((1, 3), OP), 1),), OneOf((8, 16), FILTERS)),), 8)
    net, images = self._net_and_images(spec)
    run = lambda kernel_mask: net(sampled_specs.attach(
        spec, {'blocks/0/layers/0/kernel_size': kernel_mask,
               'blocks/0/filters': [0.0, 1.0]}), images)
    both = run([0.5, 0.5])
    self.assertAllClose(both, 0.5 * run([1.0, 0.0]) + 0.5 * run([0.0, 1.0]),
                        atol=1e-6)
    self.assertNotAllClose(run([1.0, 0.0]), run([0.0, 1.0]))

  def test_a_one_hot_mask_of_another_value_scales_its_branch(self):
    # Only a one-hot mask of 1 (a sample's) takes the unscaled one-hot
    # case; another value takes the mixture, which scales by it. The same
    # linear head as above.
    spec = ops.ConvTowerSpec((ops.Block((
        ops.ConvSpec(OneOf((1, 3), OP), 1),), OneOf((8, 16), FILTERS)),), 8)
    for mode in supernet_lib.MODES:
      net = Supernet(spec, 3, mode=mode, input_channels=1, seed=0)
      _, images = self._net_and_images(spec)
      run = lambda kernel_mask, net=net, images=images: net(
          sampled_specs.attach(spec, {
              'blocks/0/layers/0/kernel_size': kernel_mask,
              'blocks/0/filters': [0.0, 1.0]}), images)
      self.assertAllClose(run([0.0, 0.5]), 0.5 * run([0.0, 1.0]),
                          atol=1e-6, msg=mode)
      self.assertAllClose(run([2.0, 0.0]), 2.0 * run([1.0, 0.0]),
                          atol=1e-6, msg=mode)

  def test_zero_entry_of_a_mixed_mask_adds_exactly_nothing(self):
    # A mask that is neither one-hot nor all non-zero runs every branch; the
    # one with mask 0 must add 0 and get 0 gradient even with NaN weights.
    spec = _tiny_spec(kernel_sizes=(1, 3, 5))
    masks = {'blocks/0/layers/0/kernel_size': [0.5, 0.5, 0.0],
             'blocks/0/filters': [0.0, 1.0]}
    for mode in supernet_lib.MODES:
      _, images = self._net_and_images(spec)
      net = Supernet(spec, 4, mode=mode, input_channels=1, seed=3)
      variables = net.variables_by_name()

      def run():
        with tf.GradientTape() as tape:
          logits = net(sampled_specs.attach(spec, masks), images,
                       training=True)
          loss = tf.reduce_sum(logits * tf.range(4.0))
        grads = tape.gradient(loss, list(variables.values()),
                              unconnected_gradients='zero')
        return logits, dict(zip(variables, grads))

      logits, grads = run()
      k5 = 'blocks/0/layers/0/conv_k5/kernel'
      variables[k5].assign(tf.fill(variables[k5].shape, np.nan))
      poisoned_logits, poisoned_grads = run()
      self.assertAllClose(poisoned_logits, logits, msg=mode)
      self.assertAllEqual(poisoned_grads[k5], tf.zeros_like(grads[k5]))
      for name, grad in poisoned_grads.items():
        self.assertAllClose(grad, grads[name], msg=f'{mode} {name}')
      self.assertNotAllClose(grads['blocks/0/layers/0/conv_k3/kernel'],
                             tf.zeros_like(grads[k5]))

  def test_filters_mask_values_are_not_weights(self):
    spec = _tiny_spec()
    net, images = self._net_and_images(spec)
    run = lambda filters_mask: net(sampled_specs.attach(
        spec, {'blocks/0/layers/0/kernel_size': [0.0, 1.0],
               'blocks/0/filters': filters_mask}), images)
    self.assertAllClose(run([0.3, 0.7]), run([0.0, 1.0]))
    self.assertAllClose(run([0.9, 0.1]), run([1.0, 0.0]))
    self.assertNotAllClose(run([1.0, 0.0]), run([0.0, 1.0]))

  def test_mask_has_no_gradient(self):
    spec = _tiny_spec()
    net, images = self._net_and_images(spec)
    mask = tf.Variable([0.5, 0.5])
    with tf.GradientTape() as tape:
      logits = net(sampled_specs.attach(
          spec, {'blocks/0/layers/0/kernel_size': mask,
                 'blocks/0/filters': [0.0, 1.0]}, tf.identity), images)
    self.assertIsNone(tape.gradient(logits, mask))

  def test_dropout_only_when_training(self):
    spec = _tiny_spec()
    masks = {'blocks/0/layers/0/kernel_size': [0.0, 1.0],
             'blocks/0/filters': [0.0, 1.0]}
    plain, images = self._net_and_images(spec, seed=5)
    dropped = Supernet(spec, 3, input_channels=1, seed=5, dropout_rate=0.5)
    sampled = sampled_specs.attach(spec, masks)
    self.assertAllClose(dropped(sampled, images, training=False),
                        plain(sampled, images, training=True))
    tf.random.set_seed(0)
    self.assertNotAllClose(dropped(sampled, images, training=True),
                           plain(sampled, images, training=True))
    # Keyed on a seed, the mask repeats.
    seed = tf.constant([4, 9], tf.int64)
    self.assertAllEqual(dropped(sampled, images, True, dropout_seed=seed),
                        dropped(sampled, images, True, dropout_seed=seed))
    self.assertNotAllClose(dropped(sampled, images, True, dropout_seed=seed),
                           plain(sampled, images, training=True))

  def test_single_choice_op_oneof_is_scaled_by_its_mask(self):
    spec = ops.ConvTowerSpec((ops.Block((
        OneOf((ops.ConvSpec(3, 1),), OP),), 8),), 8)
    net, images = self._net_and_images(spec)
    full = net(spec, images)  # No mask: the single choice as is.
    half = net(sampled_specs.attach(spec, {'blocks/0/layers/0': [0.5]}), images)
    # The head is linear in the layer output (bias 0 at init).
    self.assertAllClose(half, 0.5 * full, atol=1e-6)
    # The regulariser is not scaled (the original's maybe_switch_v2).
    self.assertAllClose(
        net.regularization_loss(
            sampled_specs.attach(spec, {'blocks/0/layers/0': [0.5]}), 0.1),
        net.regularization_loss(spec, 0.1))


def _small_space():
  """A stem, a bottleneck and a skippable one (kernel, SE, width choices)."""
  def bottleneck():
    return ops.DepthwiseBottleneckSpec(
        OneOf((3, 5), OP),
        OneOf((ops.FilterMultiplier(1.0), ops.FilterMultiplier(2.0)), FILTERS),
        OneOf((False, True), OP), 1, ops.ActivationSpec('swish6'))
  return ops.ConvTowerSpec((
      ops.Block((ops.ConvSpec(3, 2), ops.ActivationSpec('relu')),
                OneOf((8, 16), FILTERS)),
      ops.Block((bottleneck(),
                 ops.ResidualSpec(OneOf((bottleneck(), ops.ZeroSpec()), OP))),
                OneOf((8, 16), FILTERS)),
      ops.Block((ops.ConvSpec(1, 1), ops.ActivationSpec('relu'),
                 ops.GlobalAveragePoolSpec()), 16)), 8)


def _setup(mode, spec):
  """A supernet, 8 normal images and three samples of `spec`: two one-hot,
  then the op warm-up's."""
  net = Supernet(spec, 10, mode=mode, input_channels=1, seed=7)
  # 8 normal images: training-mode batch norm over 8 x 2 x 2 numbers per
  # channel in the last stage is well conditioned (see
  # supernet_equivalence_test), so rounding differences stay ~1e-7.
  images = tf.random.stateless_normal([8, 8, 8, 1], [0, 0])
  rng = np.random.default_rng(0)
  samples = [sampled_specs.masks_from_indices(
      spec, sampled_specs.random_indices(spec, rng)) for _ in range(3)]
  samples[-1] = {k: sampled_specs.uniform(len(v)) if 'filters' not in k else v
                 for k, v in samples[-1].items()}  # Op warm-up.
  return net, images, samples


@pytest.mark.numerics
class CompilationTest(tf.test.TestCase):
  """A traced or TF1 graph against eager ops: sums of other kernels."""

  def test_tf_function_matches_eager_and_traces_once(self):
    spec = _small_space()  # digits_search traced: supernet_equivalence_test.
    net, images, samples = _setup('sampled', spec)

    @tf.function(autograph=False)  # As the distribute engine traces.
    def step(masks, images):
      sampled = sampled_specs.attach(spec, masks)
      with tf.GradientTape() as tape:
        logits = net(sampled, images, training=True)
        loss = tf.reduce_sum(logits) + net.regularization_loss(sampled, 0.1)
      return logits, tape.gradient(loss, net.trainable_variables)

    for masks in samples:
      logits, grads = step({k: tf.constant(v) for k, v in masks.items()},
                           images)
      eager = net(sampled_specs.attach(spec, masks), images, training=True)
      # The same ops (measured equal under oneDNN's and Eigen's kernels;
      # a graph optimiser may fuse them into other sums of ~1e-7).
      self.assertAllClose(logits, eager, atol=1e-5)
      self.assertLen(grads, len(net.trainable_variables))
    self.assertEqual(step.experimental_get_tracing_count(), 1)

  def test_v1_graph_build_and_run_matches_eager(self):
    # One TF1 graph per mode, its masks fed: the samples of `_setup` (one
    # hot, then the op warm-up's) through the same graph.
    spec = _small_space()
    for mode in ('masked', 'sampled'):
      eager_net, images, samples = _setup(mode, spec)
      expected = []
      for masks in samples[1:]:
        sampled = sampled_specs.attach(spec, masks)
        with tf.GradientTape() as tape:
          eager = eager_net(sampled, images, training=True)
          loss = tf.reduce_sum(eager) + eager_net.regularization_loss(
              sampled, 0.1)
        expected.append((eager, tape.gradient(
            loss, eager_net.trainable_variables,
            unconnected_gradients='zero')))
      with tf.Graph().as_default():
        net = Supernet(spec, 10, mode=mode, input_channels=1, seed=7)
        fed = {path: tf.compat.v1.placeholder(tf.float32, [len(mask)])
               for path, mask in samples[1].items()}
        sampled = sampled_specs.attach(spec, fed, lambda mask: mask)
        image_input = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 1])
        logits = net(sampled, image_input, training=True)
        loss = tf.reduce_sum(logits) + net.regularization_loss(sampled, 0.1)
        grads = tf.gradients(loss, net.trainable_variables,
                             unconnected_gradients='zero')
        # Grappler off, as in the search's Estimator sessions.
        with tf.compat.v1.Session(
            config=estimator_lib.no_grappler_config()) as session:
          session.run(tf.compat.v1.global_variables_initializer())
          for masks, (eager, eager_grads) in zip(samples[1:], expected):
            feed = {fed[path]: mask for path, mask in masks.items()}
            feed[image_input] = images.numpy()
            got, got_grads = session.run([logits, grads], feed)
            # A TF1 graph and eager ops on the same values: measured 1.5e-8
            # (logits) and 7.2e-7 (gradients, up to ~10) under oneDNN's and
            # Eigen's kernels.
            self.assertAllClose(got, eager, atol=1e-5, msg=mode)
            for got_grad, eager_grad in zip(got_grads, eager_grads):
              self.assertAllClose(got_grad, eager_grad, atol=1e-4, rtol=1e-4)

  def test_a_traced_call_after_an_update_reads_the_updated_weights(self):
    # GraphCallsTest's stale-read test (the TF1 graph's), traced as the
    # distribute engine traces.
    spec = _small_space()
    _, eager_images, samples = _setup('sampled', spec)
    masks = samples[-1]
    images = eager_images.numpy()
    net = Supernet(spec, 10, mode='sampled', input_channels=1, seed=7)
    traced = tf.function(
        lambda m: _update_then_validate(net, sampled_specs.attach(spec, m),
                                        images),
        autograph=False)  # As the distribute engine.
    got = traced({k: tf.constant(v) for k, v in masks.items()})
    after = net(sampled_specs.attach(spec, masks), images)
    # A traced graph against eager ops: not the same kernels everywhere
    # (measured 0 under oneDNN's AVX-512 and Eigen's, 5.7e-6 on logits up to
    # ~15 under ONEDNN_MAX_CPU_ISA=SSE41: float32 rounding); the stale reads
    # this test caught in the TF1 graph moved them by up to ~1.
    self.assertAllClose(got, after, atol=1e-5, rtol=1e-5)


def _update_then_validate(net, sampled, images):
  """The search step's order on `net`: the training forward, an update (lr 1)
  of the weights, then the validation forward (its logits) under a control
  dependency on the update."""
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(tf.square(net(sampled, images, training=True)))
  grads = tape.gradient(loss, net.trainable_variables)
  update = tf.group([v.assign_sub(g) for v, g in
                     zip(net.trainable_variables, grads) if g is not None])
  with tf.control_dependencies([update]):
    return net(sampled, images, training=False)


class GraphCallsTest(tf.test.TestCase):
  """Calls in one TF1 graph: the same ops on the same values, whatever the
  kernels (not `numerics`)."""

  def test_calls_on_one_sample_in_a_graph_share_its_resolution(self):
    # The search step's training forward, regulariser and validation forward
    # on one sampled spec: the masks, widths and their entries are resolved
    # once (a second call adds no Unpack of a mask); another spec gets its own.
    spec = mobile.get_search_space('digits_search')
    _, eager_images, samples = _setup('sampled', spec)
    with tf.Graph().as_default() as graph:
      images = tf.constant(eager_images.numpy())
      net = Supernet(spec, 10, mode='sampled', input_channels=1, seed=7,
                     dropout_rate=0.5)
      sampled = sampled_specs.attach(spec, samples[0], tf.constant)
      count = lambda: sum(op.type == 'Unpack' for op in graph.get_operations())
      train = net(sampled, images, training=True,
                  dropout_seed=tf.constant([1, 2], tf.int64))
      after_train = count()
      regularizer = net.regularization_loss(sampled, 0.1)
      validation = net(sampled, images, training=False)
      self.assertEqual(count(), after_train)
      other = net(sampled_specs.attach(spec, samples[0], tf.constant),
                  images, training=False)
      self.assertGreater(count(), after_train)
      # Grappler off, as in the search's Estimator sessions.
      with tf.compat.v1.Session(
          config=estimator_lib.no_grappler_config()) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        train, regularizer, validation, other = session.run(
            [train, regularizer, validation, other])
    # Dropout still only in the training call; the same sample, the same
    # network.
    self.assertNotAllClose(train, validation)
    self.assertAllClose(validation, other, atol=1e-6)
    self.assertGreater(regularizer, 0.0)

  def test_a_call_after_an_update_reads_the_updated_weights(self):
    # The search step's order: the training forward, an update of the
    # weights, then the validation forward on the same sample under a control
    # dependency on the update. Every weight the validation forward reads must
    # be the updated one, also inside the skippable layers' conds: lowered to
    # Switch/Merge in a TF1 graph (the Estimator's), a cond runs a branch's
    # variable reads as soon as its predicate is known, so a predicate
    # shared with the training forward would not wait for the update (it
    # did not, from 33ac2da to the fix). (In a `tf.function`, the distribute
    # engine's, automatic control dependencies order the cond too:
    # CompilationTest's traced twin.) The op warm-up's sample runs the
    # skippable layer's bottleneck (and, in its cond, the mixture cases).
    spec = _small_space()
    _, eager_images, samples = _setup('sampled', spec)
    masks = samples[-1]
    self.assertLen([p for p in masks if p.endswith('/layers/1/layer')], 1)
    images = eager_images.numpy()
    for mode in ('sampled', 'masked'):
      with tf.Graph().as_default():
        net = Supernet(spec, 10, mode=mode, input_channels=1, seed=7)
        sampled = sampled_specs.attach(spec, masks, tf.constant)
        validation = _update_then_validate(net, sampled, images)
        plain = net(sampled, images, training=False)
        # Grappler off, as in the search's Estimator sessions.
        with tf.compat.v1.Session(
            config=estimator_lib.no_grappler_config()) as session:
          session.run(tf.compat.v1.global_variables_initializer())
          before = session.run(plain)
          got = session.run(validation)  # Runs the update first.
          after = session.run(plain)
      # The update moves the logits by far more than 1e-3; the same ops on
      # the same values agree to rounding.
      self.assertGreater(np.abs(after - before).max(), 1e-3)
      self.assertAllClose(got, after, atol=1e-6, rtol=0, msg=mode)

  def test_masks_of_unknown_length_in_a_graph(self):
    # Masks fed through [None] placeholders: the supernet fixes their length
    # from the spec and gives what the same masks as constants give.
    spec = _small_space()
    _, eager_images, samples = _setup('sampled', spec)
    masks = samples[0]
    with tf.Graph().as_default():
      net = Supernet(spec, 10, mode='sampled', input_channels=1, seed=7)
      images = tf.constant(eager_images.numpy())
      feeds = {path: tf.compat.v1.placeholder(tf.float32, [None])
               for path in masks}
      fed = net(sampled_specs.attach(spec, feeds, tf.identity), images)
      constant = net(sampled_specs.attach(spec, masks, tf.constant), images)
      # Grappler off, as in the search's Estimator sessions.
      with tf.compat.v1.Session(
          config=estimator_lib.no_grappler_config()) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        fed, constant = session.run(
            [fed, constant],
            {feeds[path]: np.asarray(value, np.float32)
             for path, value in masks.items()})
    # The same ops on the same values.
    self.assertAllClose(fed, constant, atol=1e-6)


class ErrorsTest(tf.test.TestCase):

  def test_unknown_mode(self):
    with self.assertRaisesRegex(
        ValueError, r"Unknown supernet mode 'fast'; expected one of "
        r"\('masked', 'sampled'\)"):
      Supernet(_tiny_spec(), 3, mode='fast')

  def test_bad_constructor_arguments(self):
    with self.assertRaisesRegex(ValueError, 'num_classes must be a positive '
                                'int, got 0'):
      Supernet(_tiny_spec(), 0)
    with self.assertRaisesRegex(ValueError, r'dropout_rate must be in \[0, 1'):
      Supernet(_tiny_spec(), 3, dropout_rate=1.0)
    with self.assertRaisesRegex(ValueError, 'input_channels must be'):
      Supernet(_tiny_spec(), 3, input_channels=0)
    with self.assertRaisesRegex(ValueError, 'needs a ConvTowerSpec'):
      Supernet([_tiny_spec()], 3)

  def test_bad_specs(self):
    residual_stride = ops.ConvTowerSpec((ops.Block((
        ops.ConvSpec(3, 1), ops.ResidualSpec(ops.ConvSpec(3, 2))), 8),), 8)
    with self.assertRaisesRegex(ValueError, 'blocks/0/layers/1: a ResidualSpec'
                                ' layer must keep the shape'):
      Supernet(residual_stride, 3)
    mixed = ops.ConvTowerSpec((ops.Block((
        OneOf((ops.ConvSpec(3, 1), ops.ConvSpec(3, 2)), OP),), 8),), 8)
    with self.assertRaisesRegex(ValueError, 'blocks/0/layers/0: choice 1 gives'
                                ' another stride'):
      Supernet(mixed, 3)
    multiplier_block = ops.ConvTowerSpec((ops.Block((
        ops.ConvSpec(3, 1),), ops.FilterMultiplier(2.0)),), 8)
    with self.assertRaisesRegex(ValueError, 'blocks/0/filters: block widths '
                                'must be ints'):
      Supernet(multiplier_block, 3)
    with self.assertRaisesRegex(ValueError, 'kernel_size must be a positive'):
      Supernet(ops.ConvTowerSpec((ops.Block((ops.ConvSpec(0, 1),), 8),), 8),
               3)

  def test_bad_sampled_specs(self):
    spec = _tiny_spec()
    net = Supernet(spec, 3, input_channels=1)
    images = tf.zeros([1, 4, 4, 1])
    good = {'blocks/0/layers/0/kernel_size': [1.0, 0.0],
            'blocks/0/filters': [1.0, 0.0]}
    other = _tiny_spec(kernel_sizes=(1, 5))
    with self.assertRaisesRegex(
        ValueError, "does not match the supernet's spec at "
        "'blocks/0/layers/0/kernel_size/choices/1': got 5, expected 3"):
      net(sampled_specs.attach(other, good), images)
    with self.assertRaisesRegex(ValueError, "The OneOf at 'blocks/0/filters' "
                                'has 2 choices but no mask'):
      net(schema.with_masks(spec, dict(good, **{'blocks/0/filters': None})),
          images)
    with self.assertRaisesRegex(ValueError, "The mask at 'blocks/0/filters' "
                                r'has shape \(3,\); expected \[2\]'):
      net(sampled_specs.attach(
          spec, dict(good, **{'blocks/0/filters': [1, 0, 0.]})), images)
    with self.assertRaisesRegex(ValueError, r'images must be \[batch, H, W, '
                                r'1\], got shape \(1, 4, 4, 3\)'):
      net(sampled_specs.attach(spec, good), tf.zeros([1, 4, 4, 3]))
    with self.assertRaisesRegex(ValueError, 'weight_decay must be >= 0'):
      net.regularization_loss(sampled_specs.attach(spec, good), -1.0)


if __name__ == '__main__':
  tf.test.main()
