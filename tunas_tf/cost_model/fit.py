"""Fits a linear cost model to measured costs (docs/tools.md, 'Reading the
fit'): ridge on the coupled features plus exact count columns, folded back
into `features @ kernel + bias`, scored on held-out rows, refitted on all."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from tunas_tf.cost_model import features as features_lib
from tunas_tf.cost_model import macs as macs_lib
from tunas_tf.search_space import mobile

UNITS = 'ms'
# Candidate ridge penalties for RidgeCV (features are 0/1, latencies in ms).
ALPHAS = tuple(float(a) for a in np.logspace(-6, 6, 25))
MIN_ROWS = 10
MIN_HELD_OUT = 2
MIN_TRAIN = 5
# The count columns are scaled to about this (the one-hot features are 0/1),
# so the penalty on their coefficients is COUNT_WEIGHT**2 times lighter:
# "latency follows the counts" is the model's first guess (bench/DECISIONS.md,
# 'Latency fit: count columns kept').
COUNT_WEIGHT = 100.0
# A fit must cut the constant predictor's held-out MAPE at least this much.
BETTER_THAN_CONSTANT = 0.8
# A fit this accurate on held-out rows is accepted at the penalty's lower edge.
ACCURATE_WITHIN10_PERCENT = 95.0
# And no fit is accepted with fewer of its held-out rows within +-10%.
MIN_WITHIN10_PERCENT = 80.0
# Kendall's tau is not given on fewer held-out rows (one swapped pair of 5
# moves it by 0.2).
MIN_RANK_ROWS = 10


class PoorFit(ValueError):
  """A fit that should not be used (the message says why and what to do);
  `result` is what `fit` would have returned."""

  def __init__(self, message: str, result: Dict[str, Any]):
    super().__init__(message)
    self.result = result


def feature_matrix(ssd: str, indices: Sequence[Any]) -> np.ndarray:
  """[len(indices), num_features] float64 coupled features of architectures
  (`features.batched_features`, all at once)."""
  return features_lib.batched_features(mobile.get_search_space(ssd),
                                       list(indices)).astype(np.float64)


def _percentage_errors(predicted: np.ndarray,
                       actual: np.ndarray) -> Tuple[float, float]:
  ape = np.abs(predicted - actual) / np.abs(actual) * 100.0
  return float(ape.mean()), float(ape.max())


def scores(predicted: np.ndarray, actual: np.ndarray) -> Dict[str, Any]:
  """How well `predicted` matches `actual`: `mape_percent`,
  `max_ape_percent`, `within5_percent` and `within10_percent` (the share of
  predictions within +-5% and +-10%: nn-Meter's and LitePred's figures) and
  `kendall_tau` (rank agreement, -1..1; 0 for constant predictions; None on
  fewer than `MIN_RANK_ROWS` rows)."""
  from scipy import stats  # pylint: disable=g-import-not-at-top
  predicted, actual = np.asarray(predicted), np.asarray(actual)
  mape, max_ape = _percentage_errors(predicted, actual)
  error = np.abs(predicted - actual) / np.abs(actual)
  tau = None
  if len(actual) >= MIN_RANK_ROWS:
    tau = 0.0
    if np.ptp(predicted) > 0 and np.ptp(actual) > 0:
      tau = float(stats.kendalltau(predicted, actual).statistic)
  return {'mape_percent': mape, 'max_ape_percent': max_ape,
          'within5_percent': float(100.0 * np.mean(error <= 0.05)),
          'within10_percent': float(100.0 * np.mean(error <= 0.10)),
          'kendall_tau': tau}


def timing_noise_percent(latencies: Sequence[float], spreads: Sequence[float],
                         repeats: Sequence[int]) -> Optional[float]:
  """The rows' own timing noise (%, None without rows): the median standard
  error of a row's latency, sigma / sqrt(rounds) (x 1.2533 for the median
  of more than two). Sigma: the median difference of a row's first two
  rounds (`protocol.pass_noise`, from the CSV's columns) / 0.9539 (normal
  noise), a two-round row's being twice its IQR; a row past two rounds went
  on as its first two disagreed more than any that stopped, so it ranks
  above them. When such rows are half or more, sigma is their median IQR /
  1.349 / latency."""
  latencies, spreads, repeats = (np.asarray(v, np.float64) for v in (
      latencies, spreads, repeats))
  if not latencies.size:
    return None
  relative = spreads / latencies
  sigma = np.median(np.where(repeats <= 2, 2 * relative, np.inf)) / 0.9539
  if not np.isfinite(sigma):
    sigma = np.median(relative[repeats > 2]) / 1.349
  return float(100 * np.median(np.where(repeats <= 2, 1.0, 1.2533) * sigma /
                               np.sqrt(np.maximum(repeats, 1))))


def figures(scored: Dict[str, Any], rows: int) -> str:
  """'MAPE 2.1%, worst 8.3%, 90% within +-5%, 97.5% within +-10%, Kendall's
  tau 0.987' of `scores` over `rows` rows (no tau on too few)."""
  tau = scored['kendall_tau']
  return (f"MAPE {scored['mape_percent']:.3g}%, worst "
          f"{scored['max_ape_percent']:.3g}%, {scored['within5_percent']:.3g}"
          f"% within +-5%, {scored['within10_percent']:.3g}% within +-10%, " +
          (f"Kendall's tau {tau:.3f}" if tau is not None else
           f'no rank figure on {rows} rows (fewer than {MIN_RANK_ROWS})'))


def count_columns(ssd: str, shape: macs_lib.InputSpec
                  ) -> List[Tuple[str, np.ndarray, float]]:
  """(name, kernel, bias) of the exact linear counts a fit adds as columns:
  MACs and `macs.LAYER_COUNTS`, at `shape`."""
  args = (shape.image_size, shape.num_classes, shape.input_channels)
  return [('macs', *macs_lib.macs_cost_model(ssd, *args))] + [
      (name, *macs_lib.layer_counts_model(ssd, name, *args))
      for name in macs_lib.LAYER_COUNTS]


def _with_counts(x: np.ndarray, columns, scales=None
                 ) -> Tuple[np.ndarray, List[float]]:
  """x with each count column appended, divided by its mean over x's rows
  over `COUNT_WEIGHT` (or by `scales`)."""
  values = [x @ kernel + bias for _, kernel, bias in columns]
  if scales is None:
    scales = [(float(np.mean(v)) or 1.0) / COUNT_WEIGHT for v in values]
  return (np.hstack([x] + [(v / s)[:, None] for v, s in zip(values, scales)]),
          scales)


def design_matrix(ssd: str, indices: Sequence[Any], shape: macs_lib.InputSpec,
                  scales: Optional[List[float]] = None
                  ) -> Tuple[np.ndarray, List[float]]:
  """The fit's columns for `indices` (coupled features, then the scaled
  `count_columns`) and the scales (their means over these rows unless
  given)."""
  return _with_counts(feature_matrix(ssd, indices),
                      count_columns(ssd, shape), scales)


def _folded(model, columns, scales) -> Tuple[np.ndarray, float]:
  """The ridge model on [features, counts / scales] as features @ k + b."""
  num = len(columns)
  kernel = np.array(model.coef_[:-num], np.float64)
  bias = float(model.intercept_)
  for weight, (_, count_kernel, count_bias), scale in zip(
      model.coef_[-num:], columns, scales):
    kernel += weight / scale * count_kernel
    bias += weight / scale * count_bias
  return kernel, bias


def _ridge(x: np.ndarray, y: np.ndarray):
  """RidgeCV with each row weighted by 1 / latency: between absolute and
  relative error, so the fast architectures are fitted too (bench/DECISIONS.md,
  '`fit_cost_model` weights rows by 1 / latency')."""
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


def split(num_rows: int, holdout_fraction: float, seed: int
          ) -> Tuple[np.ndarray, np.ndarray]:
  """(train, held-out) row numbers: a seeded permutation, cut by
  `split_sizes` (every form of model is scored on the same rows)."""
  num_train, _ = split_sizes(num_rows, holdout_fraction)
  order = np.random.RandomState(seed).permutation(num_rows)
  return order[:num_train], order[num_train:]


def _checked_latencies(indices: Sequence[Any], latencies: Sequence[float]
                       ) -> np.ndarray:
  latencies = np.asarray(latencies, np.float64)
  if latencies.ndim != 1 or len(indices) != latencies.shape[0]:
    raise ValueError(f'{len(indices)} architectures but '
                     f'{latencies.size} latencies')
  if not np.all(np.isfinite(latencies)) or np.any(latencies <= 0):
    raise ValueError('latencies must be positive finite numbers')
  return latencies


def fit(ssd: str, indices: Sequence[Any], latencies: Sequence[float],
        seed: int = 0, holdout_fraction: float = 0.2,
        shape: Optional[macs_lib.InputSpec] = None,
        allow_poor_fit: bool = False,
        noise_percent: Optional[float] = None) -> Dict[str, Any]:
  """Fits the linear latency model on (`indices`, `latencies` ms), scores it
  on the held-out rows of `split`, refits on all.

  Args:
    shape: the input the rows were measured at (default the space's).
    allow_poor_fit: return a fit `check` refuses, with its `warning`.
    noise_percent: the rows' `timing_noise_percent`, if known.

  Returns:
    dict: `coefficients` (what `linear.load_coefficients` reads, with the
    held-out figures) and `predictions` (of every row, ms).

  Raises:
    ValueError: an unknown space, mismatched lengths, bad indices or too few
      rows. PoorFit: a fit `check` refuses, unless `allow_poor_fit`.
  """
  latencies = _checked_latencies(indices, latencies)
  train, held_out = split(len(indices), holdout_fraction, seed)
  shape = shape or macs_lib.resolve_input(ssd)
  columns = count_columns(ssd, shape)
  features = feature_matrix(ssd, indices)
  x, scales = _with_counts(features, columns)

  model = _ridge(x[train], latencies[train])
  final = _ridge(x, latencies)
  kernel, bias = _folded(final, columns, scales)
  return _result(
      ssd, features, kernel, bias, allow_poor_fit,
      description='measured latency (tools/measure_latency), linear ridge '
      'fit on the coupled features and the MAC count (tools/fit_cost_model)',
      alpha=float(final.alpha_), sample_weight='1/latency',
      alphas=list(ALPHAS),
      count_columns={
          'image_size': shape.image_size, 'num_classes': shape.num_classes,
          'input_channels': shape.input_channels,
          'ms_per_count': {name: float(w / s) for (name, _, _), w, s in zip(
              columns, final.coef_[-len(columns):], scales)}},
      num_rows=int(len(indices)),
      holdout=_holdout(holdout_fraction, seed, latencies, train, held_out,
                       lambda rows: model.predict(x[rows]),
                       alpha=float(model.alpha_),
                       timing_noise_percent=noise_percent))


def fit_table(ssd: str, table: Dict[str, float], indices: Sequence[Any],
              latencies: Sequence[float], seed: int = 0,
              holdout_fraction: float = 0.2,
              shape: Optional[macs_lib.InputSpec] = None,
              train_rows: Optional[int] = None,
              allow_poor_fit: bool = False,
              noise_percent: Optional[float] = None) -> Dict[str, Any]:
  """The block-table model: the sum of `table` (unit key -> ms), corrected
  (`block_table.fit_correction`) on the training rows of `split` (the first
  `train_rows` of them if given), scored on the held-out rows `fit` scores,
  refitted on all. Returns as `fit` (form 'block_table'); raises as `fit`,
  and ValueError for a unit missing from `table`."""
  from tunas_tf.cost_model import block_table  # pylint: disable=g-import-not-at-top
  latencies = _checked_latencies(indices, latencies)
  train, held_out = split(len(indices), holdout_fraction, seed)
  if train_rows is not None:
    train = train[:max(train_rows, MIN_TRAIN)]
  shape = shape or macs_lib.resolve_input(ssd)
  form, count = block_table.columns(ssd, shape, table)
  features = feature_matrix(ssd, indices)
  sums, counts = (features @ k + b for k, b in (form, count))

  def predict(correction, rows):
    return (correction['scale'] * sums[rows] +
            correction['per_unit'] * counts[rows] + correction['offset'])

  correction = block_table.fit_correction(sums[train], counts[train],
                                          latencies[train])
  uncorrected = scores(sums[held_out], latencies[held_out])
  every = np.arange(len(indices)) if train_rows is None else train
  final = block_table.fit_correction(sums[every], counts[every],
                                     latencies[every])
  kernel, bias = block_table.corrected(form, count, final)
  return _result(
      ssd, features, kernel, bias, allow_poor_fit, form=block_table.FORM,
      description='per-unit latency table (tools/measure_latency '
      '--block_table), its sum corrected on whole networks '
      '(tools/fit_cost_model --block_csv), as the coupled linear form',
      table={key: float(table[key])
             for key in block_table.slots(ssd, shape)[1]},
      correction=final, num_rows=int(len(every)),
      holdout=_holdout(
          holdout_fraction, seed, latencies, train, held_out,
          lambda rows: predict(correction, rows), correction=correction,
          timing_noise_percent=noise_percent,
          **{f'uncorrected_{k}': v for k, v in uncorrected.items()}))


def _result(ssd: str, features: np.ndarray, kernel: np.ndarray, bias: float,
            allow_poor_fit: bool, **fields: Any) -> Dict[str, Any]:
  """A fit's `coefficients` (the model, then `fields`) and `predictions` (of
  every row); PoorFit for a fit `check` refuses, unless allowed (then its
  `warning`)."""
  result = {'coefficients': {
      'ssd': ssd, 'units': UNITS, 'num_features': len(kernel),
      'kernel': [float(v) for v in kernel], 'bias': float(bias), **fields},
            'predictions': features @ kernel + bias}
  problem = check(result['coefficients'])
  if problem:
    if not allow_poor_fit:
      raise PoorFit(problem, result)
    result['warning'] = problem
  return result


def _holdout(fraction: float, seed: int, latencies: np.ndarray,
             train: np.ndarray, held_out: np.ndarray, predict: Any,
             **more: Any) -> Dict[str, Any]:
  """The coefficients' `holdout`: the split, the held-out `scores` of
  `predict(rows)` and (`constant_*`) of the train mean, `more`, the
  training MAPE."""
  held = latencies[held_out]
  constant = scores(np.full([len(held_out)], latencies[train].mean()), held)
  return {'fraction': float(fraction), 'seed': int(seed),
          'num_train': len(train), 'num_held_out': len(held_out),
          **more, **scores(predict(held_out), held),
          **{f'constant_{k}': v for k, v in constant.items()},
          'train_mape_percent': _percentage_errors(predict(train),
                                                   latencies[train])[0]}


def check(coefficients: Dict[str, Any]) -> Optional[str]:
  """Why a fitted model should not be used, with what to do; None if fine
  (the rules: docs/tools.md, 'Reading the fit')."""
  h, rows = coefficients['holdout'], coefficients['num_rows']
  noise = h.get('timing_noise_percent')
  reach = noise_reach(noise, 10)
  within = noise is not None and h['mape_percent'] <= noise
  more = (f"the device's timing is the limit, not the rows: " + (
      f'the held-out MAPE {h["mape_percent"]:.3g}% is within' if within else
      'at') + f" the rows' own timing noise {noise:.3g}% (the standard error "
      "of a row's median), " + ('which more architectures cannot lower' if
      within else f'where an exact model has {reach:.3g}% within +-10%') +
      '; measure again on a quieter device (idle, pinned --cpus), with a '
      'robust statistic (the median of many runs, not their mean) or more '
      'invocations (--repeats)' if within or reach < MIN_WITHIN10_PERCENT else
      f'measure about {max(rows, 40)} more architectures (at least '
      f'doubling the {rows} rows; tools/measure_latency appends to its '
      'CSV' + ('' if 'table' in coefficients else
               ', and --most_informative picks the ones the fit lacks') +
      ') and fit again')
  alphas = ((('held-out', h['alpha']), ('final', coefficients['alpha']))
            if 'alpha' in coefficients else ())  # A block table has none.
  for name, alpha in alphas:
    top = alpha == ALPHAS[-1]
    if top or (alpha == ALPHAS[0] and
               h['within10_percent'] < ACCURATE_WITHIN10_PERCENT):
      side = 'top' if top else 'bottom'
      return (f'the {name} fit chose alpha {alpha:g}, the {side} of its grid '
              f'{ALPHAS[0]:g}..{ALPHAS[-1]:g}: the {rows} rows do not '
              f'determine the model (held-out MAPE {h["mape_percent"]:.3g}%, '
              f'a constant {h["constant_mape_percent"]:.3g}%); {more}')
  if h['mape_percent'] > BETTER_THAN_CONSTANT * h['constant_mape_percent']:
    return (f'the held-out MAPE {h["mape_percent"]:.3g}% is no better than a '
            f'constant\'s {h["constant_mape_percent"]:.3g}% (it must be at most '
            f'{BETTER_THAN_CONSTANT:g} times it; the latencies may be mostly '
            f'noise: check the pass\'s noise); {more}')
  if h['within10_percent'] < MIN_WITHIN10_PERCENT:
    return (f'{h["within10_percent"]:.3g}% of the {h["num_held_out"]} '
            f'held-out rows are within +-10%, under the bar of '
            f'{MIN_WITHIN10_PERCENT:g}%; {more}' + (
                '' if noise is not None else ' (or, if the pass\'s own noise '
                'is near the held-out MAPE, with more --repeats)'))
  return None


def noise_reach(noise_percent: Optional[float], bound_percent: float) -> float:
  """The share (%) of rows an exact model holds within +-`bound_percent` of
  rows whose errors are normal with `noise_percent` (their
  `timing_noise_percent`) as sigma; 100 when unknown or 0."""
  if not noise_percent:
    return 100.0
  return 100 * math.erf(bound_percent / (noise_percent * math.sqrt(2)))


def summary(coefficients: Dict[str, Any]) -> str:
  """Human-readable held-out errors of a fitted coefficients document, and
  with the rows' timing noise what an exact model could reach."""
  h = coefficients['holdout']
  noise = h.get('timing_noise_percent')
  cap = (f"; the rows' own timing noise {noise:.3g}% lets an exact model "
         f'reach {noise_reach(noise, 5):.3g}% within +-5%, '
         f'{noise_reach(noise, 10):.3g}% within +-10%' if noise else '')
  return (f"held-out rows {h['num_held_out']} (trained on {h['num_train']}): "
          f"{figures(h, h['num_held_out'])}; constant predictor (train mean) "
          f"MAPE {h['constant_mape_percent']:.3g}%, worst "
          f"{h['constant_max_ape_percent']:.3g}%; refitted on all "
          f"{coefficients['num_rows']} rows" + (
              f", alpha {coefficients['alpha']:.3g}" if 'alpha' in coefficients
              else _table_summary(coefficients)) + cap)


def _table_summary(coefficients: Dict[str, Any]) -> str:
  """What a block table's summary adds: its size, the table sum alone
  on the held-out rows, and the correction."""
  h, c = coefficients['holdout'], coefficients['correction']
  return (f"; {len(coefficients['table'])} table entries, their sum alone "
          f"MAPE {h['uncorrected_mape_percent']:.3g}% "
          f"({h['uncorrected_within10_percent']:.3g}% within +-10%); "
          f"correction {c['scale']:.4g} x sum + {c['per_unit']:.4g} ms per "
          f"unit + {c['offset']:.4g} ms")
