r"""Samples architectures uniformly, optionally inside a cost band.

The original's random-search baseline: keeps an architecture when `min_cost
<= estimated cost <= max_cost` under `--cost_model` (and within `--sram_kb`,
`--flash_kb`, with its estimated arena and flash bytes) in a JSON list of
`indices`, `estimated_cost` for `measure_latency --indices_file` (tools.md):

  python -m tunas_tf.tools.random_architectures --ssd=digits_search \
      --num=20 --seed=1 --output=/tmp/random.json
"""

from __future__ import annotations

if __name__ == '__main__':  # A binary: before anything imports TensorFlow.
  from tunas_tf.cli import process as _process  # pylint: disable=g-import-not-at-top
  _process.at_start()

from absl import flags

from tunas_tf.io import files
from tunas_tf.cli import flags as common_flags
from tunas_tf.io import errors
from tunas_tf.cost_model import linear as cost_linear
from tunas_tf.search import random_search

FLAGS = flags.FLAGS


def define_flags(f: flags.FlagValues = FLAGS) -> None:
  common_flags.define_space_flags(f, 'What to sample.')
  flags.DEFINE_integer('num', 1, 'How many architectures to keep.',
                       flag_values=f)
  common_flags.define_seed_flag(f, 'the uniform draws')
  common_flags.define_cost_model_flag(f)
  flags.DEFINE_float('min_cost', None, 'Keep costs >= this (unset: no bound).',
                     flag_values=f)
  flags.DEFINE_float('max_cost', None, 'Keep costs <= this (unset: no bound).',
                     flag_values=f)
  common_flags.define_limit_flags(f, 'only architectures within it are '
                                  'kept.')
  common_flags.define_input_flags(f)
  flags.DEFINE_string('output', None, 'Output JSON path (required).',
                      flag_values=f)


def main(argv, f: flags.FlagValues = FLAGS) -> None:
  """Samples and writes the architectures; bad input exits with one line."""
  common_flags.check_tool_args('random_architectures', argv, f, 'output')
  with errors.errors_in_one_line('random_architectures'):
    files.check_output_file(f.output, '--output')
    kept = random_search.sample_architectures(
        f.ssd, f.num, f.seed, f.cost_model, f.min_cost, f.max_cost,
        image_size=f.image_size, num_classes=f.num_classes,
        input_channels=f.input_channels, sram_kb=f.sram_kb,
        flash_kb=f.flash_kb)
  files.write_json(kept, f.output)
  costs = [k['estimated_cost'] for k in kept]
  print(f'{len(kept)} architectures of {f.ssd}, estimated cost '
        f'{cost_linear.cost_text(min(costs))}..'
        f'{cost_linear.cost_text(max(costs), f.cost_model)}; written to '
        f'{f.output}')


if __name__ == '__main__':
  common_flags.run(main, define_flags)
