"""Tests for symbolic kwarg resolution (`S:`, `K:`, `%`, `*`)."""

from absl.testing import parameterized
import tensorflow as tf

from tunas_tf.graph import ir
from tunas_tf.graph import symbolic


class SymbolicTest(parameterized.TestCase, tf.test.TestCase):

  @parameterized.named_parameters(
      ('channels', 'S:-1', 32),
      ('twice_channels', 'S:-1*2', 64),          # 32 * 2
      ('quarter_channels', 'S:-1%4', 8),         # 32 // 4
      ('div_then_mul', 'S:-1%2*4', 64),          # (32 // 2) * 4
      ('height', 'S:1', 16),
      ('second_input', 'S:1:-1', 3),
      ('named_tensor', 'S:other:-1*3', 15),      # 5 * 3
      ('constant', 'K:out_features', 256),
      ('constant_scaled', 'K:out_features%2', 128))
  def test_resolve_value_cases(self, value, expected):
    resolved = symbolic.resolve_value(
        value, [(2, 16, 16, 32), (2, 3)], {'out_features': 256},
        {'other:0': (4, 5)})
    self.assertEqual(resolved, expected)

  def test_resolve_value_leaves_other_values(self):
    for value in ('SAME', 'B', 'I:zeros', 3, 0.5, None):
      self.assertEqual(symbolic.resolve_value(value, [(1, 2)]), value)

  def test_resolve_value_resolves_sequences_elementwise(self):
    self.assertEqual(symbolic.resolve_value(['B', 'S:-1*2', 7], [(1, 4)]),
                     ['B', 8, 7])
    self.assertEqual(symbolic.resolve_value(('S:0', 1), [(3, 4)]), (3, 1))

  @parameterized.named_parameters(
      ('indivisible', 'S:-1%3', 'not divisible by 3'),
      ('unknown_constant', 'K:nope', "unknown constant 'nope'"),
      ('unknown_dim', 'S:0', 'dim 0 .* is unknown'),
      ('dim_out_of_range', 'S:7', 'dim 7 out of range'),
      ('slot_out_of_range', 'S:2:0', 'input slot 2 out of range'),
      ('unknown_tensor', 'S:zz:0', "unknown tensor 'zz:0'"),
      ('two_stars', 'S:-1*2*2', 'at most one'),
      ('bad_number', 'S:-1*x', "bad number 'x'"))
  def test_resolve_value_rejects(self, value, regex):
    with self.assertRaisesRegex(ValueError, f"op 'conv'.*{regex}"):
      symbolic.resolve_value(value, [(None, 4, 4, 32)], {}, {},
                             where="op 'conv'")

  def test_resolve_kwargs_copies_and_names_op(self):
    op = ir.new_op('conv', ir.OpType.CONV, ['x'],
                   op_kwargs={'features': 'S:-1*2', 'kernel_size': [3, 3]})
    self.assertEqual(symbolic.resolve_kwargs(op, [(1, 8, 8, 16)]),
                     {'features': 32, 'kernel_size': [3, 3]})
    self.assertEqual(op.op_kwargs['features'], 'S:-1*2')
    with self.assertRaisesRegex(ValueError, "op 'conv' kwarg 'features'"):
      symbolic.resolve_kwargs(op, [(1, 8, 8, 15)]) if False else (
          symbolic.resolve_kwargs(ir.new_op(
              'conv', ir.OpType.CONV, ['x'],
              op_kwargs={'features': 'S:-1%2'}), [(1, 8, 8, 15)]))

  def test_is_symbolic(self):
    self.assertTrue(symbolic.is_symbolic('S:-1'))
    self.assertTrue(symbolic.is_symbolic(['B', 'K:x']))
    self.assertFalse(symbolic.is_symbolic('SAME'))
    self.assertFalse(symbolic.is_symbolic(3))


if __name__ == '__main__':
  tf.test.main()
