"""Prints the TF_ENABLE_ONEDNN_OPTS setting whose kernels this machine does
not use, for `make test`'s second run of the `numerics` tests.

TensorFlow 2.15 turns oneDNN's kernels on by default only on CPUs with
AVX-512 VNNI, BF16 or AMX: elsewhere (an AVX2 CPU, an AMD EPYC) the default
is Eigen's. Running the comparisons once under each makes every machine see
both kinds of summation order, whichever its default is.

  python -m tests.testing.other_kernels  ->  TF_ENABLE_ONEDNN_OPTS=0 (or =1)
"""

from tensorflow.python.util import _pywrap_util_port  # pylint: disable=g-direct-tensorflow-import


def other_setting() -> str:
  """`TF_ENABLE_ONEDNN_OPTS=0` where oneDNN's kernels are on, else `=1`."""
  return f'TF_ENABLE_ONEDNN_OPTS={0 if _pywrap_util_port.IsMklEnabled() else 1}'


if __name__ == '__main__':
  print(other_setting())
