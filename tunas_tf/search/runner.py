"""The search's model_fn, input_fn and the TPUEstimator that runs them."""

from __future__ import annotations

from typing import Dict

from absl import logging
import tensorflow as tf

from tunas_tf import backend
from tunas_tf import checkpoints
from tunas_tf import hooks
from tunas_tf import precision
from tunas_tf.data import datasets
from tunas_tf.models import supernet as supernet_lib
from tunas_tf.search import config as config_lib
from tunas_tf.search import steps
from tunas_tf.search.config import SearchConfig
from tunas_tf.search_space import mobile
from tunas_tf.search_space import spec_io


def make_model_fn(config: SearchConfig):
  """Returns the TPUEstimator model_fn of the search (DESIGN steps 1-9)."""
  spec = mobile.get_search_space(config.ssd)

  def model_fn(features, labels, mode, params):
    del params
    if mode != tf.estimator.ModeKeys.TRAIN:
      raise ValueError(f'The search model_fn only trains, got mode {mode!r}')
    train_images, valid_images = features['train'], features['validation']
    if config.job.use_tpu:  # The host sent HWCN (a layout hint for XLA).
      train_images = tf.transpose(train_images, [3, 0, 1, 2])
      valid_images = tf.transpose(valid_images, [3, 0, 1, 2])
    # bfloat16 compute casts here, not in the input pipeline (reference §2.1
    # item 4); variables, loss and gradients stay float32.
    dtype = precision.compute_dtype(config.use_bfloat16, config.job.use_tpu)
    train_images = tf.cast(train_images, dtype)
    valid_images = tf.cast(valid_images, dtype)
    global_step = tf.compat.v1.train.get_or_create_global_step()
    # 1-2. Warm-up probabilities and this replica's sampled architecture.
    p_ops, p_filters = steps.warmup_probabilities(global_step, config)
    sampled, dist_info = steps.sample_architecture(spec, p_ops, p_filters)
    # 3. Cost of the sample (a mixture during warm-up).
    cost = (steps.estimate_cost(sampled, config)
            if config.enable_cost_model else None)
    # 4-5. Shared-weight step; the barrier makes all gradients exist first.
    supernet = supernet_lib.Supernet(spec, config.job.num_classes,
                                     mode=config.supernet_mode,
                                     input_channels=config.job.num_channels,
                                     seed=config.job.seed,
                                     compute_dtype=dtype)
    model = steps.supernet_train_op(supernet, sampled, train_images,
                                    labels['train'], global_step, config)
    # 6. Validation accuracy of the same sample, after the update.
    accuracy = steps.validation_accuracy(
        supernet, sampled, valid_images, labels['validation'],
        model.train_op, model.grads, config.use_gradient_sync_barrier)
    # 7. Reward, baseline, advantage.
    rl = steps.reward_and_advantage(accuracy, cost, config)
    # 8. Controller step: the only increment of the global step.
    controller = steps.controller_train_op(dist_info, rl.advantage,
                                           global_step, config)
    train_op = tf.group(model.train_op, controller.train_op)
    # 9. Every scalar to TensorBoard.
    scalars = steps.summary_scalars(model, accuracy, rl, controller,
                                    dist_info, cost, p_ops, p_filters)
    # Checkpoints without the graph in the events file; the progress log.
    training_hooks = backend.checkpoint_hooks(config.job)
    if not config.job.use_tpu:
      training_hooks.append(_progress_hook(scalars, config))
    return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
        mode=mode, loss=model.loss, train_op=train_op,
        host_call=steps.host_call(scalars, global_step, config.job.model_dir,
                                  config.job.tpu_iterations_per_loop),
        training_hooks=training_hooks)

  return model_fn


def make_input_fn(config: SearchConfig):
  """Returns the input_fn: zipped train/validation batches (reference §2.1)."""

  def input_fn(params):
    # On TPU, TPUEstimator passes the per-replica batch size.
    batch = params.get('batch_size', config.train_batch_size)
    validation_batch = int(round(batch * config.rl_batch_size_multiplier))
    job = config.job
    dataset = datasets.search_dataset(
        job.dataset, job.num_classes, batch, validation_batch, seed=job.seed,
        data_dir=job.data_dir, download=job.download,
        validation_examples=config.validation_examples,
        image_size=job.image_size)
    if config.job.use_tpu:
      to_hwcn = lambda x: tf.transpose(x, [1, 2, 3, 0])
      dataset = dataset.map(
          lambda f, l: ({k: to_hwcn(v) for k, v in f.items()}, l))
    return dataset

  return input_fn


def _progress_hook(scalars: Dict[str, tf.Tensor],
                   config: SearchConfig) -> hooks.ProgressHook:
  """Logs step, steps/s, ETA, reward and cost every `log_every_steps`."""
  fetches = {'step': tf.compat.v1.train.get_global_step()}
  for key in ('rlcontroller/reward', 'rlcontroller/estimated_cost',
              'rlcontroller/validation_accuracy'):
    if key in scalars:
      fetches[key.split('/')[1]] = scalars[key]
  return hooks.ProgressHook(fetches, max_step=config.max_global_step,
                            log_every=max(1, config.job.log_every_steps))


def make_estimator(config: SearchConfig):
  """TPUEstimator on TPU (`--tpu`) or on CPU/GPU (`use_tpu=False`)."""
  return backend.make_estimator(make_model_fn(config), config.job,
                                config.train_batch_size, optimize_graph=False)


def run_search(config: SearchConfig) -> None:
  """Writes/checks config.json and model_spec.json, then trains to the end.

  A model directory holding an earlier run of the same search resumes from
  its latest checkpoint (Estimator behaviour); a different search is refused.
  """
  spec_json = spec_io.dumps(mobile.get_search_space(config.ssd))
  resumed = config_lib.write_or_check(config, spec_json)
  logging.info('%s search %s in %s: %d steps (RL delay %d, warm-up %d/%d)',
               'Resuming' if resumed else 'Starting', config.ssd,
               config.job.model_dir, config.max_global_step,
               config.rl_delay_steps,
               config.increase_ops_warmup_steps,
               config.increase_filters_warmup_steps)
  estimator = make_estimator(config)
  # Restoring a truncated or foreign checkpoint fails deep inside the
  # Estimator; say which file and why in one line.
  with checkpoints.refuse_unreadable(
      tf.train.latest_checkpoint(config.job.model_dir)):
    estimator.train(make_input_fn(config), max_steps=config.max_global_step)
