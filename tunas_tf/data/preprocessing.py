"""ImageNet preprocessing of one encoded image: the original's
`preprocess_for_train/_eval` and normalisation, TF1 bicubic resize included.
Where it differs: crop and flip are stateless functions of `seed`; the
failed-sampling test compares height and width only (the original's never
fired on grayscale or CMYK JPEGs); only a JPEG's crop window is decoded;
non-JPEG images are read too; `channels=1` uses the channel means."""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple, Union

import tensorflow as tf

# The original's normalisation (fast_imagenet_input.py), on the 0..255 scale.
MEAN_RGB = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STDDEV_RGB = (0.229 * 255, 0.224 * 255, 0.225 * 255)
# Eval crops the centre image_size / (image_size + CROP_PADDING) of the short
# side (224 of 256).
CROP_PADDING = 32

_MIN_OBJECT_COVERED = 0.1
_ASPECT_RATIO_RANGE = (3. / 4., 4. / 3.)
_AREA_RANGE = (0.08, 1.0)
_MAX_ATTEMPTS = 10
_CHANNELS = (1, 3)

SeedLike = Union[tf.Tensor, Sequence[int]]
WindowFn = Callable[[tf.Tensor], tf.Tensor]


def _check(image_size: int, channels: int) -> None:
  """Raises ValueError for a non-positive `image_size` or bad `channels`."""
  if isinstance(image_size, bool) or not isinstance(image_size, int) or (
      image_size <= 0):
    raise ValueError(f'image_size must be a positive int, got {image_size!r}')
  if channels not in _CHANNELS:
    raise ValueError(f'channels must be one of {_CHANNELS}, got {channels!r}')


def eval_crop_window(image_shape: tf.Tensor, image_size: int) -> tf.Tensor:
  """int32 `[offset_y, offset_x, side, side]`: the centre square of
  `image_size / (image_size + 32)` of the short side of an image of
  `image_shape` ([h, w, ...]), in the original's float32 arithmetic."""
  height = tf.cast(image_shape[0], tf.int32)
  width = tf.cast(image_shape[1], tf.int32)
  ratio = image_size / (image_size + CROP_PADDING)
  # The original's arithmetic: a float32 product, truncated towards zero.
  side = tf.cast(
      tf.constant(ratio, tf.float32) *
      tf.cast(tf.minimum(height, width), tf.float32), tf.int32)
  offset_y = (height - side + 1) // 2
  offset_x = (width - side + 1) // 2
  return tf.stack([offset_y, offset_x, side, side])


def train_crop_window(image_shape: tf.Tensor, seed: SeedLike,
                      image_size: int) -> tf.Tensor:
  """int32 `[offset_y, offset_x, height, width]`: the original's distorted
  box (object covered 0.1, aspect 3/4..4/3, area 0.08..1, 10 attempts) keyed
  on `seed` ([2]); when every attempt failed, `eval_crop_window`."""
  height_width = tf.cast(image_shape[:2], tf.int32)
  crop_seed = tf.random.experimental.stateless_fold_in(seed, 0)
  whole_image = tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, shape=[1, 1, 4])
  begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
      tf.concat([height_width, [1]], axis=0),
      bounding_boxes=whole_image,
      seed=crop_seed,
      min_object_covered=_MIN_OBJECT_COVERED,
      aspect_ratio_range=_ASPECT_RATIO_RANGE,
      area_range=_AREA_RANGE,
      max_attempts=_MAX_ATTEMPTS,
      use_image_if_no_bounding_boxes=True)
  sampled = tf.concat([begin[:2], size[:2]], axis=0)
  failed = tf.reduce_all(tf.equal(size[:2], height_width))
  return tf.where(failed, eval_crop_window(height_width, image_size), sampled)


def decode_crop(encoded: tf.Tensor, window_fn: WindowFn,
                channels: int = 3) -> tf.Tensor:
  """uint8 [crop_height, crop_width, channels]: the window
  `window_fn([height, width])` (-> int32 [offset_y, offset_x, h, w]) of one
  encoded image. Only a JPEG's window is decoded (with subsampled chroma its
  edge columns can differ from a full decode's); others whole, then sliced."""

  def jpeg() -> tf.Tensor:
    window = window_fn(tf.image.extract_jpeg_shape(encoded)[:2])
    return tf.image.decode_and_crop_jpeg(encoded, window, channels=channels)

  def other() -> tf.Tensor:
    image = tf.io.decode_image(encoded, channels=channels,
                               expand_animations=False)
    window = window_fn(tf.shape(image)[:2])
    return tf.slice(image, [window[0], window[1], 0],
                    [window[2], window[3], channels])

  return tf.cond(tf.io.is_jpeg(encoded), jpeg, other)


def _resize(image: tf.Tensor, image_size: int) -> tf.Tensor:
  """TF1 `resize_bicubic` (no half-pixel centres): float32, not clipped."""
  # The kernel reads uint8 as float anyway; from float32 it is the same image,
  # faster (bench/DECISIONS.md, 'Normalise against row-tiled constants').
  resized = tf.raw_ops.ResizeBicubic(
      images=tf.cast(image, tf.float32)[tf.newaxis],
      size=[image_size, image_size], align_corners=False,
      half_pixel_centers=False)
  return resized[0]


def _mean_stddev(channels: int):
  """The normalisation's per-channel constants; one channel takes the means."""
  if channels == 1:
    return [sum(MEAN_RGB) / 3], [sum(STDDEV_RGB) / 3]
  return MEAN_RGB, STDDEV_RGB


def _normalize(image: tf.Tensor, channels: int) -> tf.Tensor:
  """(image - mean) / stddev per channel of a static-shape float32 image."""
  mean, stddev = _mean_stddev(channels)
  height, width, _ = image.shape
  # Eigen's broadcast over an inner dimension of 3 is slow on CPU
  # (bench/DECISIONS.md, 'Normalise against row-tiled constants'): rows of
  # width * channels against the constants tiled along a row.
  rows = tf.reshape(image, [height, width * channels])
  rows = ((rows - tf.constant(mean * width, tf.float32)) /
          tf.constant(stddev * width, tf.float32))
  return tf.reshape(rows, [height, width, channels])


def imagenet_train(encoded: tf.Tensor, seed: SeedLike, image_size: int,
                   channels: int = 3) -> tf.Tensor:
  """The original's training preprocessing of one encoded image (JPEG, PNG,
  BMP, GIF): `train_crop_window`, TF1 bicubic resize, flip with probability
  1/2, normalisation; a pure function of (`encoded`, `seed` [2]).

  Returns float32 [image_size, image_size, channels]: 0..255 values (not
  clipped) minus `MEAN_RGB`, over `STDDEV_RGB`. Raises ValueError for a
  non-positive `image_size` or `channels` not 1 or 3.
  """
  _check(image_size, channels)
  seed = tf.convert_to_tensor(seed)
  image = decode_crop(
      encoded, lambda shape: train_crop_window(shape, seed, image_size),
      channels)
  image = _resize(image, image_size)
  # After the resize, as the original flips: the half-pixel offset of TF1's
  # resize makes flip-then-resize a different image.
  image = tf.image.stateless_random_flip_left_right(
      image, seed=tf.random.experimental.stateless_fold_in(seed, 1))
  return _normalize(image, channels)


def imagenet_eval(encoded: tf.Tensor, image_size: int,
                  channels: int = 3) -> tf.Tensor:
  """The original's eval preprocessing of one image: crop `eval_crop_window`,
  resize, normalise; arguments, result and errors as `imagenet_train`'s."""
  _check(image_size, channels)
  image = decode_crop(
      encoded, lambda shape: eval_crop_window(shape, image_size), channels)
  return _normalize(_resize(image, image_size), channels)


def cifar_augment(image: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
  """Random 1/8 pad-and-crop and left-right flip (CIFAR-style), a pure
  function of the image and `seed` (int64 [2]; stateless ops)."""
  size = tf.shape(image)[0]
  pad = tf.maximum(size // 8, 1)
  padded = tf.pad(image, [[pad, pad], [pad, pad], [0, 0]], mode='REFLECT')
  crop_seed = tf.random.experimental.stateless_fold_in(seed, 0)
  flip_seed = tf.random.experimental.stateless_fold_in(seed, 1)
  image = tf.image.stateless_random_crop(padded, tf.shape(image), crop_seed)
  return tf.image.stateless_random_flip_left_right(image, flip_seed)


def run_image_size(name: str,
                   stored_shape: Tuple[Optional[int], Optional[int]],
                   image_size: Optional[int]) -> int:
  """`image_size`, or the stored images' shorter side when they have one
  size; ValueError for varying sizes without `image_size`."""
  if image_size is not None:
    return image_size
  if None in stored_shape:
    raise ValueError(f'{name!r} holds images of varying sizes: give '
                     '--image_size (e.g. 224)')
  return min(stored_shape)


def from_pixels(images: tf.Tensor, preprocessing: str,
                channels: int) -> tf.Tensor:
  """The network's input from 0-255 pixels [..., channels] at the run's size:
  `preprocessing`'s evaluation value transform without crop and resize
  (`imagenet` normalises, `cifar` and `none` scale to [0, 1])."""
  images = tf.cast(images, tf.float32)
  if preprocessing != 'imagenet':
    return images / 255.0
  mean, stddev = _mean_stddev(channels)
  return (images - tf.constant(mean)) / tf.constant(stddev)


def to_pixels(images: tf.Tensor, preprocessing: str,
              channels: int) -> tf.Tensor:
  """The inverse of `from_pixels`: float32 0-255 values (not rounded, not
  clipped) of network inputs."""
  if preprocessing != 'imagenet':
    return images * 255.0
  mean, stddev = _mean_stddev(channels)
  return images * tf.constant(stddev) + tf.constant(mean)
