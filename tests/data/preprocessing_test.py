"""Tests for the ImageNet preprocessing of one encoded image, and CIFAR's
augmentation."""

from __future__ import annotations

import itertools

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tunas_tf.data import preprocessing


def _coordinate_image(height: int, width: int) -> np.ndarray:
  """uint8 [h, w, 3] whose pixel (y, x) is (y % 256, x % 256, hi bits).

  The third channel is `16 * (y // 256) + x // 256`, so every pixel names its
  own coordinates: a crop shows exactly which window it came from.
  """
  y, x = np.meshgrid(np.arange(height), np.arange(width), indexing='ij')
  return np.stack([y % 256, x % 256, 16 * (y // 256) + x // 256],
                  axis=-1).astype(np.uint8)


def _photo_like(height: int, width: int, channels: int = 3,
                seed: int = 0) -> np.ndarray:
  """uint8 [h, w, channels]: smooth gradients plus noise, photo-like JPEGs."""
  rng = np.random.default_rng(seed)
  y, x = np.meshgrid(np.linspace(0, 1, height), np.linspace(0, 1, width),
                     indexing='ij')
  base = np.stack([128 + 100 * np.sin(6 * x + c) * np.cos(4 * y - c)
                   for c in range(channels)], axis=-1)
  noisy = base + rng.normal(0, 20, base.shape)
  return np.clip(noisy, 0, 255).astype(np.uint8)


def _bicubic_overshoot(a: float = -0.75) -> float:
  """Largest sum of negative 2-D weights of TF1's bicubic kernel (Keys, a).

  One output is sum(w * p) with sum(w) = 1 (TF clamps the taps at the
  borders, so the weights still sum to 1), hence it lies in
  [-S * 255, (1 + S) * 255] for 0..255 inputs, S this sum. With a = -0.75,
  S = 2 * 0.1875 * 1.1875 = 0.4453 at the half-pixel phase (each 1-D kernel
  has negative taps -0.09375, -0.09375 there).
  """

  def weights(t):  # [phase] -> [phase, tap]
    d = np.abs(np.stack([1 + t, t, 1 - t, 2 - t], axis=-1))
    near = (a + 2) * d**3 - (a + 3) * d**2 + 1
    far = a * d**3 - 5 * a * d**2 + 8 * a * d - 4 * a
    return np.where(d <= 1, near, far)

  taps = weights(np.linspace(0, 1, 101))  # [phase, tap]
  products = taps[:, None, :, None] * taps[None, :, None, :]
  return float(-np.minimum(products, 0).sum(axis=(2, 3)).min())


def _normalized_bounds(channels: int):
  """Per-channel bounds of a normalised output, bicubic overshoot included."""
  if channels == 1:
    mean = np.array([sum(preprocessing.MEAN_RGB) / 3])
    std = np.array([sum(preprocessing.STDDEV_RGB) / 3])
  else:
    mean = np.array(preprocessing.MEAN_RGB)
    std = np.array(preprocessing.STDDEV_RGB)
  s = _bicubic_overshoot()
  return (-s * 255 - mean) / std, ((1 + s) * 255 - mean) / std


def _reference(image: np.ndarray, window, image_size: int) -> np.ndarray:
  """The original's steps in NumPy and TF1 ops: slice, resize, normalise."""
  oy, ox, h, w = (int(v) for v in window)
  crop = image[oy:oy + h, ox:ox + w]
  resized = tf.compat.v1.image.resize_bicubic(
      crop[None], [image_size, image_size]).numpy()[0]
  channels = image.shape[-1]
  mean = (np.array(preprocessing.MEAN_RGB) if channels == 3
          else np.array([sum(preprocessing.MEAN_RGB) / 3]))
  std = (np.array(preprocessing.STDDEV_RGB) if channels == 3
         else np.array([sum(preprocessing.STDDEV_RGB) / 3]))
  return ((resized - mean.astype(np.float32)) /
          std.astype(np.float32)).astype(np.float32)


class PreprocessingTest(tf.test.TestCase, parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.images = {
        'jpeg_300x200': tf.io.encode_jpeg(_photo_like(300, 200), quality=90),
        'png_120x480': tf.io.encode_png(_photo_like(120, 480, seed=1)),
        'jpeg_64x64': tf.io.encode_jpeg(_photo_like(64, 64, seed=2),
                                        quality=90),
        'gray_jpeg_200x260': tf.io.encode_jpeg(
            _photo_like(200, 260, channels=1, seed=3), quality=90),
        'gray_png_50x40': tf.io.encode_png(
            _photo_like(50, 40, channels=1, seed=4)),
    }
    cls.coordinates = _coordinate_image(300, 200)
    cls.coordinates_png = tf.io.encode_png(cls.coordinates)

  @parameterized.named_parameters(
      (f'{name}_{channels}ch_{size}', name, channels, size)
      for name, channels, size in itertools.product(
          ('jpeg_300x200', 'png_120x480', 'jpeg_64x64', 'gray_jpeg_200x260',
           'gray_png_50x40'), (3, 1), (224, 32)))
  def test_shape_dtype_and_range(self, name, channels, size):
    low, high = _normalized_bounds(channels)
    outputs = [preprocessing.imagenet_eval(self.images[name], size, channels)]
    outputs += [preprocessing.imagenet_train(self.images[name], [seed, 7],
                                             size, channels)
                for seed in range(3)]
    for image in outputs:
      self.assertEqual(image.shape, (size, size, channels))
      self.assertEqual(image.dtype, tf.float32)
      image = image.numpy().reshape(-1, channels)
      self.assertTrue(np.all(image >= low - 1e-5), (image.min(0), low))
      self.assertTrue(np.all(image <= high + 1e-5), (image.max(0), high))

  def test_overshoot_bound_by_hand(self):
    # a = -0.75 at t = 0.5: taps at 1.5 weigh a * (3.375 - 11.25 + 12 - 4)
    # = -0.09375, two per axis; S = 2 * 0.1875 * (1 + 0.1875).
    self.assertAllClose(_bicubic_overshoot(), 2 * 0.1875 * 1.1875)

  def test_no_clipping_like_the_original(self):
    # Upscaled 0/255 stripes two pixels wide ring past 0 and 255 (to about
    # -48 and 303); the original kept that (convert_image_dtype float32 ->
    # float32 is a no-op) and so do we.
    stripes = np.zeros((64, 64, 3), np.uint8)
    stripes[:, (np.arange(64) // 2) % 2 == 0] = 255
    image = preprocessing.imagenet_eval(tf.io.encode_png(stripes), 224)
    low = (0 - np.array(preprocessing.MEAN_RGB)) / preprocessing.STDDEV_RGB
    high = (255 - np.array(preprocessing.MEAN_RGB)) / preprocessing.STDDEV_RGB
    flat = image.numpy().reshape(-1, 3)
    self.assertTrue(np.all(flat.min(0) < low - 0.1), flat.min(0))
    self.assertTrue(np.all(flat.max(0) > high + 0.1), flat.max(0))

  @parameterized.named_parameters(
      # side = int(224 / 256 * min) = int(0.875 * 200) = 175;
      # offsets ((300 - 175) + 1) // 2 = 63, ((200 - 175) + 1) // 2 = 13.
      ('tall', (300, 200), 224, (63, 13, 175, 175)),
      # int(0.875 * 120) = 105; (15 + 1) // 2 = 8, (375 + 1) // 2 = 188.
      ('wide', (120, 480), 224, (8, 188, 105, 105)),
      # int(0.875 * 64) = 56; (8 + 1) // 2 = 4.
      ('square', (64, 64), 224, (4, 4, 56, 56)),
      # 28 / 60 in float32 is 0.46666667; * 200 = 93.33 -> 93;
      # (207 + 1) // 2 = 104, (107 + 1) // 2 = 54.
      ('inexact_ratio', (300, 200), 28, (104, 54, 93, 93)),
      # int(0.875 * 75) = int(65.625) = 65; (10 + 1) // 2 = 5, (35 + 1) // 2.
      ('odd', (75, 100), 224, (5, 18, 65, 65)),
  )
  def test_eval_crop_window_by_hand(self, shape, size, expected):
    self.assertAllEqual(preprocessing.eval_crop_window(shape, size), expected)

  def test_eval_crop_is_the_window(self):
    window = (63, 13, 175, 175)  # 300x200 at 224, as computed above.
    crop = preprocessing.decode_crop(
        self.coordinates_png,
        lambda shape: preprocessing.eval_crop_window(shape, 224)).numpy()
    self.assertAllEqual(crop, self.coordinates[63:238, 13:188])
    # The corners name their coordinates: (y, x) = (63, 13) and (237, 187).
    self.assertAllEqual(crop[0, 0], (63, 13, 0))
    self.assertAllEqual(crop[-1, -1], (237, 187, 0))
    self.assertAllClose(
        preprocessing.imagenet_eval(self.coordinates_png, 224),
        _reference(self.coordinates, window, 224), rtol=0, atol=1e-5)

  def test_resize_is_tf1_bicubic_not_tf2(self):
    # TF2's tf.image.resize(method='bicubic') uses half-pixel centres and
    # coefficient -0.5: a different image from the original's.
    pixels = _photo_like(300, 200, seed=7)
    image = preprocessing.imagenet_eval(tf.io.encode_png(pixels), 224).numpy()
    window = (63, 13, 175, 175)
    self.assertAllClose(image, _reference(pixels, window, 224), atol=1e-5)
    crop = pixels[63:238, 13:188].astype(np.float32)
    tf2 = tf.image.resize(crop, [224, 224], method='bicubic').numpy()
    tf2 = ((tf2 - np.float32(preprocessing.MEAN_RGB)) /
           np.float32(preprocessing.STDDEV_RGB))
    # Observed: mean 0.062, max 0.38 (normalised units; noise std ~0.35).
    self.assertGreater(np.abs(image - tf2).mean(), 0.03)
    self.assertGreater(np.abs(image - tf2).max(), 0.2)

  @parameterized.named_parameters(
      ('tall', (300, 200)), ('wide', (120, 480)), ('square', (64, 64)),
      ('large', (375, 500)))
  def test_train_crop_window_over_seeds(self, shape):
    height, width = shape
    eval_window = preprocessing.eval_crop_window(shape, 224).numpy()
    sampled = 0
    windows = set()
    for seed in range(300):
      window = preprocessing.train_crop_window(shape, [seed, 11], 224).numpy()
      oy, ox, h, w = (int(v) for v in window)
      self.assertTrue(0 <= oy and oy + h <= height and 0 <= ox and
                      ox + w <= width, window)
      windows.add((oy, ox, h, w))
      if np.array_equal(window, eval_window):
        continue  # The fallback of a failed sample.
      sampled += 1
      area = h * w / (height * width)
      # The whole image as the object to cover at 0.1 makes 0.1 the floor.
      self.assertBetween(area, 0.1, 1.0)
      # Width is rounded to whole pixels: ratio within 0.5 / h of the range.
      self.assertBetween(w / h, 3 / 4 - 0.5 / h, 4 / 3 + 0.5 / h)
      self.assertFalse(h == height and w == width)
    self.assertGreater(sampled, 200)
    self.assertGreater(len(windows), 100)

  def test_failed_sampling_falls_back_to_eval_crop(self):
    # 10x400: a crop of aspect <= 4/3 is at most 10x13, 130 / 4,000 = 3% of
    # the image < 8%, so every attempt fails; eval: int(0.875 * 10) = 8,
    # offsets (10 - 8 + 1) // 2 = 1, (400 - 8 + 1) // 2 = 196.
    for seed in range(20):
      self.assertAllEqual(
          preprocessing.train_crop_window((10, 400), [seed, 0], 224),
          (1, 196, 8, 8))

  @parameterized.named_parameters(('rgb', 3), ('gray', 1))
  def test_failed_sampling_on_jpegs_of_any_channels(self, header_channels):
    # The original compared [h, w, c] with the crop's [h, w, 3] and so never
    # fell back on a grayscale JPEG; comparing h and w does.
    pixels = _photo_like(10, 400, channels=header_channels, seed=5)
    encoded = tf.io.encode_jpeg(pixels, quality=90)
    expected = preprocessing.imagenet_eval(encoded, 32).numpy()
    for seed in range(6):
      image = preprocessing.imagenet_train(encoded, [seed, 0], 32).numpy()
      self.assertTrue(np.array_equal(image, expected) or
                      np.array_equal(image, expected[:, ::-1]))

  def test_train_is_crop_resize_flip_of_the_seeds_window(self):
    flips = []
    for seed in range(40):
      image = preprocessing.imagenet_train(self.coordinates_png, [seed, 3],
                                           32).numpy()
      window = preprocessing.train_crop_window((300, 200), [seed, 3], 32)
      expected = _reference(self.coordinates, window.numpy(), 32)
      if np.allclose(image, expected, rtol=0, atol=1e-5):
        flips.append(False)
      else:
        self.assertAllClose(image, expected[:, ::-1], rtol=0, atol=1e-5)
        flips.append(True)
    self.assertIn(True, flips)
    self.assertIn(False, flips)

  def test_train_same_seed_same_image_other_seeds_differ(self):
    encoded = self.images['jpeg_300x200']
    first = preprocessing.imagenet_train(encoded, [4, 5], 64)
    self.assertAllEqual(first,
                        preprocessing.imagenet_train(encoded, [4, 5], 64))
    # int64 seeds of the same values key the same stream.
    self.assertAllEqual(first, preprocessing.imagenet_train(
        encoded, tf.constant([4, 5], tf.int64), 64))
    others = [preprocessing.imagenet_train(encoded, seed, 64).numpy()
              for seed in ([5, 5], [4, 6], [0, 0], [123456789, 1])]
    for other in others:
      self.assertGreater(np.abs(first.numpy() - other).max(), 0.1)

  def test_eval_is_deterministic(self):
    encoded = self.images['png_120x480']
    self.assertAllEqual(preprocessing.imagenet_eval(encoded, 64),
                        preprocessing.imagenet_eval(encoded, 64))

  @parameterized.named_parameters(
      # 4:4:4 chroma and grayscale: every pixel equals a full decode's.
      ('rgb_444', 3, False, True), ('gray', 1, True, True),
      # 4:2:0 (the default, and most photos'): libjpeg upsamples the window's
      # chroma as if its left and right edges were the image's, so those two
      # columns may differ; the rest is equal.
      ('rgb_420', 3, True, False))
  def test_decode_crop_jpeg_equals_full_decode_then_slice(
      self, channels, chroma_downsampling, exact):
    rng = np.random.default_rng(6)
    for height, width in ((300, 200), (120, 480), (64, 64), (37, 53)):
      pixels = _photo_like(height, width, channels, seed=height)
      encoded = tf.io.encode_jpeg(pixels, quality=90,
                                  chroma_downsampling=chroma_downsampling)
      full = tf.io.decode_jpeg(encoded, channels=channels).numpy()
      for _ in range(8):
        h, w = int(rng.integers(3, height + 1)), int(rng.integers(3, width + 1))
        oy = int(rng.integers(0, height - h + 1))
        ox = int(rng.integers(0, width - w + 1))
        crop = preprocessing.decode_crop(
            encoded, lambda _, window=(oy, ox, h, w): tf.constant(window),
            channels).numpy()
        expected = full[oy:oy + h, ox:ox + w]
        if exact:
          self.assertAllEqual(crop, expected)
        else:
          self.assertAllEqual(crop[:, 1:-1], expected[:, 1:-1])

  def test_jpeg_path_decodes_only_the_window(self):
    graph = tf.function(
        lambda e: preprocessing.imagenet_train(e, [1, 2], 224)
    ).get_concrete_function(tf.TensorSpec([], tf.string)).graph
    op_types = {op.type for op in graph.get_operations()}
    for function in graph.as_graph_def().library.function:
      op_types.update(node.op for node in function.node_def)
    self.assertContainsSubset({'ExtractJpegShape', 'DecodeAndCropJpeg',
                               'DecodeImage'}, op_types)
    # DecodeImage is the non-JPEG branch; a JPEG is never decoded whole.
    self.assertNotIn('DecodeJpeg', op_types)

  def test_in_dataset_map(self):
    names = ('jpeg_300x200', 'png_120x480', 'jpeg_64x64', 'gray_jpeg_200x260')
    encoded = [self.images[name] for name in names]
    dataset = tf.data.Dataset.from_tensor_slices(encoded).enumerate().map(
        lambda i, e: (preprocessing.imagenet_train(e, tf.stack([i, 9]), 48),
                      preprocessing.imagenet_eval(e, 48)),
        num_parallel_calls=2, deterministic=True)
    for i, (train, evaluated) in enumerate(dataset):
      self.assertAllClose(train, preprocessing.imagenet_train(
          encoded[i], tf.constant([i, 9], tf.int64), 48), atol=1e-5)
      self.assertAllClose(evaluated,
                          preprocessing.imagenet_eval(encoded[i], 48),
                          atol=1e-5)

  def test_in_a_tf1_graph(self):
    names = ('jpeg_300x200', 'png_120x480')
    eager = [(preprocessing.imagenet_train(self.images[n], [8, 1], 40),
              preprocessing.imagenet_eval(self.images[n], 40)) for n in names]
    values = [self.images[n].numpy() for n in names]
    with tf.compat.v1.Graph().as_default():
      encoded = tf.compat.v1.placeholder(tf.string, [])
      seed = tf.compat.v1.placeholder(tf.int32, [2])
      train = preprocessing.imagenet_train(encoded, seed, 40)
      evaluated = preprocessing.imagenet_eval(encoded, 40)
      self.assertEqual(train.shape, (40, 40, 3))
      self.assertEqual(evaluated.shape, (40, 40, 3))
      with tf.compat.v1.Session() as session:
        for value, (train_eager, eval_eager) in zip(values, eager):
          got = session.run([train, evaluated],
                            {encoded: value, seed: [8, 1]})
          self.assertAllClose(got[0], train_eager, atol=1e-5)
          self.assertAllClose(got[1], eval_eager, atol=1e-5)

  def test_augment_is_a_function_of_the_seed(self):
    image = tf.reshape(tf.range(8 * 8 * 1, dtype=tf.float32), [8, 8, 1])
    seed = tf.constant([5, 9], tf.int64)
    self.assertAllEqual(preprocessing.cifar_augment(image, seed),
                        preprocessing.cifar_augment(image, seed))
    outputs = {preprocessing.cifar_augment(image, tf.constant([5, s], tf.int64))
               .numpy().tobytes() for s in range(8)}
    self.assertGreater(len(outputs), 1)

  def test_to_pixels_inverts_from_pixels(self):
    pixels = np.arange(0, 255, 255 / 24, dtype=np.float32).reshape(2, 2, 2, 3)
    for name in ('imagenet', 'cifar', 'none'):
      for channels in (1, 3):
        images = pixels[..., :channels]
        network_input = preprocessing.from_pixels(images, name, channels)
        if name == 'imagenet':  # Normalised: mean 0 on average.
          self.assertLess(float(tf.reduce_min(network_input)), -1.0)
        # One division and one multiplication (or two each): float32
        # rounding of values up to 255.
        self.assertAllClose(preprocessing.to_pixels(network_input, name,
                                                    channels),
                            images, atol=1e-4)

  def test_rejects_bad_arguments(self):
    encoded = self.images['jpeg_64x64']
    with self.assertRaisesRegex(ValueError, r'image_size .* got 0'):
      preprocessing.imagenet_eval(encoded, 0)
    with self.assertRaisesRegex(ValueError, r'image_size .* got 224\.0'):
      preprocessing.imagenet_train(encoded, [1, 2], 224.0)
    with self.assertRaisesRegex(ValueError, r'channels .* \(1, 3\), got 4'):
      preprocessing.imagenet_eval(encoded, 224, channels=4)


if __name__ == '__main__':
  tf.test.main()
