r"""Writes a search's `report.png` and `report.html` (docs/search.md, 'The
report') into its directory, or `--output_dir`:

  python -m tunas_tf.tools.report --model_dir=runs/digits_search
"""

from __future__ import annotations

if __name__ == '__main__':  # A binary: before anything imports TensorFlow.
  from tunas_tf.cli import process as _process  # pylint: disable=g-import-not-at-top
  _process.at_start()

import os
from typing import Tuple

from absl import flags
import tensorflow as tf

from tunas_tf import architecture
from tunas_tf.io import files
from tunas_tf.cli import flags as common_flags
from tunas_tf.io import errors
from tunas_tf.search import config as config_lib
from tunas_tf.search import extract
from tunas_tf.search import report

FLAGS = flags.FLAGS


def define_flags(f: flags.FlagValues = FLAGS) -> None:
  common_flags.define_model_dir_flags(f, 'The search directory.', True)
  flags.DEFINE_string('output_dir', None, 'Where to write report.png and '
                      'report.html; default the search directory.',
                      flag_values=f)


def main(argv, f: flags.FlagValues = FLAGS) -> None:
  common_flags.check_tool_args('report', argv, f, 'model_dir')
  output_dir = f.output_dir or f.model_dir
  with errors.errors_in_one_line('report', OSError, tf.errors.OpError):
    files.check_output_dir(output_dir, '--output_dir')
    config = config_lib.read(f.model_dir)
    arch, line = _extracted(f.model_dir, *extract.pick(
        f.model_dir, f.checkpoint, config=config))
    scalars = report.read_scalars(f.model_dir)
    png, page = report.write_report(output_dir, scalars, arch, config, line,
                                    f.model_dir)
  print(report.summary_line(scalars, arch))
  print(line)
  print(f'Report: {png} and {page}')


def _extracted(model_dir: str, likeliest: architecture.Architecture,
               line: str) -> Tuple[architecture.Architecture, str]:
  """extract_architecture's record in `model_dir` when it is of the same
  checkpoint as `likeliest` (the band's most likely, `line` says so): what
  it took (its one-shot choice, the argmax, another band); else `likeliest`."""
  path = os.path.join(model_dir, architecture.FILE_NAME)
  if not files.exists(path):
    return likeliest, line
  recorded = architecture.read(path)
  if (recorded.checkpoint != likeliest.checkpoint or
      recorded.indices == likeliest.indices):
    return likeliest, line
  why = (f'the best by one-shot accuracy of {recorded.oneshot} in the band'
         if recorded.oneshot else 'the argmax' if recorded.cost_tolerance is
         None else f'within {recorded.cost_tolerance:.0%} of the target')
  return recorded, (f'{line}\nextract_architecture took '
                    f'{recorded.indices_string} ({why}): {path}')


if __name__ == '__main__':
  common_flags.run(main, define_flags)
