"""TFLite Micro's arena of a sampled architecture, inside the search step:
`arena_model` lays out every buffer the planner may place (their bytes and
the bookkeeping linear in the features, as `macs.layer_count_model` makes
them) and `estimate_arena` replays `memory.greedy_plan` on them in TF ops of
static shapes (TPU too): `memory.arena_bytes` exactly, for a one-hot sample."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Dict, List

import numpy as np
import tensorflow as tf

from tunas_tf.cost_model import linear
from tunas_tf.cost_model import macs
from tunas_tf.cost_model import memory
from tunas_tf.search_space import mobile


@dataclasses.dataclass(frozen=True)
class ArenaModel:
  """`features @ kernel + bias`: the aligned bytes of every buffer (0 where
  the architecture has none; 0 the input, 1 + k the output of op slot k,
  then the scratch buffers), then the planner's temporary and the tail
  bytes. Per buffer the op slot making it (`first`) and the ops reading it
  (`reads`, [buffers, ops]); `takes_input` [ops]: the op also reads its
  layer's input, the latest tensor made by op slot `start` - 1 or before;
  `lowest`: no architecture of the space needs less (bytes)."""
  kernel: np.ndarray
  bias: np.ndarray
  first: np.ndarray
  reads: np.ndarray
  takes_input: np.ndarray
  start: np.ndarray
  lowest: int


def _layout(patterns: List[list]):
  """`ArenaModel`'s `first`, `reads`, `takes_input` and `start`, and where
  each layer's slots and each op slot's scratch buffers begin, from each
  layer's ops ((inputs, number of scratch buffers) of each)."""
  slots = [slot for pattern in patterns for slot in pattern]
  num_ops = len(slots)
  first = np.concatenate([[0], np.arange(num_ops)] + [
      [k] * n for k, (_, n) in enumerate(slots)]).astype(np.int32)
  reads = np.zeros([len(first), num_ops], bool)
  reads[1 + num_ops:] = first[1 + num_ops:, None] == np.arange(num_ops)
  takes_input = np.zeros([num_ops], bool)
  starts = np.cumsum([0] + [len(p) for p in patterns])[:-1]
  for at, pattern in zip(starts, patterns):
    for t, (inputs, _) in enumerate(pattern):
      for i in inputs:  # 0 its layer's input, i the output of slot at+i-1.
        if i:
          reads[at + i, at + t] = True
        else:
          takes_input[at + t] = True
  start = np.repeat(starts, [len(p) for p in patterns]).astype(np.int32)
  scratch_at = np.cumsum([1 + num_ops] + [n for _, n in slots])
  return first, reads, takes_input, start, starts, scratch_at


@functools.lru_cache(maxsize=32)
def arena_model(ssd: str, image_size: int, num_classes: int,
                input_channels: int) -> ArenaModel:
  """The `ArenaModel` of a space at an input; ValueError for a space
  `memory.lite_ops` does not model, or whose choices of one layer make
  different ops (`macs.layer_count_model`'s errors too)."""
  count = functools.partial(macs.layer_count_model,
                            mobile.get_search_space(ssd), image_size,
                            num_classes, input_channels)
  name = lambda layer: f'blocks/{layer.block_index}/layers/{layer.layer_index}'
  of_layer = lambda f: lambda layer: f(name(layer), memory.layer_ops(layer),
                                       layer.input_width * layer.input_size**2)
  of_head = lambda f: lambda w, s, n: f('head', memory.head_ops(w, s, n),
                                         w * s * s)
  layers: Dict[str, list] = {}  # Name -> [its ops, smallest live bytes].

  def record(key, lite, input_bytes):
    pattern = [(op.inputs, len(memory.scratch(op))) for op in lite]
    # The most bytes live at one of its ops: what the planner needs at least.
    lives = list(zip(*memory.lifetimes(
        lite, [input_bytes] + [op.output for op in lite])))
    peak = max([sum(b for b, f, l in lives if f <= t <= l)
                for t in range(len(lite))], default=0)
    seen = layers.setdefault(key, [pattern, peak])
    if lite and seen[0] and pattern != seen[0]:
      raise ValueError(f'arena model: the choices of {key} make different '
                       'ops; the search cannot estimate its arena')
    seen[:] = seen[0] or pattern, min(seen[1], peak)
    return 0

  quantize = memory.LiteOp('QUANTIZE', (0,), image_size**2 * input_channels)
  record('quantize', [quantize], quantize.output)
  count(of_layer(record), of_head(record), 'arena')
  first, reads, takes_input, start, starts, scratch_at = _layout(
      [pattern for pattern, _ in layers.values()])
  offsets = dict(zip(layers, starts))

  def values(key, lite, _):
    v = np.zeros([len(first) + 2])
    for t, op in enumerate(lite, offsets[key]):
      v[1 + t] = memory.align(op.output)
      for m, n in enumerate(memory.scratch(op)):
        v[scratch_at[t] + m] = memory.align(n)
      v[-2:] += memory.bookkeeping(op)
    return v

  kernel, bias = count(of_layer(values), of_head(values), 'arena',
                       len(first) + 2)
  bias += values('quantize', [quantize], 0)
  bias[0] = memory.align(quantize.output)
  bias[-2:] += memory.MODEL_BOOKKEEPING
  least = [memory.align(round(linear.cost_range(linear.LinearCostModel(
      ssd, 'bytes', kernel[:, c], bias[c], 'arena'))[0])) for c in (-2, -1)]
  lowest = max([p for _, p in layers.values()] + least[:1]) + least[1]
  return ArenaModel(kernel, bias, first, reads, takes_input, start,
                    int(lowest))


_tf_align = lambda n: tf.math.ceil(n / memory.ALIGN) * memory.ALIGN


@tf.autograph.experimental.do_not_convert
def estimate_arena(features: Any, model: ArenaModel) -> tf.Tensor:
  """Scalar float32 bytes of the arena of (possibly mixed) features:
  `memory.arena_bytes` exactly for a one-hot architecture; for a warm-up
  mixture, the plan of each buffer's expected bytes (present if any choice
  has it)."""
  # Products and a sum, not a matrix product: TPUs multiply those in
  # bfloat16 by default, which would round the bytes.
  values = tf.reduce_sum(tf.constant(model.kernel, tf.float32) * tf.cast(
      features, tf.float32)[:, None], 0) + tf.constant(model.bias, tf.float32)
  head = tf.maximum(_greedy_top(values[:-2], model), _tf_align(values[-2]))
  return head + _tf_align(values[-1])


def _greedy_top(sizes: tf.Tensor, model: ArenaModel) -> tf.Tensor:
  """`memory.greedy_plan` of the present buffers: each, largest first (ties:
  the last first), at the lowest of 0 and the ends of the placed buffers it
  overlaps in time that clears them all."""
  num_buffers, num_ops = model.reads.shape
  present = sizes > 0
  tensors = tf.range(num_ops + 1)
  made = tf.where(present[None, :num_ops + 1] & tf.constant(
      np.arange(num_ops + 1)[None, :] <= model.start[:, None]),
                  tensors[None, :], -1)
  reads = tf.constant(model.reads) | (
      tf.constant(model.takes_input)[None, :] &
      # tf.equal: `==` is Python's identity in a TF1 graph (the Estimator's).
      tf.equal(tf.range(num_buffers)[:, None],
               tf.reduce_max(made, 1)[None, :]))
  reads &= present[None, 1:num_ops + 1]
  first = tf.constant(model.first)
  last = tf.maximum(first, tf.reduce_max(
      tf.where(reads, tf.range(num_ops)[None, :], -1), 1))
  overlap = ((first[:, None] <= last[None, :]) &
             (first[None, :] <= last[:, None]) &
             present[:, None] & present[None, :])
  order = num_buffers - 1 - tf.argsort(
      tf.reverse(sizes, [0]), direction='DESCENDING', stable=True)
  never = tf.constant(2.0**30)

  def place(n, offsets, placed):
    i = order[n]
    clash = tf.gather(overlap, i) & placed
    ends = offsets + sizes
    at = tf.concat([[0.0], tf.where(clash, ends, never)], 0)
    blocked = tf.reduce_any(clash[None, :] & (at[:, None] < ends[None, :]) & (
        offsets[None, :] < at[:, None] + tf.gather(sizes, i)), 1)
    hot = tf.one_hot(i, num_buffers, on_value=True, off_value=False)
    return n + 1, offsets + tf.cast(hot, tf.float32) * tf.reduce_min(
        tf.where(blocked, never, at)), placed | hot

  _, offsets, _ = tf.while_loop(
      lambda n, *_: n < num_buffers, place,
      (tf.constant(0), tf.zeros([num_buffers]),
       tf.zeros([num_buffers], tf.bool)))
  return tf.reduce_max(tf.where(present, offsets + sizes, 0.0))
