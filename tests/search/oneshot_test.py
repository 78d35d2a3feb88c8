"""`search.oneshot`: architectures scored with a search's shared weights.

Its agreement with `train_eval --init_from_search --eval_only` (the graph
module's inherited weights) is checked in tests/train_eval/runner_test.py.
"""

import os
import shutil
import tempfile

from absl.testing import absltest
import numpy as np
import pytest
import tensorflow as tf

from tunas_tf.data import datasets
from tunas_tf.models import supernet as supernet_lib
from tunas_tf.search import oneshot
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema
from tests.testing import searches


def _reference_top1(search_dir, indices):
  """Eager, one architecture at a time: the supernet with the latest
  checkpoint's weights on digits' test split in batches of 50."""
  space = mobile.get_search_space('digits_search')
  net = supernet_lib.Supernet(space, 10, mode='sampled', input_channels=1)
  reader = searches.reader(search_dir)
  for name, variable in net.variables_by_name().items():
    variable.assign(reader.get_tensor(name))
  sampled = schema.with_masks(space, [
      tf.one_hot(i, n) for i, n in zip(schema.parse_indices(indices),
                                       schema.num_choices(space))])
  correct = total = 0
  for images, labels in datasets.eval_dataset('digits', 'test', 10, 50):
    logits = net(sampled, images, training=False)
    correct += int(np.sum(np.argmax(logits, -1) == np.argmax(labels, -1)))
    total += int(images.shape[0])
  return correct / total


class AccuraciesTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.search_dir = searches.finished_search()
    space = mobile.get_search_space('digits_search')
    cls.largest = schema.format_indices(schema.extreme_indices(space, True))
    cls.smallest = schema.format_indices(schema.extreme_indices(space, False))

  def test_each_architecture_gets_its_own_masks(self):
    # The masks are tf.function arguments: a trace reused with the first
    # architecture's masks would score the second as the first.
    scores = oneshot.accuracies(
        self.search_dir, [self.largest, self.smallest, self.largest],
        split=datasets.TEST, batch_size=50)
    expected = [_reference_top1(self.search_dir, self.largest),
                _reference_top1(self.search_dir, self.smallest)]
    self.assertEqual(scores, [expected[0], expected[1], expected[0]])

  def test_default_split_is_the_search_hold_out(self):
    [score] = oneshot.accuracies(self.search_dir, [self.largest])
    self.assertBetween(score, 0.0, 1.0)
    # A count of correct images over the hold-out's size (not the test
    # split's 360).
    size = len(datasets.digits_arrays()[datasets.SEARCH_VALIDATION][1])
    self.assertNotEqual(size, 360)
    self.assertAlmostEqual(score * size, round(score * size), places=6)

  def test_bad_indices_name_the_problem(self):
    with self.assertRaisesRegex(ValueError, r'18'):
      oneshot.accuracies(self.search_dir, ['1:2:3'])
    bad = self.largest.split(':')
    bad[0] = '9'
    with self.assertRaisesRegex(ValueError, r'9'):
      oneshot.accuracies(self.search_dir, [':'.join(bad)])

  def test_a_checkpoint_of_something_else_is_refused(self):
    search_dir = os.path.join(tempfile.mkdtemp(), 'search')
    os.makedirs(search_dir)
    shutil.copy(os.path.join(self.search_dir, 'config.json'), search_dir)
    other = tf.train.Checkpoint(weight=tf.Variable(tf.zeros([3])))
    prefix = other.write(os.path.join(search_dir, 'other'))
    with self.assertRaisesRegex(ValueError, r'not a digits_search search'):
      oneshot.accuracies(search_dir, [self.largest], checkpoint=prefix)
    with self.assertRaisesRegex(ValueError, r'no checkpoint'):
      oneshot.accuracies(search_dir, [self.largest])


if __name__ == '__main__':
  absltest.main()
