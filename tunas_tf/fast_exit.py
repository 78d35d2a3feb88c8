"""The binaries' end: `os._exit` once `main` is done, skipping the teardown.

Kept for a measured figure: 0.6-2.3 s at the end of each binary on 2 cores
(bench/exit.py; bench/DECISIONS.md, 'Binaries end by `os._exit` after
main').
"""

import atexit
import os
import sys
import threading


def exit_now(code) -> None:
  """Ends the process with `sys.exit(code)`'s status, skipping the teardown.

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
  os._exit(status)
