"""Training one architecture standalone (docs/train_eval.md).

`python -m tunas_tf.train_eval` (flags and main in `__main__.py`). Modules:
config.py (`TrainEvalConfig`, config.json), network.py (the architecture and
its graph), data.py (input_fn), steps.py (the model_fn's steps), export.py
(SavedModel and TFLite), runner.py (model_fn, TPUEstimator, `run` on either
engine), trainer.py and evaluate.py (the distribute engine's training step
and evaluation pass).
"""
