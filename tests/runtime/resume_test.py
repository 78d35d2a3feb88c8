"""Tests of `runtime.resume`: resume points, unreadable checkpoints."""

import os
import tempfile

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from tunas_tf.runtime import resume as resume_lib


def _run_dir(steps=(0, 4, 8)):
  """A model dir with Saver checkpoints (a weight and the global step)."""
  model_dir = tempfile.mkdtemp()
  with tf.Graph().as_default():
    step = tf.compat.v1.train.get_or_create_global_step()
    weight = tf.compat.v1.get_variable('w', initializer=np.ones([64],
                                                                np.float32))
    saver = tf.compat.v1.train.Saver([step, weight], max_to_keep=5,
                                     save_relative_paths=True)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      for value in steps:
        session.run(step.assign(value))
        saver.save(session, os.path.join(model_dir, 'model.ckpt'),
                   global_step=value)
  return model_dir


def _listing(model_dir):
  """{name: bytes} of every file in `model_dir`."""
  out = {}
  for name in sorted(os.listdir(model_dir)):
    with open(os.path.join(model_dir, name), 'rb') as f:
      out[name] = f.read()
  return out


def _truncate(path, size=10):
  with open(path, 'r+b') as f:
    f.truncate(size)


_DATA = 'model.ckpt-{}.data-00000-of-00001'


class ResumePointTest(absltest.TestCase):

  def test_readable_newest_changes_nothing(self):
    model_dir = _run_dir()
    before = _listing(model_dir)
    point = resume_lib.resume_point(model_dir)
    self.assertEqual((os.path.basename(point.checkpoint), point.global_step,
                      point.skipped), ('model.ckpt-8', 8, []))
    self.assertFalse(point.state_stale)
    self.assertIsNone(resume_lib.use_resume_point(model_dir, point))
    self.assertEqual(_listing(model_dir), before)
    fresh = tempfile.mkdtemp()
    for directory in (fresh, os.path.join(fresh, 'missing')):
      point = resume_lib.resume_point(directory)
      self.assertEqual((point.checkpoint, point.global_step), (None, 0))
      self.assertIsNone(resume_lib.use_resume_point(directory, point))

  def _break(self, how, model_dir):
    data = os.path.join(model_dir, _DATA.format(8))
    index = os.path.join(model_dir, 'model.ckpt-8.index')
    if how == 'truncated':
      _truncate(data)
    elif how == 'missing shard':
      os.remove(data)
    elif how == 'bad index':
      _truncate(index, 20)
    elif how == 'removed':
      os.remove(data)
      os.remove(index)

  def test_an_unreadable_newest_falls_back_and_is_kept(self):
    for how, reason in (('truncated', 'Read less bytes'),
                        ('missing shard', 'No such file'),
                        ('bad index', 'sstable'),
                        ('removed', 'its files are missing')):
      model_dir = _run_dir()
      self._break(how, model_dir)
      before = _listing(model_dir)
      point = resume_lib.resume_point(model_dir)
      self.assertEqual(_listing(model_dir), before)  # Finding writes nothing.
      self.assertEqual((os.path.basename(point.checkpoint),
                        point.global_step), ('model.ckpt-4', 4), how)
      self.assertEqual([os.path.basename(p) for p, _ in point.skipped],
                       ['model.ckpt-8'])
      self.assertIn(reason, point.skipped[0][1], how)
      line = resume_lib.use_resume_point(model_dir, point)
      self.assertRegex(line, rf'model.ckpt-8 is unreadable \(.*{reason}.*\): '
                       'resuming from model.ckpt-4, .* the checkpoint file now '
                       'names model.ckpt-4$')
      after = _listing(model_dir)
      for name, content in before.items():  # Kept, renamed, never deleted.
        if name.startswith('model.ckpt-8.'):
          self.assertEqual(after[name + '.unreadable'], content)
        elif name != 'checkpoint':
          self.assertEqual(after[name], content)
      state = tf.train.get_checkpoint_state(model_dir)
      self.assertEqual(
          [os.path.basename(p) for p in state.all_model_checkpoint_paths],
          ['model.ckpt-0', 'model.ckpt-4'])
      self.assertIn(b'model_checkpoint_path: "model.ckpt-4"',
                    after['checkpoint'])  # Relative, as TF's Saver writes.
      self.assertEqual(tf.train.latest_checkpoint(model_dir),
                       point.checkpoint)
      again = resume_lib.resume_point(model_dir)
      self.assertEqual((again.checkpoint, again.skipped),
                       (point.checkpoint, []))

  def test_a_missing_or_garbled_checkpoint_file(self):
    for content in (None, 'garbage {'):
      model_dir = _run_dir()
      state_path = os.path.join(model_dir, 'checkpoint')
      os.remove(state_path)
      if content:
        with open(state_path, 'w') as f:
          f.write(content)
      point = resume_lib.resume_point(model_dir)
      self.assertEqual((os.path.basename(point.checkpoint), point.skipped,
                        point.state_stale), ('model.ckpt-8', [], True))
      line = resume_lib.use_resume_point(model_dir, point)
      self.assertIn('the checkpoint file is missing or unreadable', line)
      self.assertEqual(tf.train.latest_checkpoint(model_dir),
                       point.checkpoint)
      if content:
        with open(state_path + '.unreadable') as f:
          self.assertEqual(f.read(), content)

  def test_an_interrupted_save_or_fallback_still_resumes(self):
    model_dir = _run_dir()
    # A save killed before the checkpoint file named it: left alone.
    saved = resume_lib.resume_point(model_dir)
    os.rename(os.path.join(model_dir, 'model.ckpt-8.index'),
              os.path.join(model_dir, 'model.ckpt-12.index'))
    os.makedirs(os.path.join(model_dir, 'model.ckpt-12_temp'))
    with open(os.path.join(model_dir, 'checkpoint')) as f:
      state = f.read()
    point = resume_lib.resume_point(model_dir)
    self.assertEqual(os.path.basename(point.checkpoint), 'model.ckpt-4')
    self.assertEqual(os.path.basename(point.skipped[0][0]), 'model.ckpt-8')
    # A fallback killed after setting the files aside, before the checkpoint
    # file was rewritten: the next start falls back the same way.
    os.rename(os.path.join(model_dir, _DATA.format(8)),
              os.path.join(model_dir, _DATA.format(8) + '.unreadable'))
    with open(os.path.join(model_dir, 'checkpoint')) as f:
      self.assertEqual(f.read(), state)
    again = resume_lib.resume_point(model_dir)
    self.assertEqual(again.checkpoint, point.checkpoint)
    self.assertEqual(again.skipped[0][1], 'its files are missing')
    self.assertEqual(saved.global_step, 8)

  def test_no_readable_checkpoint_is_refused_changing_nothing(self):
    model_dir = _run_dir()
    for step in (0, 4, 8):
      _truncate(os.path.join(model_dir, _DATA.format(step)))
    before = _listing(model_dir)
    with self.assertRaisesRegex(
        ValueError, r'^No readable checkpoint in .* \(model.ckpt-8: Read '
        r'less bytes than requested; model.ckpt-4: .*; model.ckpt-0: .*\); '
        'nothing was changed'):
      resume_lib.resume_point(model_dir)
    self.assertEqual(_listing(model_dir), before)
    # The checkpoint file names a checkpoint whose files were all removed.
    model_dir = _run_dir(steps=(5,))
    for name in os.listdir(model_dir):
      if name.startswith('model.ckpt-5.'):
        os.remove(os.path.join(model_dir, name))
    with self.assertRaisesRegex(ValueError, r'model.ckpt-5: its files are '
                                'missing'):
      resume_lib.resume_point(model_dir)


class ErrorLineTest(absltest.TestCase):

  def test_refuse_unreadable_names_the_checkpoint(self):
    error = tf.errors.DataLossError(None, None, 'Restore failed: bad data')
    with self.assertRaisesRegex(
        ValueError, r'Cannot resume from /d/model.ckpt-5: Restore failed: '
        'bad data; remove the broken checkpoint'):
      with resume_lib.refuse_unreadable('/d/model.ckpt-5'):
        raise error
    with self.assertRaises(tf.errors.DataLossError):  # A fresh run.
      with resume_lib.refuse_unreadable(None):
        raise error
    other = tf.errors.InternalError(None, None, 'out of memory')
    with self.assertRaises(tf.errors.InternalError):  # Not a restore.
      with resume_lib.refuse_unreadable('/d/model.ckpt-5'):
        raise other


if __name__ == '__main__':
  absltest.main()
