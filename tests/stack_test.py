"""The installed stack keeps the properties the project depends on."""

from absl.testing import absltest
from google.protobuf.internal import api_implementation


class StackTest(absltest.TestCase):

  def test_protobuf_is_compiled(self):
    # Pure-Python protobuf (what protobuf 3.x gives on Python 3.11) made a
    # search's start ~3x slower: every graph serialisation ran in Python
    # (bench/search_startup.py). setup.py pins a compiled one.
    self.assertNotEqual(api_implementation.Type(), 'python')


if __name__ == '__main__':
  absltest.main()
