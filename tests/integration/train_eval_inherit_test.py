"""Tests of `--init_from_search` on the distribute engine: from a search of
either engine, the weights kept frozen, and the one-shot accuracy."""

import os
import tempfile

from absl.testing import absltest
import numpy as np
import pytest
import tensorflow as tf

from tests.testing import train_eval_runs as runs
from tunas_tf.data import datasets
from tunas_tf.graph import inherit
from tunas_tf.runtime import resume
from tunas_tf.search import oneshot
from tunas_tf.train_eval import runner


class _InheritanceTests:
  """Runs inheriting the weights of the search in `cls.search_dir`."""

  search_dir = None

  def test_freeze_inherited_trains_only_fresh_variables(self):
    model_dir = os.path.join(tempfile.mkdtemp(), 'frozen')
    # 12 classes: the classifier cannot be inherited (10 in the search).
    runner.run(runs.config(
        *runs.PINNED, f'--model_dir={model_dir}', '--engine=distribute',
        f'--init_from_search={self.search_dir}', '--freeze_inherited',
        '--num_classes=12', '--max_steps=5', '--noexport', *runs.TINY))
    search = inherit.read_supernet_values(
        tf.train.latest_checkpoint(self.search_dir))
    end = resume.reader(os.path.join(model_dir, 'model.ckpt-5'))
    inherited = 0
    for name, value in search.items():
      if name.startswith('classifier/') or not end.has_tensor(name):
        continue
      trained = end.get_tensor(name)
      np.testing.assert_array_equal(
          trained, value[tuple(slice(0, n) for n in trained.shape)],
          err_msg=name)
      inherited += 1
    self.assertGreater(inherited, 10)
    # The classifier is fresh and trained; the moving statistics (not in a
    # search's checkpoint) too.
    self.assertEqual(end.get_tensor('classifier/kernel').shape[-1], 12)
    self.assertTrue(end.has_tensor('classifier/kernel/RMSProp'))
    self.assertFalse(end.has_tensor(
        'blocks/0/layers/0/conv_k3/kernel/RMSProp'))

  def test_one_shot_accuracy_equals_the_supernets(self):
    model_dir = os.path.join(tempfile.mkdtemp(), 'one_shot')
    metrics = runner.run(runs.config(
        *runs.PINNED, f'--model_dir={model_dir}', '--engine=distribute',
        f'--init_from_search={self.search_dir}', '--eval_only', *runs.TINY))
    self.assertTrue(metrics['one_shot'])
    self.assertEqual(metrics['global_step'], 0)
    self.assertFalse(os.path.exists(os.path.join(model_dir, 'export')))
    # The masked supernet on the same weights and batches of 50.
    [expected] = oneshot.accuracies(self.search_dir, [runs.PINNED_INDICES],
                                    split=datasets.TEST, batch_size=50)
    self.assertAlmostEqual(metrics['top1'], expected, delta=1e-4)


class FromDistributeSearchTest(_InheritanceTests, absltest.TestCase):
  """From a search on the distribute engine (`runs.distribute_search`)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.search_dir = runs.distribute_search()


@pytest.mark.estimator
class FromEstimatorSearchTest(_InheritanceTests, absltest.TestCase):
  """From the shared search on the Estimator engine (`runs.search`)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.search_dir = runs.search().search_dir


if __name__ == '__main__':
  absltest.main()
