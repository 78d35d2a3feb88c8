"""Image folders of JPEGs of mixed sizes, built here, and their import.

`make_jpeg_folder` writes `root/<split>/<class>/<k>.jpg` (the layout
`tools/import_dataset --format=folder` reads); `import_jpeg_dataset` builds a
small one (2 classes, 12 train and 3 test images each, sides 64..160 px, one
grayscale) and imports it as a prepared TFDS dataset in a second or two,
optionally with some images corrupted (undecodable).

Example:
  data_dir, name = jpeg_folder.import_jpeg_dataset(tempfile.mkdtemp())
  datasets.dataset_info(name, data_dir, validation_examples=2,
                        image_size=64)
"""

import os
from typing import Dict, Sequence, Tuple

import numpy as np
from PIL import Image

from tunas_tf.data import importing
from tunas_tf.data import local_data

# split -> class -> one size per image: (height, width) for an RGB JPEG,
# (height, width, 1) for a grayscale one.
Sizes = Dict[str, Dict[str, Sequence[Tuple[int, ...]]]]

CLASSES = ('cat', 'dog')
TRAIN_PER_CLASS = 12
TEST_PER_CLASS = 3
MIN_SIDE, MAX_SIDE = 64, 160
QUALITY = 90


def _pixels(shape: Tuple[int, ...], rng: np.random.RandomState) -> np.ndarray:
  """A smooth random picture (a colour ramp plus a little noise): small as a
  JPEG, and not constant, so a wrong crop or flip would show."""
  height, width = shape[:2]
  channels = shape[2] if len(shape) == 3 else 3
  ys = np.linspace(0, 1, height)[:, None, None]
  xs = np.linspace(0, 1, width)[None, :, None]
  start, dy, dx = (rng.uniform(0, 255, channels) for _ in range(3))
  image = start + (dy - start) * ys + (dx - start) * xs / 2
  image += rng.normal(0, 8, (height, width, channels))
  image = np.clip(image, 0, 255).astype(np.uint8)
  return image[..., 0] if channels == 1 else image


def make_jpeg_folder(root: str, sizes_by_split_and_class: Sizes,
                     seed: int) -> str:
  """Writes one JPEG (quality `QUALITY`) per size, named 000.jpg, 001.jpg, ...

  Args:
    root: the folder to fill (created if needed).
    sizes_by_split_and_class: split -> class -> sizes (see `Sizes`).
    seed: seeds the pixels.

  Returns:
    `root`.
  """
  rng = np.random.RandomState(seed)
  for split, classes in sorted(sizes_by_split_and_class.items()):
    for name, sizes in sorted(classes.items()):
      folder = os.path.join(root, split, name)
      os.makedirs(folder, exist_ok=True)
      for k, shape in enumerate(sizes):
        Image.fromarray(_pixels(tuple(shape), rng)).save(
            os.path.join(folder, f'{k:03d}.jpg'), quality=QUALITY)
  return root


def mixed_sizes(seed: int) -> Sizes:
  """`TRAIN_PER_CLASS` and `TEST_PER_CLASS` sizes per class of `CLASSES`,
  height and width each drawn from `MIN_SIDE`..`MAX_SIDE`; the first train
  image of the first class is grayscale."""
  rng = np.random.RandomState(seed)
  sizes = {}
  for split, count in (('train', TRAIN_PER_CLASS), ('test', TEST_PER_CLASS)):
    sizes[split] = {
        name: [tuple(int(s) for s in rng.randint(MIN_SIDE, MAX_SIDE + 1, 2))
               for _ in range(count)] for name in CLASSES}
  sizes['train'][CLASSES[0]][0] += (1,)
  return sizes


def import_jpeg_dataset(tmpdir: str, name: str = 'jpeg_folder',
                        seed: int = 0,
                        corrupted: Sequence[str] = ()) -> Tuple[str, str]:
  """Builds a `mixed_sizes(seed)` folder in `tmpdir/jpeg_folder` and imports
  it with `importing.import_dataset` into `tmpdir/tfds`.

  Args:
    tmpdir: where the folder and the data directory go.
    name: the dataset's name.
    seed: seeds the sizes and the pixels.
    corrupted: files (relative to the folder, e.g. 'train/dog/003.jpg')
      whose bytes after the JPEG signature become zeros once the import has
      checked them, so that the dataset stores a JPEG that cannot be decoded
      (as a dataset corrupted after it was written would).

  Returns:
    (data_dir, name): `--data_dir` and `--dataset` of the imported dataset
    (3 channels, shape (None, None, 3), JPEG bytes as written).
  """
  root = make_jpeg_folder(os.path.join(tmpdir, 'jpeg_folder'),
                          mixed_sizes(seed), seed)
  data_dir = os.path.join(tmpdir, 'tfds')
  dataset = local_data.read_folder(root)  # Checks every file; reads later.
  for path in corrupted:
    path = os.path.join(root, path)
    with open(path, 'rb') as f:
      content = f.read()
    with open(path, 'wb') as f:
      f.write(content[:3] + bytes(len(content) - 3))
  importing.write_dataset(dataset, name, data_dir, 'a test fixture')
  return data_dir, name
