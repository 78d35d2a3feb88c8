"""Training one architecture standalone (docs/train_eval.md).

`python -m tunas_tf.train_eval` (flags and main in `__main__.py`). Modules:
config.py (`TrainEvalConfig`, config.json), network.py (the architecture and
its graph), data.py (input_fn), task.py (training as a runtime Task, for
either engine), steps.py (the pieces of its steps and of the Estimator's
evaluation), export.py (SavedModel and TFLite), runner.py (model_fn,
TPUEstimator, `run` on either engine), evaluate.py (the distribute engine's
evaluation pass).
"""
