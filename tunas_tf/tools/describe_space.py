r"""Describes a search space and one architecture of it.

Prints whether `--ssd` is a search space or a reference model, its size and
decisions (`*` on those that do not matter for the architecture), picks an
architecture (`--indices`, or drawn with `--seed`) and writes it to
`<output_dir>/architecture.json` (what `train_eval --architecture=` reads):

  python -m tunas_tf.tools.describe_space --ssd=digits_search \
      --output_dir=/tmp/arch
"""

if __name__ == '__main__':  # A binary: before anything imports TensorFlow.
  from tunas_tf.cli import process as _process  # pylint: disable=g-import-not-at-top
  _process.at_start()

import os

from absl import flags

from tunas_tf import architecture as architecture_lib
from tunas_tf.io import files
from tunas_tf.cli import flags as common_flags
from tunas_tf.io import errors
from tunas_tf.search_space import mobile
from tunas_tf.search_space import sample
from tunas_tf.search_space import schema
from tunas_tf.search_space import spec_io

FLAGS = flags.FLAGS


def describe(ssd: str, indices=None, seed: int = 0) -> dict:
  """JSON-ready `ssd`, `num_decisions`, `size`, `paths`, `indices` and the
  pruned `spec` (a spec_io document) of `indices` (ints or '0:2:1'; None
  draws uniformly under `seed`)."""
  spec = mobile.get_search_space(ssd)
  paths = [path for path, _ in schema.flatten_with_paths(spec)]
  if indices is None:
    indices = next(sample.draws(ssd, seed))
  pruned = schema.prune(spec, indices)
  return {
      'ssd': ssd,
      'num_decisions': len(paths),
      'size': mobile.search_space_size(spec),
      'paths': paths,
      'indices': schema.format_indices(indices),
      'spec': spec_io.to_json(pruned),
  }


def kind(ssd: str) -> str:
  """What `ssd` is to the binaries: a search space or a reference model."""
  if mobile.space_info(ssd).searchable:
    return 'a search space (train_search searches it)'
  return ('a reference model, a fixed architecture (nothing to search: '
          'train_search refuses it; train_eval trains it)')


def decision_table(ssd: str, indices) -> str:
  """One row per decision of `ssd`, in visit order: path, choices by name,
  `indices`' choice; `*` marks one under an alternative not chosen."""
  rows = architecture_lib.Architecture(ssd, indices).decisions
  if not rows:
    return '(no decisions: a fixed architecture)'
  width = max(len('decision'), max(len(r['path']) for r in rows))
  choices = [' '.join(r['choices']) for r in rows]
  width_c = max(len('choices'), max(len(c) for c in choices))
  lines = [f"{'decision':<{width}}  {'choices':<{width_c}}  chosen"]
  for row, text in zip(rows, choices):
    mark = '' if row['active'] else ' *'
    lines.append(f"{row['path']:<{width}}  {text:<{width_c}}  "
                 f"{row['value']}{mark}")
  if not all(r['active'] for r in rows):
    lines.append('* under an alternative that was not chosen: no effect')
  return '\n'.join(lines)


def define_flags(f: flags.FlagValues = FLAGS) -> None:
  common_flags.define_space_flags(f, 'What to describe.', indices_note='; '
                                  'drawn uniformly when unset.')
  common_flags.define_seed_flag(f, 'the uniform draw')
  flags.DEFINE_string('output_dir', None, 'Where to write architecture.json.',
                      flag_values=f)


def main(argv, f: flags.FlagValues = FLAGS) -> None:
  """Prints the description; bad input exits with one line."""
  common_flags.check_tool_args('describe_space', argv, f)
  path = (os.path.join(f.output_dir, architecture_lib.FILE_NAME)
          if f.output_dir else None)
  with errors.errors_in_one_line('describe_space'):
    if path:
      files.check_output_dir(f.output_dir, '--output_dir')
      files.check_output_file(path, '--output_dir')
    result = describe(f.ssd, f.indices, f.seed)
  print(f"{result['ssd']}: {kind(result['ssd'])}, "
        f"{result['num_decisions']} decisions, "
        f"{float(result['size']):.3g} architectures")
  print(decision_table(result['ssd'], result['indices']))
  print(f"architecture: {result['indices']}")
  if path:
    architecture_lib.write(
        architecture_lib.Architecture(result['ssd'], result['indices']), path)
    print(f'wrote {path}')


if __name__ == '__main__':
  common_flags.run(main, define_flags)
