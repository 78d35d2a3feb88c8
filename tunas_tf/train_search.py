r"""Searches an architecture: TuNAS, a one-shot, cost-aware search.

Trains a search space's shared weights and a controller that learns which
architecture to pick, rewarding accuracy near a cost target. The defaults run
the offline demo (8x8 `digits`, `digits_search`, `macs`) on a laptop CPU,
`python -m tunas_tf.train_search --model_dir=runs/demo`; the original's
recipes are flagfiles in `tunas_tf/configs/`. Every flag is checked before
anything is written; a killed search resumes (docs/restarting.md,
docs/search.md).
"""

from __future__ import annotations

if __name__ == '__main__':  # A binary: before anything imports TensorFlow.
  from tunas_tf.cli import process as _process  # pylint: disable=g-import-not-at-top
  _process.at_start()

from absl import flags

from tunas_tf.cli import flags as common_flags
from tunas_tf.io import checks
from tunas_tf.controller import rewards
from tunas_tf.data import datasets
from tunas_tf.runtime import jobs
from tunas_tf.runtime import lifecycle
from tunas_tf.runtime import precision
from tunas_tf.search import config as config_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import naming

FLAGS = flags.FLAGS

def define_flags(flag_values: flags.FlagValues = FLAGS) -> None:
  """Defines the search flags (called by `__main__` and by tests only)."""
  f = flag_values
  # Where and what.
  common_flags.define_data_flags(f, 'Output directory: checkpoints, events, '
                            'config.json, model_spec.json. Required.')
  common_flags.define_space_flags(f, 'What to search.')
  flags.DEFINE_integer('validation_examples', None, 'TFDS datasets: training '
                       'images held out for the controller; default 10% of '
                       'the train split. (digits has a fixed split.)',
                       flag_values=f)
  common_flags.define_seed_flag(f, 'the data order and the model and '
                                'controller initialisation')
  # Backend.
  common_flags.define_run_flags(f, iterations_per_loop=10,
                                save_checkpoints_steps=200, log_every_steps=50,
                                log_note=' (CPU/GPU)')
  flags.DEFINE_enum('supernet_mode', None, naming.MODES,
                    'masked: static shapes (TPU); sampled: slice to the sampled '
                    'widths (CPU/GPU). Default: masked on TPU, sampled '
                    'elsewhere.', flag_values=f)
  flags.DEFINE_enum('use_bfloat16', 'auto', config_lib.BFLOAT16_MODES,
                    'bfloat16 compute (float32 variables, batch-norm '
                    'statistics and loss). auto: ontpu for MobileNetV3-like '
                    'spaces, else false. ontpu: on TPU only, float32 images '
                    'cast in the model_fn. true: on every device (CPU/GPU '
                    'too), the input pipeline emitting bfloat16 images '
                    '(half the infeed bytes).',
                    flag_values=f)
  flags.DEFINE_integer('max_steps', None, 'Stop after this many steps (the '
                       'schedules use it instead of --epochs).', flag_values=f)
  # Shared weights.
  flags.DEFINE_float('model_learning_rate', 1.0, 'Peak LR per 256 images; '
                     'the actual peak is this x train_batch_size / 256. The '
                     'ImageNet recipe uses 0.165; the short demo needs more.',
                     flag_values=f)
  flags.DEFINE_float('model_warmup_steps_fraction', 0.025, 'Fraction of the '
                     'steps with a linear LR warm-up.', flag_values=f)
  flags.DEFINE_float('model_momentum', 0.9, 'RMSProp momentum.', flag_values=f)
  flags.DEFINE_float('model_weight_decay', None, 'L2 strength, applied as '
                     'wd/2 * sum(w^2); default 4e-5, or 3e-5 with bfloat16.',
                     flag_values=f)
  flags.DEFINE_integer('train_batch_size', 64, 'Global batch of the '
                       'shared-weight update.', flag_values=f)
  flags.DEFINE_integer('replicas', 1, 'Replicas off TPU, through '
                       'tf.distribute: N GPUs, or without GPUs the CPU split '
                       'into N devices. Each samples its own architecture on '
                       'train_batch_size / N images; gradients and controller '
                       'moments are averaged. On TPU the topology decides.',
                       flag_values=f)
  flags.DEFINE_float('epochs', 48.0, 'Search length in epochs of the '
                     'search-train data.', flag_values=f)
  _define_controller_flags(f)
  flags.DEFINE_boolean('summarize_tag_logits', False, 'Also write the '
                       "original's rltaglogits/ summaries (the rlpathlogits/ "
                       'by tag).', flag_values=f)


def _define_controller_flags(f: flags.FlagValues) -> None:
  """The controller's flags: RL schedule, warm-ups, reward and cost model."""
  flags.DEFINE_float('rl_learning_rate', 0.3, 'Controller Adam LR per '
                     '256 images (scaled like the model LR). The ImageNet '
                     'recipe uses 0.0003; the short demo needs more for its '
                     'decisions to settle (at 0.1 a filter count or two '
                     'ended split, the argmax up to 8.5% off the target).',
                     flag_values=f)
  flags.DEFINE_boolean('use_exponential_rl_learning_rate_schedule', True,
                       'Grow the RL LR 10x from the end of the delay to the '
                       'last step.', flag_values=f)
  flags.DEFINE_float('rl_entropy_regularization', 0.0, 'Weight of the '
                     'entropy bonus.', flag_values=f)
  flags.DEFINE_enum('rl_entropy_schedule', config_lib.ENTROPY_SCHEDULES[0],
                    config_lib.ENTROPY_SCHEDULES, 'How the entropy bonus '
                    'moves: constant (the original) or linear (falls to 0 '
                    'from the end of the RL delay to the last step, so the '
                    'controller explores early and settles by the end).',
                    flag_values=f)
  flags.DEFINE_float('rl_baseline_momentum', 0.95, 'Momentum of the '
                     'moving-average reward baseline.', flag_values=f)
  flags.DEFINE_float('rl_batch_size_multiplier', 4.0, 'Validation batch = '
                     'this x train batch.', flag_values=f)
  flags.DEFINE_float('rl_delay_steps_fraction', 0.25, 'Fraction of the steps '
                     'before the controller learns.', flag_values=f)
  flags.DEFINE_enum('supernet_sampling', config_lib.SUPERNET_SAMPLING[0],
                    config_lib.SUPERNET_SAMPLING, 'What the shared weights '
                    "train on: the controller's sample (the original) or "
                    'a uniform one (every path keeps training; the '
                    "controller's sample is still the one rewarded).",
                    flag_values=f)
  flags.DEFINE_float('increase_ops_warmup_steps_fraction', 0.25, 'Op warm-up '
                     'length (all ops on with a probability decaying 1->0); '
                     'at most the RL delay.', flag_values=f)
  flags.DEFINE_float('increase_filters_warmup_steps_fraction', 0.25, 'Filter '
                     'warm-up length (widest filters); at most the RL delay.',
                     flag_values=f)
  flags.DEFINE_enum('rl_reward_function', rewards.REWARD_ABS, rewards.REWARDS,
                    'Reward shape (abs: Q + beta |c/T - 1|).', flag_values=f)
  flags.DEFINE_boolean('enable_cost_model', True, 'Constrained search; '
                       'false: reward = accuracy.', flag_values=f)
  flags.DEFINE_list('cost_model', None, "'released' (simulated Pixel-1 ms; "
                    "default where it exists), 'macs' (multiply-adds; "
                    "default elsewhere), 'flash' (the int8 model's bytes; "
                    'with --rl_reward_function=mnas_hard a flash limit) or '
                    'the path of a coefficients JSON; several '
                    '(comma-separated): a policy each, paired with the '
                    'targets one to one (docs/search.md).', flag_values=f)
  common_flags.define_precision_flag(
      f, 'latency_precision', 'The arithmetic the searched network runs in on '
      'the device (a fitted cost model must have been measured in it, '
      "tools/measure_latency --precision; 'macs' and 'flash' count alike "
      'in any):')
  flags.DEFINE_list('rl_cost_model_target', None, 'Cost target T0. Default: '
                    '84 ms (57 for MobileNetV3-like spaces) for released '
                    "models; otherwise the geometric mean of the space's "
                    'cheapest and dearest costs. A target outside those two '
                    "(in the cost model's unit) is refused. Several "
                    '(comma-separated, increasing on one cost model): a '
                    'policy each, one search.', flag_values=f)
  flags.DEFINE_float('rl_cost_model_exponent', -0.5, 'beta of the reward '
                     '(more negative: stronger cost penalty). The ImageNet '
                     'recipes use -0.10; the demo, whose accuracy differences '
                     'are small and noisy, needs a stronger pull to the '
                     'target.', flag_values=f)
  common_flags.define_limit_flags(f, 'a sample over it has its accuracy '
                                  'scaled by (need / limit) ** -1 (over both: '
                                  'both factors; docs/microcontrollers.md); '
                                  'extraction refuses an architecture over '
                                  'it.')
  flags.DEFINE_boolean('use_gradient_sync_barrier', True, 'Order the updates '
                       'with data dependencies (all gradients before any '
                       'update; validation after the model update).',
                       flag_values=f)


def _dataset_info(f: flags.FlagValues):
  """The flags' `datasets.DatasetInfo` (metadata only), holding out
  `--validation_examples` (default a tenth of `train`); ValueError for an
  unknown or unreachable dataset, or a hold-out or size it cannot fit."""
  info = datasets.dataset_info(f.dataset, f.data_dir, f.download,
                               image_size=f.image_size,
                               validation_examples=f.validation_examples or 0)
  if f.dataset == datasets.DIGITS or f.validation_examples is not None:
    return info
  return datasets.dataset_info(
      f.dataset, f.data_dir, f.download, image_size=f.image_size,
      validation_examples=max(1, info.train_examples // 10))


def config_from_flags(flag_values: flags.FlagValues = FLAGS,
                      dataset_info=None) -> config_lib.SearchConfig:
  """The `SearchConfig` of parsed flags, defaults that depend on other flags
  resolved; `dataset_info` None loads it (tests pass one, without data).
  ValueError naming the flag for missing or inconsistent settings."""
  f = flag_values
  common_flags.check_data_flags(f)  # Before reading any data.
  config_lib.check_replicas_on_tpu(jobs.resolve_use_tpu(f.tpu, f.use_tpu),
                                   f.replicas, given=f['replicas'].present)
  info = mobile.check_searchable(f.ssd)  # Before reading any data.
  if dataset_info is None:
    dataset_info = _dataset_info(f)
  sizes = dataset_info.split_sizes
  use_bfloat16 = precision.resolve(f.use_bfloat16, info.mobilenet_v3_like)
  weight_decay = f.model_weight_decay
  if weight_decay is None:
    weight_decay = precision.default_weight_decay(use_bfloat16)
  job = common_flags.job_config(
      f, num_classes=dataset_info.classifier_width(f.num_classes),
      image_size=dataset_info.image_size,
      num_channels=dataset_info.num_channels,
      preprocessing=f.preprocessing or dataset_info.default_preprocessing)
  pairs = _pairs(f, job)
  return config_lib.SearchConfig(**common_flags.config_values(
      f, config_lib.SearchConfig, job=job,
      search_train_examples=sizes['search_train'],
      validation_examples=sizes['search_validation'],
      supernet_mode=f.supernet_mode or (naming.MASKED if job.use_tpu
                                         else naming.SAMPLED),
      use_bfloat16=use_bfloat16, model_weight_decay=weight_decay,
      cost_model=pairs[0][0], rl_cost_model_target=pairs[0][1],
      extra_pairs=tuple(pairs[1:])))


def _pairs(f: flags.FlagValues, job: jobs.JobConfig):
  """(cost model, target) of each policy: `--cost_model` and
  `--rl_cost_model_target` paired one to one, or one of them for all; each
  model checked to vary, each missing target its model's default."""
  from tunas_tf.cost_model import linear  # pylint: disable=g-import-not-at-top
  listed = lambda v: v if isinstance(v, list) else [v]  # Set, not parsed.
  names = listed(f.cost_model or None)
  targets = listed(f.rl_cost_model_target or None)
  if len(names) > 1 and len(targets) > 1 and len(names) != len(targets):
    raise ValueError(f'{len(names)} --cost_model values and {len(targets)} '
                     '--rl_cost_model_target values: give as many of each, '
                     'or one of either for all')
  pairs = []
  for k in range(max(len(names), len(targets))):
    name, target = names[k % len(names)], targets[k % len(targets)]
    where = f' (pair {k})' if len(names) > 1 else ''
    try:
      model = linear.get_cost_model(
          f.ssd, name, image_size=job.image_size, num_classes=job.num_classes,
          input_channels=job.num_channels, precision=f.latency_precision)
    except ValueError as e:
      raise ValueError(f'--cost_model {name}{where}: {e}' if where else e
                       ) from None
    if f.enable_cost_model:
      linear.check_varies(model)
    try:
      target = (linear.default_target(model) if target is None
                else float(target))
    except ValueError:
      raise ValueError(f'--rl_cost_model_target: {target!r} is not a '
                       'number') from None
    if (targets[0] is not None and f.enable_cost_model and
        f.rl_cost_model_exponent):  # A target given acts: in range.
      _check_target(target, model, f.ssd, name or model.kind,
                    f' (pair {k})' if len(targets) > 1 else where)
    pairs.append((name or model.kind, target))
  return pairs


def _check_target(target: float, model: linear.LinearCostModel, ssd: str,
                  name: str, where: str) -> None:
  """Refuses a target (of pair `where`) outside what `ssd` can cost on
  `model` (`linear.cost_range`), naming the range."""
  from tunas_tf.cost_model import linear  # pylint: disable=g-import-not-at-top
  checks.number('rl_cost_model_target', target, 0, low_open=True)
  low, high = linear.cost_range(model)
  if not low <= target <= high:
    units = linear.short_units(model.units)
    raise ValueError(
        f'--rl_cost_model_target={target:g}{where} is outside what {ssd} can '
        f'cost under --cost_model={name}: {linear.cost_text(low)} (cheapest) '
        f'to {linear.cost_text(high)} (dearest) {units}; give a target in '
        f'that range, in {units}')


def main(argv, flag_values: flags.FlagValues = FLAGS) -> int:
  """Runs the search; bad input exits with one line. Everything is checked
  before anything is written; a finished search started again says so and
  writes nothing."""
  from tunas_tf.search import runner  # pylint: disable=g-import-not-at-top
  return lifecycle.main(
      'train_search', argv,
      lambda: runner.run_search(config_from_flags(flag_values)))


if __name__ == '__main__':
  common_flags.run(main, define_flags)
