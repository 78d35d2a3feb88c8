"""A search read as a person reads it: `report.png` and `report.html` drawn
from its events, config and searched architecture (docs/search.md, 'The
report'), with plain matplotlib (Agg), no display needed."""

from __future__ import annotations

import html
import math
import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from tunas_tf.io import files
from tunas_tf.cost_model import linear as cost_linear
from tunas_tf.cost_model import macs
from tunas_tf.search import config as config_lib
from tunas_tf.search import report_text
from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import resolve
from tunas_tf.search_space import schema

if TYPE_CHECKING:
  from matplotlib import figure as figure_lib
  from tunas_tf.search.config import SearchConfig

PNG_NAME = 'report.png'
HTML_NAME = 'report.html'
FRONT_PNG = 'front.png'  # Beside them when the directory holds front.json.
TABLE_COLUMNS = ('block', 'layer', 'op', 'kernel', 'expansion', 'filters',
                 'SE', 'MACs', 'MACs share')
# An op "+ input" is inside a residual (its output plus the layer's input).
_PANEL_COLUMNS = 4
# Characters per line of a decision chart's title (a quarter of the
# picture's width at its font size) and of the picture's title.
_PANEL_TITLE_WIDTH = 40
_FIGURE_TITLE_WIDTH = 170
# The `gid` of the phase marks' lines and labels (the RL delay's end, the
# warm-ups' ends) on every time-series chart.
MARK_GID = 'phase_mark'
# A phase mark's label row above its chart (a line and a gap), under the
# title: inside the axes it covered the curves.
_MARK_ROW_PT = 11.0
_TITLE_PAD_PT = 6.0
_MOVING_COLOR = 'crimson'
# How many of the last logged steps the summary's accuracy is a mean of.
_ACCURACY_WINDOW = 10

Scalars = Dict[str, Dict[int, float]]


def read_scalars(model_dir: str) -> Scalars:
  """{tag: {step: value}} of the scalar summaries in `model_dir`'s events;
  ValueError when it holds no TF2 events file."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  paths = sorted(tf.io.gfile.glob(os.path.join(model_dir, 'events*.v2')))
  if not paths:
    raise ValueError(f'No TensorBoard events in {model_dir!r}: the search '
                     'has not written a summary yet')
  out: Scalars = {}
  for path in paths:
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
      event = tf.compat.v1.Event.FromString(record)
      for value in event.summary.value:
        if value.metadata.plugin_data.plugin_name == 'images':
          continue
        out.setdefault(value.tag, {})[event.step] = float(
            tf.make_ndarray(value.tensor))
  return out


def probabilities_over_time(scalars: Scalars, path: str,
                            labels: Sequence[str]
                            ) -> Tuple[List[int], np.ndarray]:
  """(steps, [steps, choices] probabilities) of one decision, from its
  `rlprobs/` summaries (no steps when there are none)."""
  probs = [scalars.get(f'rlprobs/{path}/{label}') for label in labels]
  if not all(probs):
    return [], np.zeros([0, len(labels)])
  steps = sorted(probs[0])
  return steps, np.array([[p[s] for p in probs] for s in steps])


def decision_series(scalars: Scalars, arch: Any, path: str,
                    labels: Sequence[str]) -> Tuple[List[int], np.ndarray]:
  """`probabilities_over_time` up to the architecture's checkpoint, whose
  probabilities (`arch.probabilities` at `arch.global_step`, what it was
  taken from) are the last point when known."""
  steps, probs = probabilities_over_time(scalars, path, labels)
  if arch.probabilities is None or path not in arch.probabilities:
    return steps, probs
  kept = [k for k, step in enumerate(steps) if step < arch.global_step]
  return ([steps[k] for k in kept] + [arch.global_step],
          np.vstack([probs[kept], [arch.probabilities[path]]]))


def layer_table(arch: Any) -> List[Dict[str, Any]]:
  """The classifier's layers as rows of `TABLE_COLUMNS` (skipped layers
  included, with 0 MACs), plus a last 'classifier' row; shares of the total
  multiply-adds at the search's input; a `DetectionEndpointSpec` (it
  computes nothing) gets no row."""
  info = macs.resolve_input(arch.ssd, arch.image_size, arch.num_classes,
                            arch.num_channels)
  layers = resolve.resolve_layers(arch.spec, info.image_size,
                                  info.input_channels)
  rows = []
  for layer in layers:
    op = layer.op
    if isinstance(op, ops.DetectionEndpointSpec):
      continue
    expansion = ''
    if layer.expanded_width and layer.input_width:
      expansion = f'x{layer.expanded_width / layer.input_width:g}'
    rows.append({
        'block': layer.block_index, 'layer': layer.layer_index,
        'op': ops.choice_label(op) + (' + input' if layer.residual
                                      else ''),
        'kernel': layer.kernel_size or '', 'expansion': expansion,
        'filters': layer.output_width,
        'SE': 'yes' if layer.se_width else '',
        'MACs': 0 if layer.is_skipped else macs.layer_macs(layer)})
  width, size = ((layers[-1].output_width, layers[-1].output_size) if layers
                 else (info.input_channels, info.image_size))
  rows.append({'block': '', 'layer': '', 'op': 'classifier', 'kernel': '',
               'expansion': '', 'filters': info.num_classes, 'SE': '',
               'MACs': macs.classifier_macs(width, size, info.num_classes)})
  total = sum(row['MACs'] for row in rows) or 1
  for row in rows:
    row['MACs share'] = f"{100.0 * row['MACs'] / total:.1f}%"
  return rows


def summary_line(scalars: Scalars, arch: Any) -> str:
  """One line: step, accuracy (the steps it is a mean of), and the searched
  cost against the target."""
  parts = [f'{arch.ssd}, step {arch.global_step} of {arch.max_global_step}']
  accuracy = scalars.get('rlcontroller/validation_accuracy')
  if accuracy:
    steps = sorted(accuracy)
    last = steps[-_ACCURACY_WINDOW:]
    parts.append(
        f'validation accuracy {np.mean([accuracy[s] for s in last]):.3f} '
        f'(mean over steps {last[0]}-{last[-1]}, '
        f"{'all' if len(last) == len(steps) else 'the last'} {len(last)} "
        'logged)')
  if arch.estimated_cost is not None:
    parts.append('cost ' + cost_linear.cost_text(
        arch.estimated_cost, arch.cost_model, arch.cost_target))
  parts.append(f'indices {arch.indices_string}')
  return '; '.join(parts)


def _decision_rows(scalars: Scalars, arch: Any,
                   config: 'SearchConfig') -> List[Dict[str, Any]]:
  """`arch.decisions` with 'label', 'steps' and 'probs' (`decision_series`),
  'lead' (None for one choice or none known) and 'moving' (active, not
  settled)."""
  decisions = arch.decisions
  labels = report_text.decision_labels([d['path'] for d in decisions])
  rows = []
  for d in decisions:
    steps, probs = decision_series(scalars, arch, d['path'], d['choices'])
    lead = (report_text.lead(steps, probs, config.rl_delay_steps)
            if steps and len(d['choices']) > 1 else None)
    rows.append(dict(d, label=labels[d['path']], steps=steps, probs=probs,
                     lead=lead, moving=bool(d['active'] and lead and
                                            not lead.settled)))
  return rows


def _mark_phases(ax, marks: List[Tuple[int, List[str]]], short: bool,
                 max_step: int) -> float:
  """Vertical dashed lines at the `report_text.phase_marks`, the RL delay
  shaded, each labelled above the chart (`short`: 'ops', 'filters', 'RL'),
  where no curve runs: one row per mark, the first lowest, starting at its
  line and running towards the chart's middle. Returns the title's pad (in
  points) that leaves the rows free."""
  for row, (step, texts) in enumerate(marks):
    if 'RL delay ends' in texts:
      ax.axvspan(0, step, color='0.5', alpha=0.08, linewidth=0, gid=MARK_GID)
    ax.axvline(step, color='0.35', linestyle='--', linewidth=0.9,
               gid=MARK_GID)
    words = ('+'.join(report_text.short_phase(t) for t in texts) if short
             else f"{', '.join(texts)} (step {step})")
    ax.annotate(words, xy=(step, 1.0), xycoords=ax.get_xaxis_transform(),
                xytext=(0, 2 + row * _MARK_ROW_PT), textcoords='offset points',
                ha='left' if 2 * step <= max_step else 'right', va='bottom',
                color='0.25', fontsize=6 if short else 7, gid=MARK_GID,
                annotation_clip=False)
  return _TITLE_PAD_PT + len(marks) * _MARK_ROW_PT


# The top charts by gid: title, y label, legend place, (tag, label) curves.
_TOP_CHARTS = {
    'reward': ('Reward and accuracy of the sampled architectures',
               'fraction correct / reward', 'lower right',
               (('rlcontroller/reward', 'reward'),
                ('rlcontroller/validation_accuracy', 'validation accuracy'),
                ('rlcontroller/baseline', 'baseline (moving average)'))),
    'cost': ('Cost of the sampled architectures', None, 'upper right',
             (('rlcontroller/estimated_cost', 'estimated cost of the sample'),)),
}


def _plot_top(ax, scalars: Scalars, arch: Any, title_pad: float) -> None:
  """The `_TOP_CHARTS` chart of `ax`'s gid; the cost's with the target
  (dashed red) and the searched architecture's cost (dotted black)."""
  title, ylabel, legend_loc, curves = _TOP_CHARTS[ax.get_gid()]
  for tag, label in curves:
    steps = sorted(scalars.get(tag, {}))
    if steps:
      ax.plot(steps, [scalars[tag][s] for s in steps], label=label,
              linewidth=1.2)
  if ylabel is None:
    for name, value, color, style in (
        ('target', arch.cost_target, 'crimson', '--'),
        ('searched', arch.estimated_cost, 'black', ':')):
      if value:
        ax.axhline(value, color=color, linestyle=style, label=f'{name} '
                   f'{cost_linear.cost_text(value, arch.cost_model)}')
    ylabel = cost_linear.units_suffix(arch.cost_model).strip() or 'cost'
  ax.set_title(title, pad=title_pad)
  ax.set_xlabel('step')
  ax.set_ylabel(ylabel)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8, loc=legend_loc)


def _plot_decision(ax, row: Dict[str, Any], title_pad: float) -> None:
  """Each choice's probability over the steps to the checkpoint's, the last
  point marked, under its label ('(no effect)' under a skipped layer, its
  `Lead.text` in red when still moving)."""
  labels, chosen, steps = row['choices'], row['index'], row['steps']
  title = row['label'] + ('' if row['active'] else ' (no effect)')
  if row['moving']:
    title += f" - {row['lead'].text}"
  for j, label in enumerate(labels):
    if steps:
      ax.plot(steps, row['probs'][:, j], color=f'C{j % 10}',
              linewidth=1.6 if j == chosen else 1.0, marker='o',
              markersize=3, markevery=[len(steps) - 1],
              label=label + (' (chosen)' if j == chosen else ''))
  ax.set_title(report_text.wrap_words(title, _PANEL_TITLE_WIDTH), fontsize=8,
               pad=title_pad, color=_MOVING_COLOR if row['moving'] else 'k')
  ax.set_ylim(-0.02, 1.02)
  ax.tick_params(labelsize=7)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=6, loc='center left', framealpha=0.6)


def one_choice_text(rows: List[Dict[str, Any]]) -> str:
  """The decisions with a single choice (no chart) in one sentence; ''
  when there are none."""
  fixed = [r for r in rows if len(r['choices']) == 1]
  if not fixed:
    return ''
  items = '; '.join(f"{r['label']} = {r['value']}" for r in fixed)
  return (f'{len(fixed)} decision{"s" if len(fixed) > 1 else ""} with a '
          f'single choice (no chart): {items}')


def build_figure(scalars: Scalars, arch: Any, config: 'SearchConfig',
                 rows: List[Dict[str, Any]]) -> 'figure_lib.Figure':
  """The report picture as a matplotlib Figure (close it when done).

  Axes carry a `gid`: 'reward', 'cost', 'decision <path>' per charted
  decision (those with two or more choices), 'one choice' (the folded
  single-choice decisions, when any) and 'table'. The phase marks' lines
  and labels carry `MARK_GID`.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  decisions = _decision_rows(scalars, arch, config)
  charted = [d for d in decisions if len(d['choices']) > 1]
  folded = one_choice_text(decisions)
  marks = report_text.phase_marks(config)
  panel_rows = math.ceil(len(charted) / _PANEL_COLUMNS)
  table_height = 0.28 * (len(rows) + 1) + 0.6
  folded_lines = (report_text.wrap_words(folded, 190).count('\n') + 1
                  if folded else 0)
  title = '\n'.join(
      report_text.title_lines(line, _FIGURE_TITLE_WIDTH)
      for line in ('; '.join(f'{k} {v}'
                             for k, v in report_text.run_facts(config)),
                   summary_line(scalars, arch)))
  title_height = 0.25 + 0.2 * (title.count('\n') + 1)
  # The marks' rows above each chart of a row (the gap between the chart
  # rows grows by as much).
  marks_height = len(marks) * _MARK_ROW_PT / 72
  heights = ([3.2] + [2.3] * panel_rows +
             ([0.25 * folded_lines + 0.1] if folded else []) + [table_height])
  fig_height = (sum(heights) + title_height + 0.5 +
                marks_height * (1 + panel_rows))
  fig = plt.figure(figsize=(16, fig_height))
  grid = fig.add_gridspec(
      len(heights), _PANEL_COLUMNS, height_ratios=heights,
      hspace=0.55 + marks_height / (sum(heights) / len(heights)),
      wspace=0.25, top=1.0 - (title_height + 0.3 + marks_height) / fig_height,
      bottom=0.02)
  max_step = config.max_global_step
  for gid, columns in (('reward', slice(0, 2)), ('cost', slice(2, 4))):
    ax = fig.add_subplot(grid[0, columns], gid=gid)
    _plot_top(ax, scalars, arch, _mark_phases(ax, marks, False, max_step))
  for k, row in enumerate(charted):
    ax = fig.add_subplot(grid[1 + k // _PANEL_COLUMNS, k % _PANEL_COLUMNS],
                         gid=f"decision {row['path']}")
    _plot_decision(ax, row, _mark_phases(ax, marks, True, max_step))
    if k % _PANEL_COLUMNS == 0:
      ax.set_ylabel('probability', fontsize=8)
    if k // _PANEL_COLUMNS == panel_rows - 1:
      ax.set_xlabel('step', fontsize=8)
  if folded:
    folded_ax = fig.add_subplot(grid[1 + panel_rows, :], gid='one choice')
    folded_ax.axis('off')
    folded_ax.text(0.0, 0.5, report_text.wrap_words(folded, 190), fontsize=8,
                   va='center', ha='left', transform=folded_ax.transAxes)
  table_ax = fig.add_subplot(grid[-1, :], gid='table')
  table_ax.axis('off')
  table_ax.set_title('Searched architecture', fontsize=11)
  table = table_ax.table(
      cellText=[[_format(row[c]) for c in TABLE_COLUMNS] for row in rows],
      colLabels=TABLE_COLUMNS, loc='upper center', cellLoc='center')
  table.auto_set_font_size(False)
  table.set_fontsize(8)
  table.auto_set_column_width(list(range(len(TABLE_COLUMNS))))
  fig.suptitle(title, fontsize=10, y=1.0 - 0.2 / fig_height, va='top')
  return fig


def _save(fig: 'figure_lib.Figure', path: str) -> None:
  """Writes `fig` into `path` (PNG, atomically; local or remote), closes it."""
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  try:
    files.write_png(fig, path, dpi=80, bbox_inches='tight')
  finally:
    plt.close(fig)


def plot_front(front: Dict[str, Any], path: str) -> None:
  """Draws front.json's points into `path`: one-shot accuracy against
  estimated cost, a panel per cost model, each target a dashed line."""
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  models = list(dict.fromkeys(p['cost_model'] for p in front['points']))
  fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 4),
                           squeeze=False)
  for ax, model in zip(axes[0], models):
    points = sorted((p for p in front['points'] if p['cost_model'] == model),
                    key=lambda p: p['estimated_cost'])
    ax.plot([p['estimated_cost'] for p in points],
            [p['oneshot_accuracy'] for p in points], 'o-')
    for p in points:
      ax.axvline(p['cost_target'], ls='--', color='gray', lw=0.8)
      ax.annotate(f"pair {p['pair']}", (p['estimated_cost'],
                                        p['oneshot_accuracy']),
                  textcoords='offset points', xytext=(4, 4), fontsize=8)
    ax.set_xlabel(f'estimated cost ({cost_linear.cost_units(model)}; '
                  'targets dashed)')
    ax.set_ylabel('one-shot accuracy on the hold-out')
    ax.set_title(os.path.basename(model), fontsize=9)
    ax.tick_params(axis='x', labelrotation=30)
  _save(fig, path)


def _format(value: Any) -> str:
  if isinstance(value, int) and not isinstance(value, bool):
    return f'{value:,}'
  return str(value)


def _marks_text(config: 'SearchConfig') -> str:
  marks = report_text.phase_marks(config)
  if not marks:
    return 'No RL delay and no warm-ups: nothing is marked.'
  where = '; '.join(f"step {step}: {', '.join(texts)}"
                    for step, texts in marks)
  return (f'Dashed vertical lines on every chart over the steps: {where}. '
          'During the op warm-up every op of the supernet is on with a '
          'probability falling from 1 to 0, during the filter warm-up the '
          'widest filters likewise; the controller learns only after the '
          f'RL delay ({config.rl_delay_steps} steps, shaded), so its '
          'probabilities are flat before it.')


def _decision_html(d: Dict[str, Any], oneshot: bool) -> str:
  """A `_decision_rows` row as a row of the page's decisions table
  (`oneshot`: the architecture is the one-shot step's pick)."""
  final = d['probs'][-1] if d['steps'] else []
  chosen = d['value'] + ('' if d['active'] else ' (no effect)')
  if d['lead'] and final[d['index']] < max(final):
    chosen += (' (by one-shot accuracy in the cost band; not the most likely)'
               if oneshot else ' (for the cost band; not the most likely)')
  status = ('' if d['lead'] is None else d['lead'].text if d['active'] else
            'not judged: no effect')
  status_cell = '<td class="moving">' if d['moving'] else '<td>'
  probabilities = ', '.join(f'{c} {p:.2f}' for c, p in zip(d['choices'],
                                                           final))
  return (f"<tr><td>{html.escape(d['label'])}</td>"
          f"<td><code>{html.escape(d['path'])}</code></td>"
          f'<td>{html.escape(probabilities)}</td>'
          f'<td>{html.escape(chosen)}</td>'
          f'{status_cell}{html.escape(status)}</td></tr>')


def page(scalars: Scalars, arch: Any, config: 'SearchConfig',
         rows: List[Dict[str, Any]], pick_line: str = '',
         front: bool = False) -> str:
  """`report.html`: the run's facts, the summary, the picture, the front's
  (with `front`), the layer table (after `pick_line`, which says how it was
  taken) and the decisions (those still moving marked) as text."""
  header = ''.join(f'<th>{html.escape(c)}</th>' for c in TABLE_COLUMNS)
  body = '\n'.join(
      '<tr>' + ''.join(f'<td>{html.escape(_format(row[c]))}</td>'
                       for c in TABLE_COLUMNS) + '</tr>' for row in rows)
  decisions = _decision_rows(scalars, arch, config)
  lines = [_decision_html(d, bool(arch.oneshot)) for d in decisions
           if len(d['choices']) > 1]
  facts = '\n'.join(
      f'<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>' for k, v
      in report_text.run_facts(config) + [('checkpoint step',
                                           str(arch.global_step))])
  folded = one_choice_text(decisions)
  pick = html.escape(pick_line).replace('\n', '<br>\n')
  title = (f'Search report: {config.ssd} on {config.job.dataset}, cost '
           f'model {report_text.cost_model_text(config)}')
  return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body {{ font-family: sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
td, th {{ border: 1px solid #bbb; padding: 2px 8px; text-align: right; }}
td.moving {{ color: {_MOVING_COLOR}; font-weight: bold; }}
img {{ max-width: 100%; }}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<table class="facts">
{facts}
</table>
<p>{html.escape(summary_line(scalars, arch))}</p>
<p class="marks">{html.escape(_marks_text(config))}</p>
<img src="{PNG_NAME}" alt="reward, cost and the decisions' probabilities over the steps">
{f'<h2>Front</h2><img src="{FRONT_PNG}" alt="one-shot accuracy against cost, a point per pair">' if front else ''}
<h2>Searched architecture</h2>
<p class="pick">{pick}</p>
<table><tr>{header}</tr>
{body}
</table>
<h2>Decisions</h2>
<p class="legend">Final probabilities are the controller's at the report's
checkpoint (step {arch.global_step}, the last point of each chart). A decision
is settled when its most likely choice has led the next by at least
{report_text.SETTLED_MARGIN:g} at every logged step of the last
{100 * report_text.SETTLED_SHARE:g}% of the controller's learning steps (the RL
steps: from the RL delay's end, step {config.rl_delay_steps}, to the
checkpoint's), counted from the first logged step of that lead; else it is
<span style="color: {_MOVING_COLOR}">still moving</span>: its chosen value
could change with more steps or another seed. A decision with no effect (under
a skipped layer) is not judged: its choice does not change the network.</p>
<table><tr><th>decision</th><th>path</th><th>final probabilities</th><th>chosen</th><th>settled</th></tr>
{chr(10).join(lines)}
</table>
<p class="one-choice">{html.escape(folded)}</p>
</body></html>
"""


def write_report(model_dir: str, scalars: Scalars, arch: Any,
                 config: 'SearchConfig', pick_line: str = '',
                 search_dir: Optional[str] = None) -> Tuple[str, str]:
  """Writes `report.png` and `report.html` into `model_dir`; their paths
  (and `front.png` when the search directory holds front.json).

  `scalars` from `read_scalars`, `arch` and `pick_line` from `extract.pick`;
  `search_dir` if not `model_dir`. ValueError for a space without decisions
  or a config of another space than `arch`'s.
  """
  if config.ssd != arch.ssd:
    raise ValueError(f'the config is a search of {config.ssd!r}, the '
                     f'architecture of {arch.ssd!r}')
  if not schema.flatten(mobile.get_search_space(arch.ssd)):
    raise ValueError(f'{arch.ssd!r} has no decisions: nothing to report')
  rows = layer_table(arch)
  png = os.path.join(model_dir, PNG_NAME)
  page_path = os.path.join(model_dir, HTML_NAME)
  _save(build_figure(scalars, arch, config, rows), png)
  front = os.path.join(search_dir or model_dir, config_lib.FRONT_FILE)
  if files.exists(front):
    plot_front(files.read_json(front), os.path.join(model_dir, FRONT_PNG))
  files.write_text(page(scalars, arch, config, rows, pick_line,
                        files.exists(front)), page_path)
  return png, page_path
