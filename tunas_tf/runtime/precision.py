"""bfloat16 compute: the `--use_bfloat16` modes and what they resolve to;
each binary resolves `auto` once and stores the mode (docs/scaling.md).
"""

from __future__ import annotations

from typing import Any

AUTO, TRUE, FALSE, ONTPU = 'auto', 'true', 'false', 'ontpu'
BFLOAT16_MODES = (AUTO, TRUE, FALSE, ONTPU)
RESOLVED_MODES = (TRUE, FALSE, ONTPU)

WEIGHT_DECAY = 4e-5
WEIGHT_DECAY_BFLOAT16 = 3e-5


def resolve(mode: str, mobilenet_v3_like: bool) -> str:
  """`mode` resolved (`auto`: `ontpu` for MobileNetV3-like spaces, else
  `false`); ValueError unless one of `BFLOAT16_MODES`."""
  if mode not in BFLOAT16_MODES:
    raise ValueError(f'Unknown --use_bfloat16={mode!r}; expected one of '
                     f'{BFLOAT16_MODES}')
  if mode == AUTO:
    return ONTPU if mobilenet_v3_like else FALSE
  return mode


def check_resolved(mode: str) -> str:
  """`mode` if it is one of `RESOLVED_MODES`, else ValueError naming it."""
  if mode not in RESOLVED_MODES:
    raise ValueError(f'use_bfloat16 must be one of {RESOLVED_MODES} once '
                     f'resolved, got {mode!r}')
  return mode


def default_weight_decay(mode: str) -> float:
  """3e-5 when `mode` asks for bfloat16 (`true`, `ontpu`), else 4e-5."""
  return WEIGHT_DECAY_BFLOAT16 if mode in (TRUE, ONTPU) else WEIGHT_DECAY


def compute_dtype(mode: str, use_tpu: bool) -> Any:
  """tf.bfloat16 for `true`, and `ontpu` on TPU; else tf.float32."""
  # TensorFlow only here: the configs that import this module do without it.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  check_resolved(mode)
  if mode == TRUE or (mode == ONTPU and use_tpu):
    return tf.bfloat16
  return tf.float32


def input_dtype(mode: str) -> Any:
  """The input pipeline's image dtype: tf.bfloat16 for `true`, else float32."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.bfloat16 if check_resolved(mode) == TRUE else tf.float32


def cast_input(dataset: Any, mode: str) -> Any:
  """`dataset` of (features, labels), features cast to `input_dtype(mode)`:
  an input pipeline's last step (before the TPU's layout transpose)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  dtype = input_dtype(mode)
  if dtype == tf.float32:
    return dataset
  cast = lambda x: tf.cast(x, dtype)
  return dataset.map(
      lambda features, labels: (tf.nest.map_structure(cast, features),
                                labels),
      num_parallel_calls=tf.data.AUTOTUNE)
