"""The binaries' garbage-collector thresholds: fewer, larger passes.

Kept for a measured figure: the suite's short digits search takes ~0.3 CPU
s (~3%) less, report 0.2-0.7 s, on TF 2.15 and 2.21 (bench/gc_thresholds.py;
bench/DECISIONS.md, 'GC thresholds').
"""

import gc

# Default (700, 10, 10): a search graph's millions of long-lived objects make
# nearly every young-generation pass find nothing.
GC_THRESHOLDS = (50_000, 20, 20)


def tune_gc() -> None:
  """Sets `GC_THRESHOLDS`: fewer, larger garbage-collector passes."""
  gc.set_threshold(*GC_THRESHOLDS)
