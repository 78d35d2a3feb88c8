"""The searched architecture of a search directory (`pick`, `pick_at`): the
most likely in the cost band, the argmax, or the band's best by one-shot
accuracy, with a line saying which rule chose (docs/search.md)."""

from __future__ import annotations

import dataclasses
import functools
import heapq
import math
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from tunas_tf import architecture as architecture_lib
from tunas_tf.io import checks
from tunas_tf.io import files
from tunas_tf.controller import reinforce
from tunas_tf.controller import rewards
from tunas_tf.cost_model import linear as cost_linear
from tunas_tf.cost_model import macs
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.search import config as config_lib
from tunas_tf.search import random_search
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema
from tunas_tf.search_space import spec_io

CONTROLLER_SCOPE = 'rl_controller/logits/'
# How many index vectors `most_likely_in_band` costs before it gives up, and
# at most at once (a batch's features are built together, far faster than
# one by one).
MAX_CANDIDATES = 20000
_BATCH = 1024
# How far (a fraction of the target) a searched architecture's cost may be
# from the target: the default band, and where `off_target_line` speaks.
OFF_TARGET = config_lib.OFF_TARGET
# extract_architecture's --oneshot: of the band's likeliest and 49 more the
# controller draws there, the best by one-shot accuracy (bench/DECISIONS.md).
ONESHOT = 50


def _log_softmax(values: np.ndarray) -> np.ndarray:
  shifted = values - values.max()
  return shifted - np.log(np.exp(shifted).sum())


def most_likely_in_band(
    logits: Sequence[np.ndarray],
    costs_of: Callable[[List[Tuple[int, ...]]], Sequence[float]],
    low: float, high: float, max_candidates: int = MAX_CANDIDATES
) -> Optional[Tuple[Tuple[int, ...], int]]:
  """(indices, rank) of the most likely index vector costing in `[low, high]`.

  The decisions are independent: a vector's log-likelihood sums its choices'
  log-softmax of `logits`. `costs_of` costs candidates most likely first, in
  batches of 1, 1, 2, 4, ... `_BATCH`; rank 1 is the argmax (ties by the
  choices' likelihood, then index). None when none of the `max_candidates`
  likeliest is in the band; ValueError for an empty band or
  `max_candidates` < 1.
  """
  if not low <= high:
    raise ValueError(f'most_likely_in_band: empty band [{low}, {high}]')
  if max_candidates < 1:
    raise ValueError(f'max_candidates must be >= 1, got {max_candidates}')
  scores = [_log_softmax(np.asarray(v, np.float64).reshape(-1))
            for v in logits]
  # Each decision's choices from the most likely down (stable: index order
  # on ties, so rank 0 everywhere is `argmax_indices`), in the rows of one
  # matrix (-inf past a decision's last choice).
  width = max(len(s) for s in scores) + 1
  orders = np.zeros([len(scores), width], int)
  sorted_scores = np.full([len(scores), width], -np.inf)
  for k, s in enumerate(scores):
    orders[k, :len(s)] = np.argsort(-s, kind='stable')
    sorted_scores[k, :len(s)] = s[orders[k, :len(s)]]
  rows = np.arange(len(scores))

  def totals(ranks: np.ndarray) -> np.ndarray:  # Each row's log-likelihood.
    return sorted_scores[rows, ranks].sum(axis=-1)

  # Best-first over rank vectors: a vector's successors (one rank more at
  # or after its last nonzero rank: each vector has one parent) are at most
  # as likely, so the heap pops in order.
  heap: List[Tuple[float, Tuple[int, ...]]] = [
      (-float(totals(np.zeros([1, len(scores)], int))[0]), (0,) * len(scores))]
  popped = 0
  while heap and popped < max_candidates:
    batch = []
    # As many as were costed before: the argmax alone first, then doubling.
    size = min(max(1, popped), _BATCH, max_candidates - popped)
    while heap and len(batch) < size:
      _, ranks = heapq.heappop(heap)
      ranks = np.array(ranks)
      batch.append(tuple(orders[rows, ranks].tolist()))
      last = np.flatnonzero(ranks)[-1:].sum()  # 0 for the argmax.
      children = ranks + np.eye(len(ranks), dtype=int)[last:]
      for child, total in zip(map(tuple, children.tolist()),
                              totals(children).tolist()):
        if total > -np.inf:
          heapq.heappush(heap, (-total, child))
    for k, cost in enumerate(costs_of(batch)):
      if low <= cost <= high:
        return batch[k], popped + k + 1
    popped += len(batch)
  return None


def samples_in_band(
    logits: Sequence[np.ndarray],
    costs_of: Callable[[List[Tuple[int, ...]]], Sequence[float]],
    low: float, high: float, count: int, seed: int = 0,
    max_draws: int = 200_000) -> List[Tuple[int, ...]]:
  """Up to `count` distinct index vectors drawn from the controller's
  distribution (the decisions independent, each the softmax of its logits)
  whose cost is in `[low, high]`, in the order drawn; fewer when
  `max_draws` draws (in batches of `_BATCH`) give fewer. The draws are
  `np.random.RandomState(seed).choice(n, p=softmax)`'s, decision after
  decision, vector after vector (as bench/README's one-shot picks drew)."""
  rng = np.random.RandomState(seed)
  cumulative = [np.cumsum(np.exp(_log_softmax(
      np.asarray(v, np.float64).reshape(-1)))) for v in logits]
  found: Dict[Tuple[int, ...], None] = {}
  for _ in range(0, max_draws, _BATCH):
    uniform = rng.random_sample((_BATCH, len(cumulative)))
    batch = list(zip(*(np.searchsorted(c / c[-1], uniform[:, d],
                                       side='right').tolist()
                       for d, c in enumerate(cumulative))))
    for indices, cost in zip(batch, costs_of(batch)):
      if low <= cost <= high:
        found.setdefault(indices)
        if len(found) == count:
          return list(found)
  return list(found)


def cost_band(config: config_lib.SearchConfig,
              tolerance: float = OFF_TARGET
              ) -> Optional[Tuple[float, float]]:
  """The costs a search aims at: its target times (1 -/+ `tolerance`), from
  0 under `mnas_hard` (which does not penalise a cheaper architecture); None
  when its reward has no cost term."""
  if not config.enable_cost_model:
    return None
  target = config.rl_cost_model_target
  low = (0.0 if config.rl_reward_function == rewards.REWARD_MNAS_HARD
         else target * (1 - tolerance))
  return low, target * (1 + tolerance)


def _costs_of(config: config_lib.SearchConfig, model: Any,
              band: Optional[Tuple[float, float]]
              ) -> Callable[[List[Tuple[int, ...]]], np.ndarray]:
  """`model`'s costs of index vectors, inf for one in `band` over the
  search's SRAM or flash limits: no band holds it, so no pick is over."""
  costs_of = functools.partial(cost_linear.estimate_costs_of_indices,
                               model=model)
  if not band or (config.sram_kb is None and config.flash_kb is None):
    return costs_of
  job = config.job
  shape = macs.resolve_input(config.ssd, job.image_size, job.num_classes,
                             job.num_channels)
  def limited(batch):
    costs = np.array(costs_of(batch), np.float64)
    for k, indices in enumerate(batch):
      if band[0] <= costs[k] <= band[1] and random_search.within(
          config.ssd, indices, shape, config.sram_kb, config.flash_kb) is None:
        costs[k] = math.inf
    return costs
  return limited


def read_logits(checkpoint: str, spec: Any,
                pair: int = 0) -> Dict[str, np.ndarray]:
  """The controller's logits (of `pair`'s policy) by OneOf path (in visit
  order); ValueError if the checkpoint cannot be read or lacks a OneOf's
  logits (`reinforce.argmax_indices` checks the lengths)."""
  reader = resume_lib.read_checkpoint(checkpoint)
  shapes = reader.get_variable_to_shape_map()
  logits = {}
  scope = CONTROLLER_SCOPE.replace('rl_controller',
                                   config_lib.pair_name('rl_controller', pair))
  for path, _ in schema.flatten_with_paths(spec):
    name = scope + path
    if name not in shapes:
      raise ValueError(f'Checkpoint {checkpoint!r} has no controller logits '
                       f'{name!r}: not a search of this space')
    logits[path] = np.asarray(reader.get_tensor(name), np.float64).reshape(-1)
  return logits


def pick(model_dir: str, checkpoint: Optional[str] = None,
         cost_tolerance: Optional[float] = OFF_TARGET,
         config: Optional[config_lib.SearchConfig] = None,
         oneshot: int = 0,
         pair: int = 0) -> Tuple[architecture_lib.Architecture, str]:
  """The searched architecture of `model_dir` (of policy `pair`, in its
  band), and the line saying which.

  Args:
    checkpoint: a checkpoint path; default the directory's latest.
    cost_tolerance: T in (0, 1): the most likely architecture within
      `cost_band(config, T)` (the argmax when none of the `MAX_CANDIDATES`
      likeliest is there); None, or no cost term: the argmax.
    config: `config_lib.read(model_dir)`; None reads it here.
    oneshot: K > 0: of the band's pick and K - 1 more drawn in the band, the
      best by one-shot accuracy on the search's hold-out (likelier on ties).

  Returns:
    (architecture, its checkpoint absolute; line saying which rule took it;
    with `oneshot`, the one-shot line first when it changed the pick).

  Raises:
    ValueError: not a search, no checkpoint, files that disagree, a
      tolerance outside (0, 1), `oneshot` < 0.
  """
  config, spec, checkpoint = _searched(model_dir, checkpoint, cost_tolerance,
                                       config, oneshot)
  if len(config.pairs) > 1:
    config = config.for_pair(pair)
  logits = read_logits(checkpoint, spec, pair)
  scores = [_log_softmax(v) for v in logits.values()]  # In visit order.
  argmax = tuple(reinforce.argmax_indices(logits, spec))
  model = config.resolved_cost_model
  band = None if cost_tolerance is None else cost_band(config,
                                                       cost_tolerance)
  costs_of = _costs_of(config, model, band)
  cost_of = functools.partial(cost_linear.estimate_cost_of_indices,
                              model=model)
  found = band and most_likely_in_band(scores, costs_of, *band)
  indices = found[0] if found else argmax
  line = _pick_line(config, cost_tolerance, band, found, scores, argmax,
                    cost_of)
  scored = None
  if oneshot and found:
    candidates, accuracy = _oneshot_scores(
        model_dir, checkpoint, indices, oneshot,
        samples_in_band(scores, costs_of, *band, oneshot))
    best, chosen = oneshot_line(candidates, accuracy,
                                config.validation_examples, argmax)
    indices, scored = candidates[best], len(candidates)
    line = (f"{chosen}\nBefore the one-shot step: {line.removeprefix('Took ')}"
            if best else f'{line}\n{chosen}')
  elif oneshot:
    line += f'\n--oneshot={oneshot} not applied: ' + (
        'no architecture in the band to start from' if band else
        'no cost band to draw in')
  return _record(
      config, checkpoint, indices, estimated_cost=cost_of(indices),
      cost_tolerance=cost_tolerance if found else None,
      argmax_indices=schema.format_indices(argmax) if found else None,
      oneshot=scored,
      probabilities={path: tuple(round(float(p), 6) for p in np.exp(v))
                     for path, v in zip(logits, scores)}), line


def _searched(model_dir: str, checkpoint: Optional[str],
              cost_tolerance: Optional[float],
              config: Optional[config_lib.SearchConfig], oneshot: int
              ) -> Tuple[config_lib.SearchConfig, Any, str]:
  """(config, space, checkpoint) of a search directory, checked (`pick`'s
  Raises)."""
  checks.number('oneshot', oneshot, 0, integer=True)
  if cost_tolerance is not None and not 0.0 < cost_tolerance < 1.0:
    raise ValueError(f'--cost_tolerance must be in (0, 1), got '
                     f'{cost_tolerance}')
  if config is None:
    config = config_lib.read(model_dir)
  spec_path = os.path.join(model_dir, config_lib.MODEL_SPEC_FILE)
  if not files.exists(spec_path):
    raise ValueError(f'No {config_lib.MODEL_SPEC_FILE} in {model_dir!r}')
  spec = spec_io.loads(files.read_text(spec_path))
  if spec != mobile.get_search_space(config.ssd):
    raise ValueError(f'{spec_path} differs from the current {config.ssd!r} '
                     'space; the search was made with another version')
  if checkpoint:
    return config, spec, checkpoint
  point = resume_lib.resume_point(model_dir)  # The `checkpoint` file's.
  if point.checkpoint is None:
    raise ValueError(f'No checkpoint in {model_dir!r}: the search has not '
                     'saved one yet')
  if point.skipped:
    prefix, reason = point.skipped[0]
    raise ValueError(f'{prefix} is unreadable ({reason}); pass '
                     f'--checkpoint={point.checkpoint} (the newest readable '
                     'one) or resume the search, which falls back to it')
  return config, spec, point.checkpoint


def _record(config: config_lib.SearchConfig, checkpoint: str,
            indices: Sequence[int], **fields: Any
            ) -> architecture_lib.Architecture:
  """The `Architecture` of `indices` picked from `config`'s search (its
  cost model and target) at `checkpoint`, with `fields`."""
  job = config.job
  return architecture_lib.Architecture(
      config.ssd, tuple(indices), cost_model=config.cost_model,
      cost_target=config.rl_cost_model_target,
      global_step=int(resume_lib.reader(checkpoint).get_tensor('global_step')),
      max_global_step=config.max_global_step,
      checkpoint=files.abspath(checkpoint), dataset=job.dataset,
      image_size=job.image_size, num_classes=job.num_classes,
      num_channels=job.num_channels, preprocessing=job.preprocessing,
      validation_examples=config.validation_examples, **fields)


def _oneshot_scores(model_dir: str, checkpoint: str,
                    likeliest: Tuple[int, ...], count: int,
                    drawn: List[Tuple[int, ...]]
                    ) -> Tuple[List[Tuple[int, ...]], List[float]]:
  """`pick`'s one-shot candidates (`likeliest`, then up to `count` - 1 of
  `drawn`) and their accuracies on the search's hold-out."""
  # TensorFlow's supernet and the data, only when asked.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tunas_tf.search import oneshot as oneshot_lib  # pylint: disable=g-import-not-at-top
  candidates = [likeliest] + [v for v in drawn if v != likeliest][:count - 1]
  try:
    accuracy = oneshot_lib.accuracies(model_dir, candidates,
                                      checkpoint=checkpoint)
  except (ValueError, OSError, tf.errors.OpError) as e:
    raise ValueError(f'{e} (the one-shot step reads the search\'s hold-out: '
                     '--oneshot=0 extracts without it)') from None
  return candidates, list(accuracy)


def oneshot_line(candidates: Sequence[Tuple[int, ...]],
                 accuracy: Sequence[float], images: int,
                 argmax: Tuple[int, ...]) -> Tuple[int, str]:
  """Which of `candidates` (the band's most likely first) the one-shot step
  takes, the best by `accuracy` on `images` hold-out images (the first on
  ties), and its line: the margin over the most likely in images, against
  the binomial standard error of the difference of two accuracies on
  `images` (beyond the noise past twice it)."""
  best = int(np.argmax(accuracy))
  where = (f'the best of {len(candidates)} in the band (the most likely and '
           f'{len(candidates) - 1} drawn from the controller) on the '
           f"search's hold-out of {images} images")
  if best == 0:
    return 0, f'One-shot accuracy kept it, {where}: {accuracy[0]:.2%}'
  a, b = accuracy[best], accuracy[0]
  error = math.sqrt((a * (1 - a) + b * (1 - b)) / images)
  return best, (
      f'Took {schema.format_indices(candidates[best])} by one-shot accuracy, '
      f'{where}: {a:.2%} against {b:.2%} for the most likely '
      f'{schema.format_indices(candidates[0])}' +
      (' (the argmax)' if tuple(candidates[0]) == tuple(argmax) else '') +
      f', {round((a - b) * images):+d} images, '
      f"{'beyond' if a - b > 2 * error else 'within'} the sampling noise "
      f'(standard error of the difference {100 * error:.2g} points, the bar '
      'twice that)')


def pick_at(model_dir: str, target: float, cost_model: Optional[str] = None,
            checkpoint: Optional[str] = None,
            cost_tolerance: float = OFF_TARGET,
            config: Optional[config_lib.SearchConfig] = None,
            oneshot: int = ONESHOT) -> Tuple[architecture_lib.Architecture,
                                             str]:
  """An architecture for `target` on `cost_model` from a finished search,
  no new search: of the in-band architectures of the policies nearest the
  target (the likeliest and `oneshot` drawn from each), the best by
  one-shot accuracy on the search's hold-out.

  On a cost model the search used, the two policies bracketing `target`;
  on another (a device given later), every policy. ValueError as `pick`, or
  for a model that does not resolve for the search, `target` outside the
  searched targets (or `linear.cost_range`), or nothing drawn in the band.
  """
  config, spec, checkpoint = _searched(model_dir, checkpoint, cost_tolerance,
                                       config, oneshot)
  name = cost_model or config.cost_model
  checks.number('target', target, 0, low_open=True)
  try:
    at = dataclasses.replace(config, cost_model=name, extra_pairs=(),
                             rl_cost_model_target=float(target))
  except ValueError as e:
    raise ValueError(f'--cost_model {name}: {e}') from None
  model = at.resolved_cost_model
  searched = sorted((t, k) for k, (m, t) in enumerate(config.pairs)
                    if m == name)
  low, high = ((searched[0][0], searched[-1][0]) if searched
               else cost_linear.cost_range(model))
  if not low <= target <= high:
    where = ('the targets searched' if searched else
             "the space's costs (no policy searched on it)")
    raise ValueError(
        f'--target={target:g} is outside {where} on cost model {name}: '
        f'{cost_linear.cost_text(low)} to {cost_linear.cost_text(high)}')
  nearest = ([k for t, k in searched if t <= target][-1:] +
             [k for t, k in searched if t >= target][:1]) if searched else \
      range(len(config.pairs))
  band = cost_band(at, cost_tolerance)
  costs_of = _costs_of(config, model, band)
  candidates: Dict[Tuple[int, ...], None] = {}
  for k in dict.fromkeys(nearest):
    scores = [_log_softmax(v) for v in read_logits(checkpoint, spec,
                                                    k).values()]
    found = most_likely_in_band(scores, costs_of, *band)
    candidates.update(dict.fromkeys(([found[0]] if found else []) +
                                    samples_in_band(scores, costs_of, *band,
                                                    max(oneshot, 1))))
  if not candidates:
    raise ValueError(f'No architecture of policies {sorted(set(nearest))} '
                     f'costs within {cost_tolerance:.0%} of --target='
                     f'{target:g} on {name}: give a wider --cost_tolerance')
  ordered = list(candidates)
  ordered, accuracy = _oneshot_scores(model_dir, checkpoint, ordered[0],
                                      len(ordered), ordered[1:])
  best, line = oneshot_line(ordered, accuracy, config.validation_examples, ())
  indices, scored = ordered[best], len(ordered)
  return _record(at, checkpoint, indices,
                 estimated_cost=cost_linear.estimate_cost_of_indices(
                     indices, model),
                 cost_tolerance=cost_tolerance, oneshot=scored), line


def front(model_dir: str, checkpoint: Optional[str] = None,
          cost_tolerance: float = OFF_TARGET,
          config: Optional[config_lib.SearchConfig] = None,
          oneshot: int = ONESHOT
          ) -> Tuple[List[architecture_lib.Architecture], List[float], str]:
  """`pick` of every pair (each in its band), their one-shot accuracies on
  the search's hold-out (one pass), and `pick`'s lines, pair by pair."""
  config, _, checkpoint = _searched(model_dir, checkpoint, cost_tolerance,
                                    config, oneshot)
  picks = [pick(model_dir, checkpoint, cost_tolerance, config, oneshot, k)
           for k in range(len(config.pairs))]
  from tunas_tf.search import oneshot as oneshot_lib  # pylint: disable=g-import-not-at-top
  accuracy = oneshot_lib.accuracies(model_dir, [a.indices for a, _ in picks],
                                    checkpoint=checkpoint)
  return [a for a, _ in picks], accuracy, '\n'.join(
      f'Pair {k}: {line}' for k, (_, line) in enumerate(picks))


def front_json(architectures: Sequence[architecture_lib.Architecture],
               accuracy: Sequence[float],
               measured_ms: Optional[Sequence[float]] = None
               ) -> Dict[str, Any]:
  """front.json: a point per pair (indices, cost model and target,
  estimated cost, one-shot accuracy, the measured latency when given)."""
  points = []
  for k, (a, acc) in enumerate(zip(architectures, accuracy)):
    points.append({'pair': k, 'indices': a.indices_string,
                   'cost_model': a.cost_model, 'cost_target': a.cost_target,
                   'estimated_cost': a.estimated_cost,
                   'oneshot_accuracy': acc})
    if measured_ms is not None:
      points[-1]['measured_latency_ms'] = measured_ms[k]
  return {'ssd': architectures[0].ssd,
          'global_step': architectures[0].global_step, 'points': points}


def _pick_line(config: config_lib.SearchConfig,
               cost_tolerance: Optional[float],
               band: Optional[Tuple[float, float]],
               found: Optional[Tuple[Tuple[int, ...], int]],
               scores: List[np.ndarray], argmax: Tuple[int, ...],
               cost_of: Callable[[Tuple[int, ...]], float]) -> str:
  """`pick`'s line: which architecture it took (`found` in `band`), and
  why."""
  if band is None:
    return 'Took the argmax of each decision (' + (
        '--argmax' if cost_tolerance is None else 'no cost band: the search '
        'had no cost term, --noenable_cost_model') + ')'
  low = cost_linear.cost_text(band[0])
  high = cost_linear.cost_text(band[1], config.cost_model)
  where = (f'at most {100 * cost_tolerance:g}% over the target (up to '
           f'{high})' if band[0] == 0 else f'within '
           f'{100 * cost_tolerance:g}% of the target ({low} to {high})')
  if not found:
    count = min(MAX_CANDIDATES, math.prod(len(s) for s in scores))
    return (f'Took the argmax of each decision: none of the {count:,} most '
            f'likely architectures costs {where}')
  if found[0] == argmax:
    return f'Took the argmax of each decision, which costs {where}'
  miss = cost_of(argmax) / config.rl_cost_model_target - 1
  log_ratio = sum(s[j] - s[i] for s, i, j in zip(scores, found[0], argmax))
  return (f'Took the most likely architecture {where}; the argmax '
          f'{schema.format_indices(argmax)} costs '
          f'{cost_linear.cost_text(cost_of(argmax), config.cost_model)}, '
          f"{100 * abs(miss):.1f}% {'over' if miss > 0 else 'under'} the "
          'target, and is '
          f'{np.exp(log_ratio):#.3g} times as likely (--argmax takes it)')


def cost_miss_line(cost: float, target: float, units: str = '',
                   reward: str = rewards.REWARD_ABS,
                   argmax: bool = False) -> Optional[str]:
  """The line saying `cost` misses `target` (> 0) by more than `OFF_TARGET`,
  with remedies (extracting without `--argmax` when `argmax`); None within
  it, or when cheaper under `mnas_hard`, which does not penalise that."""
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
  if argmax:
    remedies.append('extract without --argmax (the most likely architecture '
                    f'within {100 * OFF_TARGET:g}% of it)')
  *rest, last = remedies
  unit = f' {units}' if units else ''
  return (f'the searched architecture costs '
          f'{cost_linear.cost_text(cost)}{unit}, '
          f"{percent}% {'over' if miss > 0 else 'under'} its "
          f'target {cost_linear.cost_text(target)}{unit}: '
          f"{', '.join(rest)}{',' if len(rest) > 1 else ''}"
          f"{' or ' if rest else ''}{last}")


def off_target_line(architecture: architecture_lib.Architecture,
                    config: config_lib.SearchConfig,
                    argmax: bool = False) -> Optional[str]:
  """`cost_miss_line` of a searched architecture against its target (its
  own `cost_target`, else its search's), or, for a target no architecture
  reaches (a search from before train_search refused those), that; None
  when the search had no cost term or the cost is unknown."""
  if not config.enable_cost_model or architecture.estimated_cost is None:
    return None
  units = cost_linear.cost_units(architecture.cost_model)
  target = (config.rl_cost_model_target if architecture.cost_target is None
            else architecture.cost_target)
  searched = [m for m, (_, t) in zip(config.resolved_cost_models,
                                     config.pairs) if t == target]
  low, high = cost_linear.cost_range(searched[0]) if searched else (0, target)
  if not low <= target <= high:
    text = cost_linear.cost_text
    return (f'its target {text(target)} is outside what '
            f'{config.ssd} can cost ({text(low)} to {text(high)} {units}): no '
            'search or extraction reaches it; search again with a target in '
            'that range')
  return cost_miss_line(
      architecture.estimated_cost, target,
      '' if units == cost_linear.UNKNOWN_UNITS else units,
      config.rl_reward_function, argmax)
