"""The pieces of one search step, which `task.SearchTask.step` calls in
order on what the `make_*` functions made: ops built once per replica, in a
TF1 graph or `tf.function` alike; none increments the global step."""

from __future__ import annotations

import collections
from typing import (Any, Dict, List, Mapping, NamedTuple, Optional, Sequence,
                    Tuple)

import tensorflow as tf

from tunas_tf.controller import optimizer as controller_optimizer
from tunas_tf.controller import reinforce
from tunas_tf.controller import rewards
from tunas_tf.cost_model import arena as cost_arena
from tunas_tf.cost_model import features as cost_features
from tunas_tf.cost_model import linear as cost_linear
from tunas_tf.cost_model import memory as cost_memory
from tunas_tf.layers import moving_average
from tunas_tf.layers import schedules
from tunas_tf.layers import sync
from tunas_tf.runtime import replicas
from tunas_tf.search.config import SearchConfig, pair_name
from tunas_tf.search_space import schema

LABEL_SMOOTHING = 0.1
# The second word of the sample's stateless seed (before the step and the
# replica are folded in): keeps its stream apart from other streams of the
# same job seed (the initial weights' seeds are [seed, crc32(name)]).
_SAMPLE_STREAM = 0x5a3b1e
# The same for the uniform training sample of `--supernet_sampling=uniform`.
_UNIFORM_STREAM = 0x2c7d94


class ModelStep(NamedTuple):
  """The shared-weight RMSProp update (`supernet_train_op`): its gradients
  after and before the barrier; loss = label-smoothed cross-entropy + wd / 2
  * sum(w^2) over the sampled weights; this step's learning rate."""
  train_op: tf.Operation
  grads: List[tf.Tensor]
  raw_grads: List[tf.Tensor]
  loss: tf.Tensor
  empirical_loss: tf.Tensor
  regularization_loss: tf.Tensor
  learning_rate: tf.Tensor


class RewardStep(NamedTuple):
  """Reward, baseline and advantage (`reward_and_advantage`), scalars.

  `cost_ratio` and `cost_adjustment` are None when the cost model is off.
  """
  reward: tf.Tensor
  step_baseline: tf.Tensor
  baseline: tf.Tensor
  advantage: tf.Tensor
  cost_ratio: Optional[tf.Tensor] = None
  cost_adjustment: Optional[tf.Tensor] = None


class ControllerStep(NamedTuple):
  """The REINFORCE update (`controller_train_op`)."""
  train_op: tf.Operation
  empirical_loss: tf.Tensor
  entropy_loss: tf.Tensor
  learning_rate: tf.Tensor


def warmup_probabilities(global_step: tf.Tensor, config: SearchConfig
                         ) -> Tuple[tf.Tensor, tf.Tensor]:
  """Returns (increase_ops_prob, increase_filters_prob): 1 -> 0 linearly."""
  return (schedules.linear_decay(global_step, config.increase_ops_warmup_steps),
          schedules.linear_decay(global_step,
                                 config.increase_filters_warmup_steps))


def sample_seed(seed: int, global_step: tf.Tensor,
                stream: int = _SAMPLE_STREAM) -> tf.Tensor:
  """This step's int32 [2] stateless seed on this replica: a pure function
  of (`seed`, `stream`, step, replica id), so a resumed search draws what an
  uninterrupted one draws. The step is read here once, before the
  controller's increment that depends on it through the sample."""
  fold_in = tf.random.experimental.stateless_fold_in
  step = tf.cast(global_step, tf.int32)
  key = tf.constant([seed, stream], tf.int32)
  return fold_in(fold_in(key, step), replicas.replica_id())


def sample_architecture(spec: Any, increase_ops_prob: tf.Tensor,
                        increase_filters_prob: tf.Tensor,
                        controller: reinforce.Controller,
                        seed: Optional[tf.Tensor] = None
                        ) -> Tuple[Any, reinforce.DistInfo]:
  """`reinforce.independent_sample` of `controller` (one per replica)."""
  return reinforce.independent_sample(
      spec, increase_ops_probability=increase_ops_prob,
      increase_filters_probability=increase_filters_prob, seed=seed,
      controller=controller)


def make_controller(spec: Any, pair: int = 0) -> reinforce.Controller:
  """The controller `sample_architecture` samples from (`rl_controller/`;
  pair k > 0 `rl_controller_k/`, `config.pair_name`)."""
  with tf.compat.v1.variable_scope(pair_name('rl_controller', pair)), \
      replicas.identical_variables():
    return reinforce.Controller(spec)


def make_baseline(config: SearchConfig,
                  pair: int = 0) -> moving_average.MovingAverage:
  """The reward baseline `reward_and_advantage` updates (`rl_baseline/`,
  as `make_controller` for a pair)."""
  with replicas.identical_variables():
    return moving_average.MovingAverage(config.rl_baseline_momentum,
                                        name=pair_name('rl_baseline', pair))


def make_controller_adam(controller: reinforce.Controller, pair: int = 0
                         ) -> controller_optimizer.ControllerAdam:
  """The Adam `controller_train_op` applies (`controller_adam/`, as
  `make_controller` for a pair)."""
  with replicas.identical_variables():
    return controller_optimizer.ControllerAdam(
        list(controller.trainable_variables),
        name=pair_name('controller_adam', pair))


def active_pair(global_step: tf.Tensor, pairs: int) -> Optional[tf.Tensor]:
  """The pair whose turn it is, int32 step mod `pairs` (every replica
  the same); None for one pair, whose search is the original's."""
  return (None if pairs == 1 else
          tf.math.floormod(tf.cast(global_step, tf.int32), pairs))


def select(spec: Any, samples: List[Any], pair: Optional[tf.Tensor]) -> Any:
  """The sample of the active `pair` (of one per pair); `samples[0]` for
  None."""
  if pair is None:
    return samples[0]
  masks = [{path: oneof.mask for path, oneof in schema.flatten_with_paths(s)}
           for s in samples]
  return schema.with_masks(spec, lambda path, _: tf.gather(
      tf.stack([m[path] for m in masks]), pair))


def model_learning_rate(global_step: tf.Tensor, config: SearchConfig
                        ) -> tf.Tensor:
  """The shared weights' learning rate: cosine decay, linear warm-up."""
  return schedules.cosine_decay_with_linear_warmup(
      config.model_learning_rate_scaled, global_step, config.max_global_step,
      config.model_warmup_steps)


def model_optimizer(config: SearchConfig,
                    var_list: Optional[List[tf.Variable]] = None
                    ) -> replicas.MeanRMSProp:
  """The shared weights' RMSProp (`replicas.rmsprop`, its slots of
  `var_list` made now), with `--model_momentum`."""
  return replicas.rmsprop(config.model_momentum, var_list)


def training_architecture(spec: Any, sampled_spec: Any,
                          increase_ops_prob: tf.Tensor,
                          increase_filters_prob: tf.Tensor,
                          global_step: tf.Tensor, config: SearchConfig) -> Any:
  """The architecture the shared weights train on: `sampled_spec` (the
  original), or with `--supernet_sampling=uniform` a uniform draw from its
  own seed stream, so every path keeps training however sure the
  controller grows (its sample is still the one rewarded)."""
  if config.supernet_sampling == 'controller':
    return sampled_spec
  return reinforce.uniform_sample(
      spec, increase_ops_prob, increase_filters_prob,
      seed=sample_seed(config.job.seed, global_step, _UNIFORM_STREAM))


def estimate_cost(sampled_spec: Any, config: SearchConfig,
                  pair: int = 0) -> tf.Tensor:
  """Scalar float32 estimated cost of the sampled (possibly mixed) masks,
  on `pair`'s cost model."""
  return cost_linear.estimate_cost(cost_features.features(sampled_spec),
                                   config.resolved_cost_models[pair])


def estimate_limits(sampled_spec: Any, config: SearchConfig
                    ) -> Dict[str, tf.Tensor]:
  """{summary name: scalar float32 bytes} of the sampled (possibly mixed)
  masks under each of `config.limits` (none: {}, no op): TFLite Micro's arena
  (`arena.estimate_arena`), the int8 model's flash (its exact linear model,
  as `estimate_cost`)."""
  if not config.limits:
    return {}
  features = cost_features.features(sampled_spec)
  return {tag: cost_arena.estimate_arena(features, config.arena_model)
          if tag == 'estimated_arena' else cost_linear.estimate_cost(
              features, config.flash_model) for tag in config.limits}


def supernet_train_op(supernet, sampled_spec: Any, images: tf.Tensor,
                      labels: tf.Tensor, learning_rate: tf.Tensor,
                      config: SearchConfig,
                      optimizer: replicas.MeanRMSProp) -> ModelStep:
  """One RMSProp step of the shared weights on the train batch.

  Softmax cross-entropy with label smoothing 0.1 plus L2 (wd / 2) under the
  sample's masks; `model_optimizer`'s RMSProp (TF1 semantics) at
  `learning_rate` (`model_learning_rate`), on the mean gradient over
  replicas. With the barrier on, every gradient waits for all of them.
  """
  with tf.name_scope('training'):
    logits = tf.cast(supernet(sampled_spec, images, training=True), tf.float32)
    empirical_loss = tf.compat.v1.losses.softmax_cross_entropy(
        labels, logits, label_smoothing=LABEL_SMOOTHING)
    regularization_loss = supernet.regularization_loss(
        sampled_spec, config.model_weight_decay)
    loss = empirical_loss + regularization_loss
    optimizer = replicas.averaging_optimizer(optimizer.at(learning_rate))
    variables = list(supernet.trainable_variables)
    grads_and_vars = [(g, v) for g, v in
                      optimizer.compute_gradients(loss, var_list=variables)
                      if g is not None]
    raw_grads = grads = [g for g, _ in grads_and_vars]
    if config.use_gradient_sync_barrier:
      grads = sync.with_data_dependencies(raw_grads, raw_grads)
    train_op = optimizer.apply_gradients(
        list(zip(grads, [v for _, v in grads_and_vars])))
  return ModelStep(train_op=train_op, grads=grads, raw_grads=raw_grads,
                   loss=loss, empirical_loss=empirical_loss,
                   regularization_loss=regularization_loss,
                   learning_rate=learning_rate)


def validation_accuracy(supernet, sampled_spec: Any, images: tf.Tensor,
                        labels: tf.Tensor, model_train_op: tf.Operation,
                        grads: List[tf.Tensor], use_barrier: bool) -> tf.Tensor:
  """Top-1 of the sampled network on the validation batch, after the update.

  Reads the *updated* weights (step 6). Batch norm normalises with the
  validation batch's own statistics (stateless). The argmax is taken in the
  logits' own dtype (as in the original, where casting bf16 logits to float32
  first gave wrong accuracies under XLA).
  """
  with tf.name_scope('validation'):
    if use_barrier and grads:
      images = sync.with_data_dependencies(grads[:1], [images])[0]
    with tf.control_dependencies([model_train_op]):
      logits = supernet(sampled_spec, images, training=False)
    # int32 indices: TPUs have no native 64-bit integers (XLA emulates them).
    correct = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32),
                       tf.argmax(labels, axis=-1, output_type=tf.int32))
    return tf.reduce_mean(tf.cast(correct, tf.float32))


def reward_and_advantage(
    accuracy: tf.Tensor, cost: Optional[tf.Tensor], config: SearchConfig,
    baseline: moving_average.MovingAverage, pair: int = 0,
    active: Optional[tf.Tensor] = None,
    limits: Optional[Dict[str, tf.Tensor]] = None) -> RewardStep:
  """Reward (at `pair`'s target), baseline (EMA of the cross-replica mean
  reward, `baseline` is `make_baseline`'s, updated only where `active`) and
  advantage. Each of `limits` (`estimate_limits`) over its `config.limits`
  scales the accuracy first (`rewards.LIMIT_EXPONENT`, `mnas_hard`)."""
  cost_ratio = cost_adjustment = None
  for tag, value in (limits or {}).items():
    accuracy = rewards.compute_reward(
        accuracy, value, config.limits[tag], rewards.LIMIT_EXPONENT,
        rewards.REWARD_MNAS_HARD).reward
  reward = accuracy
  if config.enable_cost_model:
    stats = rewards.compute_reward(accuracy, cost, config.pairs[pair][1],
                                   config.rl_cost_model_exponent,
                                   config.rl_reward_function)
    reward = tf.convert_to_tensor(stats.reward, tf.float32)
    cost_ratio = tf.convert_to_tensor(stats.cost_ratio, tf.float32)
    cost_adjustment = tf.convert_to_tensor(stats.cost_adjustment, tf.float32)
  step_baseline = replicas.mean(reward)
  new_baseline = baseline.update(step_baseline, active)  # Both wait.
  return RewardStep(reward=reward, step_baseline=step_baseline,
                    baseline=new_baseline, advantage=reward - new_baseline,
                    cost_ratio=cost_ratio, cost_adjustment=cost_adjustment)


def controller_train_op(
    dist_info: reinforce.DistInfo, advantage: tf.Tensor,
    global_step: tf.Tensor, config: SearchConfig,
    adam: controller_optimizer.ControllerAdam,
    active: Optional[tf.Tensor] = None) -> ControllerStep:
  """REINFORCE with `make_controller_adam`'s Adam (beta1 0), applied only
  where `active` (None: always).

  loss = -stop_gradient(advantage) * log_prob; the entropy bonus -w(t) *
  entropy is a separate SGD step (`schedules.rl_entropy_weight`); the
  learning rate is 0 before `rl_delay_steps`, then grows 10x by the end
  (FBNet's delay, as in the original).
  """
  variables = list(dist_info.controller.trainable_variables)
  empirical_loss = -tf.stop_gradient(advantage) * dist_info.sample_log_prob
  entropy_weight = schedules.rl_entropy_weight(
      config.rl_entropy_regularization, global_step, config.rl_delay_steps,
      config.max_global_step, config.rl_entropy_schedule)
  entropy_loss = -entropy_weight * dist_info.entropy
  learning_rate = schedules.rl_learning_rate(
      config.rl_learning_rate_scaled, global_step, config.rl_delay_steps,
      config.max_global_step, config.use_exponential_rl_learning_rate_schedule)
  barrier = ((lambda grads: sync.with_data_dependencies(grads, grads))
             if config.use_gradient_sync_barrier else None)
  grads = controller_optimizer.gradients(empirical_loss, variables, barrier)
  reg_grads = (controller_optimizer.gradients(entropy_loss, variables)
               if config.rl_entropy_regularization else None)
  train_op = adam.apply(grads, learning_rate, reg_grads, active)
  return ControllerStep(train_op=train_op, empirical_loss=empirical_loss,
                        entropy_loss=entropy_loss, learning_rate=learning_rate)


def summary_scalars(model: ModelStep, accuracy: tf.Tensor, rl: RewardStep,
                    controller: ControllerStep,
                    dist_info: reinforce.DistInfo, cost: Optional[tf.Tensor],
                    increase_ops_prob: tf.Tensor,
                    increase_filters_prob: tf.Tensor,
                    tag_logits: bool = False,
                    limits: Optional[Dict[str, tf.Tensor]] = None
                    ) -> 'collections.OrderedDict[str, tf.Tensor]':
  """The original's summaries, in its order, for `host_call` (and each of
  `limits`, `rlcontroller/estimated_arena` or `_flash`, after the cost's).

  float32 scalars, and one logits vector per OneOf, `rlpathlogits/{path}`
  (with `tag_logits` also `rltaglogits/{tag}`), written element by element
  (`/{j}`) only on the steps that write summaries.
  """
  s = collections.OrderedDict()
  s['model/loss'] = model.loss
  s['model/empirical_loss'] = model.empirical_loss
  s['model/regularization_loss'] = model.regularization_loss
  s['model/learning_rate'] = model.learning_rate
  s['rlcontroller/empirical_loss'] = controller.empirical_loss
  s['rlcontroller/entropy_loss'] = controller.entropy_loss
  s['rlcontroller/validation_accuracy'] = accuracy
  s['rlcontroller/reward'] = rl.reward
  s['rlcontroller/step_baseline'] = rl.step_baseline
  s['rlcontroller/baseline'] = rl.baseline
  s['rlcontroller/advantage'] = rl.advantage
  s['rlcontroller/log_prob'] = dist_info.sample_log_prob
  if cost is not None:
    s['rlcontroller/estimated_cost'] = cost
    s['rlcontroller/cost_ratio'] = rl.cost_ratio
    s['rlcontroller/cost_adjustment'] = rl.cost_adjustment
  for tag, value in (limits or {}).items():
    s[f'rlcontroller/{tag}'] = value
  s['rlcontroller/learning_rate'] = controller.learning_rate
  s['rlcontroller/increase_ops_prob'] = increase_ops_prob
  s['rlcontroller/increase_filters_prob'] = increase_filters_prob
  s = collections.OrderedDict(
      (k, tf.cast(tf.reshape(v, []), tf.float32)) for k, v in s.items())
  groups = [('rlpathlogits', dist_info.logits_by_path)] + (
      [('rltaglogits', dist_info.logits_by_tag)] if tag_logits else [])
  for prefix, logits in groups:
    for name, values in logits.items():
      # Cast is the identity for float32: the tag entries stay the path
      # entries' tensors, which `host_call` sends once.
      s[f'{prefix}/{name}'] = tf.cast(values, tf.float32)
  return s


# The summaries all pairs share (`pair_scalars` leaves them to pair 0's).
_SHARED = ('validation_accuracy', 'learning_rate', 'increase_ops_prob',
           'increase_filters_prob') + tuple(
               tag for _, _, tag, _ in cost_memory.LIMITS)


def pair_scalars(pair: int, *args: Any, **kwargs: Any
                 ) -> 'collections.OrderedDict[str, tf.Tensor]':
  """`summary_scalars(*args, **kwargs)` of `pair`: pair 0's all, under
  the original's names; pair k's own under `rlcontroller_k/` and
  `rlpathlogits_k/`, the shared ones left to pair 0."""
  s = summary_scalars(*args, **kwargs)
  if not pair:
    return s
  s = collections.OrderedDict()
  for name, value in summary_scalars(*args, **kwargs).items():
    head, _, tail = name.partition('/')
    if head in ('rlcontroller', 'rlpathlogits') and tail not in _SHARED:
      s[f'{pair_name(head, pair)}/{tail}'] = value
  return s


def probability_summaries(decisions: Sequence[Tuple[str, Sequence[str]]],
                          scalars: Mapping[str, Any], step: Any) -> List[Any]:
  """The controller's probabilities `rlprobs/{path}/{label}`, entropies
  `rlentropy/{path}` and heat map `rlprobs_heatmap`, under the default
  writer, from a step's `rlpathlogits/{path}/{j}` (`summary_scalars`) of
  `decisions` ((path, choice labels)); in a graph or eagerly."""
  written, rows = [], []
  width = max(len(labels) for _, labels in decisions)
  for path, labels in decisions:
    logits = tf.stack([tf.cast(scalars[f'rlpathlogits/{path}/{j}'],
                               tf.float32) for j in range(len(labels))])
    probs = tf.nn.softmax(logits)
    written += [tf.summary.scalar(f'rlprobs/{path}/{label}', probs[j],
                                  step=step)
                for j, label in enumerate(labels)]
    entropy = -tf.reduce_sum(probs * tf.nn.log_softmax(logits))
    written.append(tf.summary.scalar(f'rlentropy/{path}', entropy, step=step))
    rows.append(tf.pad(probs, [[0, width - len(labels)]], constant_values=-1))
  written.append(tf.summary.image('rlprobs_heatmap',
                                  _heatmap(tf.stack(rows))[None], step=step))
  return written


def _heatmap(probs: tf.Tensor, cell: int = 12) -> tf.Tensor:
  """[D, C] probabilities (-1: no such choice) -> an RGB image in [0, 1]."""
  white = tf.constant([1.0, 1.0, 1.0])
  blue = tf.constant([0.03, 0.19, 0.42])
  p = tf.clip_by_value(probs, 0.0, 1.0)[..., None]
  rgb = white + p * (blue - white)
  rgb = tf.where((probs < 0)[..., None], tf.fill(tf.shape(rgb), 0.75), rgb)
  return tf.repeat(tf.repeat(rgb, cell, axis=0), 2 * cell, axis=1)
