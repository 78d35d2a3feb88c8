"""Writes a search's `architecture.json` (docs/search.md, 'Extraction'),
saying which architecture it took and when its cost is off the target:

  python -m tunas_tf.tools.extract_architecture --model_dir=runs/demo

or, of a search of several targets, `front.json` (`--front`), or an
architecture for a target it did not have (`--target`; docs/search.md,
'Many targets, many devices').
"""

from __future__ import annotations

if __name__ == '__main__':  # A binary: before anything imports TensorFlow.
  from tunas_tf.cli import process as _process  # pylint: disable=g-import-not-at-top
  _process.at_start()

import dataclasses
import os

from absl import flags

from tunas_tf import architecture as architecture_lib
from tunas_tf.io import files
from tunas_tf.cli import flags as common_flags
from tunas_tf.io import errors
from tunas_tf.cost_model import linear as cost_linear
from tunas_tf.cost_model import macs
from tunas_tf.cost_model import memory
from tunas_tf.search import config as config_lib
from tunas_tf.search import extract as extract_lib

FLAGS = flags.FLAGS


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
  common_flags.define_model_dir_flags(flag_values, 'The search directory.',
                                      checkpoint=True)
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
  common_flags.define_limit_flags(flag_values, 'an architecture over it is '
                                  "refused, nothing written. Default: the "
                                  "search's.")
  flags.DEFINE_string('output', None, 'Output JSON; default '
                      'MODEL_DIR/architecture.json (front.json with --front).',
                      flag_values=flag_values)
  flags.DEFINE_integer('pair', 0, 'Of a search of several (cost model, '
                       'target) pairs: the policy to extract.',
                       flag_values=flag_values)
  flags.DEFINE_bool('front', False, 'Every pair\'s architecture (each in '
                    'its band, the one-shot pick) as front.json: indices, '
                    'cost target, estimated cost, one-shot accuracy.',
                    flag_values=flag_values)
  flags.DEFINE_float('target', None, 'A target the search did not have: '
                     'of the nearest policies\' architectures in its band, '
                     'the best by one-shot accuracy (no new search).',
                     flag_values=flag_values)
  flags.DEFINE_string('cost_model', None, 'With --target: the cost model '
                      "of the target (default pair 0's); another device's "
                      'fitted model re-scores every policy\'s draws.',
                      flag_values=flag_values)
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
  output = f.output or os.path.join(f.model_dir, (
      config_lib.FRONT_FILE if f.front else architecture_lib.FILE_NAME))
  with errors.errors_in_one_line('extract_architecture'):
    _check_modes(f)
    files.check_output_file(output, '--output')
    # --sram_kb/--flash_kb replace the search's limits for the pick too.
    config = dataclasses.replace(config_lib.read(f.model_dir), **{
        name: f[name].value for name in ('sram_kb', 'flash_kb')
        if f[name].value is not None})
    if not 0 <= f.pair < len(config.pairs):
      raise ValueError(f'--pair={f.pair}: the search has pairs 0 to '
                       f'{len(config.pairs) - 1}')
  settings = None
  if f.measure_latency:  # Before the pick, which may take minutes.
    with errors.errors_in_one_line(
        'extract_architecture: --measure_latency'):
      settings = [_settings(config.for_pair(k)) for k in (
          range(len(config.pairs)) if f.front else [f.pair])]
  if f.front:
    return _front(f, config, output, settings)
  with errors.errors_in_one_line('extract_architecture'):
    if f.target is not None:
      result, line = extract_lib.pick_at(
          f.model_dir, f.target, f.cost_model, f.checkpoint, f.cost_tolerance,
          config, f.oneshot)
    else:
      result, line = extract_lib.pick(
          f.model_dir, f.checkpoint, None if f.argmax else f.cost_tolerance,
          config, 0 if f.argmax else f.oneshot, f.pair)
    off_target = extract_lib.off_target_line(result, config, f.argmax)
    shape = _checked_memory(result, config)
  architecture_lib.write(result, output)
  print(f'Searched architecture (step {result.global_step}): '
        f'{result.ssd} {result.indices_string}')
  print(f'Searched on {result.dataset} at {result.image_size}x'
        f'{result.image_size}, {result.num_classes} classes, preprocessing '
        f'{result.preprocessing}')
  print('Estimated cost ' + cost_linear.cost_text(
      result.estimated_cost, result.cost_model, result.cost_target) +
        f' ({result.cost_model})')
  print(memory.memory_text(result.spec, shape))
  print(line)
  if off_target:
    print(f'Note: {off_target}')
  print(f'Written to {output}')
  if f.measure_latency:
    with errors.errors_in_one_line(
        'extract_architecture: --measure_latency'):
      print(_measure(result, settings[0], _cache(f), config)[1])


def _check_modes(f: flags.FlagValues) -> None:
  """Refuses flags that do not go together, in one line."""
  if f.argmax and f['cost_tolerance'].present:
    raise ValueError('--argmax takes no cost band: drop --cost_tolerance')
  if f.argmax and f['oneshot'].present and f.oneshot:
    raise ValueError('--oneshot draws in the cost band: drop --argmax')
  given = [name for name in ('front', 'target', 'argmax')
           if f[name].value is not None and f[name].value is not False]
  if len(given) > 1:
    raise ValueError(f'--{given[0]} and --{given[1]} do not go together')
  if f.cost_model is not None and f.target is None:
    raise ValueError('--cost_model is the cost model of --target: give '
                     '--target too')
  if f['pair'].present and (f.front or f.target is not None):
    raise ValueError('--pair picks one policy: drop it with --front or '
                     '--target')


def _checked_memory(result: architecture_lib.Architecture,
                    config) -> macs.InputSpec:
  """`result`'s input shape; refused over `config`'s limits (the search's
  or `--sram_kb`/`--flash_kb`), saying how far."""
  shape = macs.resolve_input(result.ssd, result.image_size,
                             result.num_classes, result.num_channels)
  over = memory.over_limits(memory.needs(result.spec, shape), config.sram_kb,
                            config.flash_kb)
  if over:
    raise ValueError(f'the architecture needs {over}; nothing written')
  return shape


def _cache(f: flags.FlagValues) -> str:
  return f.model_cache or os.path.join(f.model_dir, 'latency_models')


def _front(f: flags.FlagValues, config, output: str, settings) -> None:
  """--front: every pair's architecture and its one-shot accuracy, in
  front.json."""
  with errors.errors_in_one_line('extract_architecture'):
    picks, accuracy, lines = extract_lib.front(
        f.model_dir, f.checkpoint, f.cost_tolerance, config, f.oneshot)
    for a in picks:
      _checked_memory(a, config)
  print(lines)
  measured = None
  if settings:
    with errors.errors_in_one_line(
        'extract_architecture: --measure_latency'):
      measured = [_measure(a, s, _cache(f), config)
                  for a, s in zip(picks, settings)]
    print('\n'.join(line for _, line in measured))
    measured = [ms for ms, _ in measured]
  files.write_json(extract_lib.front_json(picks, accuracy, measured), output)
  for k, (a, acc) in enumerate(zip(picks, accuracy)):
    print(f'Pair {k}: {a.indices_string}, estimated cost '
          f'{cost_linear.cost_text(a.estimated_cost, a.cost_model)} (target '
          f'{cost_linear.cost_text(a.cost_target, a.cost_model)}), one-shot '
          f'accuracy {acc:.2%}')
  print(f'Written to {output}')


def _settings(config: config_lib.SearchConfig):
  """How the search's fitted cost model's rows were timed."""
  from tunas_tf.latency import device as device_lib  # pylint: disable=g-import-not-at-top
  model = config.resolved_cost_model
  return device_lib.fitted_settings(model.measured_with, model.source)


def _measure(result: architecture_lib.Architecture, settings,
             model_cache: str, config: config_lib.SearchConfig):
  """The architecture timed with `settings`: (ms, `device_lib.closing_line`
  against its estimate and target)."""
  from tunas_tf.latency import device as device_lib  # pylint: disable=g-import-not-at-top
  from tunas_tf.graph import inference  # pylint: disable=g-import-not-at-top
  row = device_lib.measure_one(result.ssd, result.indices_string, settings,
                               model_cache, inference.builder)
  return row.latency_ms, device_lib.closing_line(
      row.latency_ms, result.estimated_cost,
      result.cost_target if config.enable_cost_model else None,
      settings.device)


if __name__ == '__main__':
  common_flags.run(main, define_flags)
