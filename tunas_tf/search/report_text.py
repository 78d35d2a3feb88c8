"""The report's words: decision labels, wrapping, how settled a decision is
(`Lead`), phase marks and the run's facts; `search.report` draws them."""

from __future__ import annotations

import dataclasses
import os
import textwrap
from typing import TYPE_CHECKING, Dict, List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tunas_tf.cost_model import linear
from tunas_tf.io import files

if TYPE_CHECKING:
  from tunas_tf.search.config import SearchConfig

# A decision is settled when its most likely choice has led the next by at
# least SETTLED_MARGIN at every logged step of the last SETTLED_SHARE of the
# controller's learning steps (after the RL delay, to the report's step).
# 0.1: wider than a decision whose argmax flipped between two runs of one
# search (0.34 vs 0.27), far above the probabilities' rounding.
SETTLED_MARGIN = 0.1
# A quarter: as the learning rate grows 10x over the learning steps (the
# default schedule), the last quarter carries 49% of their summed rate.
SETTLED_SHARE = 0.25
# What ends at a phase mark: (config property, text in the legend and on the
# top charts, short text on the decision charts).
PHASES = (
    ('increase_ops_warmup_steps', 'op warm-up ends', 'ops'),
    ('increase_filters_warmup_steps', 'filter warm-up ends', 'filters'),
    ('rl_delay_steps', 'RL delay ends', 'RL'),
)

# Words for the spec fields a decision's path ends in.
_FIELD_WORDS = {'kernel_size': 'kernel size',
                'expansion_filters': 'expansion filters',
                'use_squeeze_and_excite': 'squeeze-excite'}


def decision_label(path: str) -> str:
  """A decision's OneOf path as a short label people read.

  'blocks/3/layers/1/layer/choices/0/expansion_filters' is 'block 3 layer 1:
  expansion filters', 'blocks/0/filters' 'block 0: filters', and a layer's
  own OneOf ('blocks/2/layers/1/layer') 'block 2 layer 1: op'. A residual's
  `layer` and the first alternative's 'choices/0' are left out; another
  alternative K adds '(choice K)'. Indices count from 0, as in the table.
  """
  parts = path.split('/')
  where, what, alternatives = [], [], []
  k = 0
  while k < len(parts):
    part = parts[k]
    index = parts[k + 1] if k + 1 < len(parts) else ''
    if part in ('blocks', 'layers', 'choices') and index.isdigit():
      if part == 'blocks':
        where.append(f'block {index}')
      elif part == 'layers':
        where.append(f'layer {index}')
      elif index != '0':
        alternatives.append(f'choice {index}')
      k += 2
      continue
    if part != 'layer':  # A ResidualSpec's inner layer.
      what.append(_FIELD_WORDS.get(part, part.replace('_', ' ')))
    k += 1
  label = ' '.join(what) or 'op'
  if alternatives:
    label += f" ({', '.join(alternatives)})"
  return f"{' '.join(where)}: {label}" if where else label


def decision_labels(paths: Sequence[str]) -> Dict[str, str]:
  """`decision_label` of each path; a label two paths share is replaced by
  the path itself, so each names one decision."""
  labels = [decision_label(p) for p in paths]
  return {p: l if labels.count(l) == 1 else p for p, l in zip(paths, labels)}


def wrap_words(text: str, width: int) -> str:
  """`text` in lines of at most `width` characters, broken between words
  only (a word longer than `width` gets a line of its own, whole)."""
  return '\n'.join(textwrap.wrap(text, width, break_long_words=False,
                                 break_on_hyphens=False))


def title_lines(line: str, width: int) -> str:
  """A '; '-separated line in lines of at most `width` characters, broken
  after a ';' where it can, else between words (`wrap_words`)."""
  lines: List[str] = []
  for part in line.split('; '):
    if lines and len(lines[-1]) + 2 + len(part) <= width:
      lines[-1] += '; ' + part
    else:
      if lines:
        lines[-1] += ';'
      lines.append(part)
  return '\n'.join(wrap_words(l, width) for l in lines)


@dataclasses.dataclass(frozen=True)
class Lead:
  """How a decision's most likely choice stands at the report's step: its
  two largest probabilities there (`first`, `second`), the controller's
  `learning_steps` to there, and `led_steps` of them since the first logged
  step from which that choice led the next by `SETTLED_MARGIN` or more at
  every logged step (0 when it does not lead by that much at the end)."""
  first: float
  second: float
  led_steps: int
  learning_steps: int

  @property
  def settled(self) -> bool:
    return 0 < self.led_steps >= SETTLED_SHARE * self.learning_steps

  @property
  def text(self) -> str:
    """'settled: 0.96 vs 0.02, led 600 of 606 RL steps', or 'still moving:
    ...'."""
    return (f"{'settled' if self.settled else 'still moving'}: "
            f'{self.first:.2f} vs {self.second:.2f}, led {self.led_steps} of '
            f'{self.learning_steps} RL steps')


def lead(steps: Sequence[int], probabilities: np.ndarray,
         rl_delay_steps: int) -> Lead:
  """The `Lead` of a decision's [len(steps), choices >= 2] probabilities at
  the logged `steps` (the last the report's), learning from
  `rl_delay_steps`."""
  probabilities = np.asarray(probabilities, np.float64)
  second, first = map(float, np.sort(probabilities[-1])[-2:])
  leader = int(np.argmax(probabilities[-1]))
  end = since = steps[-1]
  for step, row in zip(steps[::-1], probabilities[::-1]):
    if row[leader] - np.delete(row, leader).max() < SETTLED_MARGIN:
      break
    since = step
  learning = max(0, end - rl_delay_steps)
  return Lead(first, second, min(learning, end - since), learning)


def phase_marks(config: 'SearchConfig') -> List[Tuple[int, List[str]]]:
  """(step, [what ends]) in step order for the op and filter warm-ups and the
  RL delay (`PHASES`); phases of 0 steps are left out, those ending at one
  step share an entry."""
  marks: Dict[int, List[str]] = {}
  for name, text, _ in PHASES:
    step = int(getattr(config, name))
    if step > 0:
      marks.setdefault(step, []).append(text)
  return sorted(marks.items())


def short_phase(text: str) -> str:
  return {long: short for _, long, short in PHASES}[text]


def cost_model_text(config: 'SearchConfig') -> str:
  """The search's cost model by name: 'macs', 'released', or a fitted
  file's name (no directory) with its precision and, when the file says,
  its device: 'phone.json, int8 on Pixel 7'."""
  if config.cost_model in (linear.RELEASED, linear.MACS):
    return config.cost_model
  try:
    device = files.read_json(config.cost_model)['measured_with']['device']
  except (ValueError, KeyError, TypeError, OSError, tf.errors.OpError):
    device = None  # A file gone, or one that does not say.
  return (f'{os.path.basename(config.cost_model)}, '
          f'{config.latency_precision}' + (f' on {device}' if device else ''))


def run_facts(config: 'SearchConfig') -> List[Tuple[str, str]]:
  """The run's facts as (name, value) pairs, from its `config.json`: space,
  data, steps and batch, cost model and target (with units), reward, RL
  delay and warm-ups."""
  reward = (f'{config.rl_reward_function}, beta '
            f'{config.rl_cost_model_exponent:g}' if config.enable_cost_model
            else 'accuracy alone (--noenable_cost_model)')
  return [
      ('search space', config.ssd), ('dataset', config.job.data_text),
      ('steps', f'{config.max_global_step} of {config.train_batch_size} '
                'images'),
      ('cost model', cost_model_text(config)),
      ('cost target',
       linear.cost_text(config.rl_cost_model_target, config.cost_model)),
      ('reward', reward), ('RL delay', f'{config.rl_delay_steps} steps'),
      ('op warm-up', f'{config.increase_ops_warmup_steps} steps'),
      ('filter warm-up', f'{config.increase_filters_warmup_steps} steps')]
