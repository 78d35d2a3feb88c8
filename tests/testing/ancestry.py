"""What a TF graph op waits for: the tests of the order graphs impose."""

from typing import Set

import tensorflow as tf


def ancestors(op: tf.Operation) -> Set[tf.Operation]:
  """`op` and every op it waits for (inputs and control inputs)."""
  seen, todo = set(), [op]
  while todo:
    op = todo.pop()
    if op not in seen:
      seen.add(op)
      todo.extend(t.op for t in op.inputs)
      todo.extend(op.control_inputs)
  return seen
