"""Test-wide settings: quiet TensorFlow, Ctrl-C as a terminal gives it, the
cores shared out among the workers, temporary files in memory, the
binaries' garbage-collector thresholds, fixed seeds where a test asks for
them, and the slowest files first."""

import atexit
import gc
import os
import shutil
import signal
import tempfile

import pytest

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

# A suite started in the background of a shell without job control (`make
# test &`, nohup) inherits SIGINT ignored, and so would every process it
# starts: the tests of Ctrl-C (a binary's one line, a pass that stops) need
# it caught, as from a terminal. Undone in the workers too (they inherit it).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
  signal.signal(signal.SIGINT, signal.default_int_handler)


# The machine's cores shared out among pytest-xdist's worker processes.
# TensorFlow (and NumPy's OpenBLAS, scikit-learn's OpenMP) size each
# process's thread pools to the whole machine; two workers on two cores then
# run four busy pools whose threads spin for each other's cores
# (bench/DECISIONS.md: the suite's CPU). Set in the workers only (xdist
# names their count), before TensorFlow or NumPy is imported (their pools
# read the settings once); the processes the tests start inherit them
# (`tests.testing.forked` keys its servers on such settings).
if 'PYTEST_XDIST_WORKER_COUNT' in os.environ:
  _THREADS = str(max(1, len(os.sched_getaffinity(0)) //
                     int(os.environ['PYTEST_XDIST_WORKER_COUNT'])))
  for _name in ('TF_NUM_INTEROP_THREADS', 'TF_NUM_INTRAOP_THREADS',
                'OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS'):
    os.environ.setdefault(_name, _THREADS)

# The suite's temporary files (checkpoints, events files, datasets, models:
# about 400 MB a run) in memory, in a directory of their own that the run
# removes when it exits, where the machine's /dev/shm has room to spare and
# TMPDIR is not set: the tests' writes do not wait on the disk
# (bench/DECISIONS.md). Made in the first process (pytest, or xdist's
# controller) when pytest is configured, before any worker starts: the
# workers and every process they start inherit TMPDIR.
_SHM = '/dev/shm'
_SHM_SPARE = 4 << 30  # Bytes free there, at least.


def _memory_tmpdir():
  """A fresh directory under /dev/shm for TMPDIR, or None (not set here)."""
  if 'TMPDIR' in os.environ or 'PYTEST_XDIST_WORKER' in os.environ:
    return None
  try:
    stat = os.statvfs(_SHM)
  except OSError:
    return None
  if (stat.f_bavail * stat.f_frsize < _SHM_SPARE or
      not os.access(_SHM, os.W_OK | os.X_OK)):
    return None
  return tempfile.mkdtemp(prefix='tunas_tf_tests_', dir=_SHM)


def pytest_configure(config):
  _no_collections_at_the_end(config)
  path = _memory_tmpdir()
  if path:
    os.environ['TMPDIR'] = path
    tempfile.tempdir = None  # `gettempdir` reads TMPDIR again.
    # Removed at exit, after the cleanups the tests register (registered
    # later, they run first: TF's test temp directory lives in it).
    atexit.register(shutil.rmtree, path, ignore_errors=True)


def _no_collections_at_the_end(config):
  """pytest's unraisable-exception plugin ends each session (a worker's) by
  collecting garbage five times, to report what the collected objects'
  finalizers raise: with the graphs of a worker's tests alive, 2-3 s of
  worker CPU at the end of each run (the suite's and the numerics pass's).
  None here: what finalizers raise during the tests is still reported, and
  what the interpreter's exit collects Python prints on stderr."""
  try:
    from _pytest import unraisableexception  # pylint: disable=g-import-not-at-top
    config.stash[unraisableexception.gc_collect_iterations_key] = 0
  except (ImportError, AttributeError):  # An older pytest: no such setting.
    pass


# The binaries' garbage-collector thresholds (`process.GC_THRESHOLDS`) for
# the tests that build graphs in the test process too.
from tunas_tf.cli import process as _process  # pylint: disable=g-import-not-at-top,wrong-import-position
gc.set_threshold(*_process.GC_THRESHOLDS)

# The files that take 10 s or more of a worker (the slowest first, as
# `--durations` showed them on 2 cores). Handed out first (the Makefile runs
# xdist with --no-loadscope-reorder, which keeps this order), they no longer
# end the run on one worker while the other idles.
SLOWEST_FIRST = (
    'tests/integration/search_test.py',
    'tests/integration/demo_test.py',
    'tests/integration/search_engines_test.py',
    'tests/integration/imagenet_recipe_test.py',
    'tests/integration/non_finite_test.py',
    'tests/models/supernet_equivalence_test.py',  # The numerics pass's.
    'tests/train_eval/runner_test.py',
    'tests/tools/extract_architecture_test.py',
    'tests/integration/replicas_search_test.py',
    'tests/models/supernet_test.py',
    'tests/train_eval/export_test.py',
    'tests/search/task_test.py',
    'tests/search/task_xla_test.py',
    'tests/integration/train_eval_distribute_test.py',
    'tests/integration/remote_storage_test.py',
    'tests/integration/multiworker_test.py',
    'tests/integration/train_eval_test.py',
    'tests/tools/fit_cost_model_test.py',
    'tests/integration/train_eval_inherit_test.py',
    'tests/search/task_replicas_test.py',
    'tests/search/compare_test.py',
    'tests/search/steps_test.py',
    'tests/models/supernet_bfloat16_test.py',
    'tests/tools/measure_latency_test.py',
    'tests/cost_model/memory_test.py',
    'tests/data/unreadable_test.py',
    'tests/integration/engine_choice_test.py',
)


# The test files that exercise nothing of TensorFlow (pure Python and NumPy;
# `layout_test` checks that importing them imports no TensorFlow): marked
# `tf_free`, they run on the first stack only (`make test-all` runs the
# newest-TF stack without them). A directory ends with '/'.
TF_FREE = (
    'tests/search_space/',
    'tests/architecture_test.py',
    'tests/io/checks_test.py',
    'tests/io/errors_test.py',
    'tests/io/records_test.py',
    'tests/conftest_test.py',
    'tests/io/commands_test.py',
    'tests/docs_test.py',
    'tests/layout_test.py',
    'tests/makefile_test.py',
    'tests/io/native_output_test.py',
    'tests/data/local_data_test.py',
    'tests/runtime/cloud_tpu_test.py',
    'tests/runtime/cluster_test.py',
)


def tf_free(path: str) -> bool:
  return any(path == p or (p.endswith('/') and path.startswith(p))
             for p in TF_FREE)


def _rank(item) -> int:
  path = item.nodeid.split('::')[0]
  return (SLOWEST_FIRST.index(path) if path in SLOWEST_FIRST
          else len(SLOWEST_FIRST))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
  """Drops `tf.test.TestCase.test_session` (a deprecated helper, not a
  test), marks the `TF_FREE` files' tests `tf_free`, skips the tests marked
  `estimator` on a TF without one (`tests.testing.engine`) and puts the
  `SLOWEST_FIRST` files first, the rest in their order."""
  del config
  kept = [item for item in items if item.name != 'test_session']
  for item in kept:
    if tf_free(item.nodeid.split('::')[0]):
      item.add_marker(pytest.mark.tf_free)
  if any(item.get_closest_marker('estimator') for item in kept):
    from tests.testing import engine  # pylint: disable=g-import-not-at-top
    if not engine.estimator.has_estimator():
      skip = pytest.mark.skip(reason=engine.NEEDS_ESTIMATOR)
      for item in kept:
        if item.get_closest_marker('estimator'):
          item.add_marker(skip)
  items[:] = sorted(kept, key=_rank)  # Stable: the rest keep their order.
