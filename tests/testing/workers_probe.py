"""Run by tests/conftest_test.py in a pytest of its own (`-n 2`): each
worker writes what it was given (the thread settings, its temporary
directory, the garbage collections pytest runs at its end) to a JSON file
under $PROBE_OUT."""

import json
import os
import tempfile


def test_record_what_the_worker_sees(pytestconfig):
  record = {name: os.environ.get(name) for name in (
      'TF_NUM_INTEROP_THREADS', 'TF_NUM_INTRAOP_THREADS',
      'OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS')}
  record['tempdir'] = tempfile.gettempdir()
  try:
    from _pytest import unraisableexception  # pylint: disable=g-import-not-at-top
    record['collections_at_end'] = pytestconfig.stash.get(
        unraisableexception.gc_collect_iterations_key, None)
  except (ImportError, AttributeError):
    record['collections_at_end'] = 'no such setting'
  worker = os.environ['PYTEST_XDIST_WORKER']
  with open(os.path.join(os.environ['PROBE_OUT'], f'{worker}.json'),
            'w') as f:
    json.dump(record, f)
