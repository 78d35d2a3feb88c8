"""One standalone run: train (unless `eval_only`), evaluate, write
`metrics.json` and the eval summaries, export."""

from __future__ import annotations

import os
from typing import Any, Dict, NamedTuple, Optional

from absl import logging
import numpy as np
import tensorflow as tf

from tunas_tf.cost_model import memory
from tunas_tf.io import files
from tunas_tf.graph import inherit
from tunas_tf.runtime import engine as engine_lib
from tunas_tf.runtime import lifecycle
from tunas_tf.runtime import preemption
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.runtime import summaries
from tunas_tf.runtime import task as runtime_task
from tunas_tf.train_eval import evaluate as evaluate_lib
from tunas_tf.train_eval import export as export_lib
from tunas_tf.train_eval import network
from tunas_tf.train_eval import task as task_lib
from tunas_tf.train_eval.config import TrainEvalConfig

METRICS_FILE = 'metrics.json'
EVAL_SUBDIR = 'eval'  # The eval summaries' directory, as the Estimator's.
# What `python -m tunas_tf.train_eval` prints (metrics.json holds more).
METRIC_KEYS = ('top1', 'top5', 'loss', 'params', 'macs',
               'train_images_per_sec', 'eval_images_per_sec', 'global_step')
_SUMMARY_KEYS = ('params', 'macs', 'train_images_per_sec',
                 'eval_images_per_sec')


def _previous_train_rate(metrics_path: str, global_step: int
                         ) -> Optional[float]:
  """The stored train rate when `metrics.json` is of the same step."""
  try:
    previous = files.read_json(metrics_path)
  except ValueError:  # Missing or not JSON.
    return None
  if previous.get('global_step') == global_step:
    return previous.get('train_images_per_sec')
  return None


def _metrics(config: TrainEvalConfig, arch, results: Dict[str, Any],
             trained: Optional[runtime_task.Trained],
             one_shot: bool) -> Dict[str, Any]:
  """metrics.json's content (without `export`) from the evaluation."""
  global_step = int(results['global_step'])
  train_rate = trained.images_per_sec if trained else None
  if train_rate is None:
    train_rate = _previous_train_rate(
        os.path.join(config.job.model_dir, METRICS_FILE), global_step)
  metrics = {
      'top1': float(results['top1']),
      'top5': float(results['top5']),
      'loss': float(results['cross_entropy']),
      'params': network.count_params(config, arch),
      'macs': network.count_macs(config, arch),
      'train_images_per_sec': train_rate,
      'eval_images_per_sec': results['images_per_sec'],
      'global_step': global_step,
      'one_shot': one_shot,
  }
  if trained is not None:
    metrics['train_start_step'] = trained.start_step
  return metrics


def _log_start(config: TrainEvalConfig, stored: Optional[Dict[str, Any]],
               resume: resume_lib.ResumePoint) -> None:
  """The run's first line, naming its data: 'Starting ...', 'Resuming ...
  from step N (model.ckpt-N)' or, with `eval_only`, 'Evaluating ...'."""
  name = f'{config.ssd} {config.indices}'
  if config.eval_only:
    weights = (f'at {resume.text}' if resume.text else 'one-shot (the '
               f'supernet weights of {config.init_from_search})')
    logging.info('Evaluating %s in %s %s on %s, split %s', name,
                 config.job.model_dir, weights, config.job.data_text,
                 config.eval_split)
    return
  what = lifecycle.start_words(name, config.job.model_dir, bool(stored),
                               resume)
  logging.info('%s: %d steps on %s (%d training images), evaluating %s',
               what, config.max_global_step, config.job.data_text,
               config.train_examples, config.eval_split)


class _Plan(NamedTuple):
  """What `run` checks before it writes: the stored config.json values (None
  for a new run) and where the run resumes."""
  stored: Optional[Dict[str, Any]]
  resume: resume_lib.ResumePoint


def run(config: TrainEvalConfig) -> Dict[str, Any]:
  """Trains (unless `eval_only`), evaluates and exports through
  `lifecycle.run`, checking everything before it writes; returns the metrics.

  Raises:
    ValueError: inconsistent directory or settings, or as `lifecycle.run`.
    preemption.Stopped: when a signal stopped it.
  """
  arch = network.build_architecture(config)
  model_dir = config.job.model_dir

  def check() -> _Plan:
    return _Plan(config.check_stored(),
                 resume_lib.resume_point(model_dir))

  plan = check()
  one_shot = config.eval_only and plan.resume.checkpoint is None
  if one_shot and not config.init_from_search:
    raise ValueError(f'--eval_only: {model_dir} holds no checkpoint to '
                     'evaluate (train first, or give --init_from_search for '
                     'one-shot accuracy)')
  inheritance = (inherit.Inheritance(config.init_from_search)
                 if config.init_from_search else None)

  def start(plan: _Plan, stop: preemption.StopRequest) -> Dict[str, Any]:
    config.write_stored(plan.stored)
    _log_start(config, plan.stored, plan.resume)
    task = task_lib.TrainEvalTask(config, arch, inheritance)
    trained, step = None, plan.resume.global_step
    if not config.eval_only and step < config.max_global_step:
      trained = engine.train(task, max_steps=config.max_global_step,
                             stop=stop, run_name='train_eval',
                             resume=plan.resume)
    results = engine.evaluate(
        task, checkpoint=None if one_shot else tf.train.latest_checkpoint(
            model_dir), stop=stop, run_name='train_eval')
    metrics = _metrics(config, arch, results, trained, one_shot)
    summaries.write_scalars(
        os.path.join(model_dir, EVAL_SUBDIR), metrics['global_step'],
        {**{k: results[k] for k in evaluate_lib.METRICS},
         **{k: metrics[k] for k in _SUMMARY_KEYS}})
    path = os.path.join(model_dir, METRICS_FILE)
    files.write_json(metrics, path, sort_keys=True)  # Kept if export fails.
    if config.export and not one_shot:
      metrics['export'] = export_lib.export(
          config, arch, tf.train.latest_checkpoint(model_dir))
      metrics['int8_top1'] = export_lib.int8_top1(
          config, metrics['export']['tflite_int8'])
      metrics['micro'] = export_lib.micro(config, arch,
                                          metrics['export']['tflite_int8'])
      files.write_json(metrics, path, sort_keys=True)
    return metrics

  engine = engine_lib.make(config.job)
  metrics = lifecycle.run(engine, 'train_eval', check, start, plan=plan)
  logging.info('%s', result_line(metrics))
  return metrics


def printed_metrics(metrics: Dict[str, Any]) -> Dict[str, Any]:
  """The `METRIC_KEYS` (and `int8_top1`) the binary prints as JSON: float32
  values in the shortest decimal that reads back the same (0.7222222),
  images per second to 0.1."""
  printed = {}
  for key in METRIC_KEYS + (('int8_top1',) if 'int8_top1' in metrics else ()):
    value = metrics[key]
    if key in ('top1', 'top5', 'loss', 'int8_top1'):
      value = float(str(np.float32(value)))
    elif key.endswith('_images_per_sec') and value is not None:
      value = round(float(value), 1)
    printed[key] = value
  return printed


def result_line(metrics: Dict[str, Any]) -> str:
  """A run's last log line, every figure rounded alike: 'top1 0.6028  top5
  0.9444  loss 1.2346  params 12345  MACs 67890  int8 top1 0.5972 (-0.56
  points)  (step 20)', the int8 part when exported."""
  int8 = metrics.get('int8_top1')
  return (f"top1 {metrics['top1']:.4f}  top5 {metrics['top5']:.4f}  "
          f"loss {metrics['loss']:.4f}  params {metrics['params']}  "
          f"MACs {metrics['macs']}  " + (
              '' if int8 is None else f'int8 top1 {int8:.4f} '
              f"({100 * (int8 - metrics['top1']):+.2f} points)  ") +
          micro_text(metrics.get('micro')) +
          f"(step {metrics['global_step']})")


def micro_text(micro: Optional[Dict[str, Any]]) -> str:
  """'TFLite Micro arena 87.4 KB (est. 87.4 KB)  flash 150.2 KB (est.
  150.3 KB)  ', each figure there is (`export.micro`), and its note."""
  if not micro:
    return ''
  text = ''
  for name in ('arena', 'flash'):
    measured, estimate = micro[f'{name}_measured'], micro[f'{name}_bytes']
    parts = ([memory.kilobytes(measured)] if measured else []) + (
        [f'(est. {memory.kilobytes(estimate)})'] if estimate else [])
    text += f"{name} {' '.join(parts)}  " if parts else ''
  note = f"({micro['note']})  " if micro['note'] else ''
  return f'TFLite Micro {text}{note}'
