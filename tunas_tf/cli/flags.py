"""Flag groups shared by the binaries, each defined on a caller's
`FlagValues` (tests build their own), and `run`, every binary's `__main__`.
Only entry points import this module: library code takes a config."""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
from typing import Any, Callable, Dict, Optional, Sequence

from absl import app
from absl import flags

from tunas_tf.cost_model import memory
from tunas_tf.io import checks
from tunas_tf.io.errors import errors_in_one_line
from tunas_tf.io import files
from tunas_tf.io import lite
from tunas_tf.cli import process
from tunas_tf.runtime import jobs
from tunas_tf.search_space import mobile

# A binary stopped by a signal: which, and what it says it kept and how to
# resume (`when_stopped`).
_STOP = {'signal': 'SIGINT', 'kept': 'its files are written whole or not at '
         'all; the same command runs it again'}


def run(main: Callable, define_flags: Callable[[], None]) -> None:
  """`define_flags()`, then `absl.app.run(main)`, except that `--help` (`-h`,
  `--helpshort`: the description and the binary's flags, shared ones
  included) and `--helpfull` print to stdout and exit 0, a bad flag or a
  signal ends it in one line, and the process ends as soon as `main` is
  done, TF's Python log quiet."""
  define_flags()
  # The shared flags are the binary's own in --help (absl's
  # `adopt_module_key_flags` from the binary's module).
  for flag in flags.FLAGS.get_key_flags_for_module(__name__):
    flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
  for short, names in ((False, {'--helpfull', '-helpfull'}),
                       (True, {'--help', '-help', '-h', '-?', '--helpshort'})):
    if names.intersection(sys.argv[1:]):
      app.usage(shorthelp=short, writeto_stdout=True, exitcode=0)

  def main_quietly(argv):
    process.quiet_python_log(flags.FLAGS['verbosity'].present)
    return main(argv)

  def stop(signum, frame):
    del frame
    _STOP['signal'] = signal.Signals(signum).name
    raise KeyboardInterrupt

  signal.signal(signal.SIGTERM, stop)  # As Ctrl-C: one line, below.
  try:
    app.run(main_quietly, flags_parser=parse_flags_in_one_line)
  except SystemExit as e:
    process.exit_now(e.code)
  except KeyboardInterrupt:
    print(f"{program_name()}: stopped by {_STOP['signal']}: {_STOP['kept']}",
          file=sys.stderr)
    process.exit_now(128 + signal.Signals[_STOP['signal']].value)


def when_stopped(kept: str) -> None:
  """What `run` says after 'stopped by SIGINT: ' (or SIGTERM; exit 128 + the
  signal's number): what the binary kept, how to resume."""
  _STOP['kept'] = kept


def program_name() -> str:
  """The running binary's name as its refusals start: `train_search` for
  `python -m tunas_tf.train_search`, `train_eval` for its package's
  `__main__`; the script's file name when run by path."""
  spec = getattr(sys.modules.get('__main__'), '__spec__', None)
  if spec is not None:
    return spec.name.removesuffix('.__main__').rsplit('.', 1)[-1]
  return os.path.splitext(os.path.basename(sys.argv[0]))[0]


def check_tool_args(tool: str, argv: Sequence[str], f: flags.FlagValues,
                    *required: str) -> None:
  """Exits in one line ('TOOL: ...') for arguments that are not flags, for
  `required` flags left unset ('--a, --b are required'), or for a bad
  --seed (`checks.seed`)."""
  if len(argv) > 1:
    sys.exit(f'{tool}: unexpected arguments {list(argv[1:])}')
  missing = [f'--{name}' for name in required if not f[name].value]
  if missing:
    sys.exit(f'{tool}: {", ".join(missing)} '
             f'{"is" if len(missing) == 1 else "are"} required')
  with errors_in_one_line(tool):
    if 'seed' in f:
      checks.seed('seed', f.seed)


def parse_flags_in_one_line(argv):
  """absl's flag parsing, with a bad flag refused in one line naming the
  binary (absl's own parser writes two, 'FATAL Flags parsing error: ...'
  and a pointer to --helpshort) and exit code 1."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    sys.exit(f'{program_name()}: {e} (--help lists the flags)')


def define_space_flags(f: flags.FlagValues, lead: str, *,
                       default: Optional[str] = 'digits_search',
                       indices_note: Optional[str] = None) -> None:
  """--ssd, `lead` starting its help: one of the spaces and reference models,
  or with `default` None a string checked where it is resolved (it may come
  from an architecture file); with `indices_note` (ending its help)
  --indices."""
  text = f'{lead} {mobile.kinds_note()}'
  if default is None:
    flags.DEFINE_string('ssd', None, text, flag_values=f)
  else:
    flags.DEFINE_enum('ssd', default, sorted(mobile.SEARCH_SPACES), text,
                      flag_values=f)
  if indices_note is not None:
    flags.DEFINE_string('indices', None, 'Colon-separated choice per '
                        'decision of --ssd, in visit order (empty for a '
                        'reference model)' + indices_note, flag_values=f)


def define_seed_flag(f: flags.FlagValues, of_what: str) -> None:
  """--seed, default 0, 'Seed of `of_what`.'"""
  flags.DEFINE_integer('seed', 0, f'Seed of {of_what}.', flag_values=f)


def define_input_flags(f: flags.FlagValues) -> None:
  """--image_size, --num_classes, --input_channels: the input and classifier
  of the networks a tool builds, default the space's."""
  for name, what in (('image_size', 'Input resolution'),
                     ('num_classes', 'Classifier width'),
                     ('input_channels', 'Image channels')):
    flags.DEFINE_integer(name, None, f"{what} of the networks; default the "
                         "space's.", flag_values=f)


def define_model_dir_flags(f: flags.FlagValues, model_dir_help: str,
                           checkpoint: bool = False) -> None:
  """--model_dir (alias --checkpoint_dir) and, with `checkpoint`,
  --checkpoint, one of its checkpoints."""
  flags.DEFINE_string('model_dir', None, model_dir_help, flag_values=f)
  flags.DEFINE_alias('checkpoint_dir', 'model_dir', flag_values=f)
  if checkpoint:
    flags.DEFINE_string('checkpoint', None, 'A checkpoint path; default the '
                        "directory's latest.", flag_values=f)


def define_cost_model_flag(f: flags.FlagValues) -> None:
  """--cost_model: what a cost is, as `cost_model/linear` resolves it."""
  flags.DEFINE_string('cost_model', None, "'released' (simulated Pixel-1 ms; "
                      "default where it exists), 'macs' (multiply-adds; "
                      "default elsewhere), 'flash' (the int8 model's bytes) "
                      'or the path of a coefficients JSON.', flag_values=f)


def config_values(f: flags.FlagValues, config_type: type,
                  **resolved: Any) -> Dict[str, Any]:
  """Keyword arguments of the dataclass `config_type`: each field named as a
  flag takes the flag's value; `resolved` (what flags combine into) wins."""
  return {**{field.name: f[field.name].value
             for field in dataclasses.fields(config_type) if field.name in f},
          **resolved}


def define_limit_flags(f: flags.FlagValues, effect: str) -> None:
  """--sram_kb and --flash_kb, the int8 model's memory limits (estimated by
  `cost_model/memory`), `effect` ending their help."""
  for name, _, _, what in memory.LIMITS:
    flags.DEFINE_float(name, None, f'A limit on the {what}, estimated), KB of '
                       f'1,024 bytes: {effect}', flag_values=f)


def define_precision_flag(f: flags.FlagValues, name: str, lead: str) -> None:
  """--NAME, the arithmetic a network runs in on the device, `lead` starting
  its help."""
  flags.DEFINE_enum(name, lite.FLOAT32, lite.PRECISIONS, lead + ' int8 is '
                    'full-integer (int8 weights, activations, input and '
                    'output; post-training quantization), what phones and '
                    'Edge TPUs run; TFLite only.', flag_values=f)


def define_data_flags(f: flags.FlagValues, model_dir_help: str,
                      dataset_note: str = '') -> None:
  """--model_dir (alias --checkpoint_dir), --dataset, --data_dir (alias
  --dataset_dir), --[no]download, --num_classes, --image_size,
  --preprocessing; `dataset_note` ends --dataset's help."""
  define_model_dir_flags(f, model_dir_help)
  flags.DEFINE_string('dataset', 'digits', "'digits' (offline, bundled) or a "
                      'TFDS image-classification dataset name.' + dataset_note,
                      flag_values=f)
  flags.DEFINE_string('data_dir', None, 'TFDS data directory.', flag_values=f)
  flags.DEFINE_alias('dataset_dir', 'data_dir', flag_values=f)
  flags.DEFINE_boolean('download', True, 'Let TFDS download and prepare a '
                       'missing dataset; with --nodownload a missing dataset '
                       'fails at once.', flag_values=f)
  flags.DEFINE_integer('num_classes', None, "Classes of the classifier; "
                       "default the dataset's own count.", flag_values=f)
  flags.DEFINE_integer('image_size', None, 'Input side in pixels; default the '
                       "stored images' shorter side (digits: 8); required "
                       'for images of varying sizes.', flag_values=f)
  flags.DEFINE_enum('preprocessing', None, ['imagenet', 'cifar', 'none'],
                    "imagenet: the original's Inception-style crop for "
                    'training, a padded centre crop for evaluation and the '
                    "controller's validation batches, bicubic, mean/std "
                    'normalised; cifar: the whole image in [0, 1], a 1/8 '
                    'pad-and-crop and flip for training; none: the whole '
                    'image, never augmented. Default: none for digits, cifar '
                    'for square images of at most 64 px, else imagenet.',
                    flag_values=f)


def check_data_flags(f: flags.FlagValues) -> None:
  """`--model_dir` given and writable, `--num_classes` and `--image_size`
  positive integers when set; ValueError naming the flag."""
  if not f.model_dir:
    raise ValueError('--model_dir is required')
  files.check_output_dir(f.model_dir, '--model_dir')
  for name in ('num_classes', 'image_size'):
    if f[name].value is not None:
      checks.number(name, f[name].value, 1, integer=True)


def define_run_flags(f: flags.FlagValues, *, iterations_per_loop: int,
                     save_checkpoints_steps: int, log_every_steps: int,
                     log_note: str = '') -> None:
  """--tpu, --tpu_zone, --gcp_project, --use_tpu, --tpu_iterations_per_loop,
  --engine, --[no]deterministic, --save_checkpoints_steps,
  --keep_checkpoint_max, --log_every_steps (`log_note` ends its help)."""
  flags.DEFINE_string('tpu', '', "local: the TPU of this Cloud TPU VM (one "
                      'host); NAME: a TPU by name through the Cloud TPU API '
                      '(a pod slice: run on worker 0); or grpc://HOST:PORT. '
                      'Checked before anything is written. Implies '
                      '--use_tpu.', flag_values=f)
  flags.DEFINE_string('tpu_zone', None, "The named TPU's zone; default the "
                      "VM's.", flag_values=f)
  flags.DEFINE_string('gcp_project', None, "The named TPU's project; default "
                      "the VM's.", flag_values=f)
  flags.DEFINE_boolean('use_tpu', None, 'Run on TPU; default: whether --tpu is '
                       'set.', flag_values=f)
  flags.DEFINE_integer('tpu_iterations_per_loop', iterations_per_loop,
                       'Steps per TPU loop; also the summary cadence.',
                       flag_values=f)
  flags.DEFINE_enum('engine', None, list(jobs.ENGINES), 'What trains: '
                    'estimator (TPUEstimator; TF 2.15 only; TPU v2-v4) or '
                    'distribute (a tf.distribute training loop; any TF; TPU '
                    'v5e/v5p/v6e, current GPUs, several machines). Default: '
                    'estimator where this TF has it, else distribute. A run '
                    'goes on on the engine it started on.', flag_values=f)
  flags.DEFINE_boolean('deterministic', False, 'TF op determinism: the same '
                       'flags give the same bits, and a killed run resumed '
                       'ends as an uninterrupted one (same machine), at some '
                       'cost in speed; ops without a deterministic kernel '
                       'then fail. May change on restart.', flag_values=f)
  flags.DEFINE_integer('save_checkpoints_steps', save_checkpoints_steps,
                       'Checkpoint cadence.', flag_values=f)
  flags.DEFINE_integer('keep_checkpoint_max', 3, 'Checkpoints kept.',
                       flag_values=f)
  flags.DEFINE_integer('log_every_steps', log_every_steps,
                       'Progress log cadence' + log_note + '.', flag_values=f)


def job_config(f: flags.FlagValues, *, num_classes: int, image_size: int,
               num_channels: int, preprocessing: str,
               dataset: Optional[str] = None) -> jobs.JobConfig:
  """The `JobConfig` of `define_data_flags`, `define_run_flags` and `--seed`,
  with the resolved `preprocessing` and `dataset` (default the flag's);
  `--use_tpu` defaults to whether `--tpu` is set. ValueError as
  `jobs.JobConfig`."""
  # Imported here: `run` and the flag definitions import no TensorFlow (the
  # binaries import it first; process_test runs `run` in fresh processes).
  from tunas_tf.runtime import estimator  # pylint: disable=g-import-not-at-top
  return jobs.JobConfig(
      model_dir=f.model_dir, dataset=dataset or f.dataset,
      data_dir=f.data_dir,
      download=f.download, num_classes=num_classes, image_size=image_size,
      num_channels=num_channels, preprocessing=preprocessing, seed=f.seed,
      use_tpu=jobs.resolve_use_tpu(f.tpu, f.use_tpu), tpu=f.tpu,
      tpu_zone=f.tpu_zone, gcp_project=f.gcp_project,
      tpu_iterations_per_loop=f.tpu_iterations_per_loop,
      save_checkpoints_steps=f.save_checkpoints_steps,
      keep_checkpoint_max=f.keep_checkpoint_max,
      log_every_steps=f.log_every_steps, deterministic=f.deterministic,
      engine=f.engine or estimator.default_engine())
