"""Flag groups shared by the entry points (`train_search`, `train_eval`), and
`run`, which every binary's `__main__` calls.

Only entry points import this module: library code takes a config, never
flags. Each function defines its flags on a caller's `FlagValues`, so tests
can build their own.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from typing import Callable, Optional

from absl import app
from absl import flags

from tunas_tf import checks
from tunas_tf import files
from tunas_tf.runtime import estimator
from tunas_tf.runtime import jobs

_SHORT_HELP = ('--help', '-help', '-h', '-?', '--helpshort')
_FULL_HELP = ('--helpfull', '-helpfull')


# Python's cyclic garbage collector passes over its youngest objects every
# 700 net allocations by default, and over older ones every 10 of those.
# Building a search graph allocates millions of objects (ops, tensors,
# their Python wrappers) that live as long as the graph, so nearly all of
# those passes find nothing. At these thresholds the suite's short digits
# search takes ~0.3 CPU s (~3%) less, report 0.2-0.7 s, on TF 2.15 and 2.21
# (bench/gc_thresholds.py, medians of paired runs); the garbage that cycles
# hold waits a little longer to be freed.
GC_THRESHOLDS = (50_000, 20, 20)


def tune_gc() -> None:
  """Sets `GC_THRESHOLDS`: fewer, larger garbage-collector passes."""
  gc.set_threshold(*GC_THRESHOLDS)


def run(main: Callable) -> None:
  """`absl.app.run(main)`, except that asking for help exits 0, that a bad
  flag is refused in one line (`parse_flags_in_one_line`), and that the
  process ends as soon as `main` is done (`exit_now`), with the garbage
  collector's thresholds raised (`tune_gc`).

  absl exits 1 after printing `--help`; here `--help` (`-h`, `--helpshort`)
  prints the binary's description and its own flags, the shared ones
  included, and `--helpfull` every flag, both to stdout with exit code 0.
  """
  args = sys.argv[1:]
  if any(a in _FULL_HELP for a in args):
    app.usage(shorthelp=False, writeto_stdout=True, exitcode=0)
  if any(a in _SHORT_HELP for a in args):
    app.usage(shorthelp=True, writeto_stdout=True, exitcode=0)

  def main_quietly(argv):
    quiet_tensorflow(flags.FLAGS['verbosity'].present)
    tune_gc()
    return main(argv)

  try:
    app.run(main_quietly, flags_parser=parse_flags_in_one_line)
  except SystemExit as e:
    exit_now(e.code)


def program_name() -> str:
  """The running binary's name as its refusals start: `train_search` for
  `python -m tunas_tf.train_search`, `train_eval` for its package's
  `__main__`; the script's file name when run by path."""
  spec = getattr(sys.modules.get('__main__'), '__spec__', None)
  if spec is not None:
    return spec.name.removesuffix('.__main__').rsplit('.', 1)[-1]
  return os.path.splitext(os.path.basename(sys.argv[0]))[0]


def parse_flags_in_one_line(argv):
  """absl's flag parsing, with a bad flag refused in one line naming the
  binary (absl's own parser writes two, 'FATAL Flags parsing error: ...'
  and a pointer to --helpshort) and exit code 1."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    sys.exit(f'{program_name()}: {e} (--help lists the flags)')


def exit_now(code) -> None:
  """Ends the process with `sys.exit(code)`'s status, skipping the teardown.

  Once a binary's `main` is done, everything it wrote is closed (its
  checkpoints, events, JSON files, the run lock). What is left of a normal
  exit is taking apart the interpreter: freeing every Python object (a
  search graph's thousands of ops and tensors) and TensorFlow's runtime,
  0.6-2.3 s at the end of each binary on 2 cores (bench/exit.py). This
  waits for the threads that are not daemons and runs the exit handlers
  (`atexit`: logging's flush, autograph's temporary files, TF's and TFDS's
  own), as Python's exit does, then flushes Python's stdout and stderr and
  calls `os._exit`. `code` as for `sys.exit`: None is 0, an int is itself,
  anything else is printed to stderr and is 1.
  """
  if code is None:
    status = 0
  elif isinstance(code, int):
    status = code
  else:
    print(code, file=sys.stderr)
    status = 1
  for thread in threading.enumerate():
    if thread is not threading.current_thread() and not thread.daemon:
      thread.join()
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (OSError, ValueError):  # Closed, or its reader gone.
      pass
  os._exit(status)


def quiet_tensorflow(verbose: bool) -> None:
  """TF's Python log once per line, and only errors unless `verbose`.

  TF's logger has a handler of its own and also passed its lines to absl's,
  so each Estimator line came twice; its INFO lines and deprecation warnings
  hid the binaries' progress lines. Unless `verbose` (`--verbosity` given),
  the logger keeps only errors, TF's Python `warnings` are ignored, and
  INFO lines logged through absl from inside TensorFlow Datasets (three per
  split read: "Load dataset info ...", "Creating a tf.data.Dataset reading 1
  files ...", "Constructing ...") or TensorFlow (TF 2.16+: "Sharding
  callback duration" per checkpoint; a SavedModel export's "Function ...
  contains input name(s) ... with unsupported characters"), or through
  `logging` from inside matplotlib (its first import: "generated new
  fontManager"), are dropped (`LibraryInfoFilter`).
  """
  import logging  # pylint: disable=g-import-not-at-top
  import warnings  # pylint: disable=g-import-not-at-top
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
  logger = logging.getLogger('tensorflow')
  logger.propagate = False
  if not verbose:
    logger.setLevel(logging.ERROR)
    warnings.filterwarnings(
        'ignore', module=r'(tensorflow|tensorflow_estimator|keras)(\.|$)')
    handler = absl_logging.get_absl_handler()
    if not any(isinstance(f, LibraryInfoFilter) for f in handler.filters):
      handler.addFilter(LibraryInfoFilter())


class LibraryInfoFilter:
  """A `logging` filter: drops records below WARNING logged from inside the
  `tensorflow_datasets`, `tensorflow` (through absl) or `matplotlib`
  (through `logging`) packages: progress notes of theirs, none of which
  says anything about the run."""

  _PACKAGES = tuple(f'{os.sep}{name}{os.sep}'
                    for name in ('tensorflow_datasets', 'tensorflow',
                                 'matplotlib'))

  def filter(self, record) -> bool:
    return (record.levelno >= 30 or  # logging.WARNING
            not any(p in record.pathname for p in self._PACKAGES))


def define_data_flags(f: flags.FlagValues, model_dir_help: str,
                      dataset_note: str = '') -> None:
  """--model_dir (alias --checkpoint_dir), --dataset, --data_dir (alias
  --dataset_dir), --[no]download, --num_classes, --image_size,
  --preprocessing; `dataset_note` ends --dataset's help."""
  flags.DEFINE_string('model_dir', None, model_dir_help, flag_values=f)
  flags.DEFINE_alias('checkpoint_dir', 'model_dir', flag_values=f)
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
  """The flags of `define_data_flags` that need no file or data to check:
  `--model_dir` given and writable, `--num_classes` and `--image_size`
  positive integers when set.

  Raises:
    ValueError: one line naming the flag.
  """
  if not f.model_dir:
    raise ValueError('--model_dir is required')
  files.check_output_dir(f.model_dir, '--model_dir')
  for name in ('num_classes', 'image_size'):
    if f[name].value is not None:
      checks.number(name, f[name].value, 1, integer=True)


def define_tpu_flags(f: flags.FlagValues, iterations_per_loop: int) -> None:
  """--tpu, --tpu_zone, --gcp_project, --use_tpu, --tpu_iterations_per_loop,
  --engine."""
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


def define_determinism_flag(f: flags.FlagValues) -> None:
  """--[no]deterministic."""
  flags.DEFINE_boolean('deterministic', False, 'TF op determinism: the same '
                       'flags give the same bits, and a killed run resumed '
                       'ends as an uninterrupted one (same machine), at some '
                       'cost in speed; ops without a deterministic kernel '
                       'then fail. May change on restart.', flag_values=f)


def job_config(f: flags.FlagValues, *, num_classes: int, image_size: int,
               num_channels: int, preprocessing: str,
               dataset: Optional[str] = None) -> jobs.JobConfig:
  """The `JobConfig` of a binary's flags, with the dataset facts resolved.

  `preprocessing` is the resolved `--preprocessing` (the dataset's default
  when unset), `dataset` the resolved `--dataset` (default the flag's).
  Reads the flags of `define_data_flags` and `define_tpu_flags` plus the
  binary's `--seed`, `--save_checkpoints_steps`, `--keep_checkpoint_max`,
  `--log_every_steps` and `--deterministic`; `--use_tpu` defaults to whether
  `--tpu` is set, `--engine` to `estimator.default_engine()`.

  Raises:
    ValueError: as `jobs.JobConfig` (--use_tpu without --tpu among them).
  """
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
