"""The original's random-search baseline: uniform architectures kept when
`min_cost <= estimated cost <= max_cost` under a linear cost model (and
within memory limits)."""

from __future__ import annotations

import itertools
import math
from typing import Any, Dict, List, Optional

from absl import logging

from tunas_tf.io import checks
from tunas_tf.cost_model import linear as cost_linear
from tunas_tf.cost_model import macs
from tunas_tf.cost_model import memory
from tunas_tf.search_space import mobile
from tunas_tf.search_space import sample
from tunas_tf.search_space import schema

# Draws allowed per requested architecture before giving up.
MAX_DRAWS_PER_ARCHITECTURE = 1000
LOG_EVERY = 100
# Draws costed at once (`linear.estimate_costs_of_indices`); those after the
# `num`-th kept one are dropped, as if never drawn.
DRAWS_PER_BATCH = 256


def sample_architectures(ssd: str, num: int, seed: int = 0,
                         cost_model: Optional[str] = None,
                         min_cost: Optional[float] = None,
                         max_cost: Optional[float] = None, *,
                         image_size: Optional[int] = None,
                         num_classes: Optional[int] = None,
                         input_channels: Optional[int] = None,
                         max_draws: Optional[int] = None,
                         sram_kb: Optional[float] = None,
                         flash_kb: Optional[float] = None
                         ) -> List[Dict[str, Any]]:
  """`num` dicts `{"indices": "0:2:1...", "estimated_cost": float}`, in the
  order drawn, of uniform draws (seeded) costing in [`min_cost`, `max_cost`]
  (None: unbounded) under `linear.get_cost_model`'s model and input; with
  `sram_kb` or `flash_kb` (KB), only those within the limits
  (`memory.over_limits`), with their `memory.needs`.

  ValueError for an unknown `ssd` or cost model, `num <= 0`, `min_cost >
  max_cost`, a limit <= 0 or on a space `memory` does not model, or fewer
  than `num` kept after `max_draws` (default `MAX_DRAWS_PER_ARCHITECTURE *
  num`) draws, saying the costs' range.
  """
  space_draws = sample.draws(ssd, seed)
  sample.check_num(num)
  for name, bound in (('min_cost', min_cost), ('max_cost', max_cost)):
    if bound is not None:
      checks.number(name, bound)
  limits = {name: limit for name, limit in (('sram_kb', sram_kb),
                                            ('flash_kb', flash_kb))
            if limit is not None}
  for name, limit in limits.items():
    checks.number(name, limit, 0, low_open=True)
  if min_cost is not None and max_cost is not None and min_cost > max_cost:
    raise ValueError(f'min_cost {min_cost:g} is greater than max_cost '
                     f'{max_cost:g}')
  model = cost_linear.get_cost_model(ssd, cost_model, image_size=image_size,
                                     num_classes=num_classes,
                                     input_channels=input_channels)
  shape = macs.resolve_input(ssd, image_size, num_classes, input_channels)
  max_draws = (MAX_DRAWS_PER_ARCHITECTURE * int(num) if max_draws is None
               else max_draws)
  kept: List[Dict[str, Any]] = []
  lowest, highest = math.inf, -math.inf
  draws = over = 0
  while len(kept) < num and draws < max_draws:
    batch = list(itertools.islice(space_draws,
                                  min(DRAWS_PER_BATCH, max_draws - draws)))
    costs = cost_linear.estimate_costs_of_indices(batch, model)
    for indices, cost in zip(batch, costs.tolist()):
      if len(kept) == num:
        break  # The rest of the batch is not drawn.
      draws += 1
      lowest, highest = min(lowest, cost), max(highest, cost)
      if ((min_cost is None or cost >= min_cost) and
          (max_cost is None or cost <= max_cost)):
        needs = (within(ssd, indices, shape, sram_kb, flash_kb) if limits
                 else {})
        over += needs is None
        if needs is not None:
          kept.append({'indices': schema.format_indices(indices),
                       'estimated_cost': cost, **needs})
      if draws % LOG_EVERY == 0:
        logging.info('%d draws, %d of %d kept (costs seen %.6g..%.6g %s)',
                     draws, len(kept), num, lowest, highest, model.units)
  if len(kept) < num:
    band = (f'[{"-inf" if min_cost is None else f"{min_cost:g}"}, '
            f'{"inf" if max_cost is None else f"{max_cost:g}"}]')
    given = ''.join(f' --{name}={limit:g}' for name, limit in limits.items())
    raise ValueError(
        f'only {len(kept)} of {num} architectures fell in the cost band '
        f'{band}{given and " within" + given} after {draws} draws (costs '
        f'drawn ranged {lowest:.6g}..{highest:.6g} {model.units}'
        f'{f", {over} in the band over the limits" if limits else ""}); the '
        'band is empty or too narrow')
  logging.info('kept %d architectures after %d draws', len(kept), draws)
  return kept


def within(ssd: str, indices: List[int], shape: macs.InputSpec,
            sram_kb: Optional[float], flash_kb: Optional[float]
            ) -> Optional[Dict[str, int]]:
  """{'arena_bytes', 'flash_bytes'} of an architecture in the limits, or None."""
  need = memory.needs(schema.prune(mobile.get_search_space(ssd), indices),
                      shape)
  return None if memory.over_limits(need, sram_kb, flash_kb) else need
