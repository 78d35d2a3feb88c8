"""tunas_tf: TuNAS-style one-shot, hardware-aware architecture search in TF.

The entry points are `train_search`, `train_eval` and `tools/`; every one
reads `architecture` (the searched architecture's one format). Importing the
package does nothing but define it.
"""
