"""The timing protocol (docs/tools.md, 'How it is timed'): architectures
timed in interleaved rounds, so a slow spell of the machine spreads over all
of them, as many as a row needs; a row is the median of its rounds."""

from __future__ import annotations

import dataclasses
import gc
import os
import time
from typing import (Any, Callable, Dict, Iterator, List, Optional, Sequence,
                    Tuple)

import numpy as np

from tunas_tf.io import checks


@dataclasses.dataclass(frozen=True)
class Protocol:
  """How each architecture is timed.

  Attributes:
    repeats: rounds per architecture before retries (>= 2; 2 if they agree).
    runs: timed calls per visit on this host (>= 1).
    warmup_runs: untimed calls at the start of every later visit (>= 0).
    max_warmup_runs: cap of the first visit's warm-up (>= warmup_runs).
    stable_tolerance: the warm-up stops when the median of the last
      `runs` calls moved less than this (relative) since the previous ones.
    max_disturbance: a visit is redone when more than this share of its wall
      time was not this process's CPU time (0 to 1; 1 turns it off).
    max_spread: a row is done once the IQR of its 2+ rounds over their median
      is within this; past `repeats`, it gets more only while `pass_noise` so
      far is within it too (more rounds do not settle a noisier device).
    max_retries: extra visits per architecture for disturbed visits and extra
      rounds for spread rows (>= 0).
    interleave: architectures visited in turn (>= 1).
  """
  repeats: int = 5
  runs: int = 10
  warmup_runs: int = 2
  max_warmup_runs: int = 100
  stable_tolerance: float = 0.02
  max_disturbance: float = 0.05
  max_spread: float = 0.05
  max_retries: int = 4
  interleave: int = 8

  def check(self) -> None:
    """Raises ValueError naming a field out of range."""
    for name, low in (('repeats', 2), ('runs', 1), ('warmup_runs', 0),
                      ('max_warmup_runs', 0), ('max_retries', 0),
                      ('interleave', 1)):
      checks.number(name, getattr(self, name), low, integer=True, prefix='')
    for name in ('stable_tolerance', 'max_disturbance', 'max_spread'):
      checks.number(name, getattr(self, name), 0, 1, low_open=True, prefix='')


@dataclasses.dataclass(frozen=True)
class Row:
  """One measured architecture: what the latency CSV holds."""
  indices: str
  latency_ms: float
  spread_ms: float
  repeats: int
  remeasured: int
  load: float
  rounds: Tuple[float, ...] = dataclasses.field(default=(), repr=False)
  seconds: float = dataclasses.field(default=0.0, repr=False)


def time_runs(run: Callable[[], Any], runs: int,
              clock: Callable[[], float] = time.process_time
              ) -> Tuple[float, float, float]:
  """(median ms, IQR ms, disturbance) of `runs` calls timed alone, the garbage
  collector off. Disturbance: the share of wall time `clock` did not advance
  (`time.thread_time` also catches this process's other threads)."""
  times = np.empty([runs])
  enabled = gc.isenabled()
  gc.disable()
  try:
    wall, cpu = time.perf_counter(), clock()
    for i in range(runs):
      start = time.perf_counter()
      run()
      times[i] = time.perf_counter() - start
    wall, cpu = time.perf_counter() - wall, clock() - cpu
  finally:
    if enabled:
      gc.enable()
  median, iqr = _spread(times * 1e3)
  return median, iqr, max(0.0, 1.0 - cpu / wall) if wall > 0 else 0.0


def warm_up(run: Callable[[], Any], runs: int, max_runs: int,
            tolerance: float,
            clock: Callable[[], float] = time.process_time) -> int:
  """Calls `run` (at most `max_runs` times) until the median of `runs` calls
  moves less than `tolerance` (relative); returns the calls made."""
  made, previous = 0, None
  while made < max_runs:
    batch = min(runs, max_runs - made)
    median = time_runs(run, batch, clock)[0]
    made += batch
    if previous is not None and abs(median - previous) <= tolerance * previous:
      break
    previous = median
  return made


def load_average() -> float:
  """The 1-minute load average (0 where the system has none)."""
  try:
    return float(os.getloadavg()[0])
  except OSError:
    return 0.0


# One architecture on one device: visit(first) -> (median ms, disturbance),
# `first` True on its first visit only.
Visit = Callable[[bool], Tuple[float, float]]


@dataclasses.dataclass
class Device:
  """Where architectures run (`backend`: 'tflite', 'tf' or 'command');
  `open(indices)` -> a `Visit`; `settings` go beside the CSV."""
  backend: str
  settings: Dict[str, Any]
  open: Callable[[str], Visit]


def _spread(values: Sequence[float]) -> Tuple[float, float]:
  q25, median, q75 = np.percentile(np.asarray(values), [25, 50, 75])
  return float(median), float(q75 - q25)


@dataclasses.dataclass
class Progress:
  """Seconds a pass spent on its architectures (finished or under way), its
  visits (device calls)."""
  work_seconds: float = 0.0
  visits: int = 0


# A reference architecture's `Visit` and its scale (ms): see `measure`.
Reference = Tuple[Visit, float]


def measure(device: Device, architectures: Sequence[str],
            protocol: Protocol, progress: Optional[Progress] = None,
            reference: Optional[Reference] = None) -> Iterator[Row]:
  """Yields each `Row` of `architectures` on `device` once its rounds are done
  (as `Protocol` says), `seconds` its preparation and visits (added to
  `progress`); DeviceError when a device command fails (rows so far stand).

  With a `reference` (visit, ms), each visit is followed by one of the
  reference and its round is the ratio of the two times `ms`: a drift of
  the device's speed (a shared host, a warming phone) moves both and cancels.
  """
  protocol.check()
  progress = progress or Progress()
  reference_visited = False
  firsts: List[float] = []  # Each row's first two rounds' difference.
  for start in range(0, len(architectures), protocol.interleave):
    chunk = list(architectures[start:start + protocol.interleave])
    seconds = dict.fromkeys(chunk, 0.0)

    def spend(indices: str, began: float) -> None:
      spent = time.perf_counter() - began
      seconds[indices] += spent
      progress.work_seconds += spent

    visits = {}
    for indices in chunk:
      began = time.perf_counter()
      visits[indices] = device.open(indices)
      spend(indices, began)
    gc.collect()  # The conversions' garbage, before any timing.
    rounds: Dict[str, List[float]] = {i: [] for i in chunk}
    redone, visited = dict.fromkeys(chunk, 0), set()

    def finished(indices: str) -> bool:
      (median, spread), made = _spread(rounds[indices]), len(rounds[indices])
      return made >= 2 and spread <= protocol.max_spread * median or (
          made >= protocol.repeats and (
              redone[indices] >= protocol.max_retries or
              np.median(firsts) > protocol.max_spread))

    todo = list(chunk)
    for r in range(protocol.repeats + protocol.max_retries):
      if r >= protocol.repeats:  # Rounds over the spread rows.
        for indices in todo:
          redone[indices] += 1
      for indices in todo[r % len(todo):] + todo[:r % len(todo)]:
        began = time.perf_counter()
        while True:
          median, disturbance = visits[indices](indices not in visited)
          visited.add(indices)
          progress.visits += 1
          if (disturbance <= protocol.max_disturbance or
              redone[indices] >= protocol.max_retries):
            break
          redone[indices] += 1
        if reference is not None:
          median *= reference[1] / reference[0](not reference_visited)[0]
          reference_visited = True
          progress.visits += 1
        rounds[indices].append(median)
        spend(indices, began)
        if len(rounds[indices]) == 2:
          firsts.append(first_difference(rounds[indices]))
        if finished(indices):
          median, spread = _spread(rounds[indices])
          yield Row(indices, median, spread, len(rounds[indices]),
                    redone[indices], load_average(), tuple(rounds[indices]),
                    seconds[indices])
      todo = [i for i in todo if not finished(i)]
      if not todo:
        break


def reference_ms(visit: Visit, visits: int = 10) -> float:
  """The reference's scale: the fastest of `visits` visits (the first warms
  up), the device at its least disturbed (a busy spell only slows it)."""
  return min(visit(k == 0)[0] for k in range(visits))


def first_difference(rounds: Sequence[float]) -> float:
  """Relative difference of a row's first two rounds: the architecture
  measured twice, interleaved (later rounds depend on these two)."""
  return float(abs(rounds[0] - rounds[1]) / (0.5 * (rounds[0] + rounds[1])))


def pass_noise(rows: Sequence[Row]) -> Optional[float]:
  """Median over rows of `first_difference` (a fraction), or None."""
  values = [first_difference(r.rounds) for r in rows if len(r.rounds) >= 2]
  return float(np.median(values)) if values else None


def passes_difference(first: Dict[str, float],
                      second: Dict[str, float]) -> Tuple[float, int]:
  """(median relative difference, count) over the architectures two passes
  share: `|a - b| / mean(a, b)`. Raises ValueError if they share none."""
  differences = _relative_differences(first, second)
  return float(np.median(differences)), len(differences)


def passes_reach(first: Dict[str, float], second: Dict[str, float],
                 bound: float) -> float:
  """The share (%) of the shared architectures an exact model could hold
  within +-`bound` (a fraction) of one pass, as the passes' noise allows:
  two passes' independent errors differ by sqrt(2) times one's, so the rows
  whose passes differ by at most sqrt(2) `bound`."""
  differences = _relative_differences(first, second)
  return float(100 * np.mean(differences <= np.sqrt(2) * bound))


def _relative_differences(first: Dict[str, float],
                          second: Dict[str, float]) -> np.ndarray:
  shared = [i for i in first if i in second]
  if not shared:
    raise ValueError('the two passes share no architecture')
  a = np.array([first[i] for i in shared])
  b = np.array([second[i] for i in shared])
  return np.abs(a - b) / (0.5 * (a + b))

