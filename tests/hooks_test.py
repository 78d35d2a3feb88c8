"""Tests of `hooks.ProgressHook` in a plain monitored session."""

from unittest import mock

from absl.testing import absltest
import tensorflow as tf

from tunas_tf import hooks


def _run(hook, train_op, runs):
  with tf.compat.v1.train.SingularMonitoredSession(hooks=[hook]) as session:
    for _ in range(runs):
      session.run(train_op)


class ProgressHookTest(absltest.TestCase):

  def _training_graph(self):
    step = tf.compat.v1.train.get_or_create_global_step()
    # The hook's fetch reads the step before the run's increment, as a fetch
    # of the global step beside the train op does.
    before = step.read_value()
    with tf.control_dependencies([before]):
      train_op = step.assign_add(1)
    return before, train_op

  def test_logs_every_n_steps_with_the_searchs_line(self):
    with tf.Graph().as_default():
      before, train_op = self._training_graph()
      hook = hooks.ProgressHook({'step': before, 'reward': tf.constant(0.5)},
                                max_step=6, log_every=2)
      with mock.patch.object(hooks.logging, 'info') as info:
        _run(hook, train_op, 6)
    # The first run only starts the clock (graph warm-up).
    self.assertEqual([c.args[1] for c in info.call_args_list], [2, 4, 6])
    for call in info.call_args_list:
      self.assertEqual(call.args[0], 'step %d/%d  %.2f steps/s  ETA %.0fs  %s')
      self.assertEqual(call.args[2], 6)
      self.assertEqual(call.args[5], 'reward=0.5')

  def test_training_images_per_second_and_start_step(self):
    record = {}
    with tf.Graph().as_default():
      before, train_op = self._training_graph()
      hook = hooks.ProgressHook({'step': before}, max_step=4, log_every=2,
                                images_per_step=10, num_cores=2,
                                record=record, record_key='rate')
      with mock.patch.object(hooks.logging, 'info') as info:
        _run(hook, train_op, 4)
    self.assertEqual(record['train_start_step'], 0)
    self.assertGreater(record['rate'], 0.0)
    self.assertEqual(len(info.call_args_list), 2)
    self.assertTrue(info.call_args_list[0].args[0].endswith('images/s'))

  def test_eval_counts_the_fetched_batch(self):
    record = {}
    with tf.Graph().as_default():
      batch = tf.constant(7)
      hook = hooks.ProgressHook({'batch': batch}, record=record,
                                record_key='eval_rate')
      with mock.patch.object(hooks.logging, 'info') as info:
        _run(hook, batch, 3)
    self.assertGreater(record['eval_rate'], 0.0)
    self.assertNotIn('train_start_step', record)
    info.assert_not_called()


if __name__ == '__main__':
  absltest.main()
