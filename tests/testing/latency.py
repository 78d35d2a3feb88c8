"""Synthetic latency measurements and CSVs for the cost-model tests."""

import numpy as np

from tunas_tf.cost_model import random_search

SSD = 'digits_search'  # 18 decisions, 744 coupled features.
HEADER = 'indices,latency_ms,spread_ms'


def write_csv(path, indices, latencies, header=HEADER):
  """Writes a latency CSV with `header`, one row per architecture."""
  with open(path, 'w') as f:
    f.write(header + '\n')
    for i, latency in zip(indices, latencies):
      f.write(f'{i},{latency},0.01\n')


def synthetic(num, seed, noise=1e-3):
  """Architectures whose latency is exactly linear in the features, + noise.

  The latency is the architecture's MAC count / 1e4 (9 to 64 "ms" in
  digits_search), times (1 + noise * N(0, 1)).

  Returns:
    (indices, noisy latencies, exact latencies).
  """
  kept = random_search.sample_architectures(SSD, num, seed=seed,
                                            cost_model='macs')
  indices = [k['indices'] for k in kept]
  exact = np.array([k['estimated_cost'] for k in kept]) / 1e4
  rng = np.random.RandomState(seed)
  return indices, exact * (1 + noise * rng.randn(num)), exact
