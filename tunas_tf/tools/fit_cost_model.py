r"""Fits a device's cost model to the latency CSV of `tools/measure_latency`.

A ridge regression on the coupled features, or with `--block_csv` (a block
table) the table's sum corrected on the CSV's networks; held-out figures
printed; a coefficients JSON that `--cost_model=PATH` takes, with the CSV's
provenance as `measured_with` (docs/tools.md):

  python -m tunas_tf.tools.fit_cost_model --ssd=digits_search \
      --csv=/tmp/latency.csv --output=/tmp/digits_latency.json
"""


from __future__ import annotations

if __name__ == '__main__':  # A binary: before anything imports TensorFlow.
  from tunas_tf.cli import process as _process  # pylint: disable=g-import-not-at-top
  _process.at_start()

import csv
import io
import sys
from typing import Any, Dict, Optional

from absl import flags

from tunas_tf.io import files
from tunas_tf.cli import flags as common_flags
from tunas_tf.cost_model import fit as fit_lib
from tunas_tf.latency import rows as rows_lib

FLAGS = flags.FLAGS


def fit_csv(csv_path: str, ssd: str, seed: int = 0,
            holdout_fraction: float = 0.2,
            allow_poor_fit: bool = False,
            block_csv: Optional[str] = None,
            train_rows: Optional[int] = None) -> Dict[str, Any]:
  """`fit.fit` on a latency CSV's rows at the input they were measured at, or
  with `block_csv` (a block table measured as the networks were)
  `fit.fit_table` (corrected on its first `train_rows` training rows if
  given); its dict plus the CSV's canonical `indices`, recording
  the CSVs' absolute paths and settings (`measured_with`).

  Raises:
    ValueError: a bad CSV, too few rows, no settings beside it, a block
      table measured otherwise or missing a unit.
    fit.PoorFit: a fit it refuses (unless `allow_poor_fit`).
  """
  indices, latencies = rows_lib.read(csv_path, ssd)
  # Before computing features.
  fit_lib.split_sizes(len(indices), holdout_fraction)
  provenance = rows_lib.read_provenance(csv_path)
  table = None
  if block_csv is not None:
    table = dict(zip(*rows_lib.read(block_csv, ssd,
                                    rows_lib.BLOCK_COLUMNS)))
    # Every key but the CPUs (the same device either way).
    difference = rows_lib.read_provenance(block_csv).difference(
        provenance, tuple(k for k in provenance.as_dict() if k != 'cpus'))
    if difference:
      raise ValueError(f'the block table {block_csv} was measured with '
                       f'{difference} as the networks of {csv_path} were: '
                       'measure both the same way')
  more = dict(shape=provenance.shape, allow_poor_fit=allow_poor_fit,
              noise_percent=_timing_noise(csv_path))
  try:
    if table is None:
      result = fit_lib.fit(ssd, indices, latencies, seed, holdout_fraction,
                           **more)
    else:
      result = fit_lib.fit_table(ssd, table, indices, latencies, seed,
                                 holdout_fraction, train_rows=train_rows,
                                 **more)
  except fit_lib.PoorFit as e:
    e.result['indices'] = indices
    raise
  coefficients = result['coefficients']
  coefficients['source_csv'] = files.abspath(csv_path)
  if block_csv is not None:
    coefficients['source_block_csv'] = files.abspath(block_csv)
  coefficients['measured_with'] = files.read_json(
      rows_lib.settings_path(csv_path))
  result['indices'] = indices
  return result


def _timing_noise(csv_path: str) -> Optional[float]:
  """`fit.timing_noise_percent` of a latency CSV's rows; None when it lacks
  the `spread_ms` and `repeats` columns (`read` has checked the rest)."""
  table = list(csv.DictReader(io.StringIO(files.read_input(csv_path))))
  if not table or not {'spread_ms', 'repeats'} <= set(table[0]):
    return None
  return fit_lib.timing_noise_percent(*zip(*[
      (float(r['latency_ms']), float(r['spread_ms']), int(r['repeats']))
      for r in table]))


def define_flags(f: flags.FlagValues = FLAGS) -> None:
  common_flags.define_space_flags(f, 'The space of the CSV.')
  flags.DEFINE_string('csv', None, 'Latency CSV of tools/measure_latency.',
                      flag_values=f)
  flags.DEFINE_string('output', None, 'Coefficients JSON to write.',
                      flag_values=f)
  common_flags.define_seed_flag(f, 'the held-out split')
  flags.DEFINE_float('holdout_fraction', 0.2, 'Share of rows held out to '
                     'score the fit.', flag_values=f)
  flags.DEFINE_string('block_csv', None, 'A block table (measure_latency '
                      '--block_table, same device and input): fit its sum, '
                      'corrected on the --csv networks (a few dozen are '
                      'enough), instead of the linear model.', flag_values=f)
  flags.DEFINE_bool('allow_poor_fit', False, 'Write a fit that is refused '
                    '(penalty at its grid\'s edge, no better than a '
                    'constant, under 80% of held-out rows within +-10%) '
                    'anyway, with a warning.', flag_values=f)


def main(argv, f: flags.FlagValues = FLAGS) -> None:
  """Fits and writes the coefficients; bad input exits with one line."""
  common_flags.check_tool_args('fit_cost_model', argv, f, 'csv', 'output')
  try:
    files.check_output_file(f.output, '--output')
    result = fit_csv(f.csv, f.ssd, f.seed, f.holdout_fraction,
                     f.allow_poor_fit, f.block_csv)
  except fit_lib.PoorFit as e:
    print(fit_lib.summary(e.result['coefficients']))
    sys.exit(f'fit_cost_model: refused: {e} (--allow_poor_fit writes it '
             'anyway)')
  except ValueError as e:
    sys.exit(f'fit_cost_model: {e}')
  coefficients = result['coefficients']
  files.write_json(coefficients, f.output)
  print(fit_lib.summary(coefficients))
  if result.get('warning'):
    print(f"Warning: {result['warning']}")
  print(f"{coefficients['num_features']} coefficients for {f.ssd} "
        f'written to {f.output}')


if __name__ == '__main__':
  common_flags.run(main, define_flags)
