"""The search as a `runtime.task.Task`: DESIGN's nine steps, once. `build`
makes a controller, baseline and Adam per (cost model, target) pair (taking
turns by step), the supernet and its RMSProp; `step` runs one search step."""

from __future__ import annotations

import collections
from typing import Any, Dict, List, Mapping, Tuple

import tensorflow as tf

from tunas_tf.cost_model import linear as cost_linear
from tunas_tf.data import datasets
from tunas_tf.data import streams
from tunas_tf.models import supernet as supernet_lib
from tunas_tf.runtime import precision
from tunas_tf.search import config as config_lib
from tunas_tf.search import steps
from tunas_tf.search.config import SearchConfig
from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema


def progress_formats(config: SearchConfig):
  """The scalars of the progress line and their text (of several pairs,
  whose turn the step was and its sample's accuracy; its arena and flash
  under limits)."""
  formats = {'rlcontroller/validation_accuracy': lambda v: f'accuracy {v:.3f}'}
  for tag in config.limits:  # 'arena 9.1 KB', 'flash 40.2 KB'
    formats['rlcontroller/' + tag] = (
        lambda v, what=tag[10:]: f'{what} {v / 1024:.1f} KB')
  if len(config.pairs) > 1:
    return {'rlcontroller/pair': lambda v: f'pair {v:.0f}', **formats}
  return {'rlcontroller/reward': lambda v: f'reward {v:.3f}',
          'rlcontroller/estimated_cost': lambda v: 'cost ' + (
              cost_linear.cost_text(v, config.cost_model,
                                    config.rl_cost_model_target)), **formats}


class SearchTask:
  """The search's variables, its per-replica step and its batches."""

  finite_scalars = {'model/loss': 'model loss',
                    'rlcontroller/reward': 'reward'}

  def __init__(self, config: SearchConfig):
    self._config = config
    self._spec = mobile.get_search_space(config.ssd)
    self._dtype = precision.compute_dtype(config.use_bfloat16,
                                          config.job.use_tpu)
    self.train_batch_size = config.train_batch_size
    self.progress = progress_formats(config)
    # (path, choice labels) of each decision, for the probability summaries.
    self._decisions = [(path, ops.choice_labels(oneof.choices))
                       for path, oneof in schema.flatten_with_paths(self._spec)]

  def build(self) -> Dict[str, Any]:
    """The objects to checkpoint, by name: every variable, the RMSProp
    slots too, so that a step traced once creates none."""
    config = self._config
    pairs = range(len(config.pairs))
    controllers = [steps.make_controller(self._spec, k) for k in pairs]
    # Pair 0 under the original's names, pair k with a `_k` suffix.
    objects = {config_lib.pair_name(name, k): value for name, values in (
        ('controller', controllers),
        ('baseline', [steps.make_baseline(config, k) for k in pairs]),
        ('controller_adam', [steps.make_controller_adam(c, k)
                             for k, c in enumerate(controllers)]))
               for k, value in enumerate(values)}
    supernet = supernet_lib.Supernet(
        self._spec, config.job.num_classes, mode=config.supernet_mode,
        input_channels=config.job.num_channels, seed=config.job.seed,
        compute_dtype=self._dtype)
    return {'supernet': supernet, **objects,
            'model_optimizer': steps.model_optimizer(
                config, list(supernet.trainable_variables))}

  def initial_values(self, objects: Mapping[str, Any]
                     ) -> List[Tuple[tf.Variable, Any]]:
    del objects  # A search starts from its seeded initial values.
    return []

  def write_summaries(self, scalars: Mapping[str, Any], step: Any
                      ) -> List[Any]:
    """`steps.probability_summaries` of the step's logits (pair 0's)."""
    return steps.probability_summaries(self._decisions, scalars, step)

  def step(self, objects: Mapping[str, Any], inputs: Any,
           global_step: tf.Tensor) -> Dict[str, tf.Tensor]:
    """One search step of `build`'s `objects` on this replica's batches;
    its scalars, by name, each after both updates."""
    config, spec = self._config, self._spec
    supernet = objects['supernet']
    features, labels = inputs
    train_images = tf.cast(features['train'], self._dtype)
    valid_images = tf.cast(features['validation'], self._dtype)
    # 1. Warm-up probabilities.
    p_ops, p_filters = steps.warmup_probabilities(global_step, config)
    # 2. This replica's sample (`steps.sample_seed`): of the pair whose
    # turn it is (`steps.active_pair`), one drawn per pair.
    n = len(config.pairs)
    of = lambda name, k: objects[config_lib.pair_name(name, k)]
    pair = steps.active_pair(global_step, n)
    seed = steps.sample_seed(config.job.seed, global_step)
    draws = [steps.sample_architecture(spec, p_ops, p_filters,
                                       of('controller', k), seed=seed)
             for k in range(n)]
    sampled = steps.select(spec, [d[0] for d in draws], pair)
    # 3. Cost of the sample (a mixture during warm-up), on each pair's model.
    costs = [steps.estimate_cost(sampled, config, k)
             if config.enable_cost_model else None for k in range(n)]
    limits = steps.estimate_limits(sampled, config)
    # 4-5. Shared-weight step (`steps.training_architecture`); the barrier
    # makes all gradients exist first.
    trained = steps.training_architecture(spec, sampled, p_ops, p_filters,
                                          global_step, config)
    model = steps.supernet_train_op(
        supernet, trained, train_images, labels['train'],
        steps.model_learning_rate(global_step, config), config,
        objects['model_optimizer'])
    # 6. Validation accuracy of the controller's sample, after the update.
    accuracy = steps.validation_accuracy(
        supernet, sampled, valid_images, labels['validation'],
        model.train_op, model.grads, config.use_gradient_sync_barrier)
    scalars, train_ops = collections.OrderedDict(), [model.train_op]
    for k, (_, dist_info) in enumerate(draws):
      active = None if pair is None else tf.equal(pair, k)
      # 7. Reward, baseline, advantage (each pair's state moves on its turn).
      rl = steps.reward_and_advantage(accuracy, costs[k], config,
                                      of('baseline', k), k, active, limits)
      # 8. The controller's REINFORCE step.
      controller = steps.controller_train_op(
          dist_info, rl.advantage, global_step, config,
          of('controller_adam', k), active)
      train_ops.append(controller.train_op)
      # 9. Every scalar, after both updates.
      scalars.update(steps.pair_scalars(
          k, model, accuracy, rl, controller, dist_info, costs[k], p_ops,
          p_filters, tag_logits=config.summarize_tag_logits, limits=limits))
    if pair is not None:
      scalars['rlcontroller/pair'] = tf.cast(pair, tf.float32)
    with tf.control_dependencies(train_ops):
      return collections.OrderedDict(
          (name, tf.identity(value)) for name, value in scalars.items())

  def dataset(self, batch_size: int, pipeline: streams.Pipeline,
              start_step: int) -> tf.data.Dataset:
    """Zipped train/validation batches of `pipeline`'s replicas, from
    `start_step` on: ({'train', 'validation'} images, the same one-hot
    labels); images float32, or bfloat16 with `--use_bfloat16=true`
    (`precision.cast_input`), labels float32."""
    config, job = self._config, self._config.job
    validation_batch = int(round(batch_size * config.rl_batch_size_multiplier))
    dataset = datasets.search_dataset(
        job.dataset, job.num_classes, batch_size, validation_batch,
        seed=job.seed, data_dir=job.data_dir, download=job.download,
        validation_examples=config.validation_examples,
        image_size=job.image_size, start_step=start_step, pipeline=pipeline,
        preprocessing=job.preprocessing)
    return precision.cast_input(dataset, config.use_bfloat16)

