"""The TFLite interpreter: LiteRT's where it is installed, else TF's.

TF 2.16+ deprecates `tf.lite.Interpreter` for LiteRT's (`ai_edge_litert`,
the same interpreter under its new name): it warns at every construction
that it is scheduled for deletion. setup.py installs LiteRT with the newest
TF; TF 2.15's stack keeps `tf.lite.Interpreter`, which does not warn there.
Where LiteRT is missing, TF's interpreter is used with that one warning
silenced (the documented alternative, which still runs the model).
"""

from __future__ import annotations

from typing import Any, Optional
import warnings

# The first line of `tf.lite.Interpreter`'s deprecation warning (TF 2.16+).
_DELETION_WARNING = r'\s*Warning: tf\.lite\.Interpreter is deprecated'


def interpreter(model_content: bytes,
                num_threads: Optional[int] = None) -> Any:
  """An interpreter of the TFLite flatbuffer `model_content` (tensors not
  yet allocated), on `num_threads` threads (None: the interpreter's
  default)."""
  try:
    from ai_edge_litert import interpreter as litert  # pylint: disable=g-import-not-at-top
  except ImportError:
    litert = None
  if litert is not None:
    return litert.Interpreter(model_content=model_content,
                              num_threads=num_threads)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  with warnings.catch_warnings():
    warnings.filterwarnings('ignore', message=_DELETION_WARNING)
    return tf.lite.Interpreter(model_content=model_content,
                               num_threads=num_threads)
