"""Does the supernet rank architectures as standalone training does?

Usage:
  python bench/supernet_ranking.py RUN_DIR [RUN_DIR ...] \
      [--search=SEARCH_DIR] [--steps=750,1500,3000]

Each RUN_DIR is a finished `bench/search_vs_random.py` run: its
results.json holds the searched and the random architectures (all within
+-5% of one cost) with their standalone top-1. Each architecture is scored
with the shared weights of a search checkpoint (`search.oneshot`: the
search's hold-out, batch norm on batch statistics, as the rewards were
measured), and the table gives, per run and checkpoint, Spearman's rank
correlation between one-shot and standalone top-1 over the random
architectures, and where the searched one ranks by one-shot accuracy. The
last line is `rho_mean=<f> rho_min=<f> searched_rank_mean=<f> rows=<n>
seconds=<n>` over the table's rows (rho over the random architectures;
rank 1 is the best).

The weights are each run's own search (`RUN_DIR/search`), or `--search`:
e.g. a search with `--rl_learning_rate=0`, whose controller stays uniform,
shows what the supernet alone can rank, without the controller's bias
(it trains what it samples most). `--steps` picks the checkpoints (the
search must have kept them: `--save_checkpoints_steps`,
`--keep_checkpoint_max`); default the latest.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

import _harness  # pylint: disable=g-import-not-at-top,wrong-import-position
from scipy import stats  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.search import oneshot  # pylint: disable=g-import-not-at-top,wrong-import-position


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('runs', nargs='+', help='search_vs_random run dirs')
  parser.add_argument('--search', default=None,
                      help='Search dir whose weights score every run '
                      '(default: each run\'s own search).')
  parser.add_argument('--steps', default=None,
                      help='Comma-separated checkpoint steps (default: the '
                      'latest).')
  args = parser.parse_args(argv)
  steps = ([int(s) for s in args.steps.split(',')] if args.steps
           else [None])
  print(f'{"run":<28} {"step":>6} {"rho(random)":>11} {"searched rank":>13} '
        f'{"one-shot mean":>13}')
  start = time.time()
  rhos, ranks = [], []
  for run in args.runs:
    try:
      with open(os.path.join(run, 'results.json')) as f:
        results = json.load(f)['results']
    except (OSError, ValueError, KeyError) as e:
      sys.exit(f'supernet_ranking: {run}: no readable results.json ({e})')
    search_dir = args.search or os.path.join(run, 'search')
    for step in steps:
      checkpoint = (None if step is None else
                    os.path.join(search_dir, f'model.ckpt-{step}'))
      try:
        scores = oneshot.accuracies(search_dir,
                                    [r['indices'] for r in results],
                                    checkpoint=checkpoint)
      except ValueError as e:
        sys.exit(f'supernet_ranking: {e}')
      standalone = [float(r['top1']) for r in results]
      rho = float(stats.spearmanr(scores[1:], standalone[1:]).statistic)
      rank = 1 + sum(s > scores[0] for s in scores[1:])
      rhos.append(rho)
      ranks.append(rank)
      label = 'latest' if step is None else str(step)
      print(f'{os.path.basename(os.path.normpath(run)):<28} {label:>6} '
            f'{rho:>11.2f} {f"{rank}/{len(scores)}":>13} '
            f'{sum(scores) / len(scores):>13.4f}', flush=True)
  _harness.finish('supernet_ranking',
                  f'rho_mean={sum(rhos) / len(rhos):.2f} '
                  f'rho_min={min(rhos):.2f} '
                  f'searched_rank_mean={sum(ranks) / len(ranks):.1f} '
                  f'rows={len(rhos)} seconds={time.time() - start:.0f}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
