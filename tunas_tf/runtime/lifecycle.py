"""One run's lifecycle, the same for every binary and engine: check, take
the lock, check again, resume, train (docs/restarting.md).
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
  """Runs `body()`; extra arguments or a ValueError exit in one line
  ('BINARY: ...', 1), a stop by signal returns `preemption.EXIT_CODE`."""
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
    engine: what the run trains on.
    binary: the binary's name, for the lock and the messages.
    check: looks at everything and writes nothing; ValueError refuses.
    start: `start(plan, stop)` writes the run's files and trains.
    finished: whether a plan has nothing left to do (returns None).
    plan: a first `check()` the caller made already.
    multi_worker: whether a cluster is allowed; a non-chief worker starts
      after the first check, without the lock, and writes no run files.

  Returns:
    What `start` returned; None when `finished`.

  Raises:
    ValueError: from `check` or `engine.check` (before anything is written);
      a cluster without `multi_worker`; a directory another live process
      holds or that changed in between.
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
  """Turns on TF op determinism (process-wide, for good) for
  `job.deterministic`, before any graph is built."""
  if job.deterministic:
    tf.config.experimental.enable_op_determinism()
