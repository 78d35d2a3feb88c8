"""`SearchConfig`: every value a search uses, resolved once from the flags
and checked on construction; code below the entry point reads it, never
flags. A restart that differs outside `RUN_ONLY_FIELDS` is refused."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from tunas_tf.cost_model import memory
from tunas_tf.io import checks
from tunas_tf.io import files
from tunas_tf.io import lite
from tunas_tf.data import datasets
from tunas_tf.layers import schedules
from tunas_tf.runtime import jobs
from tunas_tf.runtime import precision
from tunas_tf.search_space import mobile
from tunas_tf.search_space import naming

if TYPE_CHECKING:
  from tunas_tf.cost_model import linear

BFLOAT16_MODES = precision.BFLOAT16_MODES
# `--supernet_sampling` values, the default (the original's) first.
SUPERNET_SAMPLING = ('controller', 'uniform')
# `--rl_entropy_schedule` values, the default (the original's) first.
ENTROPY_SCHEDULES = schedules.ENTROPY_SCHEDULES
# The binary that writes a search directory (`jobs.written_by`).
BINARY = 'train_search'
MODEL_SPEC_FILE = 'model_spec.json'
# extract_architecture --front's points, one per pair (the report plots it).
FRONT_FILE = 'front.json'

# Fields that only say how often to save, log and summarise, or where to run
# and read the data, may change on restart; anything else (the run length
# too) changes the search and is refused.
RUN_ONLY_FIELDS = jobs.JOB_RUN_ONLY_FIELDS | {'summarize_tag_logits'}


# Values computed from the fields (properties of `SearchConfig`, stored in
# config.json beside the fields they come from).
DERIVED_FIELDS = (
    'max_global_step', 'rl_delay_steps', 'increase_ops_warmup_steps',
    'increase_filters_warmup_steps', 'model_warmup_steps',
    'model_learning_rate_scaled', 'rl_learning_rate_scaled',
    'validation_batch_size',
)


# How far (a fraction of the target) a searched architecture's cost may be
# from its target: a pair's band, extraction's default.
OFF_TARGET = 0.05


def pair_name(name: str, pair: int) -> str:
  """The name of a per-pair variable scope or summary: `name` for pair 0
  (the original's), `name_k` for pair k."""
  return f'{name}_{pair}' if pair else name


def check_replicas_on_tpu(use_tpu: bool, replicas: int,
                          given: bool = False) -> None:
  """Refuses replicas other than 1 on TPU, and `--replicas` `given` there at
  all (even 1, which might read as "one TPU core")."""
  if use_tpu and (given or replicas != 1):
    raise ValueError('--replicas is for CPU/GPU: on TPU the replica count '
                     'comes from the topology')


def _steps(name: str) -> property:
  """The property `name`: int(`<name>_fraction` * max_global_step)."""
  return property(lambda config: int(getattr(config, f'{name}_fraction') *
                                     config.max_global_step))


@dataclasses.dataclass(frozen=True)
class SearchConfig(jobs.StoredConfig):
  """All settings of one search, named as their flags, defaults resolved;
  derived values are properties. ValueError on construction for any value
  out of range, a batch its data cannot fill, a warm-up longer than the RL
  delay (as the original), an unresolvable cost model or bad replicas.
  """
  # Where, on what data and backend, how often to log and save.
  BINARY = BINARY
  RUN_ONLY_FIELDS = RUN_ONLY_FIELDS
  DERIVED_FIELDS = DERIVED_FIELDS
  # Read where config.json lacks them: before int8 latencies, one pair.
  ADDED_FIELDS = {'latency_precision': 'float32', 'extra_pairs': [],
                  'sram_kb': None, 'flash_kb': None}
  job: jobs.JobConfig
  ssd: str
  validation_examples: int
  supernet_mode: str
  use_bfloat16: str  # Resolved: 'true', 'false' or 'ontpu'.
  # Shared weights.
  model_learning_rate: float
  model_momentum: float
  model_weight_decay: float  # Resolved (None -> 4e-5 or 3e-5 with bf16).
  model_warmup_steps_fraction: float
  train_batch_size: int
  epochs: float
  max_steps: Optional[int]
  # Controller.
  rl_learning_rate: float
  use_exponential_rl_learning_rate_schedule: bool
  rl_entropy_regularization: float
  rl_baseline_momentum: float
  rl_batch_size_multiplier: float
  rl_delay_steps_fraction: float
  increase_ops_warmup_steps_fraction: float
  increase_filters_warmup_steps_fraction: float
  rl_reward_function: str
  enable_cost_model: bool
  cost_model: str  # 'released', 'macs' or a coefficients JSON path.
  rl_cost_model_target: float  # Resolved (see train_search's help).
  rl_cost_model_exponent: float
  use_gradient_sync_barrier: bool
  # Images that train the shared weights (the dataset's train split minus
  # the controller's hold-out).
  search_train_examples: int
  # Off by default: TensorBoard then shows each logit once (by path).
  summarize_tag_logits: bool = False
  replicas: int = 1
  supernet_sampling: str = 'controller'
  rl_entropy_schedule: str = 'constant'
  # The arithmetic of the latencies a fitted cost model must hold.
  latency_precision: str = 'float32'
  # (cost model, target) of the policies after the first (`pairs`).
  extra_pairs: Tuple[Tuple[str, float], ...] = ()
  # Limits (KB of 1,024 bytes, or None) on TFLite Micro's arena and on the
  # int8 .tflite's bytes (`memory.LIMITS`).
  sram_kb: Optional[float] = None
  flash_kb: Optional[float] = None

  def __post_init__(self):
    # As config.json gives them: lists.
    object.__setattr__(self, 'extra_pairs', tuple(
        (str(model), float(target)) for model, target in self.extra_pairs))
    self._check_ranges()
    self._check_replicas()
    checks.one_of('--supernet_mode', self.supernet_mode, naming.MODES)
    checks.one_of('--supernet_sampling', self.supernet_sampling,
                  SUPERNET_SAMPLING)
    checks.one_of('--rl_entropy_schedule', self.rl_entropy_schedule,
                  ENTROPY_SCHEDULES)
    checks.one_of('--latency_precision', self.latency_precision,
                  lite.PRECISIONS)
    # Before the step counts: a batch that does not fit can leave no step.
    self._check_batches()
    if self.max_global_step <= 0:
      fewest = checks.rounded_bound(self.train_batch_size,
                                    self.search_train_examples, up=True)
      raise ValueError(
          f'The search has no steps: {self.search_train_examples} examples x '
          f'{self.epochs} epochs / batch {self.train_batch_size}: use '
          f'--epochs={fewest} or more, or give --max_steps')
    rl_delay, ops_warmup, filters_warmup, model_warmup = (
        self.rl_delay_steps, self.increase_ops_warmup_steps,
        self.increase_filters_warmup_steps, self.model_warmup_steps)
    if ops_warmup > rl_delay:
      raise ValueError(f'Op warm-up ({ops_warmup} steps) is longer than the '
                       f'RL delay ({rl_delay} steps): the controller would '
                       'learn from warm-up samples')
    if filters_warmup > rl_delay:
      raise ValueError(f'Filter warm-up ({filters_warmup} steps) is longer '
                       f'than the RL delay ({rl_delay} steps); this is not '
                       'supported')
    if model_warmup >= self.max_global_step:
      raise ValueError(f'Model LR warm-up ({model_warmup} steps) must be '
                       f'shorter than the search ({self.max_global_step} '
                       'steps)')
    self._check_pairs()
    self._check_limits()

  def _check_limits(self) -> None:
    """Each limit set is > 0 and at least what the space's smallest
    architecture needs (`arena_model.lowest`, the flash model's cheapest)."""
    from tunas_tf.cost_model import linear  # pylint: disable=g-import-not-at-top
    for flag, _, _, what in memory.LIMITS:
      if (limit := getattr(self, flag)) is None:
        continue
      checks.number(flag, limit, 0, low_open=True)
      try:
        lowest = (self.arena_model.lowest if flag == 'sram_kb' else
                  linear.cost_range(self.flash_model)[0])
      except ValueError as e:
        raise ValueError(f'--{flag}: {e}') from None
      if limit * 1024 < lowest:
        size = self.job.image_size
        raise ValueError(
            f'--{flag}={limit:g}: no architecture of {self.ssd} fits; at '
            f'{size}x{size} the smallest needs '
            f'{memory.need_text(lowest, what)}')

  @property
  def limits(self) -> Dict[str, float]:
    """{summary name (`memory.LIMITS`): limit in bytes} of each limit set."""
    return {tag: getattr(self, flag) * 1024
            for flag, _, tag, _ in memory.LIMITS
            if getattr(self, flag) is not None}

  @functools.cached_property
  def arena_model(self):
    """The space's `arena.ArenaModel` at the search's input."""
    from tunas_tf.cost_model import arena  # pylint: disable=g-import-not-at-top
    return arena.arena_model(self.ssd, self.job.image_size,
                             self.job.num_classes, self.job.num_channels)

  @functools.cached_property
  def flash_model(self) -> 'linear.LinearCostModel':
    """The int8 .tflite's bytes (exactly linear) at the search's input."""
    return self._resolve('flash')

  def _check_ranges(self) -> None:
    """Each setting on its own: names, rates, momenta, decays, fractions."""
    from tunas_tf.controller import rewards  # pylint: disable=g-import-not-at-top
    # An unknown space raises, listing them; so does a reference model.
    mobile.check_searchable(self.ssd)
    precision.check_resolved(self.use_bfloat16)
    checks.one_of('--rl_reward_function', self.rl_reward_function,
                  rewards.REWARDS)
    checks.number('train_batch_size', self.train_batch_size, 1, integer=True)
    if self.max_steps is not None:
      checks.number('max_steps', self.max_steps, 1, integer=True)
    else:
      checks.number('epochs', self.epochs, 0, low_open=True)
    checks.number('model_learning_rate', self.model_learning_rate, 0,
                  low_open=True)
    checks.fraction('model_momentum', self.model_momentum, high_open=True)
    checks.number('model_weight_decay', self.model_weight_decay, 0)
    checks.number('rl_learning_rate', self.rl_learning_rate, 0)
    checks.number('rl_entropy_regularization',
                  self.rl_entropy_regularization, 0)
    checks.fraction('rl_baseline_momentum', self.rl_baseline_momentum,
                    high_open=True)
    checks.number('rl_batch_size_multiplier', self.rl_batch_size_multiplier,
                  0, low_open=True)
    for name in ('model_warmup_steps_fraction', 'rl_delay_steps_fraction',
                 'increase_ops_warmup_steps_fraction',
                 'increase_filters_warmup_steps_fraction'):
      checks.fraction(name, getattr(self, name))
    checks.number('rl_cost_model_target', self.rl_cost_model_target, 0,
                  low_open=True)
    # beta < 0 pulls towards the target (more negative: harder); 0 ignores
    # the cost.
    checks.number('rl_cost_model_exponent', self.rl_cost_model_exponent,
                  high=0)
    checks.number('validation_examples', self.validation_examples, 1,
                  integer=True)
    checks.number('search_train_examples', self.search_train_examples, 1,
                  integer=True)

  def _check_batches(self) -> None:
    """Each batch holds at least one example and fits in its split; a
    refusal names the flags to change and values that fit, in one line."""
    train, multiplier = self.train_batch_size, self.rl_batch_size_multiplier
    if self.validation_batch_size < 1:
      smallest = checks.rounded_bound(1, train, up=True)
      raise ValueError(f'--rl_batch_size_multiplier={multiplier} gives an '
                       f'empty validation batch at --train_batch_size='
                       f'{train}: use --rl_batch_size_multiplier={smallest} '
                       'or more')
    problems = []
    fitting_train = train
    if train > self.search_train_examples:
      fitting_train = (self.search_train_examples // self.replicas *
                       self.replicas)
      advice = (f'use --train_batch_size={fitting_train} or less'
                if fitting_train else 'use fewer --replicas')
      if fitting_train and self.replicas > 1:
        advice += f' (a multiple of --replicas={self.replicas})'
      problems.append(f'--train_batch_size={train} is more than the '
                      f'{self.search_train_examples} search-train examples '
                      f'of {self.job.dataset!r}: {advice}')
    validation = self.validation_batch_size
    # (When the train batch does not fit either, the validation batch is
    # refused only if it does not fit at the train batch advised.)
    if (validation > self.validation_examples and fitting_train and
        int(round(fitting_train * multiplier)) > self.validation_examples):
      largest = checks.rounded_bound(self.validation_examples,
                                     fitting_train, up=False)
      advice = f'use --rl_batch_size_multiplier={largest} or less'
      if fitting_train != train:
        advice = f'at --train_batch_size={fitting_train} ' + advice
      # TFDS data: a larger hold-out, if the rest still holds a train batch.
      total = self.search_train_examples + self.validation_examples
      if (self.job.dataset != datasets.DIGITS and
          fitting_train == train and total - validation >= train):
        advice += f', or hold out --validation_examples={validation}'
      problems.append(
          f'the validation batch (--train_batch_size x '
          f'--rl_batch_size_multiplier = {train} x {multiplier}) is '
          f'{validation}, more than the {self.validation_examples} '
          f'search-validation examples of {self.job.dataset!r}: {advice}')
    if problems:
      raise ValueError('; and '.join(problems))

  def _check_replicas(self) -> None:
    checks.number('replicas', self.replicas, 1, integer=True)
    check_replicas_on_tpu(self.job.use_tpu, self.replicas)
    if self.train_batch_size % self.replicas:
      raise ValueError(
          f'--train_batch_size={self.train_batch_size} does not split across '
          f'--replicas={self.replicas} (each replica takes train_batch_size / '
          'replicas images)')

  def _check_pairs(self) -> None:
    """Every pair's cost model resolves here; on one model the targets
    increase and their bands (1 -/+ `OFF_TARGET`) do not overlap."""
    self.resolved_cost_model  # pylint: disable=pointless-statement
    if len(self.pairs) == 1:
      return
    if not self.enable_cost_model:
      raise ValueError('Several --rl_cost_model_target or --cost_model '
                       'values need the cost model: drop '
                       '--noenable_cost_model')
    for k, (model, target) in enumerate(self.pairs):
      checks.number('rl_cost_model_target', target, 0, low_open=True)
      try:
        self._resolve(model)
      except ValueError as e:
        raise ValueError(f'--cost_model {model} (pair {k}): {e}') from None
      earlier = [t for m, t in self.pairs[:k] if m == model]
      if earlier and not earlier[-1] * (1 + OFF_TARGET) < target * (
          1 - OFF_TARGET):
        problem = ('is not above its' if target <= earlier[-1] else
                   f'has a band (-/+{OFF_TARGET:.0%}) overlapping its')
        raise ValueError(
            f'--rl_cost_model_target {target:g} (pair {k}) {problem} '
            f'predecessor {earlier[-1]:g} on cost model {model!r}: give '
            'increasing targets at least '
            f'{(1 + OFF_TARGET) / (1 - OFF_TARGET):.3f}x apart')

  def for_pair(self, pair: int) -> 'SearchConfig':
    """The search as pair `pair` alone: its cost model and target."""
    model, target = self.pairs[pair]
    return dataclasses.replace(self, cost_model=model, extra_pairs=(),
                               rl_cost_model_target=target)

  @property
  def pairs(self) -> Tuple[Tuple[str, float], ...]:
    """(cost model, target) of each policy; pair 0 the fields'."""
    return ((self.cost_model, self.rl_cost_model_target),) + self.extra_pairs

  @functools.cached_property
  def resolved_cost_models(self) -> Tuple['linear.LinearCostModel', ...]:
    """Each pair's cost model (`resolved_cost_model` the first's)."""
    return (self.resolved_cost_model,) + tuple(
        self._resolve(model) for model, _ in self.extra_pairs)

  def to_json(self) -> Dict[str, Any]:
    return dict(super().to_json(),
                extra_pairs=[list(pair) for pair in self.extra_pairs])

  @functools.cached_property
  def resolved_cost_model(self) -> 'linear.LinearCostModel':
    """`--cost_model` resolved once for this space and input."""
    return self._resolve(self.cost_model)

  def _resolve(self, cost_model: str) -> 'linear.LinearCostModel':
    from tunas_tf.cost_model import linear  # pylint: disable=g-import-not-at-top
    return linear.get_cost_model(self.ssd, cost_model,
                                 image_size=self.job.image_size,
                                 num_classes=self.job.num_classes,
                                 input_channels=self.job.num_channels,
                                 precision=self.latency_precision)

  @property
  def max_global_step(self) -> int:
    """`max_steps`, or floor(search_train_examples * epochs / batch)."""
    if self.max_steps is not None:
      return self.max_steps
    return int(self.search_train_examples * self.epochs //
               self.train_batch_size)

  # The steps of the fractions (checked in `_check_ranges`).
  rl_delay_steps = _steps('rl_delay_steps')
  increase_ops_warmup_steps = _steps('increase_ops_warmup_steps')
  increase_filters_warmup_steps = _steps('increase_filters_warmup_steps')
  model_warmup_steps = _steps('model_warmup_steps')

  @property
  def model_learning_rate_scaled(self) -> float:
    return self.model_learning_rate * self.train_batch_size / 256.0

  @property
  def rl_learning_rate_scaled(self) -> float:
    return self.rl_learning_rate * self.train_batch_size / 256.0

  @property
  def validation_batch_size(self) -> int:
    return int(round(self.train_batch_size * self.rl_batch_size_multiplier))


def check_stored(config: SearchConfig, model_spec_json: str
                 ) -> Optional[Dict[str, Any]]:
  """The stored config.json values (None for a new run), checked against
  `config` and the space `model_spec_json` (`spec_io.dumps`); no writes.
  ValueError naming the first field that differs (outside
  `RUN_ONLY_FIELDS`), another space, or a train_eval directory."""
  model_dir = config.job.model_dir
  config_path = os.path.join(model_dir, jobs.CONFIG_FILE)
  spec_path = os.path.join(model_dir, MODEL_SPEC_FILE)
  # The search space first: a different space makes every other check moot.
  # (A train_eval directory has none; its config.json says what it is.)
  if files.exists(spec_path):
    if json.loads(files.read_text(spec_path)) != json.loads(model_spec_json):
      try:  # None when config.json cannot say (unreadable, not a dict).
        stored_ssd = json.loads(files.read_input(config_path)).get('ssd')
      except (ValueError, AttributeError):
        stored_ssd = None
      # Unknown, or redefined since.
      if not isinstance(stored_ssd, str) or stored_ssd == config.ssd:
        raise ValueError(f'{spec_path} holds a different search space than '
                         f'--ssd={config.ssd}; use a new --model_dir')
      raise ValueError(f'{spec_path} holds the search space of '
                       f'--ssd={stored_ssd}, not --ssd={config.ssd}: resume '
                       f'with --ssd={stored_ssd}, or use a new --model_dir')
  return config.check_stored()


def write(config: SearchConfig, model_spec_json: str,
          stored: Optional[Dict[str, Any]]) -> None:
  """Writes `config.json` (new run-only values on a restart) and the space,
  after `check_stored` returned `stored` and everything else is checked."""
  config.write_stored(stored)
  spec_path = os.path.join(config.job.model_dir, MODEL_SPEC_FILE)
  if not files.exists(spec_path):
    files.write_text(model_spec_json, spec_path)


read = SearchConfig.read  # A search directory's stored config.
