"""tunas_tf: TuNAS-style one-shot, hardware-aware architecture search in TF.

Importing the package turns TensorFlow's C++ log off (its CUDA/cuDNN/TensorRT
probes and CPU-feature notes at import, graph-pass notes later) unless
`TF_CPP_MIN_LOG_LEVEL` is already set or the command line asks for verbosity
(`--verbosity`/`-v`, absl's flag): the binaries' own lines stay readable.
Their Python side does the same with TF's Python logger (`flags.run`).

Run as a program (`python -m tunas_tf.<binary>`, where the package is
imported while `sys.argv[0]` is still '-m'), it also imports TensorFlow
first, dropping the native log lines below that level from what the import
writes to stderr (`native_output.log_below_dropped`): TF 2.16+ logs its
start-up notes through absl's C++ log, which ignores `TF_CPP_MIN_LOG_LEVEL`
until `absl::InitializeLog()` is called, so a one-line refusal came with
six lines of them. Every binary imports TensorFlow anyway; a library user's
`import tunas_tf` does not.
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
