"""TF's Python log, and other packages' progress notes, out of the binaries'
own lines.

Kept for the binaries' contract: a refusal is one line and the progress
lines are readable (tests/flags_test.py); without it each Estimator line
came twice and TF's INFO lines and deprecation warnings, TFDS's three notes
per split read and matplotlib's font-cache note came between them. (Native
log lines at import: `native_output`.)
"""

import os


def quiet_tensorflow(verbose: bool) -> None:
  """TF's Python log once per line, and only errors unless `verbose`.

  TF's logger has a handler of its own and also passed its lines to absl's,
  so each Estimator line came twice; its INFO lines and deprecation warnings
  hid the binaries' progress lines. Unless `verbose` (`--verbosity` given),
  the logger keeps only errors, TF's Python `warnings` are ignored, and
  INFO lines logged through absl from inside TensorFlow Datasets (three per
  split read: "Load dataset info ...", "Creating a tf.data.Dataset reading 1
  files ...", "Constructing ...") or TensorFlow (TF 2.16+: "Sharding
  callback duration" per checkpoint; a SavedModel export's "Function ...
  contains input name(s) ... with unsupported characters"), or through
  `logging` from inside matplotlib (its first import: "generated new
  fontManager"), are dropped (`LibraryInfoFilter`).
  """
  import logging  # pylint: disable=g-import-not-at-top
  import warnings  # pylint: disable=g-import-not-at-top
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
  logger = logging.getLogger('tensorflow')
  logger.propagate = False
  if not verbose:
    logger.setLevel(logging.ERROR)
    warnings.filterwarnings(
        'ignore', module=r'(tensorflow|tensorflow_estimator|keras)(\.|$)')
    handler = absl_logging.get_absl_handler()
    if not any(isinstance(f, LibraryInfoFilter) for f in handler.filters):
      handler.addFilter(LibraryInfoFilter())


class LibraryInfoFilter:
  """A `logging` filter: drops records below WARNING logged from inside the
  `tensorflow_datasets`, `tensorflow` (through absl) or `matplotlib`
  (through `logging`) packages: progress notes of theirs, none of which
  says anything about the run."""

  _PACKAGES = tuple(f'{os.sep}{name}{os.sep}'
                    for name in ('tensorflow_datasets', 'tensorflow',
                                 'matplotlib'))

  def filter(self, record) -> bool:
    return (record.levelno >= 30 or  # logging.WARNING
            not any(p in record.pathname for p in self._PACKAGES))
