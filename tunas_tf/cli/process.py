"""What the binaries do to their own process: the one-line output contract
and the measured gains (bench/DECISIONS.md, 'Kernels and the process').
A binary calls `at_start()` first; `flags.run` calls `quiet_python_log`
before `main` and `exit_now` after it.
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

# The child that filters a block's stderr (`log_below_dropped`): stdin to
# stdout but the native log lines below the level (argv[1]) in absl's C++
# format (TF 2.16+) or TF's own, and absl's pre-`InitializeLog` notice.
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
  """A binary's first call: `quiet_cpp_log`, then (unless TensorFlow is
  imported) `GC_THRESHOLDS` and TF's import under `log_below_dropped`."""
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
  """Drops the native log lines below `min_log_level` (as
  `TF_CPP_MIN_LOG_LEVEL`, which TF 2.16+'s absl log ignores until
  `InitializeLog`) that the block writes to fd 2, through a filtering child
  process: a crash in the block loses no line."""
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
  """TF's Python log once per line (not also through absl's); unless
  `verbose`, only errors, no TF `warnings` and no `LibraryInfoFilter` notes."""
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
  """Drops records below WARNING from inside `tensorflow_datasets`,
  `tensorflow` or `matplotlib`: progress notes that say nothing of the run."""

  _PACKAGES = tuple(f'{os.sep}{name}{os.sep}'
                    for name in ('tensorflow_datasets', 'tensorflow',
                                 'matplotlib'))

  def filter(self, record: logging.LogRecord) -> bool:
    return (record.levelno >= logging.WARNING or
            not any(p in record.pathname for p in self._PACKAGES))


def exit_now(code) -> None:
  """Ends the process as `sys.exit(code)` would (non-daemon threads joined,
  `atexit` handlers run, streams flushed) but by `os._exit`, skipping the
  teardown (bench/DECISIONS.md). Call it once `main`'s files are closed."""
  if not isinstance(code, (int, type(None))):
    print(code, file=sys.stderr)
    code = 1
  for thread in threading.enumerate():
    if thread is not threading.current_thread() and not thread.daemon:
      thread.join()
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (OSError, ValueError):  # Closed, or its reader gone.
      pass
  os._exit(code or 0)  # pylint: disable=protected-access
