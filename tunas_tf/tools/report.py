r"""Writes a search's `report.png` and `report.html` (docs/search.md, 'The
report') into its directory, or `--output_dir`:

  python -m tunas_tf.tools.report --model_dir=runs/digits_search
"""

from __future__ import annotations

from absl import flags
import tensorflow as tf

from tunas_tf import files
from tunas_tf import flags as common_flags
from tunas_tf.search import config as config_lib
from tunas_tf.search import extract
from tunas_tf.search import report

FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
  flags.DEFINE_string('model_dir', None, 'The search directory.',
                      flag_values=flag_values)
  flags.DEFINE_string('checkpoint', None, 'A checkpoint path; default the '
                      "directory's latest.", flag_values=flag_values)
  flags.DEFINE_string('output_dir', None, 'Where to write report.png and '
                      'report.html; default the search directory.',
                      flag_values=flag_values)


def main(argv, flag_values: flags.FlagValues = FLAGS) -> None:
  f = flag_values
  common_flags.check_tool_args('report', argv, f, 'model_dir')
  output_dir = f.output_dir or f.model_dir
  with common_flags.errors_in_one_line('report', OSError, tf.errors.OpError):
    files.check_output_dir(output_dir, '--output_dir')
    config = config_lib.read(f.model_dir)
    arch, line = extract.pick(f.model_dir, f.checkpoint, config=config)
    scalars = report.read_scalars(f.model_dir)
    png, page = report.write_report(output_dir, scalars, arch, config, line)
  print(report.summary_line(scalars, arch))
  print(line)
  print(f'Report: {png} and {page}')


if __name__ == '__main__':
  common_flags.run(main, define_flags)
