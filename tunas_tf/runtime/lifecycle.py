"""One run's lifecycle, the same for every binary and engine.

`run(engine, binary, check, start)`: `check()` looks at everything and
writes nothing, nor does `engine.check()`; determinism is set; then, holding
the model directory (`run_lock`) with signals turned into a stop after the
step in flight (`preemption`), it checks again, points the `checkpoint` file
at the resume point and calls `start(plan, stop)`, which writes the run's
files and trains on `engine`; a non-chief worker of a multi-worker run
writes nothing and takes no lock.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Protocol, Sequence, TypeVar

import tensorflow as tf

from tunas_tf.io import errors
from tunas_tf.runtime import engine as engine_lib
from tunas_tf.runtime import preemption
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.runtime import run_lock
from tunas_tf.runtime.jobs import JobConfig


class Plan(Protocol):
  """What a binary's `check` found: at least where the run resumes."""
  resume: resume_lib.ResumePoint


P = TypeVar('P', bound=Plan)
R = TypeVar('R')


def main(binary: str, argv: Sequence[str], body: Callable[[], Any]) -> int:
  """A binary's `main` once its flags are parsed: `body()` (which checks,
  then runs), with extra arguments or a ValueError exiting in one line
  ('BINARY: ...', exit 1) and a stop by signal returning
  `preemption.EXIT_CODE`."""
  if len(argv) > 1:
    sys.exit(f'{binary}: unexpected arguments {list(argv[1:])}')
  try:
    with errors.errors_in_one_line(binary):
      body()
  except preemption.Stopped as e:
    print(f'{binary}: {e}', file=sys.stderr)
    return preemption.EXIT_CODE
  return 0


def run(engine: engine_lib.Engine, binary: str, check: Callable[[], P],
        start: Callable[[P, preemption.StopRequest], R],
        finished: Callable[[P], bool] = lambda plan: False,
        plan: Optional[P] = None, multi_worker: bool = False
        ) -> Optional[R]:
  """Checks, then (holding the model directory) checks again and starts.

  Args:
    engine: what the run trains on (`engine.make`).
    binary: the binary's name, for the lock and the messages.
    check: looks at everything and writes nothing; raises ValueError (one
      line) for what it refuses.
    start: given the plan of the second check and the stop request, writes
      the run's files and trains; its result is returned.
    finished: whether a plan says there is nothing left to do (then `run`
      returns None, having written nothing).
    plan: the result of a first `check()` the caller made already.
    multi_worker: whether the binary may run as several workers
      (`engine.worker()`); if not, a cluster is refused. A non-chief worker
      calls `start` after the first check, without the lock, and `start`
      writes none of the run's files (`engine.chief`).

  Raises:
    ValueError: from `check` or `engine.check` (both before anything is
      written); for a cluster without `multi_worker`; for a directory
      another live process holds or that changed in between.
    preemption.Stopped: when a signal stopped the run.
  """
  job = engine.job
  worker = engine.worker()  # A malformed TF_CONFIG is refused first.
  if worker is not None and not multi_worker:
    raise ValueError(f'{binary} runs as one worker: TF_CONFIG names a '
                     'cluster; unset it')
  plan = check() if plan is None else plan
  if finished(plan):
    return None
  engine.check()
  use_determinism(job)  # Before any graph is built.
  if worker is not None and not worker.chief:
    # The chief points its `checkpoint` file at the resume point before it
    # makes its strategy, which every worker's waits for.
    with preemption.stop_on_signal(binary) as stop:
      return start(plan, stop)
  with run_lock.acquire(job.model_dir, binary) as lock, \
      preemption.stop_on_signal(binary, lock.lost) as stop:
    # Again, now that no other process can change the directory.
    again = check()
    if finished(again):
      return None
    if (again.resume.checkpoint is None) != (plan.resume.checkpoint is None):
      raise ValueError(f'{job.model_dir} changed while this run started; '
                       'run the same command again')
    resume_lib.use_resume_point(job.model_dir, again.resume)
    return start(again, stop)


def start_words(run_name: str, model_dir: str, stored: bool,
                resume: resume_lib.ResumePoint) -> str:
  """The start of a run's first line: 'Starting RUN in DIR', 'Restarting
  ...' (a config.json, no checkpoint) or 'Resuming ... from step N
  (model.ckpt-N)'."""
  if resume.checkpoint is not None:
    return f'Resuming {run_name} in {model_dir} from {resume.text}'
  return f'{"Restarting" if stored else "Starting"} {run_name} in {model_dir}'


def use_determinism(job: JobConfig) -> None:
  """Turns on TF op determinism for `job.deterministic` (before any graph).

  `tf.config.experimental.enable_op_determinism`: every op runs a
  deterministic kernel (or fails saying it has none) and tf.data keeps its
  order, so a run and its resumption give the same bits on the same machine.
  It is process-wide and cannot be turned off again; without
  `job.deterministic` nothing changes.
  """
  if job.deterministic:
    tf.config.experimental.enable_op_determinism()
