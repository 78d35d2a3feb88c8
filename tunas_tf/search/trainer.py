"""The search as a `runtime.distribute.Trainer`: `steps.py`'s nine steps.

`SearchTrainer(config).build()` makes the supernet, the controller, the
reward baseline, the controller's Adam and the model's RMSProp; `step` runs
what `runner.make_model_fn` runs, in the same order, and returns the same
scalars (the logits one scalar per choice, `rlpathlogits/{path}/{j}`).
`make_dataset_fn(config)` gives each input pipeline its replicas' batches;
on TPU the images go HWCN (`to_hwcn`) and the step turns them back, as the
Estimator's input_fn and model_fn do. The distribute loop increments the
global step, the controller step not.
"""

from __future__ import annotations

import collections
from typing import Any, Dict, Mapping

import tensorflow as tf

from tunas_tf.data import datasets
from tunas_tf.data import streams
from tunas_tf.models import supernet as supernet_lib
from tunas_tf.runtime import precision
from tunas_tf.runtime import summaries
from tunas_tf.search import steps
from tunas_tf.search.config import SearchConfig
from tunas_tf.search_space import mobile


class SearchTrainer:
  """The search's variables and its per-replica step.

  Args:
    config: the search's config.

  Attributes:
    finite_scalars: the scalars checked finite on the host after each loop
      (`distribute.Trainer`), as `steps` checks them in the graph off TPU.
  """

  finite_scalars = {'model/loss': 'model loss',
                    'rlcontroller/reward': 'reward'}

  def __init__(self, config: SearchConfig):
    self._config = config
    self._spec = mobile.get_search_space(config.ssd)
    self._dtype = precision.compute_dtype(config.use_bfloat16,
                                          config.job.use_tpu)
    self.supernet = self.controller = self.baseline = None
    self.controller_adam = self.model_optimizer = None
    self._learning_rate = None  # This trace's model learning rate.

  def build(self) -> Mapping[str, Any]:
    """Makes every variable, the RMSProp slots too (so the step, traced
    once, creates none).

    Returns:
      The objects to checkpoint, by name.
    """
    config = self._config
    self.controller = steps.make_controller(self._spec)
    self.baseline = steps.make_baseline(config)
    self.controller_adam = steps.make_controller_adam(self.controller)
    self.supernet = supernet_lib.Supernet(
        self._spec, config.job.num_classes, mode=config.supernet_mode,
        input_channels=config.job.num_channels, seed=config.job.seed,
        compute_dtype=self._dtype)
    self.model_optimizer = steps.model_optimizer(
        lambda: self._learning_rate, config, in_estimator=False)
    # As `apply_gradients` makes them (outside any graph), with its names.
    with tf.name_scope(self.model_optimizer.get_name()):
      self.model_optimizer._create_slots(  # pylint: disable=protected-access
          list(self.supernet.trainable_variables))
    return {'supernet': self.supernet, 'controller': self.controller,
            'baseline': self.baseline,
            'controller_adam': self.controller_adam,
            'model_optimizer': self.model_optimizer}

  def step(self, inputs: Any, global_step: tf.Tensor
           ) -> Dict[str, tf.Tensor]:
    """One search step on this replica's batches; its scalars, by name."""
    config = self._config
    features, labels = inputs
    train_images, valid_images = features['train'], features['validation']
    if config.job.use_tpu:  # The host sent HWCN (`make_dataset_fn`).
      train_images, valid_images = from_hwcn(train_images), from_hwcn(
          valid_images)
    train_images = tf.cast(train_images, self._dtype)
    valid_images = tf.cast(valid_images, self._dtype)
    # 1-2. Warm-up probabilities and this replica's sampled architecture.
    p_ops, p_filters = steps.warmup_probabilities(global_step, config)
    sampled, dist_info = steps.sample_architecture(
        self._spec, p_ops, p_filters,
        seed=steps.sample_seed(config.job.seed, global_step),
        controller=self.controller)
    # 3. Cost of the sample (a mixture during warm-up).
    cost = (steps.estimate_cost(sampled, config)
            if config.enable_cost_model else None)
    # 4-5. Shared-weight step; the barrier makes all gradients exist first.
    trained = steps.training_architecture(self._spec, sampled, p_ops,
                                          p_filters, global_step, config)
    self._learning_rate = steps.model_learning_rate(global_step, config)
    model = steps.supernet_train_op(
        self.supernet, trained, train_images, labels['train'], global_step,
        config, optimizer=self.model_optimizer)
    # 6. Validation accuracy of the controller's sample, after the update.
    accuracy = steps.validation_accuracy(
        self.supernet, sampled, valid_images, labels['validation'],
        model.train_op, model.grads, config.use_gradient_sync_barrier)
    # 7. Reward, baseline, advantage.
    rl = steps.reward_and_advantage(accuracy, cost, config, global_step,
                                    baseline=self.baseline)
    # 8. Controller step (the loop increments the global step).
    controller = steps.controller_train_op(
        dist_info, rl.advantage, global_step, config,
        adam=self.controller_adam, increment_global_step=False)
    # 9. The scalars, after both updates.
    scalars = steps.summary_scalars(model, accuracy, rl, controller,
                                    dist_info, cost, p_ops, p_filters,
                                    tag_logits=config.summarize_tag_logits)
    with tf.control_dependencies([model.train_op, controller.train_op]):
      return _flat_scalars(scalars)


def _flat_scalars(scalars: Mapping[str, tf.Tensor]
                  ) -> 'collections.OrderedDict[str, tf.Tensor]':
  """`summary_scalars`' entries as scalars: a logits vector under
  `summaries.vector_tags`, as `summaries.host_call` writes it."""
  flat = collections.OrderedDict()
  for name, value in scalars.items():
    if value.shape.rank == 0:
      flat[name] = tf.identity(value)
      continue
    for j, tag in enumerate(summaries.vector_tags(name, value.shape[0])):
      flat[tag] = tf.identity(value[j])
  return flat


def to_hwcn(images: tf.Tensor) -> tf.Tensor:
  """A batch of NHWC images as HWCN, the layout TPU infeed is sent in (a
  layout hint for XLA)."""
  return tf.transpose(images, [1, 2, 3, 0])


def from_hwcn(images: tf.Tensor) -> tf.Tensor:
  """`to_hwcn`'s images back as NHWC, on the device."""
  return tf.transpose(images, [3, 0, 1, 2])


def make_dataset_fn(config: SearchConfig):
  """The `distribute.DatasetFn` of the search.

  Each input pipeline (`context.input_pipeline_id` of
  `context.num_input_pipelines`) yields the per-replica batches of its
  replicas in turn (`streams.Pipeline`), from the start step on, as the
  Estimator's input_fn does; on TPU (`config.job.use_tpu`) the images HWCN
  (`to_hwcn`), which `SearchTrainer.step` turns back.
  """

  def dataset_fn(context: tf.distribute.InputContext, start_step: int
                 ) -> tf.data.Dataset:
    batch = context.get_per_replica_batch_size(config.train_batch_size)
    validation_batch = int(round(batch * config.rl_batch_size_multiplier))
    count = context.num_input_pipelines
    pipeline = streams.Pipeline(context.input_pipeline_id, count,
                                context.num_replicas_in_sync // count)
    job = config.job
    dataset = datasets.search_dataset(
        job.dataset, job.num_classes, batch, validation_batch, seed=job.seed,
        data_dir=job.data_dir, download=job.download,
        validation_examples=config.validation_examples,
        image_size=job.image_size, start_step=start_step, pipeline=pipeline,
        preprocessing=job.preprocessing)
    dataset = precision.cast_input(dataset, config.use_bfloat16)
    if job.use_tpu:
      dataset = dataset.map(
          lambda f, l: ({k: to_hwcn(v) for k, v in f.items()}, l))
    return dataset

  return dataset_fn
