"""The worker this process is in a multi-worker run, from `TF_CONFIG`,
checked in one line; only the chief writes the run's files (docs/scaling.md).
Importing this module does not import TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Optional

from tunas_tf.io import errors

ENV = 'TF_CONFIG'
# The jobs `MultiWorkerMirroredStrategy` trains with.
_JOBS = ('chief', 'worker')


@dataclasses.dataclass(frozen=True)
class Worker:
  """One task of a multi-worker cluster."""
  task_type: str  # 'chief' or 'worker'.
  index: int  # In its job.
  count: int  # How many tasks train (chief and workers).
  chief: bool  # Whether this task writes the run's files.

  def text(self) -> str:
    """'worker 1 of a cluster of 2'."""
    return f'{self.task_type} {self.index} of a cluster of {self.count}'


def _refuse(text: str, why: str) -> ValueError:
  shown = text if len(text) <= 200 else text[:200] + '...'
  return ValueError(f'{ENV} is not a multi-worker cluster ({why}): '
                    f'{errors.one_line(shown)!r}')


def _address(value: Any) -> bool:
  """Whether `value` is 'host:port' with a port in [1, 65535]."""
  if not isinstance(value, str):
    return False
  host, _, port = value.rpartition(':')
  return bool(host) and port.isdigit() and 0 < int(port) < 65536


def parse(text: str) -> Worker:
  """The worker `text` (a `TF_CONFIG` value: "cluster" maps "worker" and at
  most one "chief" to "host:port" lists, "task" names one); ValueError (one
  line quoting `text`) otherwise. The chief: task "chief", else worker 0."""
  try:
    value = json.loads(text)
  except ValueError:
    raise _refuse(text, 'not JSON') from None
  if not isinstance(value, dict):
    raise _refuse(text, 'not a JSON object')
  cluster = value.get('cluster')
  if not isinstance(cluster, dict) or not cluster:
    raise _refuse(text, 'no "cluster" object')
  others = sorted(set(cluster) - set(_JOBS))
  if others:
    raise _refuse(text, f'jobs {others}: only "chief" and "worker" train')
  if 'worker' not in cluster and 'chief' not in cluster:
    raise _refuse(text, 'no "worker" list')
  for job, addresses in cluster.items():
    if (not isinstance(addresses, list) or not addresses or
        not all(_address(a) for a in addresses)):
      raise _refuse(text, f'"{job}" must be a list of "host:port"')
  if len(cluster.get('chief', [])) > 1:
    raise _refuse(text, 'more than one "chief"')
  task = value.get('task')
  if not isinstance(task, dict):
    raise _refuse(text, 'no "task" object')
  task_type, index = task.get('type'), task.get('index', 0)
  if task_type not in cluster:
    raise _refuse(text, f'task type {task_type!r} is not a job of the '
                  'cluster')
  if (isinstance(index, bool) or not isinstance(index, int) or
      not 0 <= index < len(cluster[task_type])):
    raise _refuse(text, f'task index {index!r} is not one of the '
                  f'{len(cluster[task_type])} "{task_type}" tasks')
  chief = task_type == 'chief' or ('chief' not in cluster and index == 0)
  count = sum(len(cluster[job]) for job in cluster)
  return Worker(task_type, index, count, chief)


def worker() -> Optional[Worker]:
  """`parse` of `TF_CONFIG`, or None when it is unset or empty."""
  text = os.environ.get(ENV, '')
  if not text.strip():
    return None
  return parse(text)


def is_chief() -> bool:
  """Whether this process writes the run's files (no cluster, or its chief);
  ValueError as `parse`."""
  found = worker()
  return found is None or found.chief
