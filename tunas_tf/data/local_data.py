"""Local image data read and checked: IDX files, an `.npz`, an image folder
(docs/own_data.md). Bad input raises ValueError naming the file and the
problem (a folder: all its unusable image files in one line)."""

from __future__ import annotations

import dataclasses
import functools
import glob
import gzip
import os
import pathlib
import struct
import zipfile
from typing import (Callable, Dict, Iterator, List, Optional, Sequence,
                    Tuple, Union)

import numpy as np

from tunas_tf.io import checks
from tunas_tf.io import errors

IDX = 'idx'
NPZ = 'npz'
FOLDER = 'folder'
FORMATS = (IDX, NPZ, FOLDER)
SPLITS = ('train', 'test')
IMAGE_EXTENSIONS = ('.png', '.jpg', '.jpeg')
PNG = 'png'
JPEG = 'jpeg'
NPZ_KEYS = ('x_train', 'y_train', 'x_test', 'y_test')

_IMAGES_MAGIC = 2051  # 0x00000803: unsigned bytes, 3 dimensions.
_LABELS_MAGIC = 2049  # 0x00000801: unsigned bytes, 1 dimension.
# split -> IDX file stems of its images and labels (MNIST's test split is
# called t10k; some mirrors write a dot before `idx`).
_IDX_STEMS = {'train': ('train-images[-.]idx3-ubyte',
                        'train-labels[-.]idx1-ubyte'),
              'test': ('t10k-images[-.]idx3-ubyte',
                       't10k-labels[-.]idx1-ubyte')}
_GRAY_MODES = ('1', 'L', 'LA')
_COLOUR_MODES = ('P', 'PA', 'RGB', 'RGBA', 'RGBX', 'CMYK', 'YCbCr')
# PIL's format name -> the encoding stored. An MPO is a camera's JPEG with
# more frames after the first, which is what TensorFlow decodes.
_PIL_FORMATS = {'PNG': PNG, 'JPEG': JPEG, 'MPO': JPEG}
_BAD_FILES_NAMED = 3  # Unusable files named in the error (all are counted).


@dataclasses.dataclass(frozen=True)
class Split:
  """One split: `num_examples`, and `examples()` a fresh iterator of (image,
  int label), the image uint8 [H, W, C] (idx, npz) or a file's bytes (folder).
  """
  num_examples: int
  examples: Callable[[], Iterator[Tuple[Union[np.ndarray, bytes], int]]]


@dataclasses.dataclass(frozen=True)
class LocalDataset:
  """A local dataset, read and checked: `image_shape` (H, W, C), H and W None
  when sizes differ; `class_names` by label id; `splits` `train`, `test`;
  `encoding_format` `PNG`, `JPEG`, or None for a folder of both."""
  image_shape: Tuple[Optional[int], Optional[int], int]
  class_names: Tuple[str, ...]
  splits: Dict[str, Split]
  encoding_format: Optional[str]


def _shape_text(shape: Sequence[int]) -> str:
  return 'x'.join(str(d) for d in shape)


def _class_names(labels: Dict[str, np.ndarray],
                 class_names: Optional[Sequence[str]]) -> Tuple[str, ...]:
  """The given class names (labels checked against them) or '0'..'max';
  `labels` {description: int64 [N]}. ValueError for a label out of range, or
  repeated or empty names."""
  if class_names is None:
    top = max(int(v.max()) for v in labels.values())
    return tuple(str(i) for i in range(top + 1))
  names = tuple(class_names)
  if not names or any(not n for n in names) or len(set(names)) < len(names):
    raise ValueError(f'class names must be distinct and non-empty, got '
                     f'{list(names)}')
  for desc, values in labels.items():
    bad = np.flatnonzero(values >= len(names))
    if bad.size:
      raise ValueError(
          f'label {values[bad[0]]} of {desc} (index {bad[0]}) is out of range '
          f'for {len(names)} class names (labels 0..{len(names) - 1})')
  return names


def _find_idx_file(directory: str, stem: str) -> str:
  prefix = os.path.join(glob.escape(directory), '*' + stem)
  matches = sorted(glob.glob(prefix) + glob.glob(prefix + '.gz'))
  pattern = '*' + stem.replace('[-.]', '-') + '[.gz]'
  if not matches:
    raise ValueError(f'missing IDX file: no {pattern} in {directory}')
  if len(matches) > 1:
    raise ValueError(f'several files match {pattern} in {directory}: '
                     f'{[os.path.basename(m) for m in matches]}')
  return matches[0]


def _read_bytes(path: str) -> bytes:
  if not path.endswith('.gz'):
    return pathlib.Path(path).read_bytes()
  try:
    with gzip.open(path, 'rb') as f:
      return f.read()
  except (OSError, EOFError) as e:
    raise ValueError(f'{path}: not a readable gzip file ({e})') from None


def read_idx_file(path: str, magic: int) -> np.ndarray:
  """One IDX file of unsigned bytes (plain or gzipped): uint8 [count, rows,
  cols] for `magic` 2051, [count] for 2049. ValueError for a wrong magic
  number or a size that disagrees with the header."""
  ndim = 3 if magic == _IMAGES_MAGIC else 1
  what = 'images' if ndim == 3 else 'labels'
  data = _read_bytes(path)
  header = 4 + 4 * ndim
  if len(data) < header:
    raise ValueError(f'{path}: {len(data)} bytes, too short for an IDX '
                     f'{what} header')
  found = struct.unpack('>I', data[:4])[0]
  if found != magic:
    raise ValueError(f'{path}: wrong magic number {found}, expected {magic} '
                     f'(IDX {what})')
  dims = struct.unpack(f'>{ndim}I', data[4:header])
  expected = header + int(np.prod(dims))
  if len(data) != expected:
    raise ValueError(f'{path}: {len(data)} bytes, but its header '
                     f'({_shape_text(dims)}) needs {expected}')
  return np.frombuffer(data, np.uint8, offset=header).reshape(dims)


def read_idx(directory: str,
             class_names: Optional[Sequence[str]] = None) -> LocalDataset:
  """The four IDX files of `directory`; ValueError for a missing or ambiguous
  file, a bad file, counts or image sizes that disagree, or labels out of
  range."""
  if not os.path.isdir(directory):
    raise ValueError(f'--source {directory} is not a directory')
  arrays, descs = {}, {}
  for split, (image_stem, label_stem) in _IDX_STEMS.items():
    image_path = _find_idx_file(directory, image_stem)
    label_path = _find_idx_file(directory, label_stem)
    images = read_idx_file(image_path, _IMAGES_MAGIC)
    labels = read_idx_file(label_path, _LABELS_MAGIC)
    if len(images) != len(labels):
      raise ValueError(
          f'image and label counts disagree: {os.path.basename(image_path)} '
          f'holds {len(images)} images but {os.path.basename(label_path)} '
          f'holds {len(labels)} labels')
    if not len(images):
      raise ValueError(f'{split} split is empty: {image_path} holds no images')
    arrays[split] = (images[..., None], labels.astype(np.int64))
    descs[split] = (os.path.basename(image_path),
                    os.path.basename(label_path))
  return _from_arrays(arrays, class_names, descs)


def _from_arrays(arrays: Dict[str, Tuple[np.ndarray, np.ndarray]],
                 class_names: Optional[Sequence[str]],
                 descs: Dict[str, Tuple[str, str]]) -> LocalDataset:
  """A `LocalDataset` of {split: (uint8 [N, H, W, C], int64 [N])}; `descs`
  name each split's images and labels in errors."""
  shapes = {split: images.shape[1:] for split, (images, _) in arrays.items()}
  if shapes['train'] != shapes['test']:
    raise ValueError(f'mixed image sizes: {descs["train"][0]} holds '
                     f'{_shape_text(shapes["train"])} images, '
                     f'{descs["test"][0]} {_shape_text(shapes["test"])}')
  if 0 in shapes['train']:
    raise ValueError(f'{descs["train"][0]} holds images of '
                     f'{_shape_text(shapes["train"])} pixels')
  names = _class_names({descs[s][1]: labels
                        for s, (_, labels) in arrays.items()}, class_names)
  return LocalDataset(
      tuple(int(d) for d in shapes['train']), names,
      {split: Split(len(labels),
                    functools.partial(zip, images, labels.tolist()))
       for split, (images, labels) in arrays.items()}, PNG)


def _npz_images(key: str, array: np.ndarray) -> np.ndarray:
  if array.dtype != np.uint8:
    raise ValueError(f'{key} has dtype {array.dtype}; expected uint8 images '
                     '(0..255)')
  if array.ndim == 3:
    array = array[..., None]
  if array.ndim != 4 or array.shape[-1] not in (1, 3):
    raise ValueError(f'{key} has shape {list(array.shape)}; expected '
                     '[N, H, W] or [N, H, W, C] with C 1 or 3')
  if not len(array):
    raise ValueError(f'{key} holds no images')
  return array


def _npz_labels(key: str, array: np.ndarray, num_images: int) -> np.ndarray:
  if not np.issubdtype(array.dtype, np.integer):
    raise ValueError(f'{key} has dtype {array.dtype}; expected integer labels')
  if array.ndim == 2 and array.shape[1] == 1:
    array = array[:, 0]
  if array.ndim != 1:
    raise ValueError(f'{key} has shape {list(array.shape)}; expected [N] '
                     'labels')
  if len(array) != num_images:
    raise ValueError(f'image and label counts disagree: x_{key[2:]} holds '
                     f'{num_images} images but {key} holds {len(array)} '
                     'labels')
  negative = np.flatnonzero(array < 0)
  if negative.size:
    raise ValueError(f'{key} holds a negative label ({array[negative[0]]} at '
                     f'index {negative[0]})')
  return array.astype(np.int64)


def _load_npz(path: str) -> Dict[str, np.ndarray]:
  """All arrays of an `.npz` (no pickled objects)."""
  if not os.path.isfile(path):
    raise ValueError(f'--source {path} is not a file')
  with open(path, 'rb') as f:
    start = f.read(6)
  if not start.startswith((b'PK', b'\x93NUMPY')):  # A zip file, or a .npy.
    raise ValueError(f'{path} is not an .npz archive (a zip file of .npy '
                     'arrays)')
  unreadable = (OSError, ValueError, EOFError, zipfile.BadZipFile)
  try:
    loaded = np.load(path, allow_pickle=False)
  except unreadable as e:
    raise ValueError(f'{path}: not a readable .npz archive '
                     f'({errors.one_line(e)})') from None
  if not isinstance(loaded, np.lib.npyio.NpzFile):
    raise ValueError(f'{path} is a single .npy array, not an .npz archive '
                     f'with {list(NPZ_KEYS)}')
  try:
    with loaded as npz:
      return {key: npz[key] for key in npz.files}
  except unreadable as e:
    raise ValueError(f'{path}: an array cannot be read '
                     f'({errors.one_line(e)})') from None


def read_npz(path: str,
             class_names: Optional[Sequence[str]] = None) -> LocalDataset:
  """`x_train`, `y_train`, `x_test`, `y_test` of one `.npz`; ValueError for an
  unreadable file, missing arrays, images not uint8 [N, H, W(, C)], bad
  labels, counts or sizes that disagree, or labels out of range."""
  found = _load_npz(path)
  missing = [key for key in NPZ_KEYS if key not in found]
  if missing:
    raise ValueError(f'missing arrays {missing} in {path} (it holds '
                     f'{sorted(found)})')
  arrays = {}
  for split in SPLITS:
    images = _npz_images(f'x_{split}', found[f'x_{split}'])
    arrays[split] = (images,
                     _npz_labels(f'y_{split}', found[f'y_{split}'],
                                 len(images)))
  return _from_arrays(arrays, class_names,
                      {split: (f'x_{split}', f'y_{split}') for split in SPLITS})


def _class_folders(root: str, split: str) -> List[str]:
  folder = os.path.join(root, split)
  if not os.path.isdir(folder):
    raise ValueError(f'missing folder: {root} has no {split}/ folder')
  return sorted(name for name in os.listdir(folder)
                if not name.startswith('.') and
                os.path.isdir(os.path.join(folder, name)))


def _image_files(root: str, split: str, name: str) -> List[str]:
  folder = os.path.join(root, split, name)
  files = sorted(f for f in os.listdir(folder) if not f.startswith('.') and
                 os.path.splitext(f)[1].lower() in IMAGE_EXTENSIONS)
  if not files:
    raise ValueError(f'empty class folder: {split}/{name} holds no '
                     f'{"/".join(IMAGE_EXTENSIONS)} images')
  return [os.path.join(folder, f) for f in files]


class _UnusableImage(Exception):
  """Why one image file cannot be imported (collected, then reported)."""


@dataclasses.dataclass(frozen=True)
class _ImageFacts:
  """One image file's (height, width), grayscale mode, and `PNG`/`JPEG`."""
  size: Tuple[int, int]
  gray: bool
  encoding: str


def _check_image(path: str) -> _ImageFacts:
  """One image file's facts, decoded once; `_UnusableImage` saying why (not
  PNG or JPEG, an unsupported PIL mode, unreadable or corrupt)."""
  from PIL import Image  # pylint: disable=g-import-not-at-top
  try:
    with Image.open(path) as image:
      encoding = _PIL_FORMATS.get(image.format)
      if encoding is None:
        raise _UnusableImage(f'a {image.format} image, not PNG or JPEG')
      mode = image.mode
      if mode not in _GRAY_MODES + _COLOUR_MODES:
        raise _UnusableImage(f'PIL mode {mode}, not 8-bit grayscale or '
                             'colour')
      width, height = image.size
      # A JPEG decoded at 1/8 scale still reads all its entropy-coded data
      # (what a truncated or corrupt file breaks), in less time
      # (bench/DECISIONS.md, 'PIL `draft`'); `draft` leaves a PNG alone.
      image.draft(None, (1, 1))
      image.load()
  except Image.UnidentifiedImageError:
    # PIL's message repeats the absolute path, which the error already names.
    raise _UnusableImage('cannot identify image file') from None
  except _UnusableImage:
    raise
  except Exception as e:  # pylint: disable=broad-except
    # PIL's plugins raise many kinds on a corrupt file (OSError, SyntaxError,
    # struct.error, DecompressionBombError, ...): each is the file's fault.
    raise _UnusableImage(errors.one_line(e)) from None
  return _ImageFacts((height, width), mode in _GRAY_MODES, encoding)


def read_folder(root: str) -> LocalDataset:
  """`root/train/<class>/*` and `root/test/<class>/*`, every image decoded
  once, stored byte for byte. ValueError for a missing split folder, no
  classes, a test class not in train, an empty class, or unusable files (all
  counted in one error naming the first few)."""
  if not os.path.isdir(root):
    raise ValueError(f'--source {root} is not a directory')
  classes = _class_folders(root, 'train')  # None: refused as for test/.
  label_of = {name: label for label, name in enumerate(classes)}
  items = {}
  for split in SPLITS:
    names = classes if split == 'train' else _class_folders(root, split)
    unknown = sorted(set(names) - set(classes))
    if unknown:
      raise ValueError(f'test classes {unknown} have no train/ folder (the '
                       f'train classes are {classes})')
    if not names:
      raise ValueError(f'no class folders in {os.path.join(root, split)}')
    items[split] = [(path, label_of[name]) for name in names
                    for path in _image_files(root, split, name)]
  facts, bad = [], []
  for path, _ in items['train'] + items['test']:
    try:
      facts.append(_check_image(path))
    except _UnusableImage as e:
      bad.append(f'{os.path.relpath(path, root)}: {e}')
  if bad:  # How many, and the first few with why.
    named = '; '.join(bad[:_BAD_FILES_NAMED])
    if len(bad) > _BAD_FILES_NAMED:
      named = f'first {_BAD_FILES_NAMED}: {named}; ...'
    raise ValueError(f'{len(bad)} unusable image '
                     f'{"file" if len(bad) == 1 else "files"} under {root} '
                     f'({named})')
  sizes = {f.size for f in facts}
  height, width = sizes.pop() if len(sizes) == 1 else (None, None)
  channels = 1 if all(f.gray for f in facts) else 3
  encodings = {f.encoding for f in facts}
  return LocalDataset(
      (height, width, channels), tuple(classes),
      {split: Split(len(pairs), lambda pairs=pairs: (
          (pathlib.Path(path).read_bytes(), label) for path, label in pairs))
       for split, pairs in items.items()},
      encodings.pop() if len(encodings) == 1 else None)


def read_source(fmt: str, source: str,
                class_names: Optional[Sequence[str]] = None) -> LocalDataset:
  """The local dataset at `source` of format `fmt` (`FORMATS`; the layouts:
  docs/own_data.md); labels named '0', '1', ... unless `class_names` (idx and
  npz only). ValueError for an unknown format, `class_names` with a folder,
  or bad input."""
  checks.one_of('format', fmt, FORMATS)
  if fmt == IDX:
    return read_idx(source, class_names)
  if fmt == NPZ:
    return read_npz(source, class_names)
  if class_names is not None:
    raise ValueError('--class_names is for idx and npz; a folder dataset '
                     'takes its class names from the class folders')
  return read_folder(source)
