"""Tests for the OneOf schema: visit order, paths, mapping and pruning."""

import copy
import dataclasses

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

from tunas_tf.search_space import schema
from tunas_tf.search_space.schema import FILTERS_TAG, OP_TAG, OneOf


@dataclasses.dataclass(frozen=True)
class _Pair:
  first: object
  second: object


def _nested_spec():
  # Visit order: children of a OneOf before the OneOf, fields in order,
  # dict keys sorted ('a' before 'b'), lists in order.
  return {
      'b': [OneOf([1, 2], FILTERS_TAG)],
      'a': _Pair(
          first=OneOf([_Pair(OneOf([3, 5, 7], OP_TAG), 'x'), 'zero'], OP_TAG),
          second=OneOf([8], FILTERS_TAG)),
  }


class SchemaTest(parameterized.TestCase):

  def test_flatten_with_paths_visit_order_and_paths(self):
    paths = [p for p, _ in schema.flatten_with_paths(_nested_spec())]
    self.assertEqual(paths, [
        'a/first/choices/0/first',
        'a/first',
        'a/second',
        'b/0',
    ])

  def test_flatten_returns_oneofs_in_visit_order(self):
    oneofs = schema.flatten(_nested_spec())
    self.assertEqual([o.choices[0] for o in oneofs][2:], [8, 1])
    self.assertEqual(oneofs[0].choices, (3, 5, 7))

  def test_map_oneofs_with_paths_children_first(self):
    seen = []

    def record(path, oneof):
      seen.append(path)
      # The parent sees its children already mapped.
      if path == 'a/first':
        self.assertEqual(oneof.choices[0].first, 'mapped:a/first/choices/0/first')
      return f'mapped:{path}'

    result = schema.map_oneofs_with_paths(record, _nested_spec())
    self.assertEqual(seen[0], 'a/first/choices/0/first')
    self.assertEqual(result['a'].first, 'mapped:a/first')
    self.assertEqual(result['b'], ['mapped:b/0'])
    self.assertEqual(list(result), ['b', 'a'])  # Keys keep their order.

  def test_map_oneofs_does_not_mutate_input(self):
    spec = _nested_spec()
    before = copy.deepcopy(spec)
    schema.map_oneofs_with_paths(lambda _, o: o.choices[0], spec)
    self.assertEqual(spec, before)

  def test_map_oneofs_keeps_mask(self):
    spec = OneOf([1, 2], OP_TAG, mask='m')
    self.assertEqual(schema.map_oneofs_with_paths(lambda _, o: o.mask, spec), 'm')

  def _masks_in_visit_order(self, spec):
    return [(path, o.mask) for path, o in schema.flatten_with_paths(spec)]

  def test_with_masks_from_a_mapping_a_sequence_or_a_function(self):
    spec = _nested_spec()
    before = copy.deepcopy(spec)
    paths = [p for p, _ in schema.flatten_with_paths(spec)]
    expected = [(p, f'm:{p}') for p in paths]
    by_path = {p: f'm:{p}' for p in paths}
    by_path['not/a/oneof'] = 'ignored'
    for masks in (by_path, [f'm:{p}' for p in paths],
                  lambda path, oneof: f'm:{path}'):
      masked = schema.with_masks(spec, masks)
      self.assertEqual(self._masks_in_visit_order(masked), expected)
      self.assertEqual(masked, spec)  # Masks are not compared.
    self.assertEqual(self._masks_in_visit_order(spec),
                     [(p, None) for p in paths])
    self.assertEqual(spec, before)

  def test_with_masks_function_sees_masked_choices(self):
    def mask(path, oneof):
      if path == 'a/first':
        self.assertEqual(oneof.choices[0].first.mask,
                         'm:a/first/choices/0/first')
      return f'm:{path}'
    masked = schema.with_masks(_nested_spec(), mask)
    self.assertEqual(masked['a'].first.mask, 'm:a/first')

  def test_with_masks_rejects_a_missing_path_or_a_wrong_count(self):
    spec = _nested_spec()
    with self.assertRaisesRegex(ValueError, "no mask for the OneOf at 'a/first"
                                "/choices/0/first'"):
      schema.with_masks(spec, {'b/0': 'm'})
    with self.assertRaisesRegex(ValueError, r'expected 4 masks \(one per '
                                r'OneOf\), got 3'):
      schema.with_masks(spec, ['m'] * 3)

  @parameterized.named_parameters(
      ('list', [0, 1, 0, 0], 'zero'),
      ('string', '1:0:0:0', _Pair(5, 'x')),
  )
  def test_prune_picks_choices(self, indices, expected_first):
    pruned = schema.prune(_nested_spec(), indices)
    self.assertEqual(pruned['a'].first, expected_first)
    self.assertEqual(pruned['a'].second, 8)
    self.assertEqual(pruned['b'], [1])
    self.assertEqual(schema.flatten(pruned), [])

  def test_prune_wrong_count(self):
    with self.assertRaisesRegex(ValueError, r'expected 4 indices .*got 3'):
      schema.prune(_nested_spec(), '0:0:0')

  def test_prune_out_of_range_names_path_and_range(self):
    with self.assertRaisesRegex(
        ValueError, r"index 3 at position 0 \(path 'a/first/choices/0/first'\)"
        r'.*allowed 0\.\.2'):
      schema.prune(_nested_spec(), [3, 0, 0, 0])

  @parameterized.named_parameters(
      ('word', '0:x:1', r"Index 1 is 'x'"),
      ('negative', [0, -1], r'Index 1 is -1'),
      ('empty_token', '0::1', r"Index 1 is ''"),
      ('float', [0.5], r'Index 0 is 0.5'),
  )
  def test_parse_indices_rejects(self, indices, message):
    with self.assertRaisesRegex(ValueError, message):
      schema.parse_indices(indices)

  def test_parse_indices_forms_agree(self):
    # Plain ints and ASCII digits are taken at once, other forms token by
    # token: the same list of Python ints.
    for indices in ('0:12:1', [0, 12, 1], (0, np.int64(12), 1),
                    ['0', '12', '1'], ' 0 : 12:1'):
      parsed = schema.parse_indices(indices)
      self.assertEqual(parsed, [0, 12, 1])
      self.assertEqual({type(i) for i in parsed}, {int})
    with self.assertRaisesRegex(ValueError, r"Index 1 is '\u00b2'"):
      schema.parse_indices('0:\u00b2')  # A digit, but not a decimal one.
    with self.assertRaisesRegex(ValueError, r'Index 0 is True'):
      schema.parse_indices([True, 1])

  def test_parse_indices_empty_string(self):
    self.assertEqual(schema.parse_indices(''), [])
    self.assertEqual(schema.parse_indices(' 1:2 '), [1, 2])

  def test_format_indices_is_the_inverse_of_parse(self):
    self.assertEqual(schema.format_indices([0, 2, 1]), '0:2:1')
    self.assertEqual(schema.format_indices(' 0:2:1 '), '0:2:1')
    self.assertEqual(schema.format_indices([]), '')
    self.assertEqual(schema.parse_indices(schema.format_indices([3, 0])),
                     [3, 0])
    with self.assertRaisesRegex(ValueError, r'Index 1 is -1'):
      schema.format_indices([0, -1])

  def test_check_indices(self):
    self.assertEqual(schema.check_indices(_nested_spec(), '2:1:0:1'),
                     [2, 1, 0, 1])
    with self.assertRaisesRegex(ValueError, 'expected 4 indices'):
      schema.check_indices(_nested_spec(), '0:0:0')
    with self.assertRaisesRegex(ValueError, r'index 3 at position 0'):
      schema.check_indices(_nested_spec(), [3, 0, 0, 0])
    # Beyond any machine integer: the same refusal, not an overflow.
    with self.assertRaisesRegex(ValueError, r'index 10{30} at position 0'):
      schema.check_indices(_nested_spec(), [10**30, 0, 0, 0])
    with self.assertRaisesRegex(ValueError, r"Index 1 is 'x'"):
      schema.check_indices(_nested_spec(), '0:x:0:0')

  def test_check_indices_list_is_prunes_check_of_each(self):
    self.assertEqual(
        schema.check_indices_list(_nested_spec(), ['2:1:0:1', (0, 0, 0, 0)]),
        [[2, 1, 0, 1], [0, 0, 0, 0]])
    self.assertEqual(schema.check_indices_list(_nested_spec(), []), [])
    # Three indices out of range: the first in visit order is named.
    bad = [0, 2, 1, 5]
    with self.assertRaises(ValueError) as pruned:
      schema.prune(_nested_spec(), bad)
    self.assertEqual(str(pruned.exception),
                     "prune: index 2 at position 1 (path 'a/first') is out "
                     'of range; allowed 0..1')
    # The first bad list (the third is bad too) gets prune's message.
    with self.assertRaises(ValueError) as checked:
      schema.check_indices_list(_nested_spec(), ['0:0:0:0', bad, '0:0:0'])
    self.assertEqual(str(checked.exception), str(pruned.exception))

  def test_oneof_rejects_unknown_tag_and_empty(self):
    with self.assertRaisesRegex(ValueError, r"Unknown OneOf tag 'ops'"):
      OneOf([1], 'ops')
    with self.assertRaisesRegex(ValueError, 'at least one choice'):
      OneOf([], OP_TAG)

  def test_oneof_equality_ignores_mask(self):
    self.assertEqual(OneOf([1, 2], OP_TAG, mask=[1, 0]), OneOf((1, 2), OP_TAG))
    self.assertNotEqual(OneOf([1, 2], OP_TAG), OneOf([1, 2], FILTERS_TAG))

  def test_extreme_indices(self):
    from tunas_tf.search_space import ops  # pylint: disable=g-import-not-at-top
    spec = [OneOf([ops.ConvSpec(OneOf([3, 5, 7], OP_TAG), 1), ops.ZeroSpec()],
                  OP_TAG),
            OneOf([ops.FilterMultiplier(6.0), ops.FilterMultiplier(3.0)],
                  FILTERS_TAG),
            OneOf([False, True], OP_TAG)]
    # Visit order: kernel, conv-or-zero, expansion, squeeze-excite.
    self.assertEqual(schema.extreme_indices(spec, largest=False), [0, 1, 1, 0])
    self.assertEqual(schema.extreme_indices(spec, largest=True), [2, 0, 0, 1])

  def test_enclosing_choices(self):
    self.assertEqual(schema.enclosing_choices(''), [])
    self.assertEqual(schema.enclosing_choices('a/first'), [])
    self.assertEqual(schema.enclosing_choices('a/first/choices/0/first'),
                     [('a/first', 0)])
    self.assertEqual(
        schema.enclosing_choices('choices/2/x/choices/1/y/choices/z'),
        [('', 2), ('choices/2/x', 1)])

  def test_num_choices(self):
    self.assertEqual(schema.num_choices(_nested_spec()), [3, 2, 1, 2])


if __name__ == '__main__':
  absltest.main()
