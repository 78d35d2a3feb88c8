"""Tests for the REINFORCE controller (original: tunas/controller.py)."""

import math
import os
import tempfile

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tunas_tf.controller import reinforce
from tunas_tf.layers import initializers
from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema
from tunas_tf.search_space.schema import FILTERS_TAG, OP_TAG, OneOf


def _flat_spec():
  """Three independent OneOfs: op x3, filters x2, a fixed filters x1."""
  return [OneOf((3, 5, 7), OP_TAG), OneOf((16, 32), FILTERS_TAG),
          OneOf((8,), FILTERS_TAG)]


def _skippable_spec():
  """OneOf[bottleneck with a nested kernel OneOf, Zero] (a skippable layer).

  Visit order: blocks/0/layers/0/layer/choices/0/kernel_size (3 choices),
  blocks/0/layers/0/layer (2 choices), blocks/0/filters (1 choice).
  """
  bottleneck = ops.DepthwiseBottleneckSpec(
      kernel_size=OneOf((3, 5, 7), OP_TAG),
      expansion_filters=ops.FilterMultiplier(3.0),
      use_squeeze_and_excite=False, strides=1)
  layer = ops.ResidualSpec(OneOf((bottleneck, ops.ZeroSpec()), OP_TAG))
  return ops.ConvTowerSpec(
      (ops.Block((layer,), OneOf((16,), FILTERS_TAG)),), filters_base=8)


_KERNEL = 'blocks/0/layers/0/layer/choices/0/kernel_size'
_LAYER = 'blocks/0/layers/0/layer'


def _masks(sampled):
  return [oneof.mask for oneof in schema.flatten(sampled)]


def _wide_spec(extra=False):
  """Eight OneOfs of 4 choices by name (op, filters alternating); with
  `extra`, a ninth whose path sorts first."""
  spec = {f'd{i}': OneOf((1, 2, 3, 4), (OP_TAG, FILTERS_TAG)[i % 2])
          for i in range(8)}
  if extra:
    spec['a'] = OneOf((1, 2, 3), OP_TAG)
  return spec


def _graph_sample(spec, seed, p_ops=0.5, p_filters=0.5):
  """Masks and log-prob of a sample with stateless `seed`, in a new graph
  (logits 0.1 * [0, 1, ...] per OneOf)."""
  with tf.Graph().as_default():
    controller = reinforce.Controller(spec)
    sampled, info = reinforce.independent_sample(
        spec, p_ops, p_filters, controller=controller,
        seed=tf.constant(seed, tf.int32))
    with tf.compat.v1.Session() as sess:
      sess.run([v.assign(0.1 * np.arange(v.shape[0], dtype=np.float32))
                for v in controller.trainable_variables])
      masks, log_prob = sess.run([
          {path: o.mask for path, o in schema.flatten_with_paths(sampled)},
          info.sample_log_prob])
  return masks, log_prob


def _draws(draw, elems, num_masks=2):
  """`draw(elem)`'s `num_masks` masks for each element of `elems` (e.g. the
  rows of [n, 2] int32 seeds), in one `tf.function` call (a while loop; n
  calls cost ms each on a busy CPU): NumPy arrays [n, choices]."""
  return [m.numpy() for m in tf.function(lambda e: tf.map_fn(
      draw, e, fn_output_signature=(tf.float32,) * num_masks))(elems)]


class ReinforceTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    tf.random.set_seed(1234)

  def test_controller_variables_zero_initialised_and_named_by_path(self):
    controller = reinforce.Controller(_skippable_spec())
    self.assertEqual(list(controller.logits_by_path),
                     [_KERNEL, _LAYER, 'blocks/0/filters'])
    self.assertEqual(controller.num_choices, (3, 2, 1))
    self.assertLen(controller.trainable_variables, 3)
    for path, variable in controller.logits_by_path.items():
      self.assertEqual(variable.dtype, tf.float32)
      self.assertEqual(variable.name, f'logits/{path}:0')
      self.assertAllEqual(variable, np.zeros(variable.shape))

  def test_controller_checkpoint_round_trip(self):
    controller = reinforce.Controller(_flat_spec())
    controller.logits_by_path['0'].assign([1.0, 2.0, 3.0])
    path = tf.train.Checkpoint(controller=controller).write(
        os.path.join(tempfile.mkdtemp(dir=self.get_temp_dir()), 'ckpt'))
    restored = reinforce.Controller(_flat_spec())
    tf.train.Checkpoint(controller=restored).read(path).assert_consumed()
    self.assertAllEqual(restored.logits_by_path['0'], [1.0, 2.0, 3.0])

  def test_independent_sample_zero_logits_log_prob_and_entropy(self):
    controller = reinforce.Controller(_flat_spec())
    for _ in range(10):
      sampled, info = reinforce.independent_sample(_flat_spec(),
                                                   controller=controller)
      masks = _masks(sampled)
      for mask, n in zip(masks, (3, 2, 1)):
        self.assertEqual(mask.dtype, tf.float32)
        self.assertAllEqual(mask.shape, [n])
        self.assertEqual(float(tf.reduce_sum(mask)), 1.0)
        self.assertEqual(float(tf.reduce_max(mask)), 1.0)
      # Uniform policy: log(1/3) + log(1/2) + log(1/1) whatever was drawn.
      self.assertAllClose(info.sample_log_prob,
                          math.log(1 / 3) + math.log(1 / 2))
      self.assertAllClose(info.entropy, math.log(3) + math.log(2))
    self.assertIs(info.controller, controller)

  def test_independent_sample_single_choice(self):
    sampled, info = reinforce.independent_sample([OneOf((8,), FILTERS_TAG)])
    self.assertAllEqual(sampled[0].mask, [1.0])
    self.assertAllClose(info.sample_log_prob, 0.0)
    self.assertAllClose(info.entropy, 0.0)

  def test_independent_sample_warmup_probability_one(self):
    spec = [OneOf((3, 5, 7), OP_TAG),
            OneOf((ops.FilterMultiplier(6.0), ops.FilterMultiplier(3.0)),
                  FILTERS_TAG),
            OneOf((16, 48, 32), FILTERS_TAG)]
    controller = reinforce.Controller(spec)
    controller.logits_by_path['0'].assign([5.0, -1.0, 0.0])
    for _ in range(5):
      sampled, info = reinforce.independent_sample(
          spec, increase_ops_probability=1.0,
          increase_filters_probability=1.0, controller=controller)
      # Ops: every op on, weighted 1/3; filters: the largest (6.0, then 48).
      self.assertAllClose(sampled[0].mask, [1 / 3, 1 / 3, 1 / 3])
      self.assertAllEqual(sampled[1].mask, [1.0, 0.0])
      self.assertAllEqual(sampled[2].mask, [0.0, 1.0, 0.0])
      # log(p) = log(1) = 0 at every node.
      self.assertAllClose(info.sample_log_prob, 0.0)

  def test_independent_sample_warmup_probability_one_ops_only(self):
    sampled, info = reinforce.independent_sample(
        _flat_spec(), increase_ops_probability=1.0)
    self.assertAllClose(sampled[0].mask, [1 / 3] * 3)
    # The op node gives log(1) = 0, the filters nodes their own log-probs.
    self.assertAllClose(info.sample_log_prob, math.log(1 / 2))
    # Entropy is that of the distribution, not of the replacement.
    self.assertAllClose(info.entropy, math.log(3) + math.log(2))

  def test_independent_sample_warmup_probability_zero(self):
    for _ in range(5):
      sampled, info = reinforce.independent_sample(
          _flat_spec(), increase_ops_probability=0.0,
          increase_filters_probability=tf.constant(0.0))
      # log(1 - 0) + log pi(a): the plain sample.
      self.assertAllClose(info.sample_log_prob,
                          math.log(1 / 3) + math.log(1 / 2))
      self.assertEqual(float(tf.reduce_max(sampled[0].mask)), 1.0)

  def test_independent_sample_warmup_mixed_probability(self):
    # With p = 0.5 each node is either replaced (log 0.5) or kept
    # (log 0.5 + log(1/n)); the single-choice node always gives log 0.5.
    spec = [OneOf((3, 5, 7), OP_TAG), OneOf((8,), FILTERS_TAG)]
    seen = set()
    for _ in range(20):
      sampled, info = reinforce.independent_sample(spec, 0.5, 0.5)
      replaced = bool(np.allclose(sampled[0].mask, 1 / 3))
      seen.add(replaced)
      expected = math.log(0.5) + (0.0 if replaced else math.log(1 / 3))
      self.assertAllClose(info.sample_log_prob, expected + math.log(0.5))
    self.assertEqual(seen, {True, False})

  def test_independent_sample_skipped_layer_nested_choices_add_nothing(self):
    spec = _skippable_spec()
    controller = reinforce.Controller(spec)
    controller.logits_by_path[_LAYER].assign([-50.0, 50.0])  # Zero certain.
    sampled, info = reinforce.independent_sample(spec, controller=controller)
    self.assertAllEqual(sampled.blocks[0].layers[0].layer.mask, [0.0, 1.0])
    # log pi(Zero) = log_softmax([-50, 50])[1] ~ -e^-100 ~ 0 and entropy ~0;
    # the nested kernel choice (log(1/3), log(3)) is inactive: adds nothing.
    self.assertAllClose(info.sample_log_prob, 0.0, atol=1e-6)
    self.assertAllClose(info.entropy, 0.0, atol=1e-6)

  def test_independent_sample_active_layer_nested_choices_count(self):
    spec = _skippable_spec()
    controller = reinforce.Controller(spec)
    controller.logits_by_path[_LAYER].assign([50.0, -50.0])  # Layer certain.
    _, info = reinforce.independent_sample(spec, controller=controller)
    self.assertAllClose(info.sample_log_prob, math.log(1 / 3), atol=1e-6)
    self.assertAllClose(info.entropy, math.log(3), atol=1e-6)
    # Under the uniform op warm-up both alternatives are on, so the nested
    # kernel is active too (it contributes log(1) = 0 and its entropy).
    controller.logits_by_path[_LAYER].assign([-50.0, 50.0])
    _, info = reinforce.independent_sample(
        spec, increase_ops_probability=1.0, controller=controller)
    self.assertAllClose(info.sample_log_prob, 0.0, atol=1e-6)
    self.assertAllClose(info.entropy, math.log(3), atol=1e-6)

  @parameterized.named_parameters(('t1', 1.0), ('t2', 2.0), ('t_half', 0.5))
  def test_independent_sample_log_prob_gradient(self, temperature):
    spec = [OneOf((3, 5, 7), OP_TAG), OneOf((16, 32), FILTERS_TAG)]
    controller = reinforce.Controller(spec)
    logits = {'0': np.array([0.5, -1.0, 2.0]), '1': np.array([0.3, -0.2])}
    for path, values in logits.items():
      controller.logits_by_path[path].assign(values)
    for _ in range(3):
      with tf.GradientTape() as tape:
        sampled, info = reinforce.independent_sample(
            spec, temperature=temperature, controller=controller)
      grads = tape.gradient(info.sample_log_prob,
                            list(controller.logits_by_path.values()))
      for oneof, path, grad in zip(sampled, logits, grads):
        scaled = logits[path] / temperature
        softmax = np.exp(scaled) / np.exp(scaled).sum()
        # d log softmax(l / T)[a] / dl = (onehot(a) - softmax(l / T)) / T.
        self.assertAllClose(grad, (oneof.mask.numpy() - softmax) / temperature)

  def test_independent_sample_logits_divided_by_temperature(self):
    spec = [OneOf((3, 5, 7), OP_TAG)]
    controller = reinforce.Controller(spec)
    controller.logits_by_path['0'].assign([1.0, 2.0, 4.0])
    _, info = reinforce.independent_sample(spec, temperature=2.0,
                                           controller=controller)
    self.assertAllClose(info.logits_by_path['0'], [0.5, 1.0, 2.0])
    probs = np.exp([0.5, 1.0, 2.0]) / np.exp([0.5, 1.0, 2.0]).sum()
    self.assertAllClose(info.entropy, -(probs * np.log(probs)).sum())

  def test_independent_sample_uniform_chi_square(self):
    spec = OneOf((3, 5, 7), OP_TAG)
    controller = reinforce.Controller(spec)

    [masks] = _draws(lambda _: (reinforce.independent_sample(
        spec, controller=controller)[0].mask,), tf.range(1000), num_masks=1)
    counts = masks.sum(axis=0)
    chi_square = ((counts - 1000 / 3)**2 / (1000 / 3)).sum()
    # 0.1% critical value of chi-square with 2 degrees of freedom.
    self.assertLess(chi_square, 13.82)
    self.assertEqual(counts.sum(), 1000)

  def test_independent_sample_in_tf_function(self):
    spec = _skippable_spec()
    controller = reinforce.Controller(spec)

    @tf.function
    def sample(p):
      sampled, info = reinforce.independent_sample(
          spec, increase_ops_probability=p, controller=controller)
      return _masks(sampled), info.sample_log_prob, info.entropy

    masks, log_prob, entropy = sample(tf.constant(0.0))
    layer_mask = masks[1].numpy()
    self.assertEqual(layer_mask.sum(), 1.0)
    expected = math.log(1 / 2) + (math.log(1 / 3) if layer_mask[0] else 0.0)
    self.assertAllClose(log_prob, expected)
    self.assertAllClose(entropy,
                        math.log(2) + (math.log(3) if layer_mask[0] else 0.0))
    masks, log_prob, _ = sample(tf.constant(1.0))
    self.assertAllClose(masks[1], [0.5, 0.5])
    self.assertAllClose(log_prob, 0.0)

  def test_independent_sample_in_v1_graph(self):
    with tf.Graph().as_default():
      with tf.compat.v1.variable_scope('rl_controller'):
        sampled, info = reinforce.independent_sample(
            _flat_spec(), increase_ops_probability=tf.constant(0.0),
            increase_filters_probability=None)
      names = [v.name for v in tf.compat.v1.trainable_variables()]
      self.assertEqual(names, ['rl_controller/logits/0:0',
                               'rl_controller/logits/1:0',
                               'rl_controller/logits/2:0'])
      with self.session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        for _ in range(5):
          masks, log_prob, entropy = sess.run(
              [_masks(sampled), info.sample_log_prob, info.entropy])
          self.assertEqual(masks[0].sum(), 1.0)
          self.assertAllClose(log_prob, math.log(1 / 3) + math.log(1 / 2))
          self.assertAllClose(entropy, math.log(3) + math.log(2))

  def test_independent_sample_seed_same_sample_in_another_graph(self):
    first = _graph_sample(_wide_spec(), [3, 7])
    again = _graph_sample(_wide_spec(), [3, 7])
    self.assertEqual(first[0].keys(), again[0].keys())
    for path, mask in first[0].items():
      np.testing.assert_array_equal(mask, again[0][path], err_msg=path)
    self.assertEqual(first[1], again[1])  # Bit for bit.

  def test_independent_sample_seed_other_seeds_other_samples(self):
    # Each seed differing in one of its two words gives another sample, and
    # the warm-up replacements (uniform op masks or the largest filters)
    # differ from seed to seed too.
    samples = [_graph_sample(_wide_spec(), seed)[0]
               for seed in ([3, 7], [3, 8], [4, 7], [0, 0])]
    replaced = []
    for masks in samples:
      replaced.append(tuple(
          bool(np.allclose(m, 0.25) or (path in ('d1', 'd3', 'd5', 'd7') and
                                        m[3] == 1.0))
          for path, m in sorted(masks.items())))
    for i in range(len(samples)):
      for j in range(i):
        self.assertFalse(all(np.array_equal(samples[i][k], samples[j][k])
                             for k in samples[i]), (i, j))
    self.assertGreater(len(set(replaced)), 1)

  def test_independent_sample_seed_draws_keyed_by_path(self):
    # Adding a OneOf leaves every other OneOf's draws as they were.
    masks, _ = _graph_sample(_wide_spec(), [5, 1])
    more, _ = _graph_sample(_wide_spec(extra=True), [5, 1])
    self.assertEqual(set(more) - set(masks), {'a'})
    for path, mask in masks.items():
      np.testing.assert_array_equal(mask, more[path], err_msg=path)

  def test_path_keys_differ_in_every_search_space(self):
    for name in mobile.SEARCH_SPACES:
      paths = [path for path, _ in
               schema.flatten_with_paths(mobile.get_search_space(name))]
      keys = {initializers.name_key(path) for path in paths}
      self.assertLen(keys, len(paths), name)
      self.assertLess(max(keys, default=0), 2**31)

  def test_independent_sample_seed_frequencies_follow_softmax(self):
    # 2000 seeds: the categorical draw follows softmax([0.5, 1, 2]) and the
    # warm-up replaces with probability 0.3 (chi-square, 0.1% critical
    # values: 13.82 for 2 degrees of freedom, 10.83 for 1).
    spec = [OneOf((3, 5, 7), OP_TAG), OneOf((16, 32), FILTERS_TAG)]
    controller = reinforce.Controller(spec)
    controller.logits_by_path['0'].assign([0.5, 1.0, 2.0])

    def draw(seed):
      sampled, _ = reinforce.independent_sample(
          spec, increase_filters_probability=0.3, controller=controller,
          seed=seed)
      return sampled[0].mask, sampled[1].mask

    n = 2000
    seeds = tf.stack([tf.range(n), tf.fill([n], 12345)], axis=1)
    op_masks, filters_masks = _draws(draw, seeds)
    counts = op_masks.sum(axis=0)
    # The largest filters are 32 either way; P(32) = 0.3 + 0.7 / 2.
    replaced = int((filters_masks[:, 1] == 1.0).sum())
    probs = np.exp([0.5, 1.0, 2.0]) / np.exp([0.5, 1.0, 2.0]).sum()
    self.assertLess((((counts - n * probs)**2) / (n * probs)).sum(), 13.82)
    p32 = 0.3 + 0.7 / 2
    expected = np.array([n * p32, n * (1 - p32)])
    got = np.array([replaced, n - replaced])
    self.assertLess((((got - expected)**2) / expected).sum(), 10.83)

  def test_independent_sample_seed_int64_and_python_ints(self):
    spec = _flat_spec()
    for seed in ([1, 2], tf.constant([1, 2], tf.int64)):
      sampled, info = reinforce.independent_sample(spec, 0.5, 0.5, seed=seed)
      again, info_again = reinforce.independent_sample(
          spec, 0.5, 0.5, seed=seed, controller=info.controller)
      for a, b in zip(_masks(sampled), _masks(again)):
        self.assertAllEqual(a, b)
      self.assertEqual(float(info.sample_log_prob),
                       float(info_again.sample_log_prob))

  @parameterized.named_parameters(
      ('float', tf.constant([1.0, 2.0])), ('three', [1, 2, 3]),
      ('scalar', tf.constant(1)))
  def test_independent_sample_bad_seed(self, seed):
    with self.assertRaisesRegex(ValueError, r'seed must be None or a '
                                r'stateless seed \(shape \[2\]'):
      reinforce.independent_sample(_flat_spec(), seed=seed)

  def test_independent_sample_logits_by_tag_names(self):
    spec = _skippable_spec()
    _, info = reinforce.independent_sample(spec)
    self.assertEqual(list(info.logits_by_tag),
                     ['op_indices_0', 'op_indices_1', 'filters_indices_0'])
    self.assertEqual(list(info.logits_by_path),
                     [_KERNEL, _LAYER, 'blocks/0/filters'])
    for by_tag, by_path in zip(info.logits_by_tag.values(),
                               info.logits_by_path.values()):
      self.assertIs(by_tag, by_path)

  def test_argmax_indices(self):
    spec = _skippable_spec()
    controller = reinforce.Controller(spec)
    controller.logits_by_path[_KERNEL].assign([0.1, 0.9, 0.3])
    controller.logits_by_path[_LAYER].assign([2.0, -1.0])
    self.assertEqual(
        reinforce.argmax_indices(controller.logits_by_path, spec), [1, 0, 0])
    logits = {path: v.numpy() for path, v in
              reversed(controller.logits_by_path.items())}
    # The spec's visit order wins over the mapping's order.
    self.assertEqual(reinforce.argmax_indices(logits, spec), [1, 0, 0])

  def test_argmax_indices_errors(self):
    spec = _skippable_spec()
    with self.assertRaisesRegex(ValueError, 'no logits for the OneOf at'):
      reinforce.argmax_indices({_LAYER: [0.0, 1.0]}, spec)
    with self.assertRaisesRegex(ValueError, 'has 2 choices'):
      reinforce.argmax_indices(
          {_KERNEL: [0, 0, 1], _LAYER: [0.0, 1.0, 2.0],
           'blocks/0/filters': [0.0]}, spec)

  @parameterized.named_parameters(('zero', 0.0), ('negative', -1.0))
  def test_independent_sample_bad_temperature(self, temperature):
    with self.assertRaisesRegex(ValueError, 'temperature must be > 0'):
      reinforce.independent_sample(_flat_spec(), temperature=temperature)

  @parameterized.named_parameters(
      ('ops_high', 'increase_ops_probability', 1.5),
      ('ops_negative', 'increase_ops_probability', -0.1),
      ('filters_high', 'increase_filters_probability', 2))
  def test_independent_sample_bad_probability(self, name, value):
    with self.assertRaisesRegex(ValueError, f'{name} must be .* in \\[0, 1\\]'):
      reinforce.independent_sample(_flat_spec(), **{name: value})

  def test_independent_sample_controller_mismatch(self):
    controller = reinforce.Controller(_flat_spec())
    with self.assertRaisesRegex(ValueError,
                                'Controller does not match the spec'):
      reinforce.independent_sample(_skippable_spec(), controller=controller)

  def test_uniform_sample_draws_each_choice_one_in_n_without_variables(self):
    # Each choice is drawn 1/n (chi-square, 0.1% critical value 13.82 for 2
    # degrees of freedom), and no controller variable is made.
    spec = [OneOf((3, 5, 7), OP_TAG), OneOf((16, 32), FILTERS_TAG)]

    def draw(seed):
      sampled = reinforce.uniform_sample(spec, seed=seed)
      return sampled[0].mask, sampled[1].mask

    n = 1500
    seeds = tf.stack([tf.range(n), tf.fill([n], 99)], axis=1)
    op_masks, filters_masks = _draws(draw, seeds)
    counts = op_masks.sum(axis=0)
    np.testing.assert_array_equal(filters_masks.sum(axis=1), np.ones(n))
    self.assertLess(((counts - n / 3)**2 / (n / 3)).sum(), 13.82)
    self.assertEqual(counts.sum(), n)
    with tf.Graph().as_default():
      reinforce.uniform_sample(spec, 0.5, 0.5, seed=[1, 2])
      self.assertEmpty(tf.compat.v1.global_variables())

  def test_uniform_sample_is_the_untrained_controllers_sample(self):
    # Same seed, same warm-up probabilities: the same masks as a controller
    # with logits 0, warm-up replacements included.
    spec = _wide_spec()
    for seed in ([3, 7], [8, 1]):
      sampled, _ = reinforce.independent_sample(spec, 0.5, 0.5, seed=seed)
      uniform = reinforce.uniform_sample(spec, 0.5, 0.5, seed=seed)
      for path, oneof in schema.flatten_with_paths(uniform):
        self.assertAllEqual(oneof.mask, sampled[path].mask, msg=path)

  def test_uniform_sample_warmup_and_single_choice(self):
    spec = [OneOf((3, 5, 7), OP_TAG), OneOf((16, 48, 32), FILTERS_TAG),
            OneOf((8,), FILTERS_TAG)]
    sampled = reinforce.uniform_sample(spec, 1.0, 1.0, seed=[4, 4])
    self.assertAllClose(sampled[0].mask, [1 / 3] * 3)
    self.assertAllEqual(sampled[1].mask, [0.0, 1.0, 0.0])
    self.assertAllEqual(sampled[2].mask, [1.0])
    with self.assertRaisesRegex(ValueError, 'increase_ops_probability must'):
      reinforce.uniform_sample(spec, 1.5)
    with self.assertRaisesRegex(ValueError, 'seed must be None'):
      reinforce.uniform_sample(spec, seed=[1, 2, 3])


if __name__ == '__main__':
  tf.test.main()
