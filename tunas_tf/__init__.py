"""tunas_tf: TuNAS-style one-shot, hardware-aware architecture search in TF.

Importing the package turns TF's C++ log off unless `TF_CPP_MIN_LOG_LEVEL` is
set or the command line asks for verbosity; a binary (`python -m
tunas_tf.BINARY`) also raises the garbage collector's thresholds and imports
TensorFlow with the native log lines below that level dropped
(`process.at_import`). A library user's `import tunas_tf` imports no
TensorFlow.
"""

from tunas_tf import process as _process

_process.at_import()
