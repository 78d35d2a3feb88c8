"""tunas_tf: TuNAS-style one-shot, hardware-aware architecture search in TF.

Importing the package sets `TF_CPP_MIN_LOG_LEVEL=3` (TF's C++ log off) unless
it is already set or the command line asks for verbosity (`--verbosity`/`-v`).
Run as a program (`python -m tunas_tf.<binary>`: `sys.argv[0]` is still '-m'),
it also imports TensorFlow with the native log lines below that level dropped
(`native_output.log_below_dropped`: TF 2.16+ ignores the variable at import).
A library user's `import tunas_tf` imports no TensorFlow.
"""

import os as _os
import sys as _sys


def _asks_for_verbosity(argv) -> bool:
  return any(a.startswith(('--verbosity', '-v=', '--v=')) or a == '-v'
             for a in argv[1:])


def _min_log_level() -> int:
  try:
    return int(_os.environ.get('TF_CPP_MIN_LOG_LEVEL', '0'))
  except ValueError:
    return 0


if ('TF_CPP_MIN_LOG_LEVEL' not in _os.environ and
    not _asks_for_verbosity(_sys.argv)):
  _os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'

if _sys.argv[:1] == ['-m'] and 'tensorflow' not in _sys.modules:
  from tunas_tf import native_output as _native_output  # pylint: disable=g-import-not-at-top
  with _native_output.log_below_dropped(_min_log_level()):
    import tensorflow as _  # pylint: disable=g-import-not-at-top,unused-import
