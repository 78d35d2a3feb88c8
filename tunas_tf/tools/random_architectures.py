r"""Samples architectures uniformly, optionally inside a cost band.

The random-search baseline (reference/tunas.md §8.2): every OneOf index is
drawn uniformly and independently (indices nested under an alternative that is
not chosen are drawn too and ignored by `schema.prune`, as in the original), and
an architecture is kept when `min_cost <= estimated cost <= max_cost`. Draws go
on until `--num` architectures are kept, or give up after `1000 * num` draws
with an error saying how many were kept and which costs were seen.

  python -m tunas_tf.tools.random_architectures --ssd=digits_search \
      --num=20 --seed=1 --output=/tmp/random.json

  python -m tunas_tf.tools.random_architectures --ssd=proxylessnas_search \
      --num=5 --min_cost=83 --max_cost=85 --output=/tmp/random_84ms.json

writes a JSON list `[{"indices": "0:2:1:...", "estimated_cost": 84.2}, ...]`.
`--cost_model` is `released`, `macs` or the path of a coefficients JSON; by
default the search's (released where it exists, else macs). The written file
is what `tools/measure_latency --indices_file` reads.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Dict, List, Optional, Sequence

from absl import app
from absl import flags
from absl import logging
import numpy as np

from tunas_tf import files
from tunas_tf.cost_model import features as features_lib
from tunas_tf.cost_model import linear as cost_linear
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema

FLAGS = flags.FLAGS
# Draws allowed per requested architecture before giving up.
MAX_DRAWS_PER_ARCHITECTURE = 1000
LOG_EVERY = 100


def draw_indices(num_choices: Sequence[int],
                 rng: np.random.RandomState) -> List[int]:
  """One uniform, independent index per OneOf (`num_choices` in visit order).

  With `rng = np.random.RandomState(seed)`, the first draw is the one
  `tools/describe_space --seed` picks.
  """
  return [int(rng.randint(n)) for n in num_choices]


def indices_to_string(indices: Sequence[int]) -> str:
  """'0:2:1' for [0, 2, 1]."""
  return ':'.join(str(int(i)) for i in indices)


def _check_bound(name: str, value: Optional[float]) -> Optional[float]:
  if value is None:
    return None
  if isinstance(value, bool) or not isinstance(value, (int, float)) or (
      not math.isfinite(value)):
    raise ValueError(f'{name} must be a finite number, got {value!r}')
  return float(value)


def sample_architectures(ssd: str, num: int, seed: int = 0,
                         cost_model: Optional[str] = None,
                         min_cost: Optional[float] = None,
                         max_cost: Optional[float] = None, *,
                         image_size: Optional[int] = None,
                         num_classes: Optional[int] = None,
                         input_channels: Optional[int] = None,
                         max_draws: Optional[int] = None,
                         log_every: int = LOG_EVERY
                         ) -> List[Dict[str, Any]]:
  """Draws architectures uniformly until `num` fall inside the cost band.

  Args:
    ssd: a name of `mobile.SEARCH_SPACES`.
    num: positive int, how many architectures to keep.
    seed: seed of the draws (`np.random.RandomState`).
    cost_model: None (released where it exists, else macs), 'released',
      'macs' or the path of a coefficients JSON (`linear.get_cost_model`).
    min_cost: keep only costs >= this (None: no lower bound).
    max_cost: keep only costs <= this (None: no upper bound).
    image_size: input resolution for 'macs' (default: the space's).
    num_classes: classifier width for 'macs' (default: the space's).
    input_channels: image channels for 'macs' (default: the space's).
    max_draws: give up after this many draws (default
      `MAX_DRAWS_PER_ARCHITECTURE * num`).
    log_every: log progress every this many draws.

  Returns:
    A list of `num` dicts `{"indices": "0:2:1...", "estimated_cost": float}`
    in the order drawn; each cost equals
    `linear.estimate_cost_of_indices(indices, ssd, cost_model, ...)`.

  Raises:
    ValueError: for an unknown `ssd` or cost model, `num <= 0`,
      `min_cost > max_cost`, or fewer than `num` architectures in the band
      after `max_draws` draws (the message says how many were kept and the
      range of the costs drawn).
  """
  space = mobile.get_search_space(ssd)
  if isinstance(num, bool) or not isinstance(num, (int, np.integer)) or (
      num <= 0):
    raise ValueError(f'num must be a positive int, got {num!r}')
  min_cost = _check_bound('min_cost', min_cost)
  max_cost = _check_bound('max_cost', max_cost)
  if min_cost is not None and max_cost is not None and min_cost > max_cost:
    raise ValueError(f'min_cost {min_cost:g} is greater than max_cost '
                     f'{max_cost:g}')
  model = cost_linear.get_cost_model(ssd, cost_model, image_size=image_size,
                                     num_classes=num_classes,
                                     input_channels=input_channels)
  if max_draws is None:
    max_draws = MAX_DRAWS_PER_ARCHITECTURE * int(num)
  counts = schema.num_choices(space)
  rng = np.random.RandomState(seed)
  kept: List[Dict[str, Any]] = []
  lowest, highest = math.inf, -math.inf
  draws = 0
  while len(kept) < num and draws < max_draws:
    indices = draw_indices(counts, rng)
    draws += 1
    masked = features_lib.attach_one_hot_masks(space, indices)
    cost = float(features_lib.features(masked).astype(np.float64) @
                 model.kernel + model.bias)
    lowest, highest = min(lowest, cost), max(highest, cost)
    if ((min_cost is None or cost >= min_cost) and
        (max_cost is None or cost <= max_cost)):
      kept.append({'indices': indices_to_string(indices),
                   'estimated_cost': cost})
    if log_every and draws % log_every == 0:
      logging.info('%d draws, %d of %d kept (costs seen %.6g..%.6g %s)',
                   draws, len(kept), num, lowest, highest, model.units)
  if len(kept) < num:
    band = (f'[{"-inf" if min_cost is None else f"{min_cost:g}"}, '
            f'{"inf" if max_cost is None else f"{max_cost:g}"}]')
    raise ValueError(
        f'only {len(kept)} of {num} architectures fell in the cost band '
        f'{band} after {draws} draws (costs drawn ranged {lowest:.6g}..'
        f'{highest:.6g} {model.units}); the band is empty or too narrow')
  logging.info('kept %d architectures after %d draws', len(kept), draws)
  return kept


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
  """Defines the tool's flags (only when run as a program)."""
  flags.DEFINE_string('ssd', 'digits_search', 'Search space, one of '
                      f'{sorted(mobile.SEARCH_SPACES)}.',
                      flag_values=flag_values)
  flags.DEFINE_integer('num', 1, 'How many architectures to keep.',
                       flag_values=flag_values)
  flags.DEFINE_integer('seed', 0, 'Seed of the uniform draws.',
                       flag_values=flag_values)
  flags.DEFINE_string('cost_model', None, "'released', 'macs' or the path of "
                      'a coefficients JSON; default released where it exists, '
                      'else macs.', flag_values=flag_values)
  flags.DEFINE_float('min_cost', None, 'Keep costs >= this (unset: no bound).',
                     flag_values=flag_values)
  flags.DEFINE_float('max_cost', None, 'Keep costs <= this (unset: no bound).',
                     flag_values=flag_values)
  flags.DEFINE_integer('image_size', None, "Input resolution for 'macs'; "
                       "default the space's.", flag_values=flag_values)
  flags.DEFINE_integer('num_classes', None, "Classifier width for 'macs'; "
                       "default the space's.", flag_values=flag_values)
  flags.DEFINE_integer('input_channels', None, "Image channels for 'macs'; "
                       "default the space's.", flag_values=flag_values)
  flags.DEFINE_string('output', None, 'Output JSON path (required).',
                      flag_values=flag_values)


def main(argv) -> None:
  if len(argv) > 1:
    sys.exit(f'random_architectures: unexpected arguments {argv[1:]}')
  if not FLAGS.output:
    sys.exit('random_architectures: --output is required')
  try:
    kept = sample_architectures(
        FLAGS.ssd, FLAGS.num, FLAGS.seed, FLAGS.cost_model, FLAGS.min_cost,
        FLAGS.max_cost, image_size=FLAGS.image_size,
        num_classes=FLAGS.num_classes, input_channels=FLAGS.input_channels)
  except ValueError as e:
    sys.exit(f'random_architectures: {e}')
  files.write_json(kept, FLAGS.output)
  costs = [k['estimated_cost'] for k in kept]
  print(f'{len(kept)} architectures of {FLAGS.ssd}, estimated cost '
        f'{min(costs):.6g}..{max(costs):.6g}; written to {FLAGS.output}')


if __name__ == '__main__':
  define_flags()
  app.run(main)
