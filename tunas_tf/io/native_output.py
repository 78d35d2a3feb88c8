"""Silences what native code prints straight to the process's stdout/stderr
(the TFLite converter's ~20 lines of "non-converted ops" per conversion)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import Iterator


@contextlib.contextmanager
def captured() -> Iterator[None]:
  """Points fds 1 and 2 at a temporary file for the block; replays it to
  stderr when the block raises, so no error is lost."""
  for stream in (sys.stdout, sys.stderr):
    stream.flush()
  saved = [os.dup(1), os.dup(2)]
  with tempfile.TemporaryFile() as sink:
    os.dup2(sink.fileno(), 1)
    os.dup2(sink.fileno(), 2)
    failed = True
    try:
      yield
      failed = False
    finally:
      for stream in (sys.stdout, sys.stderr):
        stream.flush()
      for fd, saved_fd in zip((1, 2), saved):
        os.dup2(saved_fd, fd)
        os.close(saved_fd)
      if failed:
        sink.seek(0)
        sys.stderr.write(sink.read().decode('utf-8', 'replace'))
        sys.stderr.flush()
