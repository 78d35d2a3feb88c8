"""The engine a run trains and evaluates on: `make` is the one place that
reads `job.engine`; callers use nothing but `Engine`."""

from __future__ import annotations

from typing import Any, Dict, Optional, Protocol, Sequence

from tunas_tf.runtime import cluster
from tunas_tf.runtime import distribute
from tunas_tf.runtime import estimator
from tunas_tf.runtime import preemption
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.runtime import task as task_lib
from tunas_tf.runtime.jobs import JobConfig


class Engine(Protocol):
  """Trains and evaluates tasks (`runtime.task`) for one `job`; `chief`:
  whether this process writes the run's files."""

  job: JobConfig
  chief: bool

  def worker(self) -> Optional[cluster.Worker]:
    """This process's worker of a cluster, or None; ValueError (one line)
    for a malformed `TF_CONFIG`."""

  def check(self) -> None:
    """ValueError (one line), making and writing nothing, for what the
    engine could not run (no Estimator, an unresolvable TPU, too few
    devices, a strategy the environment refuses)."""

  def train(self, task: task_lib.Task, *, max_steps: int,
            stop: preemption.StopRequest, run_name: str,
            resume: resume_lib.ResumePoint) -> task_lib.Trained:
    """Trains `task` to `max_steps` from `resume` (the `checkpoint` file
    names it), saving every `job.save_checkpoints_steps` steps.

    Raises:
      ValueError: one line, for a NaN or Inf among the task's
        `finite_scalars` (the newest checkpoint never holds it), an
        undecodable image, an unreadable checkpoint, a lost directory.
      preemption.Stopped: when a signal stopped it (its checkpoint saved).
    """

  def evaluate(self, task: task_lib.EvaluatedTask, *,
               checkpoint: Optional[str], stop: preemption.StopRequest,
               run_name: str) -> Dict[str, Any]:
    """One pass of the task's evaluation on `checkpoint` (None: the task's
    own values): its aggregated metrics, `global_step`, `images_per_sec`.

    Raises:
      ValueError: one line, for an undecodable image or a checkpoint the
        task cannot read.
      preemption.Stopped: when a signal cut it short.
    """


def make(job: JobConfig, replicas: int = 1,
         grappler_off: Sequence[str] = ()) -> Engine:
  """The engine of `job.engine`, for `replicas` replicas off TPU; with
  `grappler_off`, the distribute engine goes without those passes, the
  Estimator's sessions without Grappler."""
  if job.engine == 'estimator':
    return estimator.EstimatorEngine(job, replicas,
                                     optimize_graph=not grappler_off)
  return distribute.DistributeEngine(job, replicas, grappler_off)
