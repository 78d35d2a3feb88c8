r"""Describes a search space and one architecture of it.

Prints the space's size and decisions, picks an architecture (given with
`--indices`, or drawn uniformly with `--seed`) and writes it to
`<output_dir>/architecture.json` with its pruned spec.

  python -m tunas_tf.tools.describe_space --ssd=digits_search \
      --output_dir=/tmp/arch
"""

import json
import os
import sys

from absl import app
from absl import flags

from tunas_tf import files
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema
from tunas_tf.search_space import spec_io

_SSD = flags.DEFINE_enum('ssd', 'digits_search', sorted(mobile.SEARCH_SPACES),
                         'Search space or reference model.')
_INDICES = flags.DEFINE_string(
    'indices', None, 'Colon-separated choice per decision (visit order); '
    'drawn uniformly when unset.')
_SEED = flags.DEFINE_integer('seed', 0, 'Seed of the uniform draw.')
_OUTPUT_DIR = flags.DEFINE_string('output_dir', None,
                                  'Where to write architecture.json.')


def describe(ssd: str, indices=None, seed: int = 0) -> dict:
  """Returns a JSON-ready description of the space and one architecture.

  Args:
    ssd: registered search-space name.
    indices: list of ints or colon-separated string; None draws uniformly.
    seed: seed of the uniform draw.

  Returns:
    dict with keys `ssd`, `num_decisions`, `size`, `paths`, `indices`,
    `spec` (the pruned spec as a spec_io document).
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  spec = mobile.get_search_space(ssd)
  paths = [path for path, _ in schema.flatten_with_paths(spec)]
  if indices is None:
    rng = np.random.RandomState(seed)
    indices = [int(rng.randint(n)) for n in schema.num_choices(spec)]
  pruned = schema.prune(spec, indices)
  return {
      'ssd': ssd,
      'num_decisions': len(paths),
      'size': mobile.search_space_size(spec),
      'paths': paths,
      'indices': ':'.join(map(str, schema.parse_indices(indices))),
      'spec': spec_io.to_json(pruned),
  }


def main(argv):
  del argv
  try:
    result = describe(_SSD.value, _INDICES.value, _SEED.value)
  except ValueError as e:
    sys.exit(f'describe_space: {e}')
  print(f"{result['ssd']}: {result['num_decisions']} decisions, "
        f"{float(result['size']):.3g} architectures")
  print(f"architecture: {result['indices']}")
  if _OUTPUT_DIR.value:
    path = os.path.join(_OUTPUT_DIR.value, 'architecture.json')
    files.write_json(result, path)
    print(f'wrote {path}')


if __name__ == '__main__':
  app.run(main)
