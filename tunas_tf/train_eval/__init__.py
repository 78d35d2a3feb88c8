"""Training one architecture standalone: `python -m tunas_tf.train_eval`
(docs/train_eval.md; the modules in docs/layout.md)."""
