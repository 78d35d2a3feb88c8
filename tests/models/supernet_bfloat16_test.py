"""The supernet in bfloat16: close to float32 for the same weights.

`Supernet(..., compute_dtype=tf.bfloat16)` runs the forward pass in bfloat16
on float32 variables (cast on read), with float32 batch-norm statistics.
Compared with the float32 network of the same seed (hence the same weights)
on the same sample, in both modes:

* logits: bfloat16, and max |bf16 - f32| <= 5% of max |f32 logits|
  (bfloat16 keeps 8 significant bits, a relative rounding of 2^-9 per op;
  measured 1.1-1.7% on digits_search, 1.6-2.1% on cifar_search, for three
  random samples and eight images);
* gradients: float32, with ||g_bf16 - g_f32|| <= 8% of ||g_f32|| (measured
  0.9-1.8% on digits_search, 1.8-2.7% on cifar_search);
* variables stay float32, and the regulariser (which reads the float32
  variables) is bit-identical.
"""

from absl.testing import parameterized
import numpy as np
import pytest
import tensorflow as tf

from tunas_tf.models import supernet as supernet_lib
from tunas_tf.search_space import mobile
from tests.testing import sampled_specs as helpers

pytestmark = [pytest.mark.numerics, pytest.mark.bfloat16]

Supernet = supernet_lib.Supernet
LOGITS_RTOL = 0.05  # Of max |float32 logits|.
GRADIENT_RTOL = 0.08  # Of ||float32 gradient||.
WEIGHT_DECAY = 0.1
_SPACES = {'digits_search': (8, 1), 'cifar_search': (32, 3)}


def _run(net, spec, masks, images):
  """(logits, regulariser, gradients) of sum(logits * w) + regulariser."""
  sampled = helpers.attach(spec, masks)
  with tf.GradientTape() as tape:
    logits = net(sampled, images, training=True)
    reg = net.regularization_loss(sampled, WEIGHT_DECAY)
    weights = tf.range(1.0, 1.0 + logits.shape[-1]) / 10.0
    loss = tf.reduce_sum(tf.cast(logits, tf.float32) * weights) + reg
  grads = tape.gradient(loss, net.trainable_variables,
                        unconnected_gradients=tf.UnconnectedGradients.ZERO)
  return logits, reg, grads


class SupernetBfloat16Test(tf.test.TestCase, parameterized.TestCase):

  def _compare(self, ssd, mode, masks, images):
    spec = mobile.get_search_space(ssd)
    channels = images.shape[-1]
    nets = {dtype: Supernet(spec, 10, mode=mode, input_channels=channels,
                            seed=3, compute_dtype=dtype)
            for dtype in (tf.float32, tf.bfloat16)}
    f32 = _run(nets[tf.float32], spec, masks, images)
    bf16 = _run(nets[tf.bfloat16], spec, masks, images)
    self.assertEqual(f32[0].dtype, tf.float32)
    self.assertEqual(bf16[0].dtype, tf.bfloat16)
    logits32 = f32[0].numpy()
    difference = np.abs(tf.cast(bf16[0], tf.float32).numpy() - logits32)
    self.assertLessEqual(difference.max(),
                         LOGITS_RTOL * np.abs(logits32).max())
    self.assertGreater(difference.max(), 0.0)  # It did compute in bfloat16.
    self.assertEqual(bf16[1].dtype, tf.float32)
    self.assertEqual(float(bf16[1]), float(f32[1]))
    for variable in nets[tf.bfloat16].trainable_variables:
      self.assertEqual(variable.dtype, tf.float32, variable.name)
    self.assertEqual({g.dtype for g in bf16[2]}, {tf.float32})
    g32 = np.concatenate([g.numpy().ravel() for g in f32[2]])
    g16 = np.concatenate([g.numpy().ravel() for g in bf16[2]])
    self.assertLessEqual(np.linalg.norm(g16 - g32),
                         GRADIENT_RTOL * np.linalg.norm(g32))

  @parameterized.product(ssd=sorted(_SPACES), mode=supernet_lib.MODES,
                         seed=[0, 1])
  def test_one_hot_sample_close_to_float32(self, ssd, mode, seed):
    spec = mobile.get_search_space(ssd)
    size, channels = _SPACES[ssd]
    masks = helpers.masks_from_indices(
        spec, helpers.random_indices(spec, np.random.default_rng(seed)))
    images = tf.random.stateless_uniform([8, size, size, channels],
                                         [0, seed])
    self._compare(ssd, mode, masks, images)

  @parameterized.parameters(*supernet_lib.MODES)
  def test_warmup_masks_close_to_float32(self, mode):
    # Uniform op masks run every branch and scale them by 1/n in bfloat16.
    spec = mobile.get_search_space('digits_search')
    masks = helpers.masks_from_indices(
        spec, helpers.random_indices(spec, np.random.default_rng(2)))
    for path, mask in masks.items():
      if not path.endswith('filters'):
        masks[path] = helpers.uniform(len(mask))
    images = tf.random.stateless_uniform([8, 8, 8, 1], [0, 2])
    self._compare('digits_search', mode, masks, images)

  def test_images_of_any_float_dtype_are_cast(self):
    spec = mobile.get_search_space('digits_search')
    net = Supernet(spec, 10, input_channels=1, seed=0,
                   compute_dtype=tf.bfloat16)
    masks = helpers.masks_from_indices(
        spec, helpers.random_indices(spec, np.random.default_rng(0)))
    images = tf.random.stateless_uniform([2, 8, 8, 1], [0, 0])
    sampled = helpers.attach(spec, masks)
    from_f32 = net(sampled, images)
    from_bf16 = net(sampled, tf.cast(images, tf.bfloat16))
    self.assertEqual(net.compute_dtype, tf.bfloat16)
    self.assertAllEqual(from_f32, from_bf16)

  @parameterized.parameters(tf.float16, tf.float64, 'int32', 'nonsense')
  def test_bad_compute_dtype(self, dtype):
    with self.assertRaisesRegex(ValueError, 'compute_dtype must be one of'):
      Supernet(mobile.get_search_space('digits_search'), 10,
               input_channels=1, compute_dtype=dtype)


if __name__ == '__main__':
  tf.test.main()
