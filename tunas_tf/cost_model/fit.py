"""Fits a linear cost model to measured costs: ridge, held-out errors.

`fit` fits ridge regression (`RidgeCV`, leave-one-out over `ALPHAS`, rows
weighted by 1 / latency) on the coupled one-hot features of each
architecture, scores a seeded `holdout_fraction` of the rows by mean and
worst absolute percentage error next to a constant predictor, then refits
on all rows. Its coefficients document is what `linear.load_coefficients`
(and `--cost_model=PATH`) reads; `tools/fit_cost_model` runs it on a
latency CSV.
"""

from __future__ import annotations

from typing import Any, Dict, Sequence, Tuple

import numpy as np

from tunas_tf.cost_model import features as features_lib
from tunas_tf.search_space import mobile

UNITS = 'ms'
# Candidate ridge penalties for RidgeCV (features are 0/1, latencies in ms).
ALPHAS = tuple(float(a) for a in np.logspace(-6, 6, 25))
MIN_ROWS = 10
MIN_HELD_OUT = 2
MIN_TRAIN = 5


def feature_matrix(ssd: str, indices: Sequence[Any]) -> np.ndarray:
  """[len(indices), num_features] float64 coupled features of architectures."""
  space = mobile.get_search_space(ssd)
  return np.stack([
      features_lib.features(features_lib.attach_one_hot_masks(space, i))
      for i in indices]).astype(np.float64)


def _percentage_errors(predicted: np.ndarray,
                       actual: np.ndarray) -> Tuple[float, float]:
  ape = np.abs(predicted - actual) / np.abs(actual) * 100.0
  return float(ape.mean()), float(ape.max())


def _ridge(x: np.ndarray, y: np.ndarray):
  """RidgeCV with each row weighted by 1 / latency.

  Latencies of one space span well over an order of magnitude; unweighted
  least squares fits the slow architectures and leaves large relative errors
  on the fast ones. Weighting the squared error by 1 / latency sits between
  absolute and relative error, and cuts the held-out error (bench/DECISIONS.md,
  '`fit_cost_model` weights rows by 1 / latency').
  """
  from sklearn import linear_model  # pylint: disable=g-import-not-at-top
  return linear_model.RidgeCV(alphas=ALPHAS, fit_intercept=True).fit(
      x, y, sample_weight=1.0 / y)


def split_sizes(num_rows: int, holdout_fraction: float) -> Tuple[int, int]:
  """(train, held-out) row counts; raises ValueError if there are too few."""
  if not 0.0 < holdout_fraction < 1.0:
    raise ValueError(f'holdout_fraction must be in (0, 1), got '
                     f'{holdout_fraction!r}')
  held_out = int(round(num_rows * holdout_fraction))
  train = num_rows - held_out
  if num_rows < MIN_ROWS or held_out < MIN_HELD_OUT or train < MIN_TRAIN:
    raise ValueError(
        f'too few rows: {num_rows} measurements, need at least {MIN_ROWS}, '
        f'with at least {MIN_HELD_OUT} held out and {MIN_TRAIN} to train on '
        f'(holdout_fraction={holdout_fraction:g} holds out {held_out})')
  return train, held_out


def fit(ssd: str, indices: Sequence[Any], latencies: Sequence[float],
        seed: int = 0, holdout_fraction: float = 0.2) -> Dict[str, Any]:
  """Fits the linear latency model, scores it on held-out rows, refits on all.

  Args:
    ssd: a name of `mobile.SEARCH_SPACES`.
    indices: one architecture per measurement (lists or '0:2:1' strings).
    latencies: measured latencies (ms), positive.
    seed: seed of the held-out split.
    holdout_fraction: share of the rows held out, in (0, 1).

  Returns:
    A dict with the coefficients document (`coefficients`: the JSON that
    `linear.load_coefficients` reads, with the held-out errors beside it),
    and `predictions`: the final model's predictions for every row (ms).

  Raises:
    ValueError: for an unknown space, mismatched lengths, indices that do not
      fit the space, or too few rows (see `split_sizes`).
  """
  latencies = np.asarray(latencies, np.float64)
  if latencies.ndim != 1 or len(indices) != latencies.shape[0]:
    raise ValueError(f'{len(indices)} architectures but '
                     f'{latencies.size} latencies')
  if not np.all(np.isfinite(latencies)) or np.any(latencies <= 0):
    raise ValueError('latencies must be positive finite numbers')
  num_train, num_held_out = split_sizes(len(indices), holdout_fraction)
  x = feature_matrix(ssd, indices)
  order = np.random.RandomState(seed).permutation(len(indices))
  train, held_out = order[:num_train], order[num_train:]

  model = _ridge(x[train], latencies[train])
  mape, max_ape = _percentage_errors(model.predict(x[held_out]),
                                     latencies[held_out])
  constant = np.full([num_held_out], latencies[train].mean())
  constant_mape, constant_max_ape = _percentage_errors(constant,
                                                       latencies[held_out])
  train_mape, _ = _percentage_errors(model.predict(x[train]),
                                     latencies[train])

  final = _ridge(x, latencies)
  kernel = [float(v) for v in final.coef_]
  bias = float(final.intercept_)
  coefficients = {
      'ssd': ssd,
      'units': UNITS,
      'num_features': len(kernel),
      'kernel': kernel,
      'bias': bias,
      'description': 'measured latency (tools/measure_latency), linear ridge '
                     'fit (tools/fit_cost_model)',
      'alpha': float(final.alpha_),
      'sample_weight': '1/latency',
      'alphas': list(ALPHAS),
      'num_rows': int(len(indices)),
      'holdout': {
          'fraction': float(holdout_fraction),
          'seed': int(seed),
          'num_train': int(num_train),
          'num_held_out': int(num_held_out),
          'alpha': float(model.alpha_),
          'mape_percent': mape,
          'max_ape_percent': max_ape,
          'constant_mape_percent': constant_mape,
          'constant_max_ape_percent': constant_max_ape,
          'train_mape_percent': train_mape,
      },
  }
  return {'coefficients': coefficients,
          'predictions': x @ np.asarray(kernel) + bias}


def summary(coefficients: Dict[str, Any]) -> str:
  """Human-readable held-out errors of a fitted coefficients document."""
  h = coefficients['holdout']
  return (f"held-out rows {h['num_held_out']} (trained on {h['num_train']}): "
          f"MAPE {h['mape_percent']:.3g}%, worst {h['max_ape_percent']:.3g}%; "
          f"constant predictor (train mean) MAPE "
          f"{h['constant_mape_percent']:.3g}%, worst "
          f"{h['constant_max_ape_percent']:.3g}%; refitted on all "
          f"{coefficients['num_rows']} rows, alpha {coefficients['alpha']:.3g}")
