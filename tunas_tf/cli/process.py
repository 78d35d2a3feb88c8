"""What the binaries do to their own process: the one-line output contract
and the measured gains (bench/DECISIONS.md, 'Kernels and the process').

A binary calls `at_start()` first: TF's C++ log off, the garbage
collector's thresholds raised and TensorFlow imported with the native lines
below that level dropped. `flags.run` calls `quiet_python_log` before `main`
and `exit_now` after it.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import os
import sys
import threading
from typing import Iterator, Sequence

# Python's (700, 10, 10) collects ~1,100 times in the suite's short search,
# ~700 of them while TF imports, over objects that live to the end.
GC_THRESHOLDS = (50_000, 20, 20)

# The child that filters a block's stderr (`log_below_dropped`): reads its
# stdin line by line and writes to its stdout (the parent's stderr) every
# line but the native log lines below the level (argv[1]): absl's C++ log
# format (`I0000 00:00:1795791205.569430    6308 port.cc:153] ...`, TF
# 2.16+) or TF's own (`2024-01-01 12:00:00.000000: I tensorflow/...] ...`),
# and absl's notice that it logs to stderr before `InitializeLog` (a
# warning). Run with `python -I -S`: no site packages, ~20 ms of CPU.
_FILTER = r'''
import re, sys
level = int(sys.argv[1])
severity = re.compile(
    r'([IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^ \]]+:\d+\] |'
    r'\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ([IWEF]) [^ \]]+:\d+\] |'
    r'(W)ARNING: All log messages before absl::InitializeLog\(\) is called')
out = sys.stdout.buffer
for line in sys.stdin.buffer:
  m = severity.match(line.decode('utf-8', 'replace'))
  if m and 'IWEF'.index(next(g for g in m.groups() if g)) < level:
    continue
  out.write(line)
  out.flush()
'''


def quiet_cpp_log(argv: Sequence[str]) -> None:
  """Sets `TF_CPP_MIN_LOG_LEVEL=3` (TF's C++ log off) unless it is set or
  `argv` asks for verbosity (`--verbosity`, `-v`)."""
  if 'TF_CPP_MIN_LOG_LEVEL' not in os.environ and not any(
      a.startswith(('--verbosity', '-v=', '--v=')) or a == '-v'
      for a in argv[1:]):
    os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'


def at_start() -> None:
  """A binary's first call, before its other imports: `quiet_cpp_log`, then,
  unless TensorFlow is imported already, `GC_THRESHOLDS` and TensorFlow's
  import with the native log lines below that level dropped
  (`log_below_dropped`: TF 2.16+ ignores the variable there)."""
  quiet_cpp_log(sys.argv)
  if 'tensorflow' in sys.modules:
    return
  gc.set_threshold(*GC_THRESHOLDS)
  try:
    level = int(os.environ.get('TF_CPP_MIN_LOG_LEVEL', '0'))
  except ValueError:
    level = 0
  with log_below_dropped(level):
    import tensorflow  # pylint: disable=g-import-not-at-top,import-outside-toplevel,unused-import


@contextlib.contextmanager
def log_below_dropped(min_log_level: int) -> Iterator[None]:
  """Drops the native log lines below `min_log_level` (0 INFO, 1 WARNING,
  2 ERROR, 3 FATAL, as `TF_CPP_MIN_LOG_LEVEL`) that the block writes to
  file descriptor 2; every other line goes through as it comes.

  For what `TF_CPP_MIN_LOG_LEVEL` cannot reach: TF 2.16+ logs through absl's
  C++ log, which writes everything to stderr until `absl::InitializeLog()`
  (Python never calls it). The block's stderr goes through a pipe to a child
  process that filters it onto the real stderr, so a crash inside the block
  loses nothing: the child forwards what it got and ends at the pipe's end.
  """
  if min_log_level <= 0:
    yield
    return
  import subprocess  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  for stream in (sys.stdout, sys.stderr):
    stream.flush()
  saved = os.dup(2)
  read, write = os.pipe()
  child = subprocess.Popen(
      [sys.executable, '-I', '-S', '-c', _FILTER, str(min_log_level)],
      stdin=read, stdout=saved, stderr=saved)
  os.close(read)
  os.dup2(write, 2)
  os.close(write)
  try:
    yield
  finally:
    sys.stderr.flush()
    os.dup2(saved, 2)  # Closes the pipe: the child reads to its end.
    os.close(saved)
    child.wait()


def quiet_python_log(verbose: bool) -> None:
  """TF's Python log once per line, and only errors unless `verbose`.

  TF's logger stops passing its lines on to absl's (each came twice). Unless
  `verbose` (`--verbosity` given), it keeps only errors, TF's Python
  `warnings` are ignored, and the INFO notes of TensorFlow Datasets,
  TensorFlow and matplotlib are dropped (`LibraryInfoFilter`).
  """
  import warnings  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  logger = logging.getLogger('tensorflow')
  logger.propagate = False
  if not verbose:
    logger.setLevel(logging.ERROR)
    warnings.filterwarnings(
        'ignore', module=r'(tensorflow|tensorflow_estimator|keras)(\.|$)')
    handler = absl_logging.get_absl_handler()
    if not any(isinstance(f, LibraryInfoFilter) for f in handler.filters):
      handler.addFilter(LibraryInfoFilter())


class LibraryInfoFilter(logging.Filter):
  """Drops records below WARNING logged from inside the
  `tensorflow_datasets`, `tensorflow` (through absl) or `matplotlib`
  (through `logging`) packages: progress notes of theirs, none of which
  says anything about the run."""

  _PACKAGES = tuple(f'{os.sep}{name}{os.sep}'
                    for name in ('tensorflow_datasets', 'tensorflow',
                                 'matplotlib'))

  def filter(self, record: logging.LogRecord) -> bool:
    return (record.levelno >= logging.WARNING or
            not any(p in record.pathname for p in self._PACKAGES))


def exit_now(code) -> None:
  """Ends the process with `sys.exit(code)`'s status, skipping the
  interpreter's teardown (bench/DECISIONS.md, 'Binaries end by `os._exit`').

  Call it once everything `main` wrote is closed. Waits for the threads
  that are not daemons and runs the `atexit` handlers, as Python's exit
  does, then flushes stdout and stderr and calls `os._exit` (no freeing of
  every object). `code` as for `sys.exit`: None is 0, an int is itself,
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
  os._exit(status)  # pylint: disable=protected-access
