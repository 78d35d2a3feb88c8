r"""Samples architectures uniformly, optionally inside a cost band.

The random-search baseline of the original: every OneOf index is
drawn uniformly and independently (indices nested under an alternative that is
not chosen are drawn too and ignored by `schema.prune`, as in the original), and
an architecture is kept when `min_cost <= estimated cost <= max_cost`. Draws go
on until `--num` architectures are kept, or give up after `1000 * num` draws
with an error saying how many were kept and which costs were seen.

  python -m tunas_tf.tools.random_architectures --ssd=digits_search \
      --num=20 --seed=1 --output=/tmp/random.json

  python -m tunas_tf.tools.random_architectures --ssd=proxylessnas_search \
      --num=5 --min_cost=83 --max_cost=85 --output=/tmp/random_84ms.json

writes a JSON list `[{"indices": "0:2:1:...", "estimated_cost": 84.2}, ...]`.
`--cost_model` is `released`, `macs` or the path of a coefficients JSON; by
default the search's (released where it exists, else macs). The written file
is what `tools/measure_latency --indices_file` reads. The sampling itself is
`cost_model.random_search.sample_architectures`.
"""

from __future__ import annotations

import sys

from absl import flags

from tunas_tf import checks
from tunas_tf import flags as common_flags
from tunas_tf import files
from tunas_tf.cost_model import random_search
from tunas_tf.search import report
from tunas_tf.search_space import mobile

FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
  """Defines the tool's flags (only when run as a program)."""
  flags.DEFINE_string('ssd', 'digits_search', 'Search space, one of '
                      f'{sorted(mobile.SEARCH_SPACES)}.',
                      flag_values=flag_values)
  flags.DEFINE_integer('num', 1, 'How many architectures to keep.',
                       flag_values=flag_values)
  flags.DEFINE_integer('seed', 0, 'Seed of the uniform draws.',
                       flag_values=flag_values)
  flags.DEFINE_string('cost_model', None, "'released', 'macs' or the path of "
                      'a coefficients JSON; default released where it exists, '
                      'else macs.', flag_values=flag_values)
  flags.DEFINE_float('min_cost', None, 'Keep costs >= this (unset: no bound).',
                     flag_values=flag_values)
  flags.DEFINE_float('max_cost', None, 'Keep costs <= this (unset: no bound).',
                     flag_values=flag_values)
  flags.DEFINE_integer('image_size', None, "Input resolution for 'macs'; "
                       "default the space's.", flag_values=flag_values)
  flags.DEFINE_integer('num_classes', None, "Classifier width for 'macs'; "
                       "default the space's.", flag_values=flag_values)
  flags.DEFINE_integer('input_channels', None, "Image channels for 'macs'; "
                       "default the space's.", flag_values=flag_values)
  flags.DEFINE_string('output', None, 'Output JSON path (required).',
                      flag_values=flag_values)


def main(argv, flag_values: flags.FlagValues = FLAGS) -> None:
  """Samples and writes the architectures; bad input exits with one line."""
  f = flag_values
  if len(argv) > 1:
    sys.exit(f'random_architectures: unexpected arguments {argv[1:]}')
  if not f.output:
    sys.exit('random_architectures: --output is required')
  try:
    files.check_output_file(f.output, '--output')
    checks.seed('seed', f.seed)
    kept = random_search.sample_architectures(
        f.ssd, f.num, f.seed, f.cost_model, f.min_cost, f.max_cost,
        image_size=f.image_size, num_classes=f.num_classes,
        input_channels=f.input_channels)
  except ValueError as e:
    sys.exit(f'random_architectures: {e}')
  files.write_json(kept, f.output)
  costs = [k['estimated_cost'] for k in kept]
  print(f'{len(kept)} architectures of {f.ssd}, estimated cost '
        f'{report.cost_text(min(costs))}..{report.cost_text(max(costs))}; written to {f.output}')


if __name__ == '__main__':
  define_flags()
  common_flags.run(main)
