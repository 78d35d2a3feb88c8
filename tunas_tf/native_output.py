"""Silences what native code prints straight to the process's stdout/stderr.

`log_below_dropped()` drops the native log lines below a level from what a
block writes to stderr (the binaries import TensorFlow in one).
`captured()` points file descriptors 1 and 2 at a temporary file for the
block (the TFLite converter's ~20 lines of "non-converted ops" per
conversion); if the block fails, what it printed is written back to stderr,
so no error is lost.

  with native_output.captured():
    tflite = converter.convert()
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from typing import Iterator


@contextlib.contextmanager
def captured() -> Iterator[None]:
  """Native stdout/stderr output of the block goes to a temporary file
  (replayed to stderr when the block raises)."""
  for stream in (sys.stdout, sys.stderr):
    stream.flush()
  saved = [os.dup(1), os.dup(2)]
  with tempfile.TemporaryFile() as sink:
    os.dup2(sink.fileno(), 1)
    os.dup2(sink.fileno(), 2)
    try:
      yield
    except BaseException:
      _restore(saved)
      sink.seek(0)
      sys.stderr.write(sink.read().decode('utf-8', 'replace'))
      sys.stderr.flush()
      raise
    else:
      _restore(saved)


def _restore(saved) -> None:
  for stream in (sys.stdout, sys.stderr):
    stream.flush()
  os.dup2(saved[0], 1)
  os.dup2(saved[1], 2)
  for fd in saved:
    os.close(fd)


# The child that filters a block's stderr (`log_below_dropped`): reads its
# stdin line by line and writes to its stdout (the parent's stderr) every
# line but the native log lines below the level (argv[1]): absl's C++ log
# format (`I0000 00:00:1795791205.569430    6308 port.cc:153] ...`, TF
# 2.16+) or TF's own (`2024-01-01 12:00:00.000000: I tensorflow/...] ...`),
# and absl's notice that it logs to stderr before `InitializeLog` (a
# warning). Run with `python -I -S`: no site packages, ~15 ms.
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
