"""The command lines the binaries suggest ('Next: ...'), as the user would
type them: with the interpreter that is running, not a bare `python`.

A virtualenv's interpreter (`make search` runs `.venv/bin/python`) is the
one that has the package; `python` on PATH may be another Python, or none.
Under the working directory the path is relative (`.venv/bin/python`),
elsewhere absolute.
"""

from __future__ import annotations

import os
import sys


def python() -> str:
  """The running interpreter as a command: relative to the working
  directory when under it, else absolute; `python` when unknown."""
  executable = sys.executable
  if not executable:
    return 'python'
  relative = os.path.relpath(executable)
  if relative.startswith(os.pardir + os.sep):
    return executable
  return relative if os.sep in relative else os.path.join(os.curdir, relative)


def module_command(module: str, *args: str) -> str:
  """'<python> -m <module> <args>' (`python()`)."""
  return ' '.join((python(), '-m', module) + args)
