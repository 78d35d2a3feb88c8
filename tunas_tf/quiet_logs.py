"""TF's Python log, and other packages' progress notes, out of the binaries'
own lines.

Kept for the binaries' contract: a refusal is one line and the progress
lines are readable (tests/flags_test.py). Native log lines: `native_output`.
"""

import os


def quiet_tensorflow(verbose: bool) -> None:
  """TF's Python log once per line, and only errors unless `verbose`.

  TF's logger stops passing its lines on to absl's (each came twice). Unless
  `verbose` (`--verbosity` given), it keeps only errors, TF's Python
  `warnings` are ignored, and the INFO notes of TensorFlow Datasets,
  TensorFlow and matplotlib are dropped (`LibraryInfoFilter`).
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
