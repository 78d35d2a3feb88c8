"""The machinery both binaries run on: the job config, the Estimator,
replicas, precision, hooks, summaries, guards, resume points, preemption,
the run lock and Cloud TPU resolution."""
