r"""The TuNAS paper's experiment: the searched architecture against random ones.

Draws K architectures uniformly inside the searched one's cost band, trains
all of them with the same `train_eval` settings, and prints and plots
accuracy against cost (outputs and restarts: docs/tools.md):

  python -m tunas_tf.tools.compare_random --search_dir=runs/digits_search \
      --num_random=5 --train_eval_flags=--epochs=60
"""

from __future__ import annotations

if __name__ == '__main__':  # A binary: before anything imports TensorFlow.
  from tunas_tf.cli import process as _process  # pylint: disable=g-import-not-at-top
  _process.at_start()

import os
from typing import Any, Dict, List, Optional

from absl import flags

from tunas_tf.io import files
from tunas_tf.cli import flags as common_flags
from tunas_tf.io import errors
from tunas_tf.cost_model import provenance
from tunas_tf.search import compare as compare_lib
from tunas_tf.search import config as config_lib

FLAGS = flags.FLAGS


def define_flags(f: flags.FlagValues = FLAGS) -> None:
  flags.DEFINE_string('search_dir', None, 'A finished search directory (with '
                      'architecture.json).', flag_values=f)
  flags.DEFINE_string('output_dir', None, 'Default SEARCH_DIR/compare_random.',
                      flag_values=f)
  flags.DEFINE_integer('num_random', 5, 'Random architectures to train.',
                       flag_values=f)
  flags.DEFINE_float('cost_tolerance', 0.05, 'Cost band: the searched cost '
                     'times (1 -/+ this).', flag_values=f)
  common_flags.define_seed_flag(f, 'the random draws')
  flags.DEFINE_bool('measure_latency', False, 'With a fitted latency cost '
                    'model: also measure every architecture on its device '
                    'and rank them by measured latency.', flag_values=f)
  flags.DEFINE_list('train_eval_flags', [], 'Comma-separated train_eval flags '
                    'given to every run, e.g. --epochs=60,--seed=1.',
                    flag_values=f)


def record_measured(results: List[Dict[str, Any]],
                    measured_with: provenance.Provenance) -> None:
  """Each run's `metrics.json` gets its `measured_latency_ms` and where
  (`measured_on`: the device, `measured_precision`)."""
  for result in results:
    path = os.path.join(result['run_dir'], compare_lib.METRICS_FILE)
    files.write_json(dict(
        files.read_json(path), measured_latency_ms=result['measured_ms'],
        measured_on=measured_with.device,
        measured_precision=measured_with.precision), path, sort_keys=True)


def main(argv, f: flags.FlagValues = FLAGS) -> Optional[int]:
  """Runs the comparison; bad input exits with one line."""
  common_flags.check_tool_args('compare_random', argv, f, 'search_dir')
  output_dir = f.output_dir or os.path.join(f.search_dir, 'compare_random')
  common_flags.when_stopped(f'the finished runs in {output_dir} are kept, an '
                            'unfinished one resumes; the same command goes on')
  with errors.errors_in_one_line('compare_random'):
    files.check_output_dir(output_dir, '--output_dir')
    results = compare_lib.compare(f.search_dir, output_dir, f.num_random,
                                  f.cost_tolerance, f.seed,
                                  f.train_eval_flags)
    if f.measure_latency:
      results = compare_lib.add_measured_latency(
          results, f.search_dir, os.path.join(output_dir, 'latency_models'))
      files.write_json(results,
                       os.path.join(output_dir, compare_lib.RESULTS_FILE))
      record_measured(results, config_lib.read(
          f.search_dir).resolved_cost_model.measured_with)
  results_path = os.path.join(output_dir, compare_lib.RESULTS_FILE)
  plot_path = os.path.join(output_dir, compare_lib.PLOT_FILE)
  compare_lib.plot(results, plot_path,
                   **compare_lib.plot_context(f.search_dir))
  print(compare_lib.summary(results))
  if f.measure_latency:
    print(compare_lib.by_measured_latency(results))
  print(f'Results: {results_path}, plot: {plot_path}')
  return 0


if __name__ == '__main__':
  common_flags.run(main, define_flags)
