"""The searched architecture of a search directory.

`search_architecture(model_dir)` takes the argmax of each OneOf's controller
logits from a checkpoint (default the latest), the space from the
directory's `model_spec.json` and the search's data from its `config.json`.
With `cost_tolerance=T` it is instead the most likely architecture whose
estimated cost is within the target times (1 -/+ T) (`most_likely_in_band`:
the argmax whenever it is in the band), which keeps what the controller
learned when a decision has not settled. `off_target_line` says when the
result's cost misses the search's target by more than `OFF_TARGET`. Used by
`tools/extract_architecture` and `tools/report`.
"""

from __future__ import annotations

import heapq
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from tunas_tf import architecture as architecture_lib
from tunas_tf import files
from tunas_tf.controller import reinforce
from tunas_tf.controller import rewards
from tunas_tf.cost_model import linear as cost_linear
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.search import config as config_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema
from tunas_tf.search_space import spec_io

CONTROLLER_SCOPE = 'rl_controller/logits/'
# How many index vectors `most_likely_in_band` costs before it gives up.
MAX_CANDIDATES = 20000
# How far (a fraction of the target) a searched architecture's cost may be
# from the target before `off_target_line` speaks: the band README and
# docs/search.md advise for `--cost_tolerance`.
OFF_TARGET = 0.05


def _softmax(values: np.ndarray) -> np.ndarray:
  shifted = np.exp(values - values.max())
  return shifted / shifted.sum()


def _log_softmax(values: np.ndarray) -> np.ndarray:
  shifted = values - values.max()
  return shifted - np.log(np.exp(shifted).sum())


def most_likely_in_band(logits: Sequence[np.ndarray],
                        cost_of: Callable[[Tuple[int, ...]], float],
                        low: float, high: float,
                        max_candidates: int = MAX_CANDIDATES
                        ) -> Tuple[Tuple[int, ...], int]:
  """The most likely index vector with `low <= cost_of(vector) <= high`.

  Args:
    logits: one rank-1 array of logits per decision; the decisions are
      independent, so a vector's log-likelihood is the sum of its choices'
      log-softmax values.
    cost_of: the cost of an index vector.
    low, high: the cost band (inclusive).
    max_candidates: how many vectors to cost before giving up.

  Returns:
    (indices, rank): the vector and its place in order of likelihood (1: the
    argmax, first maximum on ties). Ties are broken by the choices'
    order of likelihood and then by index, so the result is deterministic.

  Raises:
    ValueError: for an empty band, or when none of the `max_candidates` most
      likely vectors is in it (the message gives the argmax's cost).
  """
  if not low <= high:
    raise ValueError(f'most_likely_in_band: empty band [{low}, {high}]')
  if max_candidates < 1:
    raise ValueError(f'max_candidates must be >= 1, got {max_candidates}')
  scores = [_log_softmax(np.asarray(v, np.float64).reshape(-1))
            for v in logits]
  # Each decision's choices from the most likely down (stable: index order
  # on ties, so rank 0 everywhere is `argmax_indices`).
  orders = [np.argsort(-s, kind='stable') for s in scores]
  sorted_scores = [s[o] for s, o in zip(scores, orders)]

  def total(ranks: Tuple[int, ...]) -> float:
    return float(sum(s[r] for s, r in zip(sorted_scores, ranks)))

  # Best-first over rank vectors: a vector's predecessors (one rank less
  # somewhere) are at least as likely, so the heap pops in order.
  start = (0,) * len(scores)
  heap: List[Tuple[float, Tuple[int, ...]]] = [(-total(start), start)]
  seen = {start}
  argmax_cost = None
  rank = 0
  while heap and rank < max_candidates:
    rank += 1
    _, ranks = heapq.heappop(heap)
    indices = tuple(int(o[r]) for o, r in zip(orders, ranks))
    cost = float(cost_of(indices))
    if argmax_cost is None:
      argmax_cost = cost
    if low <= cost <= high:
      return indices, rank
    for k in range(len(ranks)):
      if ranks[k] + 1 < len(orders[k]):
        child = ranks[:k] + (ranks[k] + 1,) + ranks[k + 1:]
        if child not in seen:
          seen.add(child)
          heapq.heappush(heap, (-total(child), child))
  raise ValueError(
      f'none of the {rank} most likely architectures '
      f'costs within [{low:.6g}, {high:.6g}] (the argmax costs '
      f'{argmax_cost:.6g}); widen the tolerance or search with a closer '
      'target')


def read_logits(checkpoint: str, spec: Any) -> Dict[str, np.ndarray]:
  """The controller's logits by OneOf path, checked against `spec`.

  Raises:
    ValueError: if the checkpoint cannot be read or lacks the logits of one
      of the space's OneOfs. (`reinforce.argmax_indices` checks the lengths.)
  """
  reader = resume_lib.read_checkpoint(checkpoint)
  shapes = reader.get_variable_to_shape_map()
  logits = {}
  for path, _ in schema.flatten_with_paths(spec):
    name = CONTROLLER_SCOPE + path
    if name not in shapes:
      raise ValueError(f'Checkpoint {checkpoint!r} has no controller logits '
                       f'{name!r}: not a search of this space')
    logits[path] = np.asarray(reader.get_tensor(name), np.float64).reshape(-1)
  return logits


def _newest_readable(model_dir: str) -> str:
  """The checkpoint the `checkpoint` file names, if it can be read.

  Raises:
    ValueError: when there is none, or it cannot be read (naming the newest
      readable one to pass as --checkpoint); nothing is changed.
  """
  point = resume_lib.resume_point(model_dir)
  if point.checkpoint is None:
    raise ValueError(f'No checkpoint in {model_dir!r}: the search has not '
                     'saved one yet')
  if point.skipped:
    prefix, reason = point.skipped[0]
    raise ValueError(f'{prefix} is unreadable ({reason}); pass '
                     f'--checkpoint={point.checkpoint} (the newest readable '
                     'one) or resume the search, which falls back to it')
  return point.checkpoint


def search_architecture(model_dir: str, checkpoint: Optional[str] = None,
                        cost_tolerance: Optional[float] = None,
                        config: Optional[config_lib.SearchConfig] = None
                        ) -> architecture_lib.Architecture:
  """The searched architecture of `model_dir`.

  Args:
    model_dir: a search's model directory (config.json, model_spec.json,
      checkpoints).
    checkpoint: a checkpoint path; default the directory's latest.
    cost_tolerance: None for the argmax (the original's extraction), or T in
      (0, 1): the most likely architecture whose estimated cost is within
      the search's target times (1 -/+ T) (see the module doc); the record
      then carries `cost_tolerance` and `argmax_indices`.
    config: the directory's `config_lib.read(model_dir)`, which a caller
      that needs it too has read already; None: read here.

  Raises:
    ValueError: for a directory that is not a search, holds no checkpoint,
      or whose files disagree; a tolerance outside (0, 1); no architecture
      in the band among the `MAX_CANDIDATES` most likely.
  """
  if cost_tolerance is not None and not 0.0 < cost_tolerance < 1.0:
    raise ValueError(f'--cost_tolerance must be in (0, 1), got '
                     f'{cost_tolerance}')
  if config is None:
    config = config_lib.read(model_dir)
  spec_path = os.path.join(model_dir, config_lib.MODEL_SPEC_FILE)
  if not files.exists(spec_path):
    raise ValueError(f'No {config_lib.MODEL_SPEC_FILE} in {model_dir!r}')
  spec = spec_io.loads(files.read_text(spec_path))
  ssd = config.ssd
  if spec != mobile.get_search_space(ssd):
    raise ValueError(f'{spec_path} differs from the current {ssd!r} space; '
                     'the search was made with another version')
  if checkpoint is None:
    checkpoint = _newest_readable(model_dir)
  logits = read_logits(checkpoint, spec)
  indices = reinforce.argmax_indices(logits, spec)
  model = config.resolved_cost_model
  argmax_indices = None
  if cost_tolerance is not None:
    target = config.rl_cost_model_target
    argmax_indices = schema.format_indices(indices)
    indices, _ = most_likely_in_band(
        [logits[path] for path, _ in schema.flatten_with_paths(spec)],
        lambda candidate: cost_linear.estimate_cost_of_indices(
            list(candidate), model),
        target * (1 - cost_tolerance), target * (1 + cost_tolerance))
  cost = cost_linear.estimate_cost_of_indices(list(indices), model)
  global_step = int(resume_lib.reader(checkpoint).get_tensor('global_step'))
  return architecture_lib.Architecture(
      ssd, indices, estimated_cost=cost, cost_model=config.cost_model,
      cost_target=config.rl_cost_model_target, global_step=global_step,
      max_global_step=config.max_global_step,
      checkpoint=files.abspath(checkpoint), dataset=config.job.dataset,
      image_size=config.job.image_size, num_classes=config.job.num_classes,
      num_channels=config.job.num_channels,
      preprocessing=config.job.preprocessing,
      validation_examples=config.validation_examples,
      cost_tolerance=cost_tolerance, argmax_indices=argmax_indices,
      probabilities={path: tuple(round(float(p), 6) for p in _softmax(v))
                     for path, v in logits.items()})


def extract(model_dir: str, checkpoint: Optional[str] = None,
            cost_tolerance: Optional[float] = None) -> Dict[str, Any]:
  """`search_architecture` as the JSON object of `architecture.json` (its
  checkpoint absolute: `architecture.write` makes it relative to the file)."""
  return search_architecture(model_dir, checkpoint, cost_tolerance).to_json()


def cost_miss_line(cost: float, target: float, units: str = '',
                   reward: str = rewards.REWARD_ABS) -> Optional[str]:
  """The line saying `cost` misses `target` by more than `OFF_TARGET`, with
  the remedies (None when it does not).

  Args:
    cost: the searched architecture's estimated cost.
    target: the search's cost target (> 0).
    units: the cost's unit ('MACs', 'ms'), or '' for none.
    reward: the search's `--rl_reward_function`: under `mnas_hard`, which
      does not penalise a cheaper architecture, only a cost over the target
      counts.

  Returns:
    e.g. 'the searched architecture costs 171,000 MACs, 22.3% under its
    target 220,131 MACs: search longer (--max_steps), pull harder towards
    the target (a more negative --rl_cost_model_exponent), or extract the
    most likely architecture within 5% of it (--cost_tolerance=0.05)'.
  """
  miss = cost / target - 1.0
  # Decided on the figure the line prints, so it never says '5% over'.
  percent = f'{100 * abs(miss):.3g}'
  if float(percent) <= 100 * OFF_TARGET or (
      reward == rewards.REWARD_MNAS_HARD and miss < 0):
    return None
  remedies = ['search longer (--max_steps)']
  # A more negative beta pulls the `abs` reward to the target from either
  # side, and every reward down from above it; `mnas` pays for being under.
  if reward == rewards.REWARD_ABS or miss > 0:
    remedies.append('pull harder towards the target (a more negative '
                    '--rl_cost_model_exponent)')
  remedies.append('extract the most likely architecture within '
                  f'{OFF_TARGET:.0%} of it (--cost_tolerance={OFF_TARGET:g})')
  unit = f' {units}' if units else ''
  return (f'the searched architecture costs '
          f'{cost_linear.cost_text(cost)}{unit}, '
          f"{percent}% {'over' if miss > 0 else 'under'} its "
          f'target {cost_linear.cost_text(target)}{unit}: '
          f"{', '.join(remedies[:-1])}{',' if len(remedies) > 2 else ''} or "
          f'{remedies[-1]}')


def off_target_line(architecture: architecture_lib.Architecture,
                    config: config_lib.SearchConfig) -> Optional[str]:
  """`cost_miss_line` of a searched architecture against its search's
  target; None when the search had no cost term or the cost is unknown."""
  if not config.enable_cost_model or architecture.estimated_cost is None:
    return None
  units = cost_linear.cost_units(architecture.cost_model)
  return cost_miss_line(
      architecture.estimated_cost, config.rl_cost_model_target,
      '' if units == cost_linear.UNKNOWN_UNITS else units,
      config.rl_reward_function)
