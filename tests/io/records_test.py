"""Tests of `records`: dataclasses from JSON objects, one line per refusal."""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from absl.testing import absltest

from tunas_tf.io import records


@dataclasses.dataclass(frozen=True)
class _Record:
  name: str
  count: int
  scale: Optional[float]
  flag: bool = False
  note: Optional[str] = 'none'
  items: Tuple[int, ...] = ()


class RecordsTest(absltest.TestCase):

  def test_from_dict_takes_defaults_for_absent_or_null_keys(self):
    record = records.from_dict(
        _Record, {'name': 'a', 'count': 2, 'scale': None, 'note': None,
                  'items': [1]}, 'here')
    self.assertEqual(record, _Record('a', 2, None, False, 'none', [1]))
    self.assertEqual(records.from_dict(
        _Record, {'name': 'a', 'count': 2, 'scale': 1, 'x': 0}, 'here',
        ignored=None).scale, 1)

  def test_from_dict_names_the_field(self):
    good = {'name': 'a', 'count': 2, 'scale': 0.5}
    for data, message in (
        ([], r'^here is not a JSON object$'),
        ({'name': 'a', 'scale': 1}, r"^here has no field 'count'; see x$"),
        ({**good, 'extra': 1, 'x': 2},
         r"^here has unknown fields \['extra'\]; see x$"),
        ({**good, 'count': True}, r"^here: field 'count' is True, expected "
         r'an int$'),
        ({**good, 'scale': 'big'}, "field 'scale' is 'big', expected a "
         'number'),
        ({**good, 'name': None}, "field 'name' is None, expected a string"),
        ({**good, 'flag': 1}, "field 'flag' is 1, expected true or false"),
        ({**good, 'note': 3}, "field 'note' is 3, expected a string")):
      with self.assertRaisesRegex(ValueError, message, msg=str(data)):
        records.from_dict(_Record, data, 'here', ignored=('x',),
                          hint='; see x')


if __name__ == '__main__':
  absltest.main()
