"""Tests for tunas_tf/flags: the binaries' --help (exit 0, their own flags)."""

import importlib
import os
import subprocess
import sys

from absl.testing import absltest

BINARIES = ('tunas_tf.train_search', 'tunas_tf.train_eval.__main__') + tuple(
    f'tunas_tf.tools.{name}' for name in (
        'extract_architecture', 'describe_space', 'random_architectures',
        'compare_random', 'fit_cost_model', 'measure_latency',
        'import_dataset', 'report'))
_OUTSIDE = ('reference/', 'DESIGN', '§', 'STYLE')


class HelpTest(absltest.TestCase):

  def test_binaries_help_with_their_shared_flags_and_exit_zero(self):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
    running = {m: subprocess.Popen([sys.executable, '-m', m, '--help'],
                                   stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env=env)
               for m in ('tunas_tf.train_search', 'tunas_tf.train_eval')}
    for module, process in running.items():
      out, err = process.communicate(timeout=240)
      self.assertEqual(process.returncode, 0, f'{module}: {err[-500:]}')
      for flag in ('--model_dir', '--dataset', '--data_dir', '--tpu:',
                   '--[no]deterministic:'):
        self.assertIn(flag, out, f'{module} --help lacks {flag}')
      for outside in _OUTSIDE:
        self.assertNotIn(outside, out, module)

  def test_every_binary_runs_through_flags_run_and_cites_nothing_outside(self):
    for name in BINARIES:
      module = importlib.import_module(name)
      for outside in _OUTSIDE:
        self.assertNotIn(outside, module.__doc__, name)
      with open(module.__file__) as f:
        self.assertIn('common_flags.run(main)', f.read(), name)


class QuietLogTest(absltest.TestCase):

  def test_library_info_lines_are_dropped_and_their_warnings_kept(self):
    import logging  # pylint: disable=g-import-not-at-top
    from tunas_tf import flags as common_flags  # pylint: disable=g-import-not-at-top
    tfds_file = os.path.join(os.sep, 'venv', 'site-packages',
                             'tensorflow_datasets', 'core', 'reader.py')
    tf_file = os.path.join(os.sep, 'venv', 'site-packages', 'tensorflow',
                           'python', 'checkpoint', 'functional_saver.py')
    ours = os.path.join(os.sep, 'repo', 'tunas_tf', 'search', 'runner.py')

    def record(level, path):
      return logging.LogRecord('absl', level, path, 1, 'msg', None, None)

    keep = common_flags.LibraryInfoFilter().filter
    self.assertFalse(keep(record(logging.INFO, tfds_file)))
    self.assertTrue(keep(record(logging.WARNING, tfds_file)))
    self.assertFalse(keep(record(logging.INFO, tf_file)))
    self.assertTrue(keep(record(logging.WARNING, tf_file)))
    self.assertTrue(keep(record(logging.INFO, ours)))


if __name__ == '__main__':
  absltest.main()
