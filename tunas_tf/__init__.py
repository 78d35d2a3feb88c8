"""tunas_tf: TuNAS-style one-shot, hardware-aware architecture search in TF.

Importing the package turns TensorFlow's C++ log off (its CUDA/cuDNN/TensorRT
probes and CPU-feature notes at import, graph-pass notes later) unless
`TF_CPP_MIN_LOG_LEVEL` is already set or the command line asks for verbosity
(`--verbosity`/`-v`, absl's flag): the binaries' own lines stay readable.
Their Python side does the same with TF's Python logger (`flags.run`).
"""

import os as _os
import sys as _sys


def _asks_for_verbosity(argv) -> bool:
  return any(a.startswith(('--verbosity', '-v=', '--v=')) or a == '-v'
             for a in argv[1:])


if ('TF_CPP_MIN_LOG_LEVEL' not in _os.environ and
    not _asks_for_verbosity(_sys.argv)):
  _os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'
