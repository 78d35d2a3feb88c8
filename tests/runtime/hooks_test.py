"""Tests of `hooks.ProgressHook` and `hooks.CheckpointSaverHook` in plain
monitored sessions."""

import glob
import os
import tempfile
from unittest import mock

from absl.testing import absltest
import tensorflow as tf

from tunas_tf.runtime import hooks


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
    # The first run only starts the clock (graph warm-up); the session's
    # close is announced.
    *lines, closing = info.call_args_list
    self.assertEqual([c.args[1] for c in lines], [2, 4, 6])
    self.assertEqual(closing.args, ('step %d/%d: closing the session (its last '
                                    'summaries and input pipeline)', 6, 6))
    for call in lines:
      self.assertEqual(call.args[0], 'step %d/%d  %.2f steps/s  ETA %.0fs  %s')
      self.assertEqual(call.args[2], 6)
      self.assertEqual(call.args[5], 'reward=0.5')

  def test_formats_write_a_fetch_their_way(self):
    with tf.Graph().as_default():
      before, train_op = self._training_graph()
      hook = hooks.ProgressHook(
          {'step': before, 'cost': tf.constant(1234.0),
           'reward': tf.constant(0.5)}, max_step=2, log_every=1,
          formats={'cost': lambda v: f'cost {v:,.0f} MACs'})
      with mock.patch.object(hooks.logging, 'info') as info:
        _run(hook, train_op, 2)
    self.assertEqual(info.call_args_list[-2].args[5],
                     'cost 1,234 MACs reward=0.5')

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
    self.assertEqual(len(info.call_args_list), 3)
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


def _event_kinds(logdir):
  """{kind: count} over the v1 events files of `logdir` (not the .v2 ones)."""
  kinds = {}
  for path in glob.glob(os.path.join(logdir, 'events.out.tfevents.*')):
    if path.endswith('.v2'):
      continue
    for record in tf.data.TFRecordDataset(path):
      kind = tf.compat.v1.Event.FromString(record.numpy()).WhichOneof('what')
      kinds[kind] = kinds.get(kind, 0) + 1
  return kinds


class CheckpointSaverHookTest(absltest.TestCase):

  def _train(self, model_dir, runs):
    """`runs` steps with the hook behind a summary hook, as in an Estimator."""
    with tf.Graph().as_default():
      step = tf.compat.v1.train.get_or_create_global_step()
      train_op = step.assign_add(1)
      summary = tf.compat.v1.summary.scalar('loss', tf.constant(1.0))
      # Made in the model_fn; MonitoredTrainingSession's SummarySaverHook
      # begins before the model_fn's hooks and asks for the writer first.
      saver_hook = hooks.CheckpointSaverHook(model_dir, save_steps=2)
      summary_hook = tf.compat.v1.train.SummarySaverHook(
          save_steps=1, output_dir=model_dir, summary_op=summary)
      tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.SAVERS,
                                     tf.compat.v1.train.Saver())
      with tf.compat.v1.train.MonitoredSession(
          tf.compat.v1.train.ChiefSessionCreator(checkpoint_dir=model_dir),
          hooks=[summary_hook, saver_hook]) as session:
        for _ in range(runs):
          session.run(train_op)

  def test_saves_checkpoints_and_writes_no_graph(self):
    model_dir = tempfile.mkdtemp()
    self._train(model_dir, 5)
    state = tf.train.get_checkpoint_state(model_dir)
    # At session creation, every 2 steps, and at the end.
    self.assertEqual(
        [os.path.basename(p) for p in state.all_model_checkpoint_paths],
        ['model.ckpt-0', 'model.ckpt-2', 'model.ckpt-4', 'model.ckpt-5'])
    self.assertEqual(glob.glob(os.path.join(model_dir, '*.meta')), [])
    self.assertFalse(os.path.exists(os.path.join(model_dir, 'graph.pbtxt')))
    # The last CHECKPOINT log is written after the summary hook's flush.
    tf.compat.v1.summary.FileWriterCache.get(model_dir).flush()
    kinds = _event_kinds(model_dir)
    self.assertNotIn('graph_def', kinds)
    self.assertNotIn('meta_graph_def', kinds)
    self.assertEqual(kinds['summary'], 5)
    # START, then CHECKPOINT at 0, 2, 4 and 5.
    self.assertEqual(kinds['session_log'], 5)
    # A second session restores step 5 and goes on from there.
    self._train(model_dir, 2)
    self.assertEqual(
        int(tf.train.load_checkpoint(model_dir).get_tensor('global_step')),
        7)

  def test_summaries_only_writer_is_the_shared_writer(self):
    model_dir = tempfile.mkdtemp()
    with tf.Graph().as_default():
      writer = hooks.summaries_only_writer(model_dir)
      self.assertIs(tf.compat.v1.summary.FileWriterCache.get(model_dir),
                    writer)
      self.assertIs(hooks.summaries_only_writer(model_dir), writer)
      writer.add_graph(tf.compat.v1.get_default_graph())
      writer.add_session_log(
          tf.compat.v1.SessionLog(status=tf.compat.v1.SessionLog.START), 0)
      writer.flush()
    self.assertEqual(_event_kinds(model_dir),
                     {'file_version': 1, 'session_log': 1})


if __name__ == '__main__':
  absltest.main()
