"""The variable-name contract and the network constants, in one place.

Names go by position and role, not OneOf path: a layer `blocks/{b}/layers/{l}`,
its parts `conv_k{k}`, `depthwise_k{k}`, `expand`, `project`, `se/reduce`,
`se/expand`, a part's batch norm `{part}/bn`, the head `classifier`; a
supernet variable `{part}/{variable}` (in the standalone graph, the op).
"""

from __future__ import annotations

# Supernet modes.
MASKED = 'masked'  # Widest weights times channel masks; static shapes (TPU).
SAMPLED = 'sampled'  # Kernels sliced to the sampled widths (CPU/GPU).
MODES = (MASKED, SAMPLED)

# Constants of the network's semantics.
BATCH_NORM_EPSILON = 1e-3
# Share of the expanded width kept inside squeeze-and-excite, before
# `filters.make_divisible` rounds it to the filters base.
SE_RATIO = 0.25
# Standard deviation of the classifier kernel's normal initialiser.
CLASSIFIER_STDDEV = 0.01
# Standard deviation of a unit normal truncated to [-2, 2] (0.8796256610...,
# to the 8 decimals the supernet's seeded initial values were drawn with);
# dividing by it makes a truncated normal draw have the requested stddev.
TRUNCATED_NORMAL_STDDEV = 0.87962566

# Part and variable names.
EXPAND = 'expand'  # A bottleneck's 1x1 expansion conv.
PROJECT = 'project'  # The 1x1 projection conv of a bottleneck or separable.
SE = 'se'  # Squeeze-and-excite's scope (graph ops `se/pool`, `se/mul`).
SE_REDUCE = 'se/reduce'  # Squeeze-and-excite's 1x1 reducing conv (biased).
SE_EXPAND = 'se/expand'  # Squeeze-and-excite's 1x1 expanding conv (biased).
CLASSIFIER = 'classifier'  # The head's 1x1 conv to the classes (biased).
BATCH_NORM = 'bn'  # A part's batch norm: `{part}/bn`.

KERNEL = 'kernel'
BIAS = 'bias'
GAMMA = 'gamma'  # Batch-norm scale.
BETA = 'beta'  # Batch-norm offset.


def join(*names: str) -> str:
  """`names` joined with `/`, skipping empty ones: `a/b` for ('a', '', 'b')."""
  return '/'.join(str(n) for n in names if n != '')


def layer_prefix(block_index: int, layer_index: int) -> str:
  """`blocks/{b}/layers/{l}`: a layer's parts' prefix and its schema path."""
  return f'blocks/{block_index}/layers/{layer_index}'


def block_filters_path(block_index: int) -> str:
  """The schema path of a block's `filters`: `blocks/{b}/filters`."""
  return f'blocks/{block_index}/filters'


def conv_part(kernel_size: int) -> str:
  """The part name of a `ConvSpec` with this kernel size: `conv_k{k}`."""
  return f'conv_k{kernel_size}'


def depthwise_part(kernel_size: int) -> str:
  """`depthwise_k{k}` (each kernel size its own part, never a crop)."""
  return f'depthwise_k{kernel_size}'


def batch_norm_name(part: str) -> str:
  """The name of a part's batch norm (a graph op): `{part}/bn`."""
  return join(part, BATCH_NORM)


def variable_name(part: str, variable: str) -> str:
  """A part's variable: `{part}/{variable}`, e.g. `.../expand/kernel`."""
  return join(part, variable)
