"""The standalone model_fn, the TPUEstimator, and one run: train, eval, export.

`run(config)` writes or checks `config.json`, trains (unless `eval_only`),
evaluates, writes `metrics.json` (see `METRIC_KEYS`) and the eval summaries,
and exports the evaluated weights (`export.py`), on `config.job.engine`:
the training task (`task.TrainEvalTask`) through the TPUEstimator's adapter
(`runtime.estimator.task_model_fn`) and its evaluation
(`evaluate.estimator_spec`), or the tf.distribute loop over the same task
and `evaluate.py`'s pass; both evaluate each batch with `evaluate.batch`.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, NamedTuple, Optional

from absl import logging
import numpy as np
import tensorflow as tf

from tunas_tf import files
from tunas_tf.data import unreadable
from tunas_tf.graph import inherit
from tunas_tf.runtime import distribute
from tunas_tf.runtime import estimator as estimator_lib
from tunas_tf.runtime import lifecycle
from tunas_tf.runtime import preemption
from tunas_tf.runtime import resume as resume_lib
from tunas_tf.search_space import ops as spec_ops
from tunas_tf.train_eval import config as config_lib
from tunas_tf.train_eval import data
from tunas_tf.train_eval import evaluate as evaluate_lib
from tunas_tf.train_eval import export as export_lib
from tunas_tf.train_eval import network
from tunas_tf.train_eval import task as task_lib
from tunas_tf.train_eval.config import TrainEvalConfig

METRICS_FILE = 'metrics.json'
# What `python -m tunas_tf.train_eval` prints (metrics.json holds more).
METRIC_KEYS = ('top1', 'top5', 'loss', 'params', 'macs',
               'train_images_per_sec', 'eval_images_per_sec', 'global_step')
_SUMMARY_KEYS = ('params', 'macs', 'train_images_per_sec',
                 'eval_images_per_sec')


def make_model_fn(config: TrainEvalConfig, arch: spec_ops.ConvTowerSpec,
                  record: Dict[str, Any], one_shot: bool = False,
                  inheritance: Optional[inherit.Inheritance] = None):
  """The TPUEstimator model_fn of the standalone network: training (the
  task's step, `estimator.task_model_fn`) and evaluation
  (`evaluate.estimator_spec`).

  Args:
    config: the run's config.
    arch: the pruned, scaled architecture.
    record: a dict the hooks write `train_images_per_sec`,
      `eval_images_per_sec` and `train_start_step` into.
    one_shot: batch norm on batch statistics (no moving averages); with
      `init_from_search` this scores the supernet's weights.
    inheritance: the search's weights (`config.init_from_search`), or None.
  """
  train_fn = estimator_lib.task_model_fn(
      lambda: task_lib.TrainEvalTask(config, arch, inheritance), config.job,
      config.max_global_step, record=record)

  def model_fn(features, labels, mode, params):
    if mode == tf.estimator.ModeKeys.TRAIN:
      return train_fn(features, labels, mode, params)
    return evaluate_lib.estimator_spec(config, arch, features, labels, record,
                                       one_shot, inheritance)

  return model_fn


def make_estimator(config: TrainEvalConfig, model_fn):
  """TPUEstimator on TPU (`--tpu`) or on CPU/GPU (`use_tpu=False`)."""
  return estimator_lib.make_estimator(
      model_fn, config.job, config.train_batch_size,
      eval_batch_size=config.eval_batch_size)


def _previous_train_rate(metrics_path: str, global_step: int
                         ) -> Optional[float]:
  """The stored train rate when `metrics.json` is of the same step."""
  previous = {}
  if tf.io.gfile.exists(metrics_path):
    try:
      previous = files.read_json(metrics_path)
    except ValueError:
      previous = {}
  if previous.get('global_step') == global_step:
    return previous.get('train_images_per_sec')
  return None


def _metrics(config: TrainEvalConfig, arch, results: Dict[str, Any],
             record: Dict[str, Any], one_shot: bool) -> Dict[str, Any]:
  """metrics.json's content (without `export`) from the eval results."""
  global_step = int(results.get('global_step', 0))
  train_rate = record.get('train_images_per_sec')
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
      'eval_images_per_sec': record.get('eval_images_per_sec'),
      'global_step': global_step,
      'one_shot': one_shot,
  }
  if 'train_start_step' in record:
    metrics['train_start_step'] = record['train_start_step']
  return metrics


def _train_and_evaluate(config: TrainEvalConfig, arch, record: Dict[str, Any],
                        resume: resume_lib.ResumePoint, one_shot: bool,
                        inheritance: Optional[inherit.Inheritance],
                        stop: preemption.StopRequest) -> Dict[str, Any]:
  """Trains unless `eval_only` (the data from the step it resumes at), then
  evaluates; the Estimator's results.

  Raises:
    preemption.Stopped: when `stop` was asked for (after saving, when
      training; evaluation then does not run or is cut short).
  """
  model_dir = config.job.model_dir
  # One-shot only with `eval_only`: it never trains.
  estimator = make_estimator(config, make_model_fn(
      config, arch, record, one_shot=one_shot, inheritance=inheritance))
  if not config.eval_only:
    estimator_lib.train(
        estimator, estimator_lib.task_input_fn(
            task_lib.TrainEvalTask(config, arch), config.job,
            start_step=resume.global_step),
        max_steps=config.max_global_step, stop=stop, model_dir=model_dir,
        run_name='train_eval', resume_checkpoint=resume.checkpoint)
  # TPU needs the number of steps; its last batch is padded (SLICED input:
  # one pipeline of full eval batches, split over the cores).
  steps = (data.eval_steps(config, config.eval_batch_size)
           if config.job.use_tpu else None)
  return estimator_lib.evaluate(
      estimator, data.eval_input_fn(config), stop, steps=steps,
      guards=[unreadable.stops_in_one_line("train_eval's evaluation")])


def _train_and_evaluate_distributed(
    config: TrainEvalConfig, arch, record: Dict[str, Any],
    resume: resume_lib.ResumePoint, one_shot: bool,
    inheritance: Optional[inherit.Inheritance],
    stop: preemption.StopRequest) -> Dict[str, Any]:
  """`_train_and_evaluate` on the distribute engine: trains unless
  `eval_only` or finished (`task.TrainEvalTask`, the data from the
  step it resumes at), then evaluates (`evaluate.evaluate`) and writes the
  eval summaries, as `Estimator.evaluate` does; the results.

  Raises:
    preemption.Stopped: as `_train_and_evaluate`.
  """
  model_dir = config.job.model_dir
  strategy = distribute.strategy_for(config.job)
  if not config.eval_only and resume.global_step < config.max_global_step:
    record['train_start_step'] = resume.global_step
    since = time.time()
    end = distribute.train(
        strategy, task_lib.TrainEvalTask(config, arch, inheritance),
        job=config.job, max_steps=config.max_global_step, stop=stop,
        run_name='train_eval')
    rate = task_lib.images_per_sec(
        model_dir, since, resume.global_step, end, config.train_batch_size,
        strategy.num_replicas_in_sync)
    if rate is not None:
      record['train_images_per_sec'] = rate
  checkpoint = None if one_shot else tf.train.latest_checkpoint(model_dir)
  results = evaluate_lib.evaluate(config, arch, strategy, stop,
                                  checkpoint=checkpoint,
                                  inheritance=inheritance)
  record['eval_images_per_sec'] = results.pop('images_per_sec')
  evaluate_lib.write_summaries(
      model_dir, int(results['global_step']),
      {name: results[name] for name in evaluate_lib.SUMMARY_NAMES})
  return results


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
  """Trains (unless `eval_only`), evaluates and exports; returns the metrics.

  Checks everything before it writes (the architecture, the stored
  `config.json`: a restart may change only `RUN_ONLY_FIELDS`; the
  checkpoints; the search weights to inherit; the TPU), then runs through
  `lifecycle.run`: a directory with a checkpoint resumes from it, the data
  going on from its step; one without starts fresh or, with
  `init_from_search`, from the search's weights. A signal stops training
  after the step (TPU loop) in flight, saved, or cuts the evaluation short;
  nothing more is written then.

  Raises:
    ValueError: for an inconsistent directory or settings, or as
      `lifecycle.run`; when a NaN or Inf loss stops training (naming the
      step and the last good checkpoint; nothing is saved after it).
    preemption.Stopped: when a signal stopped it.
  """
  arch = network.build_architecture(config)
  model_dir = config.job.model_dir

  def check() -> _Plan:
    return _Plan(config_lib.check_stored(config),
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
    config_lib.write(config, plan.stored)
    _log_start(config, plan.stored, plan.resume)
    record: Dict[str, Any] = {}
    run_engine = (_train_and_evaluate_distributed
                  if config.job.engine == 'distribute' else
                  _train_and_evaluate)
    results = run_engine(config, arch, record, plan.resume, one_shot,
                         inheritance, stop)
    metrics = _metrics(config, arch, results, record, one_shot)
    evaluate_lib.write_summaries(model_dir, metrics['global_step'],
                                 {k: metrics[k] for k in _SUMMARY_KEYS})
    if config.export and not one_shot:
      metrics['export'] = export_lib.export(
          config, arch, tf.train.latest_checkpoint(model_dir))
    files.write_json(metrics, os.path.join(model_dir, METRICS_FILE),
                     sort_keys=True)
    return metrics

  metrics = lifecycle.run(config.job, 'train_eval', check, start, plan=plan)
  logging.info('%s', result_line(metrics))
  return metrics


def printed_metrics(metrics: Dict[str, Any]) -> Dict[str, Any]:
  """The `METRIC_KEYS` the binary prints as JSON: top1, top5 and loss (float32
  values) in the shortest decimal that reads back as the same float32
  (0.7222222, not 0.7222222089767456), images per second to 0.1;
  `metrics.json` keeps them as computed."""
  printed = {}
  for key in METRIC_KEYS:
    value = metrics[key]
    if key in ('top1', 'top5', 'loss'):
      value = float(str(np.float32(value)))
    elif key.endswith('_images_per_sec') and value is not None:
      value = round(float(value), 1)
    printed[key] = value
  return printed


def result_line(metrics: Dict[str, Any]) -> str:
  """A run's last log line, every figure rounded alike: 'top1 0.6028  top5
  0.9444  loss 1.2346  params 12345  MACs 67890  (step 20)'."""
  return (f"top1 {metrics['top1']:.4f}  top5 {metrics['top5']:.4f}  "
          f"loss {metrics['loss']:.4f}  params {metrics['params']}  "
          f"MACs {metrics['macs']}  (step {metrics['global_step']})")
