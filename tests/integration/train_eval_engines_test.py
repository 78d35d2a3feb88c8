"""train_eval on both engines (TF 2.15): the same four steps (EMA on) on the
same batches, the same evaluation, the same summary tags, and no restart on
the other engine."""

import os
import tempfile

from absl.testing import absltest
import numpy as np
import pytest

from tests.testing import train_eval_runs as runs
from tunas_tf.runtime import resume
from tunas_tf.train_eval import runner


_STEPS = 4


@pytest.mark.estimator
class EnginesAgreeTest(absltest.TestCase):
  """`runs.PINNED` four steps of its task on each engine from the same seed,
  with dropout, path dropout, L2 and an EMA; then each evaluated."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    root = tempfile.mkdtemp()
    args = [*runs.PINNED, f'--max_steps={_STEPS}', '--dropout_rate=0.2',
            '--path_dropout_rate=0.2', '--weight_decay=1e-2',
            '--moving_average_decay=0.9', '--noexport', *runs.TINY]
    cls.dirs, cls.metrics, cls.args = {}, {}, args
    for engine in ('estimator', 'distribute'):
      cls.dirs[engine] = os.path.join(root, engine)
      cls.metrics[engine] = runner.run(runs.config(
          *args, f'--model_dir={cls.dirs[engine]}', f'--engine={engine}'))

  def test_the_steps_update_alike(self):
    """Weights, RMSProp's slots and the EMA's shadows (its decay a function
    of the step) after 4 steps on the same batches."""
    readers = {engine: resume.reader(os.path.join(directory,
                                                  f'model.ckpt-{_STEPS}'))
               for engine, directory in self.dirs.items()}
    names = readers['estimator'].get_variable_to_shape_map()
    self.assertEqual(len([n for n in names if n.endswith('/RMSProp_1')]), 41)
    start = resume.reader(os.path.join(self.dirs['estimator'],
                                       'model.ckpt-0'))
    moved = 0
    for name in names:
      theirs = readers['estimator'].get_tensor(name)
      ours = readers['distribute'].get_tensor(name)
      # Every variable of the Estimator's checkpoint, its slots and shadows
      # too, is in ours under its name: measured equal to the bit (the same
      # ops on the same batches, on CPU); float32 rounding allowed.
      np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-7,
                                 err_msg=name)
      moved += not np.array_equal(theirs, start.get_tensor(name))
    self.assertGreater(moved, 150)

  def test_evaluations_agree(self):
    """metrics.json of both engines: one evaluation, summed in float64 over
    the 360 test images (top1, top5: counts; the losses: means of float32
    values, which the weights' float32 rounding above moves by ~1e-7)."""
    ours, theirs = self.metrics['distribute'], self.metrics['estimator']
    for key in ('global_step', 'params', 'macs', 'one_shot',
                'train_start_step'):
      self.assertEqual(ours[key], theirs[key], key)
    for key in ('top1', 'top5'):
      self.assertAlmostEqual(ours[key] * 360, theirs[key] * 360, places=6)
    self.assertAlmostEqual(ours['loss'], theirs['loss'], delta=1e-5)
    for engine, directory in self.dirs.items():
      self.assertEqual(runs.tags(os.path.join(directory, 'eval')),
                       runs.EVAL_TAGS, engine)
      self.assertEqual(runs.TRAIN_TAGS - runs.tags(directory), set(), engine)
      for key in ('train_images_per_sec', 'eval_images_per_sec'):
        self.assertGreater(self.metrics[engine][key], 0.0, (engine, key))

  def test_an_estimator_run_restarted_on_distribute_is_refused(self):
    with self.assertRaisesRegex(
        ValueError, "^[^\n]*: engine is 'estimator'[^\n]*'distribute'"):
      runner.run(runs.config(
          *self.args, f'--model_dir={self.dirs["estimator"]}',
          '--engine=distribute'))


if __name__ == '__main__':
  absltest.main()
