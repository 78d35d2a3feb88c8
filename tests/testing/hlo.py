"""Reading tf2xla's HLO modules: the XLA lowering tests' shared helpers."""

from typing import Iterator

from tensorflow.compiler.xla import xla_data_pb2  # pylint: disable=g-direct-tensorflow-import
from tensorflow.compiler.xla.service import hlo_pb2  # pylint: disable=g-direct-tensorflow-import

# Element types of an instruction's shape.
BF16, F32, S64 = xla_data_pb2.BF16, xla_data_pb2.F32, xla_data_pb2.S64


def module(serialized: bytes) -> hlo_pb2.HloModuleProto:
  """The module of `experimental_get_compiler_ir(...)('hlo_serialized')`."""
  return hlo_pb2.HloModuleProto.FromString(serialized)


def instructions(hlo: hlo_pb2.HloModuleProto) -> Iterator[
    hlo_pb2.HloInstructionProto]:
  """Every instruction of every computation of `hlo`."""
  for computation in hlo.computations:
    yield from computation.instructions


def is_rng_counter(instruction) -> bool:
  """Whether an instruction is a stateless random op's counter (S64[<=2]).

  TF's stateless random ops (V2) lower their seed to a key and a counter of
  at most two 64-bit words (Philox), whatever the size of the draw.
  """
  return (instruction.metadata.op_type.startswith('StatelessRandom') and
          list(instruction.shape.dimensions) in ([1], [2]))


def vector_s64(hlo: hlo_pb2.HloModuleProto):
  """The TF op names of the 64-bit integer vectors of `hlo`, RNG counters
  aside (TPUs emulate 64-bit integers: scalars only, ideally)."""
  return [i.metadata.op_name for i in instructions(hlo)
          if i.shape.element_type == S64 and i.shape.dimensions
          and not is_rng_counter(i)]
