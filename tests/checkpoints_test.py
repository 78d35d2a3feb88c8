"""Tests of `checkpoints`: error lines, search checkpoints, supernet values."""

import json
import os
import tempfile

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from tunas_tf import checkpoints


def _write_checkpoint(directory, values):
  """A TF1-style checkpoint of `values` ({name: array}) in `directory`."""
  with tf.Graph().as_default():
    variables = [tf.compat.v1.get_variable(name, initializer=value)
                 for name, value in values.items()]
    saver = tf.compat.v1.train.Saver(variables)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      return saver.save(session, os.path.join(directory, 'model.ckpt'),
                        global_step=3)


class CheckpointsTest(absltest.TestCase):

  def test_op_error_reason_skips_the_noise(self):
    error = tf.errors.DataLossError(
        None, None, 'Graph execution error:\n\nDetected at node x\n'
        '  File "a.py", line 3\ntruncated record at 12\n[[{{node y}}]]')
    self.assertEqual(checkpoints.op_error_reason(error),
                     'truncated record at 12')

  def test_refuse_unreadable_names_the_checkpoint(self):
    error = tf.errors.DataLossError(None, None, 'Restore failed: bad data')
    with self.assertRaisesRegex(
        ValueError, r'Cannot resume from /d/model.ckpt-5: Restore failed: '
        'bad data; remove the broken checkpoint'):
      with checkpoints.refuse_unreadable('/d/model.ckpt-5'):
        raise error
    with self.assertRaises(tf.errors.DataLossError):  # A fresh run.
      with checkpoints.refuse_unreadable(None):
        raise error
    other = tf.errors.InternalError(None, None, 'out of memory')
    with self.assertRaises(tf.errors.InternalError):  # Not a restore.
      with checkpoints.refuse_unreadable('/d/model.ckpt-5'):
        raise other

  def test_search_checkpoint_and_supernet_values(self):
    search_dir = tempfile.mkdtemp()
    with self.assertRaisesRegex(ValueError, 'holds no checkpoint'):
      checkpoints.search_checkpoint(search_dir)
    with self.assertRaisesRegex(ValueError, 'no such directory'):
      checkpoints.search_checkpoint(os.path.join(search_dir, 'missing'))
    path = _write_checkpoint(search_dir, {
        'blocks/0/layers/0/conv/kernel': np.ones([1, 1, 2, 3], np.float32),
        'blocks/0/layers/0/conv/kernel/RMSProp': np.ones([1, 1, 2, 3],
                                                          np.float32),
        'classifier/bias': np.zeros([4], np.float32),
        'rl_controller/logits': np.zeros([2], np.float32),
    })
    self.assertEqual(checkpoints.search_checkpoint(search_dir), path)
    with open(os.path.join(search_dir, 'config.json'), 'w') as f:
      json.dump({'ssd': 'cifar_search'}, f)
    self.assertEqual(checkpoints.search_checkpoint(search_dir,
                                                   'cifar_search'), path)
    with self.assertRaisesRegex(ValueError, "searched 'cifar_search', not "
                                '--ssd=digits_search'):
      checkpoints.search_checkpoint(search_dir, 'digits_search')
    values = checkpoints.read_supernet_values(path)
    self.assertEqual(sorted(values), ['blocks/0/layers/0/conv/kernel',
                                      'classifier/bias'])
    with self.assertRaisesRegex(ValueError, 'Cannot read checkpoint'):
      checkpoints.read_supernet_values(os.path.join(search_dir, 'nothing'))


if __name__ == '__main__':
  absltest.main()
