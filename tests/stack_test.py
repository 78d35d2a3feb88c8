"""The installed stack keeps the properties the project depends on."""

import os
import subprocess
import sys

from absl.testing import absltest
from google.protobuf.internal import api_implementation

from tests.testing import other_kernels


class StackTest(absltest.TestCase):

  def test_protobuf_is_compiled(self):
    # Pure-Python protobuf (what protobuf 3.x gives on Python 3.11) made a
    # search's start ~3x slower: every graph serialisation ran in Python
    # (bench/DECISIONS.md, 'Compiled protobuf'). setup.py pins a compiled one.
    self.assertNotEqual(api_implementation.Type(), 'python')

  def test_other_kernels_names_the_setting_not_in_force(self):
    # `make test` reruns the numerics tests with what this prints. Here, then
    # in a fresh process under the setting it names (TF reads it once).
    here = other_kernels.other_setting()
    self.assertIn(here, ('TF_ENABLE_ONEDNN_OPTS=0', 'TF_ENABLE_ONEDNN_OPTS=1'))
    in_force = os.environ.get('TF_ENABLE_ONEDNN_OPTS')
    if in_force is not None:
      self.assertNotEqual(here, f'TF_ENABLE_ONEDNN_OPTS={in_force}')
    other = here.split('=')[1]
    out = subprocess.run(
        [sys.executable, '-m', 'tests.testing.other_kernels'],
        env=dict(os.environ, TF_ENABLE_ONEDNN_OPTS=other,
                 TF_CPP_MIN_LOG_LEVEL='3'),
        capture_output=True, text=True, check=True)
    self.assertEqual(out.stdout, f'TF_ENABLE_ONEDNN_OPTS={1 - int(other)}\n')


if __name__ == '__main__':
  absltest.main()
