"""The two engines take the same step: one step of the Estimator's model_fn
and one of the distribute engine, from the same checkpoint, agree.

One process of its own (TF's kernels, `TF_ENABLE_ONEDNN_OPTS` included, are
chosen per process) runs the Estimator one step from scratch (model.ckpt-0,
model.ckpt-1), then the distribute engine one step from a copy of its
model.ckpt-0. Step 0 is in the op and filter warm-ups, before the RL delay.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

from absl.testing import absltest
import numpy as np
import pytest
import tensorflow as tf

from tunas_tf.runtime import distribute
from tunas_tf.runtime import preemption
from tunas_tf.runtime import resume
from tunas_tf.runtime import summaries
from tunas_tf.search import runner
from tunas_tf.search import trainer as trainer_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema
from tests.testing import searches

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_FLAGS = ('--max_steps=20', '--train_batch_size=16',
          '--tpu_iterations_per_loop=1', '--save_checkpoints_steps=1')

# Tolerance of |estimator - distribute| <= _ATOL + _RTOL * |estimator|, for
# float32 (unit roundoff u = 2^-24 = 6e-8). The engines run the same ops
# with other kernels and fusions (a TF1 graph without Grappler; a
# tf.function with it), so sums are taken in other orders: a sum of n terms
# then differs by up to ~n u relative (worst case), ~sqrt(n) u typically.
# The largest sums here run over a batch's 16 x 8 x 8 = 1024 positions:
# <= 6e-5 of a gradient, i.e. <= 6e-7 of a weight's move (<= 1e-2 here),
# under _ATOL; values of order 1 (a loss, a log-prob of -21, RMSProp's mean
# square near 1) are rounded to within _RTOL = 1e-5 (~170 u). Seen on this
# machine: <= 1.2e-7 on the variables (one ulp of 1), <= 4e-9 on the
# summaries. The data-order bug this guards against put 5e-3 between the
# engines' classifier weights.
_RTOL, _ATOL = 1e-5, 1e-6


def _decisions():
  spec = mobile.get_search_space('digits_search')
  return [(path, ops.choice_labels(oneof.choices))
          for path, oneof in schema.flatten_with_paths(spec)]


def run_both(root: str) -> None:
  """`root`/estimator: the Estimator's step 0; `root`/distribute: the
  distribute engine's, from the Estimator's model.ckpt-0."""
  estimator_dir = os.path.join(root, 'estimator')
  distribute_dir = os.path.join(root, 'distribute')
  config = searches.search_config(estimator_dir, *_FLAGS)
  runner.make_estimator(config).train(runner.make_input_fn(config),
                                      max_steps=1)
  os.makedirs(distribute_dir)
  for path in glob.glob(os.path.join(estimator_dir, 'model.ckpt-0.*')):
    shutil.copy(path, distribute_dir)
  with open(os.path.join(distribute_dir, 'checkpoint'), 'w') as f:
    f.write('model_checkpoint_path: "model.ckpt-0"\n')
  config = searches.search_config(distribute_dir, '--engine=distribute',
                                  *_FLAGS)
  decisions = _decisions()
  step = distribute.train(
      tf.distribute.get_strategy(), trainer_lib.SearchTrainer(config),
      trainer_lib.make_dataset_fn(config), job=config.job, max_steps=1,
      stop=preemption.StopRequest(), run_name='the search',
      summaries=lambda values, step: summaries.write_probabilities(
          decisions, values.__getitem__, step),
      grappler_off=runner.distribute_grappler_off())  # As the search.
  assert step == 1, step


_RUN = textwrap.dedent('''
    import sys
    from tests.search import engines_test as t
    t.run_both(sys.argv[1])
''')


def _assert_close(estimator, distribute_, name):
  np.testing.assert_allclose(distribute_, estimator, rtol=_RTOL, atol=_ATOL,
                             err_msg=name)


@pytest.mark.estimator
@pytest.mark.numerics
class EnginesTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    root = tempfile.mkdtemp()
    process = subprocess.run(
        [sys.executable, '-c', _RUN, root], cwd=_ROOT, text=True,
        capture_output=True, timeout=600,
        env=dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL='3'))
    assert process.returncode == 0, process.stderr[-3000:]
    cls.estimator = os.path.join(root, 'estimator')
    cls.distribute = os.path.join(root, 'distribute')

  def test_one_step_gives_the_same_variables(self):
    """Weights, controller logits, baseline, both optimizers' slots and
    Adam's powers, the global step: every variable of the Estimator's
    checkpoint, by name."""
    start = resume.reader(os.path.join(self.estimator, 'model.ckpt-0'))
    theirs = resume.reader(os.path.join(self.estimator, 'model.ckpt-1'))
    ours = resume.reader(os.path.join(self.distribute, 'model.ckpt-1'))
    names = sorted(theirs.get_variable_to_shape_map())
    for prefix in ('blocks/', 'classifier/', 'rl_controller/logits/',
                   'rl_baseline/', 'controller_adam/m/', 'controller_adam/v/',
                   'controller_adam/beta2_power'):
      self.assertTrue(any(n.startswith(prefix) for n in names), prefix)
    self.assertTrue(any(n.endswith('/RMSProp_1') for n in names))
    moved = 0.0
    for name in names:
      self.assertTrue(ours.has_tensor(name), name)
      value = theirs.get_tensor(name)
      _assert_close(value, ours.get_tensor(name), name)
      if name.startswith(('blocks/', 'classifier/')) and (
          not name.endswith(('/RMSProp', '/RMSProp_1'))):
        moved = max(moved, np.max(np.abs(value - start.get_tensor(name))))
    # The step moved the weights far more than the tolerance.
    self.assertGreater(moved, 1000 * _ATOL)

  def test_step_0_writes_the_same_summaries(self):
    theirs = searches.events(self.estimator)
    ours = searches.events(self.distribute)
    at_0 = lambda events: {tag: steps[0] for tag, steps in events.items()
                           if 0 in steps}
    theirs, ours = at_0(theirs), at_0(ours)
    self.assertEqual(sorted(ours), sorted(theirs))
    self.assertEqual(set(searches.scalar_tags()) - set(theirs), set())
    for tag, value in theirs.items():
      _assert_close(value, ours[tag], tag)
    self.assertEqual(sorted(searches.images(self.distribute)),
                     sorted(searches.images(self.estimator)))


if __name__ == '__main__':
  absltest.main()
