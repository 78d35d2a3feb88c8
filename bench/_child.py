"""Runs one search or train_eval in this process and reports its timings.

Used by the benchmarks (`bench/startup.py`, `bench/search_step.py`,
`bench/memory.py`, `bench/engines.py`, `bench/search_semantics.py`,
`bench/allocator.py`), each child in a fresh process:

  python bench/_child.py search|train_eval STOP_AFTER OUTPUT_JSON \
      [--noarchitectures] [--grappler] [--nograppler]
      [--grappler_off=PASS,...] -- FLAGS...

On the Estimator engine it wraps the model_fn that
`estimator.make_estimator` receives so that the graph build is timed and a
hook is added to the training hooks. The hook records when the TF session
exists, how long each step takes and when it ends, and after `STOP_AFTER`
steps writes a JSON record to OUTPUT_JSON and leaves the process at once (no
final checkpoint, no evaluation, no export): seconds since the process
started at each phase, per-step seconds, each step's end (`step_end_s`, and
the process's CPU seconds then, `step_end_cpu_s`), the sampled architecture
of each step (search only: the argmax of every mask; not with
`--noarchitectures`) and the peak RSS.

On the distribute engine (`--engine=distribute`, or no `--engine` where TF
has no Estimator: the binaries' own default; `engine` in the record says
which ran) it wraps the loop function of `runtime.distribute` instead (both
binaries train through it): the first call is traced on its own
(`get_concrete_function`, timed) and then run as one step followed by the
rest of its loop, so that the first step's end is known; every loop's end
is recorded, no loop runs past `STOP_AFTER` steps, and after the loop that
reaches them the record is written and the process left as above. Its
fields: seconds since the process started when the variables existed
(`variables_built_s`), the tracing started (`trace_start_s`: the checkpoint
of step 0 saved and the dataset made) and ended (`graph_built_s`) and the
first step ended (`first_step_s`), the traced loop's op count
(`graph_ops`), `loop_steps`, `loop_start_s` (when the engine called it),
`loop_end_s` and `loop_end_cpu_s` of each loop, the tracing count and the
peak RSS. On both engines each phase's
`..._s` has a `..._cpu_s`: the process's CPU seconds (user + system, all
threads) at that point.

With `BENCH_PROFILE=PATH` in the environment, the Estimator's model_fn runs
under cProfile and its statistics are written to PATH (for `pstats`), its
graph (function library included) to PATH.graph.pb.

`--grappler` runs the search with all of Grappler (TF's graph optimiser),
on either engine: the Estimator's sessions without `no_grappler_config`,
the distribute engine's loop without `runner.distribute_grappler_off()`;
`--grappler_off=PASS,...` that loop without those passes instead
(`distribute.grappler_without`'s names). `--nograppler` turns Grappler off
for `tf.function` graphs (`tf.config.optimizer.set_experimental_options`).
"""

from __future__ import annotations

import time

_PROCESS_START = time.time()

# pylint: disable=g-import-not-at-top,wrong-import-position
import json
import os
import resource
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import flags
import tensorflow as tf

from tunas_tf.runtime import estimator
from tunas_tf.search import steps as search_steps

_IMPORTED = time.time()
_IMPORTED_CPU = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
_SAMPLED = {}


def _since_start(t: float) -> float:
  return round(t - _PROCESS_START, 3)


def _cpu_s() -> float:
  """CPU seconds (user + system, all threads) the process has used."""
  usage = resource.getrusage(resource.RUSAGE_SELF)
  return usage.ru_utime + usage.ru_stime


class _TimingHook(tf.compat.v1.train.SessionRunHook):
  """Times the session start and each step; exits after `stop_after`."""

  def __init__(self, record, stop_after: int, output: str):
    self._record, self._stop, self._output = record, stop_after, output
    self._fetches = {}
    if _SAMPLED:
      self._fetches = {path: tf.argmax(mask) for path, mask in
                       _SAMPLED.items()}

  def after_create_session(self, session, coord):
    del session, coord
    self._record['session_created_s'] = _since_start(time.time())
    self._record['session_created_cpu_s'] = _cpu_s()
    self._record['step_s'] = []
    self._record['step_end_s'] = []
    self._record['step_end_cpu_s'] = []
    self._record['architectures'] = []

  def before_run(self, run_context):
    del run_context
    self._start = time.perf_counter()
    return tf.compat.v1.train.SessionRunArgs(self._fetches)

  def after_run(self, run_context, run_values):
    del run_context
    self._record['step_s'].append(time.perf_counter() - self._start)
    self._record['step_end_s'].append(time.time() - _PROCESS_START)
    self._record['step_end_cpu_s'].append(_cpu_s())
    if self._fetches:
      self._record['architectures'].append(
          {path: int(v) for path, v in run_values.results.items()})
    if len(self._record['step_s']) == 1:
      self._record['first_step_s'] = _since_start(time.time())
      self._record['first_step_cpu_s'] = _cpu_s()
    if len(self._record['step_s']) >= self._stop:
      _finish(self._record, self._output)


def _finish(record, output: str) -> None:
  """Writes the record with the peak RSS and leaves the process at once."""
  record['max_rss_mb'] = (
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)
  with open(output, 'w') as f:
    json.dump(record, f)
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(0)  # pylint: disable=protected-access


def _patch_distribute(record, stop_after: int, output: str) -> None:
  """Times the distribute engine's variables, trace and loops."""
  from tunas_tf.runtime import distribute  # pylint: disable=g-import-not-at-top
  init = distribute._Run.__init__  # pylint: disable=protected-access
  record['loop_steps'], record['loop_end_s'] = [], []
  record['loop_start_s'], record['loop_end_cpu_s'] = [], []

  def loop_ended(steps: int) -> None:
    record['loop_steps'].append(steps)
    record['loop_end_s'].append(time.time() - _PROCESS_START)
    record['loop_end_cpu_s'].append(_cpu_s())

  def timed(loop):
    def call(iterator, steps):
      # No more steps than asked for (the loop's length is a tensor: the
      # same trace).
      steps = tf.minimum(tf.cast(steps, tf.int64),
                         stop_after - sum(record['loop_steps']))
      record['loop_start_s'].append(time.time() - _PROCESS_START)
      if record['loop_end_s']:
        out = loop(iterator, steps)
        out[-1].numpy()
        loop_ended(int(steps))
      else:  # The first call: trace, one step, then the rest of the loop.
        one = tf.constant(1, tf.int64)
        record['trace_start_s'] = _since_start(time.time())
        record['trace_start_cpu_s'] = _cpu_s()
        traced = loop.get_concrete_function(iterator, one)
        record['graph_built_s'] = _since_start(time.time())
        record['graph_ops'] = len(traced.graph.get_operations())
        record['graph_built_cpu_s'] = _cpu_s()
        out = loop(iterator, one)
        out[-1].numpy()
        record['first_step_s'] = _since_start(time.time())
        record['first_step_cpu_s'] = _cpu_s()
        if int(steps) > 1:
          first = out
          out = loop(iterator, steps - 1)
          # (last, last mean, kept, kept_at): the step written, if any,
          # was the first one.
          if int(out[-1]) < 0:
            out = (*out[:-2], first[-2], first[-1])
          out[-1].numpy()
        loop_ended(int(steps))
        record['tracing_count'] = loop.experimental_get_tracing_count()
      if sum(record['loop_steps']) >= stop_after:
        _finish(record, output)
      return out
    return call

  def patched_init(self, *args, **kwargs):
    init(self, *args, **kwargs)
    record['variables_built_s'] = _since_start(time.time())
    record['variables_built_cpu_s'] = _cpu_s()
    self.loop = timed(self.loop)

  distribute._Run.__init__ = patched_init  # pylint: disable=protected-access


def _patch(record, stop_after: int, output: str,
           architectures: bool = True, grappler: bool = False) -> None:
  """Times the model_fn and adds the timing hook to its training hooks
  (which fetches each step's sampled architecture when `architectures`);
  with `grappler`, the sessions run Grappler."""
  make_estimator = estimator.make_estimator
  sample_architecture = search_steps.sample_architecture

  def sample_and_keep(spec, *args, **kwargs):
    from tunas_tf.search_space import schema
    sampled, dist_info = sample_architecture(spec, *args, **kwargs)
    for path, oneof in schema.flatten_with_paths(sampled):
      if oneof.mask is not None:
        _SAMPLED[path] = oneof.mask
    return sampled, dist_info

  def patched(model_fn, *args, **kwargs):
    def timed_model_fn(features, labels, mode, params):
      start = time.time()
      # With replicas the model_fn runs once per replica: the first's start.
      record.setdefault('graph_build_start_s', _since_start(start))
      record.setdefault('graph_build_start_cpu_s', _cpu_s())
      profile_path = os.environ.get('BENCH_PROFILE')
      if profile_path:  # cProfile of the graph build, for pstats.
        import cProfile  # pylint: disable=g-import-not-at-top
        profiler = cProfile.Profile()
        spec = profiler.runcall(model_fn, features, labels, mode, params)
        profiler.dump_stats(profile_path)
        with open(profile_path + '.graph.pb', 'wb') as f:
          f.write(tf.compat.v1.get_default_graph().as_graph_def()
                  .SerializeToString())
      else:
        spec = model_fn(features, labels, mode, params)
      record['graph_built_s'] = _since_start(time.time())
      record['graph_built_cpu_s'] = _cpu_s()
      record['graph_ops'] = len(tf.compat.v1.get_default_graph()
                                .get_operations())
      if mode != tf.estimator.ModeKeys.TRAIN:
        return spec
      hooks = list(spec.training_hooks or ())
      hooks.append(_TimingHook(record, stop_after, output))
      return spec._replace(training_hooks=tuple(hooks))
    if grappler:
      kwargs['optimize_graph'] = True
    return make_estimator(timed_model_fn, *args, **kwargs)

  estimator.make_estimator = patched
  if architectures:
    search_steps.sample_architecture = sample_and_keep


def main() -> None:
  kind, stop_after, output = sys.argv[1], int(sys.argv[2]), sys.argv[3]
  separator = sys.argv.index('--')
  options = sys.argv[4:separator]
  argv = [kind] + sys.argv[separator + 1:]
  record = {'kind': kind, 'imported_s': _since_start(_IMPORTED),
            'imported_cpu_s': _IMPORTED_CPU}
  if '--nograppler' in options:
    tf.config.optimizer.set_experimental_options(
        {'disable_meta_optimizer': True})
  if '--grappler' in options:
    from tunas_tf.search import runner
    runner.distribute_grappler_off = lambda: ()
  for option in options:
    if option.startswith('--grappler_off='):
      from tunas_tf.search import runner
      passes = tuple(option.split('=', 1)[1].split(','))
      runner.distribute_grappler_off = lambda: passes
  from tunas_tf.runtime import estimator as estimator_lib  # pylint: disable=g-import-not-at-top
  engine = next((a.split('=', 1)[1] for a in argv if a.startswith('--engine=')),
                estimator_lib.default_engine())
  record['engine'] = engine
  if engine == 'distribute':
    _patch_distribute(record, stop_after, output)
  else:
    _patch(record, stop_after, output,
           architectures='--noarchitectures' not in options,
           grappler='--grappler' in options)
  values = flags.FlagValues()
  if kind == 'search':
    from tunas_tf import train_search
    from tunas_tf.search import runner
    train_search.define_flags(values)
    values(argv)
    runner.run_search(train_search.config_from_flags(values))
  elif kind == 'train_eval':
    from tunas_tf.train_eval import __main__ as train_eval_main
    from tunas_tf.train_eval import runner
    train_eval_main.define_flags(values)
    values(argv)
    runner.run(train_eval_main.config_from_flags(values))
  else:
    sys.exit(f'_child: unknown kind {kind!r}')
  sys.exit(f'_child: the run ended before {stop_after} steps')


if __name__ == '__main__':
  main()
