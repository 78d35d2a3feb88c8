"""The command lines the binaries suggest ('Next: ...'), with the interpreter
that is running (a virtualenv's has the package; `python` on PATH may not)."""

from __future__ import annotations

import os
import sys


def python() -> str:
  """The running interpreter as a command: relative to the working
  directory when under it, else absolute; `python` when unknown."""
  if not sys.executable:
    return 'python'
  relative = os.path.relpath(sys.executable)
  if relative.startswith(os.pardir + os.sep):
    return sys.executable
  return relative if os.sep in relative else os.path.join(os.curdir, relative)


def module_command(module: str, *args: str) -> str:
  """'<python> -m <module> <args>' (`python()`)."""
  return ' '.join((python(), '-m', module) + args)
