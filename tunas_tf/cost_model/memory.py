"""What an int8 network needs on a microcontroller, from its spec alone:
`arena_bytes` (TFLite Micro's tensor arena, as the `tflite-micro` wheel's
64-bit host plans it) and `flash_bytes` (the .tflite `train_eval` exports),
both following the converter's op list (`lite_ops`)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import resolve
from tunas_tf.search_space import structure
from tunas_tf.search_space import walker

ALIGN = 16  # TFLite Micro's MicroArenaBufferAlignment().
# TFLite Micro's struct sizes on a 64-bit host (tflite-micro's allocator):
# TfLiteEvalTensor, NodeAndRegistration, a persistent TfLiteTensor with its
# quantization, AllocationInfo, the greedy planner's per-buffer arrays, a
# scratch buffer request and handle.
EVAL_TENSOR, NODE, IO_TENSOR = 24, 88, 96
ALLOCATION_INFO, PLANNER_BUFFER, SCRATCH_REQUEST, SCRATCH_HANDLE = 32, 40, 16, 8
# Kernel op data (`AllocatePersistentBuffer` in each kernel's Prepare).
OP_DATA = {'CONV_2D': 80, 'DEPTHWISE_CONV_2D': 80, 'ADD': 60, 'MEAN': 44,
           'QUANTIZE': 32}
# The interpreter's own tail (allocator, planner, subgraph arrays).
TAIL_FIXED = 512
# The .tflite beyond its int8 weights, fitted (least squares, 50 exports of
# digits_search and mcu_search; on 40 others within 0.31%): per output channel
# (an int32 bias, and a float32 scale + int64 zero point for the weights and
# for the bias: 28), per convolution (its 3 tensors, names, the op), per
# other op, and the rest.
FLASH_CHANNEL, FLASH_CONV, FLASH_OP, FLASH_FIXED = 28, 600, 276, 816


class Shape(NamedTuple):
  """The input (TensorFlow-free: `macs.InputSpec` has the same fields)."""
  image_size: int
  num_classes: int
  input_channels: int


@dataclasses.dataclass(frozen=True)
class LiteOp:
  """One op of the int8 model: `kind` (TFLite's builtin name), `inputs`
  (indices of activation tensors), `output` (its tensor's bytes), `channels`
  (per-channel scales of its int8 weights and int32 bias; 0 without
  weights), `weights` (bytes of its int8 weights)."""
  kind: str
  inputs: Tuple[int, ...]
  output: int
  channels: int = 0
  weights: int = 0


def align(n: int) -> int:
  """`n` bytes rounded up to `ALIGN`."""
  return -(-n // ALIGN) * ALIGN


class _Ops:
  """Collects `LiteOp`s; activation tensor i is op i's output (0: input)."""

  def __init__(self, input_bytes: int):
    self.ops: List[LiteOp] = []
    self.sizes = [input_bytes]

  def add(self, kind, inputs, output, channels=0, weights=0) -> int:
    self.ops.append(LiteOp(kind, tuple(inputs), output, channels, weights))
    self.sizes.append(output)
    return len(self.sizes) - 1

  def conv(self, x: int, in_width: int, out_width: int, kernel: int,
           size: int, depthwise: bool = False) -> int:
    weights = kernel * kernel * out_width * (1 if depthwise else in_width)
    return self.add('DEPTHWISE_CONV_2D' if depthwise else 'CONV_2D', [x],
                    size * size * out_width, out_width, weights)

  def part(self, x: int, part, size: int) -> Tuple[int, int]:
    """(output tensor, output size) of a pruned part on tensor `x`."""
    if part is None or isinstance(part, structure.Identity):
      return x, size
    if isinstance(part, structure.Chain):
      for child in part.parts:
        x, size = self.part(x, child, size)
      return x, size
    if isinstance(part, structure.Residual):
      y, size = self.part(x, part.layer, size)  # A skipped layer adds none.
      return (x if y == x else self.add('ADD', [y, x], self.sizes[x])), size
    out = part.out_size(size)
    if isinstance(part, (structure.Conv, structure.Depthwise)) and (
        getattr(part, 'activation', None) in _FUSED):
      return self.conv(x, part.in_width.static(), part.out_width.static(),
                       part.kernel_size, out,
                       isinstance(part, structure.Depthwise)), out
    if isinstance(part, structure.GlobalPool):
      return self.add('MEAN', [x], part.in_width.static()), 1
    if (isinstance(part, structure.Activation) and part.activation in _FUSED
        and self.ops and self.ops[-1].kind.endswith('CONV_2D')
        and x == len(self.sizes) - 1):
      return x, size  # Fused into the convolution before it.
    raise ValueError(
        f'memory estimate: {type(part).__name__} '
        f'{getattr(part, "activation", "")} is not supported (ReLU networks '
        'of convolutions, depthwise convolutions, residuals and pools)')


_FUSED = (None, ops.RELU, ops.RELU6)  # What TFLite fuses into a convolution.


def lite_ops(pruned: ops.ConvTowerSpec, shape: Shape
             ) -> Tuple[List[LiteOp], List[int]]:
  """(ops, bytes of each activation tensor, 0 the input) of the int8 model
  `train_eval` exports for `pruned` at `shape`. ValueError for a spec with
  OneOfs or a part not modelled (squeeze-excite, other than fused ReLU)."""
  s, c = shape.image_size, shape.input_channels
  built = _Ops(s * s * c)
  x = built.add('QUANTIZE', [0], s * s * c)
  size, width = s, c
  for layer in walker.describe_network(pruned, c).layers:
    x, size = built.part(x, layer.part, size)
    if layer.part is not None and layer.part.out_width.static():
      width = layer.part.out_width.static()
  x = built.conv(x, width, shape.num_classes, 1, size)
  built.add('MEAN', [x], shape.num_classes)
  return built.ops, built.sizes


def greedy_plan(sizes: Sequence[int], first: Sequence[int],
                last: Sequence[int]) -> int:
  """Bytes of TFLite Micro's GreedyMemoryPlanner layout: buffers by size,
  largest first (ties: the last requested first), each at the lowest offset
  clear of the placed buffers alive at the same time."""
  order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], -i))
  placed: List[Tuple[int, int]] = []  # (offset, buffer), by offset.
  top = 0
  for i in order:
    offset = 0
    for at, j in placed:
      if first[j] > last[i] or first[i] > last[j]:
        continue
      if at - offset >= sizes[i]:
        break
      offset = max(offset, at + sizes[j])
    placed.append((offset, i))
    placed.sort()
    top = max(top, offset + sizes[i])
  return top


def scratch(op: LiteOp) -> List[int]:
  """Bytes of an op's scratch buffers, live during it: int8 MEAN's int32
  sums, rank and axes (requested in its Prepare)."""
  return [4 * op.output, 16, 8] if op.kind == 'MEAN' else []


def lifetimes(lite: Sequence[LiteOp], sizes: Sequence[int]
              ) -> Tuple[List[int], List[int], List[int]]:
  """(aligned bytes, first op, last op) of the activation tensors (`lite_ops`'
  sizes), then of each op's `scratch` buffers: what the planner lays out."""
  first = [0] + list(range(len(lite)))
  last = list(first)
  buffers = [align(n) for n in sizes]
  for t, op in enumerate(lite):
    for i in op.inputs:
      last[i] = max(last[i], t)
    for n in scratch(op):
      buffers.append(align(n))
      first.append(t)
      last.append(t)
  return buffers, first, last


def bookkeeping(op: LiteOp) -> np.ndarray:
  """[planner's temporary arrays, persistent tail] bytes one op adds: its
  output and weight tensors, node, op data and scratch buffers."""
  tensors, n = (3 if op.channels else 1), len(scratch(op))
  return np.array([
      SCRATCH_REQUEST * n + ALLOCATION_INFO * (tensors + n) +
      PLANNER_BUFFER * (1 + n),
      EVAL_TENSOR * tensors + NODE + SCRATCH_HANDLE * n +
      align(OP_DATA[op.kind]) + 2 * align(4 * op.channels)])


# `bookkeeping` of the model itself: its input tensor and MEAN's axes
# constant (the classifier ends in a MEAN), the interpreter, its I/O tensors.
MODEL_BOOKKEEPING = np.array([2 * ALLOCATION_INFO + PLANNER_BUFFER,
                              TAIL_FIXED + 2 * EVAL_TENSOR + 2 * IO_TENSOR])


def arena_bytes(pruned: ops.ConvTowerSpec, shape: Shape) -> int:
  """The tensor arena (bytes) TFLite Micro needs for the int8 model of a
  pruned spec at `shape` (`lite_ops`' errors): the planned activations and
  scratch buffers (or, if larger, the planner's own temporary arrays), plus
  the persistent bookkeeping."""
  lite, sizes = lite_ops(pruned, shape)
  planning, tail = sum((bookkeeping(op) for op in lite), MODEL_BOOKKEEPING)
  return (max(greedy_plan(*lifetimes(lite, sizes)), align(int(planning))) +
          align(int(tail)))


def _flash(lite: Sequence[LiteOp]) -> int:
  return sum(op.weights + FLASH_CHANNEL * op.channels + FLASH_CONV
             if op.channels else FLASH_OP for op in lite)


def flash_bytes(pruned: ops.ConvTowerSpec, shape: Shape) -> int:
  """Bytes of the int8 .tflite of a pruned spec at `shape` (`lite_ops`'
  errors); a file whose identical constants share a buffer is smaller."""
  return FLASH_FIXED + _flash(lite_ops(pruned, shape)[0])


def layer_ops(layer: resolve.ResolvedLayer) -> List[LiteOp]:
  """`lite_ops` of one layer, its input tensor 0 (a ReLU layer folds into the
  convolution before it, which `lite_ops` checks)."""
  if isinstance(layer.part, structure.Activation) and (
      layer.part.activation in _FUSED):
    return []
  built = _Ops(layer.input_width * layer.input_size**2)
  built.part(0, layer.part, layer.input_size)
  return built.ops


def head_ops(width: int, size: int, num_classes: int) -> List[LiteOp]:
  """The classifier's ops on a `size`^2 x `width` tensor 0: its 1x1
  convolution and MEAN."""
  built = _Ops(0)
  built.add('MEAN', [built.conv(0, width, num_classes, 1, size)], num_classes)
  return built.ops


@functools.lru_cache(maxsize=32)
def flash_cost_model(ssd: str, image_size: int, num_classes: int,
                     input_channels: int) -> Tuple[np.ndarray, float]:
  """`flash_bytes` as an exact linear model (kernel, bias) of a space's
  features, as `macs.macs_cost_model` (`macs.layer_count_model`'s errors)."""
  from tunas_tf.cost_model import macs  # pylint: disable=g-import-not-at-top
  return macs.layer_count_model(  # The head's: the input's QUANTIZE too.
      mobile.get_search_space(ssd), image_size, num_classes, input_channels,
      lambda layer: _flash(layer_ops(layer)),
      lambda *head: FLASH_FIXED + FLASH_OP + _flash(head_ops(*head)), 'flash')


def kilobytes(n: int) -> str:
  """Bytes as KB of 1,024 bytes: '87.4 KB'."""
  return f'{n / 1024:,.1f} KB'


def needs(pruned: ops.ConvTowerSpec, shape: Shape) -> Dict[str, int]:
  """{'arena_bytes': `arena_bytes`, 'flash_bytes': `flash_bytes`}."""
  return {'arena_bytes': arena_bytes(pruned, shape),
          'flash_bytes': flash_bytes(pruned, shape)}


# Each memory limit: its flag (KB of 1,024 bytes), the `needs` figure it
# bounds, the search's summary of that figure, and what the figure is.
LIMITS = (('sram_kb', 'arena_bytes', 'estimated_arena',
           'tensor arena (TFLite Micro'),
          ('flash_kb', 'flash_bytes', 'estimated_flash', 'int8 model (flash'))


def need_text(bytes_: float, what: str) -> str:
  """'a 9.1 KB tensor arena (TFLite Micro, estimated)' (`what` of `LIMITS`)."""
  return f'a {kilobytes(bytes_)} {what}, estimated)'


def over_limits(need: Mapping[str, int], sram_kb: Optional[float] = None,
                flash_kb: Optional[float] = None) -> Optional[str]:
  """None when `needs`' figures fit the limits (KB; None: none), else what
  is needed and how far over the first it breaks ('a 9.1 KB tensor arena
  (TFLite Micro, estimated), 20.0% over --sram_kb=7.58')."""
  for (flag, key, _, what), limit in zip(LIMITS, (sram_kb, flash_kb)):
    if limit is not None and need[key] > limit * 1024:
      return (f'{need_text(need[key], what)}, '
              f'{100 * (need[key] / (limit * 1024) - 1):.1f}% over --{flag}='
              f'{limit:g}')
  return None


def memory_text(pruned: ops.ConvTowerSpec, shape: Shape) -> str:
  """'TFLite Micro (int8, estimated): arena 87.4 KB, flash 150.2 KB', or
  the reason there is no estimate."""
  try:
    arena, flash = needs(pruned, shape).values()
  except ValueError as e:
    return f'TFLite Micro memory not estimated: {e}'
  return (f'TFLite Micro (int8, estimated): arena {kilobytes(arena)}, '
          f'flash {kilobytes(flash)}')
