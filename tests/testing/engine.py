"""Which tests this TF can run: the ones that train or evaluate on the
Estimator engine need `tf.estimator` (TF 2.15).

Such a test carries the marker `estimator` (tests/conftest.py skips it on a
TF without one, saying why); the shared runs (`searches.finished_search`,
`train_eval_runs`) call `skip_without_estimator`, so a test that needs one
is skipped where it asks for it.
"""

import unittest

from tunas_tf.runtime import estimator

NEEDS_ESTIMATOR = 'needs tf.estimator (TF <= 2.15)'


def skip_without_estimator() -> None:
  """Skips the calling test (or class set-up) on a TF without Estimator."""
  if not estimator.has_estimator():
    raise unittest.SkipTest(NEEDS_ESTIMATOR)
