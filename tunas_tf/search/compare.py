"""The TuNAS paper's experiment: a searched architecture against random ones
drawn in its cost band, each trained alike with `train_eval` (resuming)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Dict, List, Optional, Sequence

from absl import logging
import numpy as np

from tunas_tf import architecture as architecture_lib
from tunas_tf.io import files
from tunas_tf.cost_model import linear as cost_linear
from tunas_tf.data import datasets
from tunas_tf.runtime import jobs
from tunas_tf.search import config as config_lib
from tunas_tf.search import random_search

RESULTS_FILE = 'results.json'
PLOT_FILE = 'compare_random.png'
METRICS_FILE = 'metrics.json'


def train_command(run_dir: str, ssd: str, indices: str,
                  search_config: config_lib.SearchConfig,
                  train_eval_flags: Sequence[str]) -> List[str]:
  """The `train_eval` command line of one architecture (same data as the search)."""
  job = search_config.job
  data = ('dataset', 'num_classes', 'image_size', 'preprocessing') + (
      ('data_dir',) if job.data_dir else ())
  return [sys.executable, '-m', 'tunas_tf.train_eval', f'--ssd={ssd}',
          f'--indices={indices}', f'--model_dir={run_dir}',
          *(f'--{name}={getattr(job, name)}' for name in data),
          *train_eval_flags]


def train_one(name: str, command: List[str], run_dir: str) -> Dict[str, Any]:
  """Runs one `train_eval` command unless `run_dir` has its metrics; the
  metrics dict. Raises ValueError naming the run when training fails, or
  when `run_dir` holds a finished training of another architecture."""
  metrics_path = os.path.join(run_dir, METRICS_FILE)
  if files.exists(metrics_path):
    # Of the architecture `command` trains? (A directory reused after the
    # searched architecture changed is not.)
    path = os.path.join(run_dir, jobs.CONFIG_FILE)
    stored = files.read_json(path) if files.exists(path) else {}
    wanted = dict(flag[2:].split('=', 1) for flag in command
                  if flag.startswith(('--ssd=', '--indices=')))
    for key, value in wanted.items():
      if stored.get(key) != value:
        raise ValueError(
            f'{run_dir} holds a finished training with {key} '
            f'{stored.get(key)!r}, not {name}\'s {value!r}: remove it or '
            'use another output directory')
    logging.info('%s: already trained (%s)', name, metrics_path)
  else:
    logging.info('%s: training in %s', name, run_dir)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
      lines = [line for line in done.stderr.strip().splitlines()
               if not line.startswith('Pass --help')] or ['(no output)']
      raise ValueError(f'train_eval failed for {name} in {run_dir}: '
                       f'{lines[-1]}')
    if not files.exists(metrics_path):
      raise ValueError(f'train_eval wrote no {METRICS_FILE} in {run_dir}')
  return files.read_json(metrics_path)


def compare(search_dir: str, output_dir: str, num_random: int,
            cost_tolerance: float = 0.05, seed: int = 0,
            train_eval_flags: Sequence[str] = ()) -> List[Dict[str, Any]]:
  """Trains the searched (from `architecture.json`) and `num_random` random
  architectures in the band searched cost * (1 -/+ `cost_tolerance`) and
  the search's memory limits alike, with `train_eval_flags`, runs and
  `results.json` in `output_dir`.

  Returns one dict per architecture (searched first): `name`, `indices`,
  `estimated_cost`, `top1`, `top5`, `params`, `macs`, `run_dir`. ValueError
  for a bad directory or argument, an empty band or a failed run.
  """
  if num_random <= 0:
    raise ValueError(f'--num_random must be > 0, got {num_random}')
  if not 0.0 < cost_tolerance < 1.0:
    raise ValueError(f'--cost_tolerance must be in (0, 1), got '
                     f'{cost_tolerance}')
  search_config = config_lib.read(search_dir)
  path = os.path.join(search_dir, architecture_lib.FILE_NAME)
  if not files.exists(path):
    raise ValueError(f'No {architecture_lib.FILE_NAME} in {search_dir!r}; run '
                     'tunas_tf.tools.extract_architecture first')
  architecture = architecture_lib.read(path)
  if architecture.estimated_cost is None:
    raise ValueError(f"{path} has no 'estimated_cost'")
  ssd, cost = architecture.ssd, float(architecture.estimated_cost)
  randoms = random_search.sample_architectures(
      ssd, num_random, seed=seed, cost_model=search_config.cost_model,
      min_cost=cost * (1 - cost_tolerance),
      max_cost=cost * (1 + cost_tolerance),
      image_size=search_config.job.image_size,
      num_classes=search_config.job.num_classes,
      input_channels=search_config.job.num_channels,
      sram_kb=search_config.sram_kb, flash_kb=search_config.flash_kb)
  candidates = [('searched', architecture.indices_string, cost)] + [
      (f'random_{i}', r['indices'], r['estimated_cost'])
      for i, r in enumerate(randoms)]
  results = []
  for name, indices, estimated_cost in candidates:
    run_dir = os.path.join(output_dir, 'runs', name)
    metrics = train_one(name, train_command(run_dir, ssd, indices, search_config,
                                         train_eval_flags), run_dir)
    results.append({'name': name, 'indices': indices,
                    'estimated_cost': estimated_cost,
                    'top1': metrics['top1'], 'top5': metrics.get('top5'),
                    'params': metrics.get('params'),
                    'macs': metrics.get('macs'), 'run_dir': run_dir})
  files.write_json(results, os.path.join(output_dir, RESULTS_FILE))
  return results


def add_measured_latency(results: List[Dict[str, Any]], search_dir: str,
                         model_cache: str) -> List[Dict[str, Any]]:
  """Each result with `measured_ms`, measured as the search's fitted cost
  model's rows were; ValueError for no device named, or a failing one."""
  from tunas_tf.graph import inference  # pylint: disable=g-import-not-at-top
  from tunas_tf.latency import device as device_lib  # pylint: disable=g-import-not-at-top
  model = config_lib.read(search_dir).resolved_cost_model
  settings = device_lib.fitted_settings(model.measured_with, model.source)
  return [dict(r, measured_ms=device_lib.measure_one(
      model.ssd, r['indices'], settings, model_cache,
      inference.builder).latency_ms) for r in results]


def by_measured_latency(results: List[Dict[str, Any]]) -> str:
  """The runs ranked by measured latency (fastest first), with top-1."""
  lines = [f"{'name':<12} {'measured':>12} {'estimated':>12} {'top1':>8}"]
  for r in sorted(results, key=lambda r: r['measured_ms']):
    lines.append(f"{r['name']:<12} {r['measured_ms']:>9.4g} ms "
                 f"{cost_linear.cost_text(r['estimated_cost']):>12} "
                 f"{r['top1']:>8.4f}")
  return '\n'.join(lines)


def standing(results: List[Dict[str, Any]]) -> Dict[str, Any]:
  """Of [searched, random...] 'top1's: 'searched_top1', the random ones'
  'random_median_top1', 'random_mean_top1', 'random_std' (ddof 1; 0 for
  one), 'n', and how many the searched one 'beats'."""
  searched = float(results[0]['top1'])
  random_top1 = np.array([float(r['top1']) for r in results[1:]])
  return {
      'searched_top1': searched,
      'random_median_top1': float(np.median(random_top1)),
      'random_mean_top1': float(random_top1.mean()),
      'random_std': (float(random_top1.std(ddof=1))
                     if len(random_top1) > 1 else 0.0),
      'beats': int(np.sum(random_top1 < searched)),
      'n': len(random_top1),
  }


def summary(results: List[Dict[str, Any]]) -> str:
  """A table of the runs and the searched architecture's `standing`."""
  lines = [f"{'name':<12} {'cost':>12} {'top1':>8}  indices"]
  for r in results:
    cost = cost_linear.cost_text(r['estimated_cost'])
    lines.append(f"{r['name']:<12} {cost:>12} {r['top1']:>8.4f}  "
                 f"{r['indices']}")
  s = standing(results)
  lines.append(f"searched top-1 {s['searched_top1']:.4f}; random "
               f"{s['random_mean_top1']:.4f} +- {s['random_std']:.4f} "
               f"(n={s['n']}); the searched architecture beats {s['beats']} "
               f"of {s['n']}")
  return '\n'.join(lines)


def plot(results: List[Dict[str, Any]], path: str,
         cost_model: Optional[str] = None,
         target: Optional[float] = None,
         num_test: Optional[int] = None) -> None:
  """Top-1 against estimated cost: the random architectures as grey dots,
  the searched one as a red star, the search's target as a dashed line."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  from matplotlib import ticker  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(6.5, 4.5))
  ax.scatter([r['estimated_cost'] for r in results[1:]],
             [100.0 * r['top1'] for r in results[1:]], c='grey',
             label=f'random ({len(results) - 1}, same cost band)')
  searched = results[0]
  ax.scatter([searched['estimated_cost']], [100.0 * searched['top1']],
             c='red', marker='*', s=200, zorder=3,
             label=f"searched ({100.0 * searched['top1']:.2f}%)")
  if target:
    ax.axvline(target, color='crimson', linestyle='--', linewidth=1,
               label=f'target {cost_linear.cost_text(target, cost_model)}')
  ax.xaxis.set_major_formatter(ticker.FuncFormatter(
      lambda x, _: cost_linear.cost_text(x)))
  ax.xaxis.set_major_locator(ticker.MaxNLocator(nbins=5))
  ax.set_xlabel(f'estimated cost ({cost_linear.cost_units(cost_model)})')
  ax.set_ylabel('top-1 accuracy on the test split (%)')
  title = 'Searched vs random architectures of equal cost'
  if num_test:
    title += f'\n{num_test:,} test images: one image is {100.0 / num_test:.2f}%'
  ax.set_title(title, fontsize=10)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8)
  fig.tight_layout()
  files.write_png(fig, path, dpi=100)
  plt.close(fig)


def plot_context(search_dir: str) -> Dict[str, Any]:
  """Cost model, target and test-split size of the search, for `plot`."""
  config = config_lib.read(search_dir)
  context = {'cost_model': config.cost_model,
             'target': config.rl_cost_model_target}
  try:
    info = datasets.dataset_info(  # With the search's hold-out (TFDS).
        config.job.dataset, config.job.data_dir,
        validation_examples=(0 if config.job.dataset == datasets.DIGITS
                             else config.validation_examples))
    context['num_test'] = info.split_sizes.get(datasets.TEST)
  except ValueError:  # The plot goes without the count.
    pass
  return context
