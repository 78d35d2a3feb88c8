"""Prints the TF_ENABLE_ONEDNN_OPTS setting whose kernels this machine does
not use, for `make test`'s second run of the `numerics` tests.

TensorFlow 2.15 turns oneDNN's kernels on by default only on CPUs with
AVX-512 VNNI, BF16 or AMX: elsewhere (an AVX2 CPU, an AMD EPYC) the default
is Eigen's. Running the comparisons once under each makes every machine see
both kinds of summation order, whichever its default is.

  python -m tests.testing.other_kernels  ->  TF_ENABLE_ONEDNN_OPTS=0 (or =1)
"""

import glob
import importlib.machinery
import importlib.util
import os


def _setting(onednn_on: bool) -> str:
  return f'TF_ENABLE_ONEDNN_OPTS={0 if onednn_on else 1}'


def other_setting() -> str:
  """`TF_ENABLE_ONEDNN_OPTS=0` where oneDNN's kernels are on, else `=1`."""
  from tensorflow.python.util import _pywrap_util_port  # pylint: disable=g-direct-tensorflow-import,g-import-not-at-top,import-outside-toplevel
  return _setting(_pywrap_util_port.IsMklEnabled())


def _util_port_alone():
  """TF's `_pywrap_util_port` loaded without TensorFlow: 0.2-0.6 s against
  the 2.5-4 s of its import, which `make test` waits for. In a process of
  its own only: loaded twice (this, then TF's import), the library frees a
  pointer twice at exit (TF 2.15)."""
  directory = os.path.dirname(importlib.util.find_spec('tensorflow').origin)
  path, = glob.glob(os.path.join(directory, 'python', 'util',
                                 '_pywrap_util_port*.so'))
  loader = importlib.machinery.ExtensionFileLoader('_pywrap_util_port', path)
  module = importlib.util.module_from_spec(
      importlib.util.spec_from_loader(loader.name, loader))
  loader.exec_module(module)
  return module


if __name__ == '__main__':
  print(_setting(_util_port_alone().IsMklEnabled()))
