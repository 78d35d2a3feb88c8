"""A tiny folder of PNG images in the layout `tools/import_dataset
--format=folder` reads (`root/<split>/<class>/<k>.png`), built here."""

import os

import numpy as np
from PIL import Image


def write_png(path: str, array: np.ndarray) -> None:
  """`array` (uint8 [H, W] or [H, W, C]) as a PNG at `path`."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  Image.fromarray(array).save(path)


def write_folder(root: str) -> str:
  """train/zebra (2 images), train/apple (1), test/apple, test/zebra (1
  each): grayscale 3x5 PNGs whose pixels all equal 20 * image number."""
  images = [('train', 'zebra', 1), ('train', 'zebra', 2),
            ('train', 'apple', 3), ('test', 'apple', 4), ('test', 'zebra', 5)]
  for split, name, k in images:
    write_png(os.path.join(root, split, name, f'{k}.png'),
              np.full((3, 5), 20 * k, np.uint8))
  with open(os.path.join(root, 'train', 'apple', 'notes.txt'), 'w') as f:
    f.write('not an image: ignored')
  return root
