r"""Does the search beat random search at equal cost? (the TuNAS paper's test)

Usage:
  python bench/search_vs_random.py --dataset=fashion_mnist_local \
      --data_dir=data/tfds [--target_scale=1.0] [--seed=0] [--num_random=10]
      [--output_dir=runs/search_vs_random/<dataset>_x<S>_seed<K>]

One run:
  1. a search (`train_search`, `--ssd`, the `macs` cost model) at the rule
     target (the geometric mean of the space's smallest and largest
     architectures' MACs at the dataset's image size) times `--target_scale`,
     search seed `--seed`;
  2. `tools/extract_architecture --cost_tolerance=0.05` on it: the most
     likely architecture within +-5% of the target (the argmax when it is
     in the band; bench/DECISIONS.md, "Reward exponent -0.2 and extraction
     within +-5%");
  3. the searched architecture and `--num_random` architectures drawn
     uniformly from the space within +-5% of its estimated cost (draw seed
     `--seed`) each trained from scratch by `train_eval` with one recipe
     (`RECIPE`: same epochs, batch, schedule, augmentation and train seed for
     all), evaluated on the test split (`tools/compare_random`'s library);
  4. with `--noise_seeds=M`, the searched architecture trained M more times
     with other train seeds: the seed-to-seed noise of one architecture, to
     hold against the random architectures' spread.

Prints a table and, last, `searched_top1=<f> random_median_top1=<f>
random_mean_top1=<f> random_std=<f> beats=<k>/<n> cost_dev=<f>` (random_std:
sample standard deviation; beats: random architectures below the searched
one; cost_dev: |searched cost / target - 1|). Writes `results.json` (every
run, the summary, the seconds of each phase) and `search_vs_random.png`
(accuracy against cost, the random points, the searched point, the target)
in the output directory. Started again it resumes: the search resumes or is
left as it is when finished, and finished trainings are skipped.

With `--sweep DIR [DIR ...]` it only reads finished runs' `results.json` and
plots them together (`--sweep_plot`, default sweep.png in the first DIR's
parent): the searched architectures against the random ones, over targets
and seeds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from typing import Any, Dict, List, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import _harness  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

from tunas_tf import files  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.cost_model import linear  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.data import datasets  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.search import compare  # pylint: disable=g-import-not-at-top,wrong-import-position

RESULTS_FILE = 'results.json'
PLOT_FILE = 'search_vs_random.png'
COST_TOLERANCE = 0.05

# The recipes, flagfiles in tunas_tf/configs/ (their comments say why each
# value; bench/DECISIONS.md the runs that decided them).
SEARCH_FLAGFILE = os.path.join(ROOT, 'tunas_tf', 'configs',
                               'fashion_mnist_search.cfg')
TRAIN_FLAGFILE = os.path.join(ROOT, 'tunas_tf', 'configs',
                              'fashion_mnist_train_eval.cfg')
SEARCH_FLAGS = (f'--flagfile={SEARCH_FLAGFILE}',)
RECIPE = (f'--flagfile={TRAIN_FLAGFILE}', '--noexport',
          '--log_every_steps=1000')


def rule_target(ssd: str, dataset: str, data_dir: str) -> float:
  """The search's default target for `ssd` on `dataset` (macs model)."""
  info = datasets.dataset_info(dataset, data_dir)
  model = linear.get_cost_model(ssd, 'macs', image_size=info.image_size,
                                num_classes=info.num_classes,
                                input_channels=info.num_channels)
  return linear.default_target(model)


def _run(command: List[str], what: str) -> float:
  """Runs `command` (output to this terminal); seconds it took."""
  print(f'[{what}] {" ".join(command[2:])}', flush=True)
  start = time.time()
  done = subprocess.run(command, env=dict(os.environ, PYTHONPATH=ROOT),
                        check=False)
  if done.returncode != 0:
    sys.exit(f'search_vs_random: {what} failed (exit {done.returncode})')
  return time.time() - start


def search(args, target: float, search_dir: str) -> Dict[str, float]:
  """Runs (or resumes) the search and extracts it; seconds per phase."""
  python = [sys.executable, '-m']
  common = [f'--dataset={args.dataset}', '--nodownload',
            f'--ssd={args.ssd}', '--cost_model=macs']
  if args.data_dir:
    common.append(f'--data_dir={args.data_dir}')
  seconds = {}
  seconds['search_s'] = _run(
      python + ['tunas_tf.train_search', *SEARCH_FLAGS,
                f'--model_dir={search_dir}',
                f'--rl_cost_model_target={target!r}', f'--seed={args.seed}']
      + common + list(args.search_flags), 'search')
  seconds['extract_s'] = _run(
      python + ['tunas_tf.tools.extract_architecture',
                f'--model_dir={search_dir}',
                f'--cost_tolerance={COST_TOLERANCE}'], 'extract')
  return seconds


def noise_runs(args, searched: Dict[str, Any], output_dir: str,
               search_dir: str) -> List[Dict[str, Any]]:
  """The searched architecture trained with `--noise_seeds` other seeds."""
  from tunas_tf.search import config as config_lib  # pylint: disable=g-import-not-at-top
  search_config = config_lib.read(search_dir)
  runs = []
  for k in range(1, args.noise_seeds + 1):
    name = f'searched_seed{args.seed + k}'
    run_dir = os.path.join(output_dir, 'runs', name)
    command = compare.train_command(
        run_dir, search_config.ssd, searched['indices'], search_config,
        list(RECIPE) + [f'--seed={args.seed + k}'] + list(args.train_flags))
    metrics = compare.train_one(name, command, run_dir)
    runs.append({'name': name, 'top1': metrics['top1'],
                 'estimated_cost': searched['estimated_cost']})
  return runs


def summarise(results: Sequence[Dict[str, Any]], target: float
              ) -> Dict[str, Any]:
  """The last line's figures from [searched, random...] results."""
  figures = compare.standing(results)
  figures['cost_dev'] = abs(float(results[0]['estimated_cost']) / target - 1.0)
  return figures


def last_line(s: Dict[str, Any]) -> str:
  return (f"searched_top1={s['searched_top1']:.4f} "
          f"random_median_top1={s['random_median_top1']:.4f} "
          f"random_mean_top1={s['random_mean_top1']:.4f} "
          f"random_std={s['random_std']:.4f} beats={s['beats']}/{s['n']} "
          f"cost_dev={s['cost_dev']:.4f}")


def run(args) -> Dict[str, Any]:
  """One target, one seed: search, extract, train all; the results dict."""
  target = rule_target(args.ssd, args.dataset, args.data_dir) * args.target_scale
  output_dir = args.output_dir or os.path.join(
      'runs', 'search_vs_random',
      f'{args.dataset}_x{args.target_scale:g}_seed{args.seed}')
  search_dir = os.path.join(output_dir, 'search')
  seconds = search(args, target, search_dir)
  start = time.time()
  results = compare.compare(
      search_dir, output_dir, args.num_random, COST_TOLERANCE, args.seed,
      list(RECIPE) + [f'--seed={args.seed}'] + list(args.train_flags))
  seconds['train_s'] = time.time() - start
  start = time.time()
  noise = noise_runs(args, results[0], output_dir, search_dir)
  seconds['noise_s'] = time.time() - start
  summary = summarise(results, target)
  if noise:
    seeds = np.array([results[0]['top1']] + [r['top1'] for r in noise])
    summary['searched_seed_std'] = float(seeds.std(ddof=1))
  record = {'dataset': args.dataset, 'ssd': args.ssd, 'seed': args.seed,
            'target_scale': args.target_scale, 'target': target,
            'search_flags': list(SEARCH_FLAGS) + list(args.search_flags),
            'recipe': list(RECIPE) + list(args.train_flags),
            'results': results, 'noise': noise, 'summary': summary,
            'seconds': seconds}
  files.write_json(record, os.path.join(output_dir, RESULTS_FILE))
  compare.plot(results, os.path.join(output_dir, PLOT_FILE),
               **compare.plot_context(search_dir))
  print(compare.summary(results))
  if noise:
    print(f"searched architecture over {len(noise) + 1} train seeds: "
          f"std {summary['searched_seed_std']:.4f}")
  print('seconds: ' + ', '.join(f'{k} {v:.0f}' for k, v in seconds.items()))
  _harness.finish('search_vs_random', last_line(summary))
  return record


def sweep(dirs: Sequence[str], path: str) -> None:
  """One plot of finished runs: every random point, every searched star."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  from matplotlib import ticker  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(7, 4.8))
  targets = set()
  for i, d in enumerate(dirs):
    with open(os.path.join(d, RESULTS_FILE)) as f:
      record = json.load(f)
    res, s = record['results'], record['summary']
    targets.add(record['target'])
    ax.scatter([r['estimated_cost'] for r in res[1:]],
               [100 * r['top1'] for r in res[1:]], c='grey', s=12,
               label='random, +-5% of the searched cost' if i == 0 else None)
    ax.scatter([res[0]['estimated_cost']], [100 * res[0]['top1']], c='red',
               marker='*', s=160, zorder=3,
               label='searched' if i == 0 else None)
    ax.errorbar([res[0]['estimated_cost']], [100 * s['random_mean_top1']],
                yerr=[100 * s['random_std']], fmt='_', color='black',
                capsize=4, label='random mean +- std' if i == 0 else None)
    print(f"{d}: x{record['target_scale']:g} seed {record['seed']}: "
          + last_line(s))
  ax.set_xscale('log')
  ax.set_xticks(sorted(targets))  # The targets, written out.
  ax.xaxis.set_major_formatter(
      ticker.FuncFormatter(lambda x, _: linear.cost_text(x)))
  ax.xaxis.set_minor_formatter(ticker.NullFormatter())
  ax.set_xlabel('estimated cost (MACs; ticks at the targets)')
  ax.set_ylabel('top-1 on the test split (%)')
  ax.set_title('Searched vs random architectures of equal cost', fontsize=10)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
  print(f'sweep plot: {path}')


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--dataset', default=None)
  parser.add_argument('--data_dir', default=None)
  parser.add_argument('--ssd', default='digits_search')
  parser.add_argument('--target_scale', type=float, default=1.0)
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--num_random', type=int, default=10)
  parser.add_argument('--noise_seeds', type=int, default=0)
  parser.add_argument('--output_dir', default=None)
  parser.add_argument('--search_flags', nargs='*', default=[],
                      help='Extra train_search flags (after the defaults).')
  parser.add_argument('--train_flags', nargs='*', default=[],
                      help='Extra train_eval flags for every training.')
  parser.add_argument('--sweep', nargs='*', default=None,
                      help='Finished run directories to plot together.')
  parser.add_argument('--sweep_plot', default=None)
  args = parser.parse_args(argv)
  if args.sweep is not None:
    if not args.sweep:
      sys.exit('search_vs_random: --sweep needs run directories')
    sweep(args.sweep, args.sweep_plot or os.path.join(
        os.path.dirname(os.path.abspath(args.sweep[0])), 'sweep.png'))
    return 0
  if not args.dataset:
    sys.exit('search_vs_random: --dataset is required')
  if not (args.target_scale > 0 and math.isfinite(args.target_scale)):
    sys.exit(f'search_vs_random: --target_scale must be > 0, got '
             f'{args.target_scale}')
  try:
    run(args)
  except ValueError as e:
    sys.exit(f'search_vs_random: {e}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
