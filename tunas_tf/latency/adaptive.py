"""Which architectures to measure next: where the fitted model is least sure.

A ridge fit's uncertainty about columns x (`fit.design_matrix`) is
proportional to the leverage x^T (X^T X + alpha I)^-1 x, X the rows measured
so far; a greedy D-optimal design picks the largest, updates X, repeats.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from tunas_tf.cost_model import fit
from tunas_tf.cost_model import macs
from tunas_tf.search_space import sample


def most_informative(ssd: str, measured: Sequence[str], num: int,
                     shape: Optional[macs.InputSpec] = None,
                     pool: Optional[int] = None, seed: int = 0) -> List[str]:
  """`num` architectures to measure next, most informative first, from
  `pool` uniform draws (default max(500, 20 * num)) not in `measured`.

  Raises:
    ValueError: an unknown space, `num <= 0`, or fewer new draws than `num`.
  """
  shape = shape or macs.resolve_input(ssd)
  size = pool or max(500, 20 * num)
  done = set(measured)
  candidates = [i for i in dict.fromkeys(
      sample.sample_indices(ssd, size, seed)) if i not in done]
  if len(candidates) < num:
    raise ValueError(f'only {len(candidates)} new architectures among '
                     f'{size} draws; ask for fewer than {num} or a bigger pool')
  scales = None
  if measured:
    scales = fit.design_matrix(ssd, list(measured), shape)[1]
  x, scales = fit.design_matrix(ssd, candidates, shape, scales)
  inverse = np.eye(x.shape[1])  # Ridge penalty 1: the features are 0/1.
  if measured:
    rows = fit.design_matrix(ssd, list(measured), shape, scales)[0]
    inverse = np.linalg.inv(rows.T @ rows + np.eye(x.shape[1]))
  projected = inverse @ x.T                     # [columns, candidates]
  leverage = np.einsum('ij,ji->i', x, projected)
  picked: List[int] = []
  for _ in range(num):
    leverage[picked] = -np.inf
    best = int(np.argmax(leverage))
    picked.append(best)
    u = projected[:, best]                      # inverse @ x_best
    scale = 1.0 + leverage[best]
    coupling = x @ u                            # x_p^T inverse x_best
    leverage -= coupling**2 / scale
    projected -= np.outer(u, coupling) / scale
  return [candidates[i] for i in picked]
