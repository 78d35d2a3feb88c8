"""Local image data -> a prepared TFDS dataset at `<data_dir>/<name>/1.0.0/`
(docs/own_data.md), written into a temporary folder renamed into place at
the end, so bad input leaves `data_dir` as it was."""

from __future__ import annotations

import glob
import os
import re
import shutil
import tempfile
from typing import Optional, Sequence, Tuple

from tunas_tf.io import checks
from tunas_tf.data import local_data
from tunas_tf.data.local_data import LocalDataset

VERSION = '1.0.0'
_NAME = re.compile(r'^[a-z][a-z0-9_]*$')
_BUILTIN = 'digits'  # datasets.DIGITS: a name the loader never sends to TFDS.


def check_destination(name: str, data_dir: str, overwrite: bool) -> str:
  """`data_dir/name`, checked: ValueError for a name not snake_case, `digits`
  or a registered TFDS name, a remote `data_dir`, or an existing dataset
  without `overwrite` (with it, a folder that is not one)."""
  if not _NAME.match(name):
    raise ValueError(f'dataset name {name!r} must be snake_case: a lower-case '
                     'letter, then lower-case letters, digits and _')
  if name == _BUILTIN:
    raise ValueError(f'dataset name {name!r} is the built-in offline dataset; '
                     'choose another name')
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  try:
    tfds.builder_cls(name)
  except tfds.core.registered.DatasetNotFoundError:
    pass
  else:
    raise ValueError(f'dataset name {name!r} is a registered TFDS dataset, '
                     'which TFDS would build from its own code rather than '
                     f'read from data_dir; choose another name, e.g. '
                     f'{name + "_local"!r}')
  if '://' in data_dir:
    raise ValueError(f'--data_dir {data_dir} must be a local directory (copy '
                     'the prepared dataset to remote storage afterwards)')
  target = os.path.join(data_dir, name)
  if os.path.lexists(target):
    if not overwrite:
      raise ValueError(f'dataset {name!r} already exists in {data_dir}; pass '
                       '--overwrite to replace it')
    if not glob.glob(os.path.join(target, '*', 'dataset_info.json')):
      raise ValueError(f'{target} exists and is not a prepared TFDS dataset; '
                       'not replacing it')
  return target


def _builder(name: str, dataset: LocalDataset, data_dir: str,
             description: str):
  """A TFDS builder of `dataset` writing under `data_dir/name/VERSION`."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  class LocalImages(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """Images and labels of a `LocalDataset` (not registered: read by name
    from files, as `tfds.builder` does for unregistered names)."""

    VERSION = tfds.core.Version(VERSION)

    def __init__(self):
      self.name = name
      super().__init__(data_dir=data_dir)

    def _info(self):
      return tfds.core.DatasetInfo(
          builder=self, description=description,
          features=tfds.features.FeaturesDict({
              'image': tfds.features.Image(
                  shape=dataset.image_shape,
                  encoding_format=dataset.encoding_format),
              'label': tfds.features.ClassLabel(names=dataset.class_names)}),
          supervised_keys=('image', 'label'))

    def _split_generators(self, dl_manager):
      del dl_manager
      return {split: self._generate_examples(dataset.splits[split])
              for split in local_data.SPLITS}

    def _generate_examples(self, split):  # pylint: disable=arguments-differ
      for i, (image, label) in enumerate(split.examples()):
        yield i, {'image': image, 'label': label}

    # TFDS prints "Downloading and preparing dataset ..." and "... downloaded
    # and prepared to <the temporary folder>": both wrong here.
    def _log_download_bytes(self):
      pass

    def _log_download_done(self):
      pass

  return LocalImages()


def write_dataset(dataset: LocalDataset, name: str, data_dir: str,
                  description: str, overwrite: bool = False) -> str:
  """Writes `dataset` as the prepared TFDS dataset `name`; returns
  `data_dir/name`. ValueError as `check_destination`; OSError for an image
  file that can no longer be read."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  target = check_destination(name, data_dir, overwrite)
  os.makedirs(data_dir, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=f'.import_dataset-{name}-', dir=data_dir)
  try:
    _builder(name, dataset, tmp, description).download_and_prepare(
        download_config=tfds.download.DownloadConfig(try_download_gcs=False))
    if os.path.lexists(target):
      os.rename(target, os.path.join(tmp, 'replaced'))
    os.rename(os.path.join(tmp, name), target)
  finally:
    shutil.rmtree(tmp, ignore_errors=True)
  return target


def import_dataset(fmt: str, source: str, name: str, data_dir: str, *,
                   overwrite: bool = False,
                   class_names: Optional[Sequence[str]] = None
                   ) -> Tuple[str, LocalDataset]:
  """Reads `source` (format `fmt`, `local_data.FORMATS`) and writes it as
  dataset `name`; returns (`data_dir/name`, the `LocalDataset`). `class_names`
  (idx and npz): a name per label id. ValueError as `local_data.read_source`
  and `check_destination`, before anything is written."""
  checks.one_of('format', fmt, local_data.FORMATS)
  check_destination(name, data_dir, overwrite)  # Before reading anything.
  dataset = local_data.read_source(fmt, source, class_names)
  description = (f'Imported by tunas_tf.tools.import_dataset from {fmt} '
                 f'data at {os.path.abspath(source)}.')
  return write_dataset(dataset, name, data_dir, description,
                       overwrite), dataset
