"""Tests for spec <-> JSON."""

import json

from absl.testing import absltest
from absl.testing import parameterized

from tunas_tf.search_space import ops
from tunas_tf.search_space import spec_io
from tunas_tf.search_space.schema import OP_TAG, OneOf


class SpecIoTest(parameterized.TestCase):

  def test_round_trip_keeps_types(self):
    spec = {
        'list': [1, 2.5, None, True, 'relu'],
        'tuple': (ops.FilterMultiplier(3.0), ops.ZeroSpec()),
        'oneof': OneOf([ops.ConvSpec(OneOf([3, 5], OP_TAG), 2), ops.ZeroSpec()],
                       OP_TAG, mask=[1.0, 0.0]),
        3: 'int key',
    }
    restored = spec_io.loads(spec_io.dumps(spec))
    self.assertEqual(restored, spec)
    self.assertIsInstance(restored['tuple'], tuple)
    self.assertIsInstance(restored['list'], list)
    self.assertIsInstance(restored['list'][1], float)
    self.assertIsNone(restored['oneof'].mask)  # Masks are not serialised.

  def test_document_has_format_version(self):
    document = json.loads(spec_io.dumps(ops.ZeroSpec()))
    self.assertEqual(document['format_version'], spec_io.FORMAT_VERSION)

  def test_unknown_type_lists_known(self):
    text = json.dumps({'format_version': 1,
                       'spec': {'__type__': 'Evil', 'fields': {}}})
    with self.assertRaisesRegex(
        ValueError, r"unknown type 'Evil' at /; known types are \['ActivationSpec'"):
      spec_io.loads(text)

  @parameterized.named_parameters(
      ('bad_json', '{', 'invalid JSON'),
      ('not_document', '[1, 2]', 'not a spec document'),
      ('version', '{"format_version": 2, "spec": 1}',
       'unsupported format_version 2'),
      ('unknown_field',
       '{"format_version": 1, "spec": {"__type__": "ZeroSpec", '
       '"fields": {"x": 1}}}', r"ZeroSpec at / has unknown fields \['x'\]"),
      ('missing_field',
       '{"format_version": 1, "spec": {"__type__": "ConvSpec", '
       '"fields": {"kernel_size": 3}}}', 'bad ConvSpec at /'),
      ('plain_object', '{"format_version": 1, "spec": [{"a": 1}]}',
       'malformed node at /0'),
      ('bad_tag',
       '{"format_version": 1, "spec": {"__type__": "OneOf", "choices": [1], '
       '"tag": "x"}}', "Unknown OneOf tag 'x'"),
  )
  def test_loads_rejects(self, text, message):
    with self.assertRaisesRegex(ValueError, message):
      spec_io.loads(text)

  def test_dumps_rejects_unregistered(self):
    with self.assertRaisesRegex(ValueError, 'cannot serialise a object'):
      spec_io.dumps(object())


if __name__ == '__main__':
  absltest.main()
