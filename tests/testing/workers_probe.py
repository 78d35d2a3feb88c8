"""Run by tests/conftest_test.py in a pytest of its own (`-n 2`): each
worker writes what it was given (the thread settings, its temporary
directory) to a JSON file under $PROBE_OUT."""

import json
import os
import tempfile


def test_record_what_the_worker_sees():
  record = {name: os.environ.get(name) for name in (
      'TF_NUM_INTEROP_THREADS', 'TF_NUM_INTRAOP_THREADS',
      'OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS')}
  record['tempdir'] = tempfile.gettempdir()
  worker = os.environ['PYTEST_XDIST_WORKER']
  with open(os.path.join(os.environ['PROBE_OUT'], f'{worker}.json'),
            'w') as f:
    json.dump(record, f)
