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
  2. `tools/extract_architecture --cost_tolerance=0.05` on it (its default
     `--oneshot=50`): of the most likely architecture within +-5% of the
     target and 49 more the controller draws there, the best by one-shot
     accuracy on the search's hold-out;
  3. the target's random pool: `--num_random` architectures drawn uniformly
     within +-5% of the target (draw seed 0), trained once in
     `<output_dir>/../<dataset>_x<S>_random/` and shared by every seed's run
     at that target; the searched architecture trained alike (`RECIPE`:
     same epochs, batch, schedule, augmentation and train seed
     `--train_seed` for all), evaluated on the test split;
  4. with `--noise_seeds=M`, the searched architecture trained M more times
     with other train seeds: the seed-to-seed noise of one architecture.

Prints a table and, last, `searched_top1=<f> random_median_top1=<f>
random_mean_top1=<f> random_std=<f> beats=<k>/<n> cost_dev=<f>` (random_std:
sample standard deviation; beats: random architectures below the searched
one; cost_dev: |searched cost / target - 1|). Writes `results.json` and
`search_vs_random.png` in the output directory. Started again it resumes:
the search resumes or is left as it is when finished, and finished
trainings are skipped.

With `--front_scales=0.5,1,2` one search spans those targets (a policy
each, docs/search.md 'Many targets, many devices'), `extract_architecture
--front` gives a point per target, and each point is held against its
target's shared pool as above, written as a run of its own
(`<output_dir>/x<S>/results.json`, default output_dir
`runs/search_vs_random/<dataset>_front_x0.5_1_2_seed<K>`).

With `--sweep DIR [DIR ...]` it only reads finished runs' `results.json`:
the table of targets x seeds (per target: the seeds' mean against the
pool's mean, in standard errors of the difference, Welch's), and one plot
(`--sweep_plot`, default sweep.png in the first DIR's parent).
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

from tunas_tf.io import files  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.cost_model import linear  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.data import datasets  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.search import compare  # pylint: disable=g-import-not-at-top,wrong-import-position

RESULTS_FILE = 'results.json'
PLOT_FILE = 'search_vs_random.png'
COST_TOLERANCE = 0.05
# The pool's draws and every training's seed (the search seed is `--seed`).
POOL_SEED = 0

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


def search(args, targets: Sequence[float], search_dir: str
           ) -> Dict[str, float]:
  """Runs (or resumes) the search at `targets` (one, or a front's) and
  extracts it (`--front` for several); seconds per phase."""
  python = [sys.executable, '-m']
  common = [f'--dataset={args.dataset}', '--nodownload',
            f'--ssd={args.ssd}', '--cost_model=macs']
  if args.data_dir:
    common.append(f'--data_dir={args.data_dir}')
  seconds = {}
  seconds['search_s'] = _run(
      python + ['tunas_tf.train_search', *SEARCH_FLAGS,
                f'--model_dir={search_dir}', '--rl_cost_model_target=' +
                ','.join(f'{t!r}' for t in targets), f'--seed={args.seed}']
      + common + list(args.search_flags), 'search')
  # A resumed bench extracts again only if the search moved since.
  from tunas_tf import architecture as architecture_lib  # pylint: disable=g-import-not-at-top
  from tunas_tf.search import config as config_lib  # pylint: disable=g-import-not-at-top
  written = os.path.join(search_dir, config_lib.FRONT_FILE if len(targets) > 1
                         else architecture_lib.FILE_NAME)
  checkpoint = os.path.join(search_dir, 'checkpoint')
  if (os.path.exists(written) and
      os.path.getmtime(written) > os.path.getmtime(checkpoint)):
    print(f'[extract] {written} is newer than the search: kept', flush=True)
    return seconds
  seconds['extract_s'] = _run(
      python + ['tunas_tf.tools.extract_architecture',
                f'--model_dir={search_dir}',
                f'--cost_tolerance={COST_TOLERANCE}'] +
      (['--front'] if len(targets) > 1 else []), 'extract')
  return seconds


def noise_runs(args, searched: Dict[str, Any], output_dir: str,
               search_dir: str) -> List[Dict[str, Any]]:
  """The searched architecture trained with `--noise_seeds` other seeds."""
  from tunas_tf.search import config as config_lib  # pylint: disable=g-import-not-at-top
  search_config = config_lib.read(search_dir)
  runs = []
  for k in range(1, args.noise_seeds + 1):
    name = f'searched_seed{args.train_seed + k}'
    run_dir = os.path.join(output_dir, 'runs', name)
    command = compare.train_command(
        run_dir, search_config.ssd, searched['indices'], search_config,
        list(RECIPE) + [f'--seed={args.train_seed + k}'] +
        list(args.train_flags))
    metrics = compare.train_one(name, command, run_dir)
    runs.append({'name': name, 'top1': metrics['top1'],
                 'estimated_cost': searched['estimated_cost']})
  return runs


def summarise(results: Sequence[Dict[str, Any]], target: float,
              limits: Dict[str, float]) -> Dict[str, Any]:
  """The last line's figures from [searched, random...] results; with
  int8 exports their standing too, and with memory `limits` ({'sram_kb':,
  'flash_kb':}) whether TFLite Micro ran the searched one within them."""
  figures = compare.standing(results)
  figures['cost_dev'] = abs(float(results[0]['estimated_cost']) / target - 1.0)
  if all(r.get('int8_top1') is not None for r in results):
    int8 = compare.standing([{'top1': r['int8_top1']} for r in results])
    figures.update({f'int8_{k}': v for k, v in int8.items() if k != 'n'})
  micro = results[0].get('micro') or {}
  for limit, key in (('sram_kb', 'arena_measured'),
                     ('flash_kb', 'flash_measured')):
    if limits.get(limit) and micro.get(key):
      figures[f'{limit}_used'] = micro[key] / 1024 / limits[limit]
  return figures


def last_line(s: Dict[str, Any]) -> str:
  return (f"searched_top1={s['searched_top1']:.4f} "
          f"random_median_top1={s['random_median_top1']:.4f} "
          f"random_mean_top1={s['random_mean_top1']:.4f} "
          f"random_std={s['random_std']:.4f} beats={s['beats']}/{s['n']} "
          f"cost_dev={s['cost_dev']:.4f}" + ''.join(
              f' {k}={s[k]:.4f}' for k in (
                  'int8_searched_top1', 'int8_random_median_top1',
                  'int8_random_mean_top1', 'int8_random_std', 'sram_kb_used',
                  'flash_kb_used') if k in s) +
          (f" int8_beats={s['int8_beats']}/{s['n']}"
           if 'int8_beats' in s else ''))


def pool_dir(output_dir: str, dataset: str, scale: float) -> str:
  """The target's random pool, beside the seeds' run directories."""
  return os.path.join(os.path.dirname(os.path.abspath(output_dir)),
                      f'{dataset}_x{scale:g}_random')


def random_pool(args, target: float, search_dir: str, directory: str
                ) -> List[Dict[str, Any]]:
  """`--num_random` architectures within +-5% of `target` and the search's
  memory limits (draw seed `POOL_SEED`), each trained once in `directory`
  (resumed when there)."""
  from tunas_tf.search import config as config_lib  # pylint: disable=g-import-not-at-top
  from tunas_tf.search import random_search  # pylint: disable=g-import-not-at-top
  config = config_lib.read(search_dir)
  drawn = random_search.sample_architectures(
      config.ssd, args.num_random, seed=POOL_SEED,
      cost_model=config.cost_model, min_cost=target * (1 - COST_TOLERANCE),
      max_cost=target * (1 + COST_TOLERANCE),
      image_size=config.job.image_size, num_classes=config.job.num_classes,
      input_channels=config.job.num_channels, sram_kb=config.sram_kb,
      flash_kb=config.flash_kb)
  return [dict(_trained(f'random_{i}', r['indices'], r['estimated_cost'],
                        config, os.path.join(directory, 'runs', f'random_{i}'),
                        args.train_seed, args.train_flags),
               **{k: v for k, v in r.items() if k.endswith('_bytes')})
          for i, r in enumerate(drawn)]


def _trained(name: str, indices: str, cost: float, config: Any,
             run_dir: str, train_seed: int, train_flags: Sequence[str]
             ) -> Dict[str, Any]:
  """One architecture trained by `RECIPE` (skipped when finished)."""
  command = compare.train_command(
      run_dir, config.ssd, indices, config,
      list(RECIPE) + [f'--seed={train_seed}'] + list(train_flags))
  metrics = compare.train_one(name, command, run_dir)
  # With `--train_flags=--export`: the int8 top-1 and TFLite Micro's figures.
  return {'name': name, 'indices': indices, 'estimated_cost': cost,
          'top1': metrics['top1'], 'top5': metrics.get('top5'),
          'params': metrics.get('params'), 'macs': metrics.get('macs'),
          'int8_top1': metrics.get('int8_top1'), 'micro': metrics.get('micro'),
          'run_dir': run_dir}


def run(args) -> List[Dict[str, Any]]:
  """One seed: search (one target, or with `--front_scales` a front of
  them), extract, train all; the results dict of each target."""
  from tunas_tf import architecture as architecture_lib  # pylint: disable=g-import-not-at-top
  rule = rule_target(args.ssd, args.dataset, args.data_dir)
  scales = args.front_scales or [args.target_scale]
  name = (f"front_x{'_'.join(f'{s:g}' for s in scales)}"
          if args.front_scales else f'x{args.target_scale:g}')
  output_dir = args.output_dir or os.path.join(
      'runs', 'search_vs_random', f'{args.dataset}_{name}_seed{args.seed}')
  search_dir = os.path.join(output_dir, 'search')
  seconds = search(args, [rule * s for s in scales], search_dir)
  if not args.front_scales:
    searched = architecture_lib.read(
        os.path.join(search_dir, architecture_lib.FILE_NAME))
    return [_point(args, output_dir, search_dir, args.target_scale, rule,
                   searched.indices_string, float(searched.estimated_cost),
                   seconds)]
  front = files.read_json(os.path.join(search_dir, 'front.json'))
  # Each point as a run of its own (`--sweep` reads them beside the 3 x 3).
  return [_point(args, os.path.join(output_dir, f'x{scale:g}'), search_dir,
                 scale, rule, point['indices'],
                 float(point['estimated_cost']), dict(seconds))
          for scale, point in zip(scales, front['points'])]


def _point(args, output_dir: str, search_dir: str, scale: float,
           rule: float, indices: str, cost: float,
           seconds: Dict[str, float]) -> Dict[str, Any]:
  """The searched architecture `indices` at `rule` x `scale` trained with
  its target's random pool; the results dict, written and printed."""
  from tunas_tf.search import config as config_lib  # pylint: disable=g-import-not-at-top
  target = rule * scale
  config = config_lib.read(search_dir)
  start = time.time()
  results = [_trained('searched', indices, cost, config,
                      os.path.join(output_dir, 'runs', 'searched'),
                      args.train_seed, args.train_flags)]
  pool = pool_dir(output_dir if not args.front_scales else
                  os.path.dirname(output_dir), args.dataset, scale)
  results += random_pool(args, target, search_dir, pool)
  seconds['train_s'] = time.time() - start
  start = time.time()
  noise = noise_runs(args, results[0], output_dir, search_dir)
  seconds['noise_s'] = time.time() - start
  summary = summarise(results, target, {'sram_kb': config.sram_kb,
                                        'flash_kb': config.flash_kb})
  if noise:
    seeds = np.array([results[0]['top1']] + [r['top1'] for r in noise])
    summary['searched_seed_std'] = float(seeds.std(ddof=1))
  record = {'dataset': args.dataset, 'ssd': args.ssd, 'seed': args.seed,
            'target_scale': scale, 'target': target,
            'front_scales': args.front_scales,
            'search_flags': list(SEARCH_FLAGS) + list(args.search_flags),
            'recipe': list(RECIPE) + list(args.train_flags),
            'train_seed': args.train_seed, 'pool_dir': pool,
            'results': results, 'noise': noise, 'summary': summary,
            'seconds': seconds}
  files.write_json(record, os.path.join(output_dir, RESULTS_FILE))
  compare.plot(results, os.path.join(output_dir, PLOT_FILE),
               **{**compare.plot_context(search_dir), 'target': target})
  print(compare.summary(results))
  if noise:
    print(f"searched architecture over {len(noise) + 1} train seeds: "
          f"std {summary['searched_seed_std']:.4f}")
  print('seconds: ' + ', '.join(f'{k} {v:.0f}' for k, v in seconds.items()))
  _harness.finish('search_vs_random', last_line(summary))
  return record


def by_target(records: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
  """Per target scale (ascending), over its seeds' records: the seeds'
  searched top-1 mean, the pool's mean (the random architectures of all
  its records, each counted once), the difference and its standard error
  (Welch's: sqrt(s_searched^2 / n_searched + s_random^2 / n_random)), how
  many seeds beat the pool's median, and the worst cost deviation."""
  rows = []
  for scale in sorted({r['target_scale'] for r in records}):
    group = [r for r in records if r['target_scale'] == scale]
    searched = np.array([r['results'][0]['top1'] for r in group], float)
    pool = {x['indices']: x['top1'] for r in group for x in r['results'][1:]}
    randoms = np.array(list(pool.values()), float)
    variance = (randoms.var(ddof=1) / len(randoms) if len(randoms) > 1
                else 0.0)
    if len(searched) > 1:
      variance += searched.var(ddof=1) / len(searched)
    difference = float(searched.mean() - randoms.mean())
    se = math.sqrt(variance)
    rows.append({
        'target_scale': scale, 'seeds': [r['seed'] for r in group],
        'searched': searched.tolist(), 'searched_mean': float(searched.mean()),
        'random_mean': float(randoms.mean()), 'n_random': len(randoms),
        'difference': difference, 'se': se,
        'z': difference / se if se > 0 else float('nan'),
        'beats_median': int(np.sum(searched > np.median(randoms))),
        'cost_dev_max': max(r['summary']['cost_dev'] for r in group)})
  return rows


def sweep(dirs: Sequence[str], path: str) -> None:
  """One plot of finished runs: every random point, every searched star."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  from matplotlib import ticker  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(7, 4.8))
  targets, records = set(), []
  for i, d in enumerate(dirs):
    with open(os.path.join(d, RESULTS_FILE)) as f:
      record = json.load(f)
    records.append(record)
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
  rows = by_target(records)
  for row in rows:
    print(f"x{row['target_scale']:g}: seeds {row['seeds']}: searched "
          + ' / '.join(f'{100 * v:.2f}' for v in row['searched'])
          + f"% (mean {100 * row['searched_mean']:.2f}%) against the "
          f"{row['n_random']} random {100 * row['random_mean']:.2f}%: "
          f"{100 * row['difference']:+.2f}% = {row['z']:.2f} standard "
          f"errors; {row['beats_median']}/{len(row['seeds'])} beat the "
          f"median; cost_dev <= {100 * row['cost_dev_max']:.1f}%")
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
  print(' '.join(
      f"x{row['target_scale']:g}_z={row['z']:.2f} "
      f"x{row['target_scale']:g}_beats={row['beats_median']}/"
      f"{len(row['seeds'])}" for row in rows))


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--dataset', default=None)
  parser.add_argument('--data_dir', default=None)
  parser.add_argument('--ssd', default='digits_search')
  parser.add_argument('--target_scale', type=float, default=1.0)
  parser.add_argument('--front_scales', type=lambda v: [
      float(x) for x in v.split(',')], default=None,
                      help='One search of these targets (x the rule '
                      'target, e.g. 0.5,1,2): each point against its '
                      "target's pool.")
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--num_random', type=int, default=10)
  parser.add_argument('--noise_seeds', type=int, default=0)
  parser.add_argument('--train_seed', type=int, default=POOL_SEED,
                      help='Seed of every training (searched and pool).')
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
