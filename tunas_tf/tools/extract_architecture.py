"""Writes a search's `architecture.json` (docs/search.md, 'Extraction'),
saying which architecture it took and when its cost is off the target:

  python -m tunas_tf.tools.extract_architecture --model_dir=runs/demo
"""

from __future__ import annotations

if __name__ == '__main__':  # A binary: before anything imports TensorFlow.
  from tunas_tf.cli import process as _process  # pylint: disable=g-import-not-at-top
  _process.at_start()

import os

from absl import flags

from tunas_tf import architecture as architecture_lib
from tunas_tf.io import checks
from tunas_tf.io import files
from tunas_tf.cli import flags as common_flags
from tunas_tf.cost_model import linear as cost_linear
from tunas_tf.cost_model import macs
from tunas_tf.cost_model import memory
from tunas_tf.search import config as config_lib
from tunas_tf.search import extract as extract_lib

FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
  flags.DEFINE_string('model_dir', None, 'The search directory.',
                      flag_values=flag_values)
  flags.DEFINE_alias('checkpoint_dir', 'model_dir', flag_values=flag_values)
  flags.DEFINE_string('checkpoint', None, 'A checkpoint path; default the '
                      "directory's latest.", flag_values=flag_values)
  flags.DEFINE_float('cost_tolerance', extract_lib.OFF_TARGET, 'T in (0, '
                     '1): take the most likely architecture whose estimated '
                     "cost is within the search's target times (1 -/+ T) "
                     '(under mnas_hard: at most 1 + T).',
                     flag_values=flag_values)
  flags.DEFINE_bool('argmax', False, 'Take the argmax of each decision (the '
                    "original's extraction) instead of a cost band.",
                    flag_values=flag_values)
  flags.DEFINE_integer('oneshot', extract_lib.ONESHOT, 'K > 0: of the '
                       'architecture in the band and K - 1 more the '
                       'controller draws there, take the one of best '
                       "one-shot accuracy on the search's hold-out (its "
                       'supernet weights; a pass over the hold-out per '
                       'architecture). 0: the most likely in the band.',
                       flag_values=flag_values)
  flags.DEFINE_float('sram_kb', None, 'An SRAM limit, KB of 1,024 bytes: an '
                     'architecture whose TFLite Micro arena (estimated) is '
                     'over it is refused, nothing written.',
                     flag_values=flag_values)
  flags.DEFINE_string('output', None, 'Output JSON; default '
                      'MODEL_DIR/architecture.json.', flag_values=flag_values)
  flags.DEFINE_bool('measure_latency', False, 'With a fitted latency cost '
                    'model: measure the architecture on the device its rows '
                    'were measured on (same backend, threads, CPUs or '
                    'device command) and print measured vs predicted vs '
                    'target.', flag_values=flag_values)
  flags.DEFINE_string('model_cache', None, 'With --measure_latency: where '
                      'the converted model goes; default '
                      'MODEL_DIR/latency_models.', flag_values=flag_values)


def main(argv, flag_values: flags.FlagValues = FLAGS) -> None:
  """Extracts and writes the architecture; bad input exits with one line."""
  f = flag_values
  common_flags.check_tool_args('extract_architecture', argv, f, 'model_dir')
  output = f.output or os.path.join(f.model_dir, architecture_lib.FILE_NAME)
  with common_flags.errors_in_one_line('extract_architecture'):
    if f.argmax and f['cost_tolerance'].present:
      raise ValueError('--argmax takes no cost band: drop --cost_tolerance')
    if f.argmax and f['oneshot'].present and f.oneshot:
      raise ValueError('--oneshot draws in the cost band: drop --argmax')
    if f.sram_kb is not None:
      checks.number('sram_kb', f.sram_kb, 0, low_open=True)
    files.check_output_file(output, '--output')
    config = config_lib.read(f.model_dir)
  settings = None
  if f.measure_latency:  # Before the pick, which may take minutes.
    with common_flags.errors_in_one_line(
        'extract_architecture: --measure_latency'):
      settings = _settings(config)
  with common_flags.errors_in_one_line('extract_architecture'):
    result, line = extract_lib.pick(
        f.model_dir, f.checkpoint, None if f.argmax else f.cost_tolerance,
        config, 0 if f.argmax else f.oneshot)
    off_target = extract_lib.off_target_line(result, config, f.argmax)
    shape = macs.resolve_input(result.ssd, result.image_size,
                               result.num_classes, result.num_channels)
    if f.sram_kb is not None:
      memory.check_sram(result.spec, shape, f.sram_kb)
  architecture_lib.write(result, output)
  print(f'Searched architecture (step {result.global_step}): '
        f'{result.ssd} {result.indices_string}')
  print(f'Searched on {result.dataset} at {result.image_size}x'
        f'{result.image_size}, {result.num_classes} classes, preprocessing '
        f'{result.preprocessing}')
  units = cost_linear.units_suffix(result.cost_model)
  print(f'Estimated cost {cost_linear.cost_text(result.estimated_cost)}'
        f'{units} ({result.cost_model}; target '
        f'{cost_linear.cost_text(result.cost_target)}{units})')
  print(memory.memory_text(result.spec, shape))
  print(line)
  if off_target:
    print(f'Note: {off_target}')
  print(f'Written to {output}')
  if f.measure_latency:
    with common_flags.errors_in_one_line(
        'extract_architecture: --measure_latency'):
      print(_measure(result, config, settings,
                     f.model_cache or os.path.join(f.model_dir,
                                                   'latency_models')))


def _settings(config: config_lib.SearchConfig):
  """How the search's fitted cost model's rows were timed."""
  from tunas_tf.latency import device as device_lib  # pylint: disable=g-import-not-at-top
  model = config.resolved_cost_model
  return device_lib.fitted_settings(model.measured_with, model.source)


def _measure(result: architecture_lib.Architecture,
             config: config_lib.SearchConfig, settings,
             model_cache: str) -> str:
  """The closing measurement: `device_lib.closing_line` of the architecture
  timed with `settings`."""
  from tunas_tf.latency import device as device_lib  # pylint: disable=g-import-not-at-top
  model = config.resolved_cost_model
  from tunas_tf.graph import inference  # pylint: disable=g-import-not-at-top
  row = device_lib.measure_one(result.ssd, result.indices_string, settings,
                               model_cache, inference.builder)
  return device_lib.closing_line(
      row.latency_ms,
      cost_linear.estimate_cost_of_indices(result.indices, model),
      config.rl_cost_model_target if config.enable_cost_model else None,
      settings.device)


if __name__ == '__main__':
  common_flags.run(main, define_flags)
