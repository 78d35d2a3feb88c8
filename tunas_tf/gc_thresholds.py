"""The binaries' garbage-collector thresholds: fewer, larger passes.

Kept for a measured figure: the suite's short digits search takes ~0.3 CPU
s (~3%) less, report 0.2-0.7 s, on TF 2.15 and 2.21 (bench/gc_thresholds.py;
bench/DECISIONS.md, 'GC thresholds').
"""

import gc

# Python's cyclic garbage collector passes over its youngest objects every
# 700 net allocations by default, and over older ones every 10 of those.
# Building a search graph allocates millions of objects (ops, tensors,
# their Python wrappers) that live as long as the graph, so nearly all of
# those passes find nothing (the figure above: medians of paired runs);
# the garbage that cycles hold waits a little longer to be freed.
GC_THRESHOLDS = (50_000, 20, 20)


def tune_gc() -> None:
  """Sets `GC_THRESHOLDS`: fewer, larger garbage-collector passes."""
  gc.set_threshold(*GC_THRESHOLDS)
