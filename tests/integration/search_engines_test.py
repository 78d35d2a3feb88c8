"""The two engines run the same search: several learning steps of the
Estimator's model_fn and of the distribute engine, from the same
checkpoint, agree in every variable and every summary.

The search's task (`search.task.SearchTask`) is written once; the engines
are its adapters, and this is where their differences would show. The
runs: `digits_search` (two skippable layers, whose `tf.cond`s read the
weights in a TF1 graph only through their predicates: the stale validation
read of 33ac2da lived there), 6 steps with the controller learning from
step 0 (no warm-ups, no RL delay, so the reward, the baseline, Adam and the
sampled architectures all move), a summary every step; in sampled mode on
one replica, and in masked mode on two (each of the two is a path of its
own through the task; together in one run, as a search can run them), and
three (cost model, target) pairs taking turns in sampled mode. The
Estimator runs each from scratch
(model.ckpt-0, model.ckpt-6); the distribute engine runs from a copy of its
model.ckpt-0. Processes of their own (op determinism and the CPU split for
two replicas are process-wide), in two chains side by side: the Estimator's
single-replica runs then the distribute engine's, under this machine's
default kernels, and the Estimator's two replicas then the distribute
engine's, under the other kernels (`tests.testing.other_kernels`: Eigen's
where oneDNN's are the default, or the reverse). Both summation orders are
seen in the suite's one run, so the test is not among the `numerics` ones
that `make test` runs again.
"""

import concurrent.futures
import glob
import os
import shutil
import sys
import tempfile
import textwrap
from typing import Dict

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
import pytest

from tunas_tf.runtime import lifecycle
from tunas_tf.runtime import preemption
from tunas_tf.runtime import resume
from tunas_tf.search import runner
from tunas_tf.search import task as task_lib
from tests.testing import other_kernels
from tests.testing import searches
from tests.testing import forked

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_STEPS = 6
# A validation batch of 4 x 64 images and a peak model learning rate of 1
# (4 x 64 / 256): weights that move enough in a step for a stale read of
# them to change the validation accuracy (with 16 images and the default
# rate, 33ac2da's stale read changed nothing in 8 steps).
_FLAGS = (f'--max_steps={_STEPS}', '--train_batch_size=64',
          '--model_learning_rate=4', '--tpu_iterations_per_loop=1',
          f'--save_checkpoints_steps={_STEPS}',
          '--rl_delay_steps_fraction=0', '--rl_learning_rate=1.0',
          '--increase_ops_warmup_steps_fraction=0',
          '--increase_filters_warmup_steps_fraction=0', '--deterministic')
# The runs, by name: their flags beyond _FLAGS.
RUNS = {'sampled': (),
        'masked_two_replicas': ('--supernet_mode=masked', '--replicas=2'),
        # Three policies taking turns (the state of two kept on each step).
        'three_pairs': ('--rl_cost_model_target=150000,220000,330000',)}

# Tolerance of |estimator - distribute| <= _ATOL + _RTOL * |estimator|, for
# float32 (unit roundoff u = 2^-24 = 6e-8). The engines run the same ops
# with other kernels and fusions (a TF1 graph without Grappler; a
# tf.function with it), so sums are taken in other orders: a sum of n terms
# then differs by up to ~n u relative (worst case), ~sqrt(n) u typically.
# The largest sums here run over a batch's 64 x 8 x 8 = 4096 positions:
# <= 2.4e-4 of a gradient relative (worst case), ~4e-6 typically, of a
# weight's move; values of order 1 (a loss, a log-prob, RMSProp's mean
# square near 1, Adam's moments) are rounded to within _RTOL = 1e-5 (~170 u).
# Seen: 0 (bitwise) on a Zen 4 EPYC under oneDNN's kernels, every run. The
# stale validation read of 33ac2da put whole images of accuracy
# (1/256 = 3.9e-3) between the engines from step 0; a data-order bug put
# 5e-3 between the classifier weights.
_RTOL, _ATOL = 1e-5, 1e-6


def _config(model_dir: str, run: str, *extra: str):
  return searches.search_config(model_dir, *_FLAGS, *RUNS[run], *extra)


def _train(engine, config) -> None:
  trained = engine.train(
      task_lib.SearchTask(config), max_steps=_STEPS,
      stop=preemption.StopRequest(), run_name='the search',
      resume=resume.resume_point(config.job.model_dir))
  assert trained.step == _STEPS, trained


def estimator_run(root: str, run: str) -> None:
  """`root`/`run`/estimator, from scratch."""
  config = _config(os.path.join(root, run, 'estimator'), run)
  lifecycle.use_determinism(config.job)
  _train(runner.make_engine(config), config)


def distribute_run(root: str, run: str) -> None:
  """`root`/`run`/distribute, from a copy of the Estimator's model.ckpt-0."""
  target = os.path.join(root, run, 'distribute')
  os.makedirs(target)
  for path in glob.glob(os.path.join(root, run, 'estimator',
                                     'model.ckpt-0.*')):
    shutil.copy(path, target)
  with open(os.path.join(target, 'checkpoint'), 'w') as f:
    f.write('model_checkpoint_path: "model.ckpt-0"\n')
  config = _config(target, run, '--engine=distribute')
  engine = runner.make_engine(config)
  assert engine.strategy.num_replicas_in_sync == config.replicas  # First.
  lifecycle.use_determinism(config.job)
  _train(engine, config)


_RUN = textwrap.dedent('''
    import os, sys
    from tensorflow.python.util import _pywrap_util_port
    from tests.integration import search_engines_test as t
    # The kernels asked for are those in use.
    asked = os.environ.get('TF_ENABLE_ONEDNN_OPTS')
    assert asked is None or _pywrap_util_port.IsMklEnabled() == (
        asked == '1'), asked
    if sys.argv[2] == 'estimator':
      t.estimator_run(sys.argv[1], sys.argv[3])
    else:
      t.distribute_run(sys.argv[1], sys.argv[3])
''')


def _python(root: str, *args: str, kernels: Dict[str, str]) -> None:
  """Runs `_RUN` with `args`, under `kernels` (environment settings)."""
  process = forked.run_one(
      [sys.executable, '-c', _RUN, root, *args], cwd=_ROOT, timeout=1200,
      env=dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL='3',
               **kernels))
  assert process.returncode == 0, process.stderr[-3000:]


def _assert_close(estimator, distribute_, name):
  np.testing.assert_allclose(distribute_, estimator, rtol=_RTOL, atol=_ATOL,
                             err_msg=name)


@pytest.mark.estimator
class EnginesTest(parameterized.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.root = tempfile.mkdtemp()

    def chain(runs, kernels):
      for run in runs:
        _python(cls.root, 'estimator', run, kernels=kernels)
        _python(cls.root, 'distribute', run, kernels=kernels)

    other = dict([other_kernels.other_setting().split('=')])
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
      for done in [pool.submit(chain, runs, kernels) for runs, kernels in (
          (('sampled', 'three_pairs'), {}), (('masked_two_replicas',), other))]:
        done.result()

  def _dirs(self, run):
    return (os.path.join(self.root, run, 'estimator'),
            os.path.join(self.root, run, 'distribute'))

  @parameterized.named_parameters((run, run) for run in RUNS)
  def test_every_variable_agrees(self, run):
    """Weights, controller logits, baseline, both optimizers' slots and
    Adam's powers, the global step: every variable of the Estimator's
    checkpoint, by name, after 6 steps."""
    estimator, distribute_ = self._dirs(run)
    start = resume.reader(os.path.join(estimator, 'model.ckpt-0'))
    theirs = resume.reader(os.path.join(estimator, f'model.ckpt-{_STEPS}'))
    ours = resume.reader(os.path.join(distribute_, f'model.ckpt-{_STEPS}'))
    names = sorted(theirs.get_variable_to_shape_map())
    for prefix in ('blocks/', 'classifier/', 'rl_controller/logits/',
                   'rl_baseline/', 'controller_adam/m/', 'controller_adam/v/',
                   'controller_adam/beta2_power'):
      self.assertTrue(any(n.startswith(prefix) for n in names), prefix)
    self.assertTrue(any(n.endswith('/RMSProp_1') for n in names))
    self.assertEqual(theirs.get_tensor('global_step'), _STEPS)
    moved = {'weights': 0.0, 'controller': 0.0}
    for name in names:
      self.assertTrue(ours.has_tensor(name), name)
      value = theirs.get_tensor(name)
      _assert_close(value, ours.get_tensor(name), name)
      change = np.max(np.abs(value - start.get_tensor(name)))
      if name.startswith(('blocks/', 'classifier/')) and (
          not name.endswith(('/RMSProp', '/RMSProp_1'))):
        moved['weights'] = max(moved['weights'], change)
      if name.startswith('rl_controller/'):
        moved['controller'] = max(moved['controller'], change)
    # The steps moved the weights and the controller far more than the
    # tolerance.
    self.assertGreater(moved['weights'], 1000 * _ATOL)
    self.assertGreater(moved['controller'], 1000 * _ATOL)

  @parameterized.named_parameters((run, run) for run in RUNS)
  def test_every_summary_agrees(self, run):
    estimator, distribute_ = self._dirs(run)
    theirs, ours = searches.events(estimator), searches.events(distribute_)
    self.assertEqual(sorted(ours), sorted(theirs))
    self.assertEqual(set(searches.scalar_tags()) - set(theirs), set())
    for tag, values in theirs.items():
      self.assertEqual(sorted(values), list(range(_STEPS)), tag)
      self.assertEqual(sorted(ours[tag]), list(range(_STEPS)), tag)
      for step, value in values.items():
        _assert_close(value, ours[tag][step], f'{tag} at step {step}')
    # The controller learned: the advantage was not 0 throughout.
    self.assertGreater(max(abs(v) for v in
                           theirs['rlcontroller/advantage'].values()), 1e-3)
    theirs, ours = searches.images(estimator), searches.images(distribute_)
    self.assertEqual(sorted(ours), sorted(theirs))
    for tag, values in theirs.items():
      self.assertEqual(sorted(ours[tag]), sorted(values), tag)


if __name__ == '__main__':
  absltest.main()
