r"""Imports local image data as a prepared TFDS dataset, for use offline.

`--format` is `idx`, `npz` or `folder` (docs/own_data.md); `--dataset=<name>
--data_dir=<data_dir>` reads the result. Bad input stops with one line and
leaves `data_dir` as it was:

  python -m tunas_tf.tools.import_dataset --format=idx \
      --source=/usr/share/datasets/fashion-mnist --name=fashion_mnist_local \
      --data_dir=data/tfds
"""

from __future__ import annotations

if __name__ == '__main__':  # A binary: before anything imports TensorFlow.
  from tunas_tf.cli import process as _process  # pylint: disable=g-import-not-at-top
  _process.at_start()

import contextlib

from absl import flags
from absl import logging

from tunas_tf.cli import flags as common_flags
from tunas_tf.io import errors
from tunas_tf.data import importing
from tunas_tf.data import local_data

FLAGS = flags.FLAGS
# `LocalDataset.encoding_format` -> how the summary names it.
_STORED_AS = {local_data.PNG: 'PNG', local_data.JPEG: 'JPEG',
              None: 'PNG and JPEG files'}


def define_flags(f: flags.FlagValues = FLAGS) -> None:
  # A string, not an enum: an unknown format then fails with one line.
  flags.DEFINE_string('format', None, 'Source format, one of '
                      f'{"|".join(local_data.FORMATS)} (required).',
                      flag_values=f)
  flags.DEFINE_string('source', None, 'idx: the directory of the four IDX '
                      'files; npz: the .npz file; folder: the directory '
                      'holding train/ and test/ (required).', flag_values=f)
  flags.DEFINE_string('name', None, 'Dataset name, snake_case, not a '
                      'registered TFDS dataset: --dataset=NAME afterwards '
                      '(required).', flag_values=f)
  flags.DEFINE_string('data_dir', None, 'TFDS data directory to write into: '
                      '--data_dir afterwards (required; created if needed).',
                      flag_values=f)
  flags.DEFINE_boolean('overwrite', False, 'Replace an existing dataset of '
                       'that name.', flag_values=f)
  flags.DEFINE_list('class_names', None, 'idx/npz: comma-separated name of '
                    "each label id; default '0', '1', ... up to the largest "
                    'label. (folder: the class folder names.)', flag_values=f)


@contextlib.contextmanager
def _quiet_tfds():
  """No TFDS progress bars, and no warning that a fresh dataset folder has no
  dataset_info.json yet; both come back afterwards."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  verbosity = logging.get_verbosity()
  logging.set_verbosity(logging.ERROR)
  tfds.disable_progress_bar()
  try:
    yield
  finally:
    tfds.enable_progress_bar()
    logging.set_verbosity(verbosity)


def main(argv, f: flags.FlagValues = FLAGS) -> None:
  """Imports the dataset of `f`; bad input exits with one line."""
  common_flags.check_tool_args('import_dataset', argv, f,
                               'format', 'source', 'name', 'data_dir')
  with errors.errors_in_one_line('import_dataset', OSError):
    with _quiet_tfds():
      path, dataset = importing.import_dataset(
          f.format, f.source, f.name, f.data_dir, overwrite=f.overwrite,
          class_names=f.class_names)
  sizes = ', '.join(f'{split} {s.num_examples}'
                    for split, s in dataset.splits.items())
  height, width, channels = dataset.image_shape
  shape = (f'{height}x{width}x{channels}' if height is not None else
           f'varying sizes, {channels} channel{"s" * (channels > 1)}')
  stored = _STORED_AS[dataset.encoding_format]
  print(f'Imported {f.name!r} to {path}: {sizes} images of {shape} (stored '
        f'as {stored}), {len(dataset.class_names)} classes. Use it with '
        f'--dataset={f.name} --data_dir={f.data_dir}')
  if height is None or height != width:
    which = 'differ in size' if height is None else 'are not square'
    print(f'The images {which}: pass --image_size to train_search and '
          'train_eval (they resize to a square).')


if __name__ == '__main__':
  common_flags.run(main, define_flags)
