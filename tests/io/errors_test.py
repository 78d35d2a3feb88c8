"""Tests of `errors`: one-line error text and the first useful line."""

from absl.testing import absltest

from tunas_tf.io import errors


class ErrorsTest(absltest.TestCase):

  def test_one_line_folds_white_space(self):
    self.assertEqual(errors.one_line(ValueError('a\n  b\tc ')), 'a b c')
    self.assertEqual(errors.one_line(' host\nname '), 'host name')
    self.assertEqual(errors.one_line(OSError()), 'OSError')
    self.assertEqual(errors.one_line(''), '')

  def test_first_line_skips_the_locations(self):
    # Moved from resume_test (op_error_reason): a TF graph-execution error.
    text = ('Graph execution error:\n\nDetected at node x\n  File "a.py", '
            'line 3\ntruncated record at 12\n[[{{node y}}]]')
    self.assertEqual(errors.first_line(RuntimeError(text)),
                     'truncated record at 12')

  def test_first_line_takes_the_converters_error(self):
    text = ('note: x\nloc("a"): error: \'tf.Erf\' op is neither a custom op'
            '\nloc("b"): error: second\n')
    self.assertEqual(errors.first_line(text),
                     "'tf.Erf' op is neither a custom op")
    self.assertEqual(errors.first_line('x' * 300), 'x' * 200)
    self.assertEqual(errors.first_line('\n[[{{node y}}]]\n'), '[[{{node y}}]]')
    self.assertEqual(errors.first_line(ValueError()), 'ValueError')

  def test_errors_in_one_line_exits_with_the_prefix(self):
    with self.assertRaises(SystemExit) as exit_:
      with errors.errors_in_one_line('tool'):
        raise ValueError('bad\n value')
    self.assertEqual(exit_.exception.code, 'tool: bad value')
    with self.assertRaises(SystemExit) as exit_:
      with errors.errors_in_one_line('tool', OSError):
        raise OSError('gone')
    self.assertEqual(exit_.exception.code, 'tool: gone')
    with self.assertRaises(KeyError):
      with errors.errors_in_one_line('tool'):
        raise KeyError('not ours')


if __name__ == '__main__':
  absltest.main()
