"""Tests for search/report on the shared finished search (8 steps: op
warm-up 2, filter warm-up 4, RL delay 4): the figure's charts, marks and
labels, the page's tables, the unsettled flag, the layer table, the
probabilities over time and the summary line (the tool that writes them:
tests/tools/report_test.py; the report's words:
tests/search/report_text_test.py)."""

import dataclasses
import tempfile
import types

from absl.testing import absltest
from matplotlib import colors
from matplotlib import pyplot as plt
import numpy as np

from tunas_tf.cost_model import linear as cost_linear
from tunas_tf.search import config as config_lib
from tunas_tf.search import extract
from tunas_tf.search import report
from tunas_tf.search import report_text
from tests.testing import searches


def _axes(fig):
  """The figure's axes by gid (`report.build_figure`)."""
  return {ax.get_gid(): ax for ax in fig.axes}


def _words(text):
  """`text` with its line breaks and runs of spaces as single spaces."""
  return ' '.join(text.split())


def _mark_steps(ax):
  return sorted(line.get_xdata()[0] for line in ax.lines
                if line.get_gid() == report.MARK_GID)


def _mark_texts(ax):
  return [' '.join(t.get_text().split()) for t in ax.texts
          if t.get_gid() == report.MARK_GID]


def _html_row(page, path):
  """The decisions table's row of `path`."""
  rows = [line for line in page.split('\n')
          if f'<code>{path}</code>' in line]
  assert len(rows) == 1, rows
  return rows[0]


class ReportTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.search_dir = searches.finished_search()
    cls.arch = extract.search_architecture(cls.search_dir)
    cls.scalars = report.read_scalars(cls.search_dir)
    cls.config = config_lib.read(cls.search_dir)

  def _figure(self, scalars=None, arch=None):
    arch = arch or self.arch
    fig = report.build_figure(scalars or self.scalars, arch, self.config,
                              report.layer_table(arch))
    self.addCleanup(plt.close, fig)
    return fig

  def _page(self, scalars=None, arch=None):
    arch = arch or self.arch
    return report.page(scalars or self.scalars, arch, self.config,
                       report.layer_table(arch))

  def _charted(self):
    return [d for d in self.arch.decisions if len(d['choices']) > 1]

  def test_rl_delay_and_warm_up_ends_are_marked_at_their_steps(self):
    self.assertEqual((self.config.increase_ops_warmup_steps,
                      self.config.increase_filters_warmup_steps,
                      self.config.rl_delay_steps), (2, 4, 4))
    axes = _axes(self._figure())
    series = [axes['reward'], axes['cost']] + [
        axes[f"decision {d['path']}"] for d in self._charted()]
    for ax in series:
      self.assertEqual(_mark_steps(ax), [2, 4], ax.get_gid())
    for name in ('reward', 'cost'):
      self.assertEqual(_mark_texts(axes[name]),
                       ['op warm-up ends (step 2)',
                        'filter warm-up ends, RL delay ends (step 4)'])
    self.assertEqual(_mark_texts(axes['decision blocks/0/filters']),
                     ['ops', 'filters+RL'])
    self.assertIn('step 2: op warm-up ends; step 4: filter warm-up ends, '
                  'RL delay ends', self._page())
    self.assertIn('after the RL delay (4 steps, shaded)', _words(self._page()))

  def test_single_choice_decisions_are_folded_into_one_line(self):
    single = [d['path'] for d in self.arch.decisions
              if len(d['choices']) == 1]
    self.assertEqual(single, ['blocks/2/layers/0', 'blocks/3/layers/0'])
    axes = _axes(self._figure())
    self.assertEqual(
        [g for g in axes if g.startswith('decision ')],
        [f"decision {d['path']}" for d in self._charted()])
    folded = ('2 decisions with a single choice (no chart): block 2 layer '
              '0: op = DepthwiseBottleneck; block 3 layer 0: op = '
              'DepthwiseBottleneck')
    self.assertEqual([_words(t.get_text()) for t in axes['one choice'].texts],
                     [folded])
    page = self._page()
    self.assertIn(folded, page)
    self.assertNotIn('<code>blocks/2/layers/0</code>', page)

  def test_chart_titles_are_readable_labels_wrapped_between_words(self):
    axes = _axes(self._figure())
    for d in self._charted():
      title = axes[f"decision {d['path']}"].get_title()
      self.assertNotIn('...', title)
      self.assertTrue(_words(title).startswith(
          report_text.decision_label(d['path'])), title)
      for line in title.split('\n'):
        self.assertTrue(len(line) <= 40 or ' ' not in line, title)
    title = axes['decision blocks/3/layers/1/layer/choices/0/'
                 'expansion_filters'].get_title()
    self.assertTrue(_words(title).startswith(
        'block 3 layer 1: expansion filters'), title)

  def test_table_has_only_the_layers_a_classifier_has(self):
    # digits_search's block 1 is a separable conv and a detection endpoint.
    self.assertEqual(type(self.arch.spec.blocks[1].layers[1]).__name__,
                     'DetectionEndpointSpec')
    rows = report.layer_table(self.arch)
    self.assertEqual([r['op'] for r in rows if r['block'] == 1],
                     ['SeparableConv'])
    self.assertNotIn('DetectionEndpoint', [r['op'] for r in rows])
    table = _axes(self._figure())['table'].tables[0]
    cells = [c.get_text().get_text() for c in table.get_celld().values()]
    self.assertIn('SeparableConv', cells)
    self.assertNotIn('DetectionEndpoint', cells)
    self.assertNotIn('DetectionEndpoint', self._page())

  def test_run_facts_in_the_title_and_the_page(self):
    target = cost_linear.cost_text(self.config.rl_cost_model_target)
    title = _words(self._figure().get_suptitle())
    for fact in ('search space digits_search',
                 'dataset digits 8x8, preprocessing none',
                 '8 steps of 16 images',
                 f'cost model macs, target {target} MACs',
                 'RL delay 4 steps, op warm-up 2, filter warm-up 4',
                 'step 8 of 8'):
      self.assertIn(fact, title)
    page = self._page()
    self.assertIn('<title>Search report: digits_search on digits</title>',
                  page)
    for name, value in (('search space', 'digits_search'),
                        ('dataset', 'digits 8x8, preprocessing none'),
                        ('cost model', 'macs'),
                        ('cost target', f'{target} MACs'),
                        ('steps', '8 (16 images a step)'),
                        ('RL delay', '4 steps')):
      self.assertIn(f'<tr><th>{name}</th><td>{value}</td></tr>', page)

  def _probabilities(self, top, second):
    """blocks/0/filters' probabilities: `top` on the chosen, `second` on
    the next, the rest shared by the other two."""
    d = self.arch.decisions[0]
    self.assertEqual(d['path'], 'blocks/0/filters')
    p = [(1.0 - top - second) / 2] * 4
    p[d['index']] = top
    p[(d['index'] + 1) % 4] = second
    return d, p

  def _flag(self, scalars, arch):
    """(the chart's title and colour, the page's row) of blocks/0/filters."""
    ax = _axes(self._figure(scalars, arch))['decision blocks/0/filters']
    return (_words(ax.get_title()), colors.to_hex(ax.title.get_color()),
            _html_row(self._page(scalars, arch), 'blocks/0/filters'))

  def test_unsettled_is_flagged_from_hand_built_summaries(self):
    arch = dataclasses.replace(self.arch, probabilities=None)
    for (top, second), flagged in (((0.36, 0.30), True),
                                   ((0.60, 0.30), False)):
      d, final = self._probabilities(top, second)
      scalars = dict(self.scalars)
      for j, label in enumerate(d['choices']):
        scalars[f"rlprobs/blocks/0/filters/{label}"] = {
            0: 0.25, 2: 0.25, 4: 0.3 if j == d['index'] else 0.7 / 3,
            6: final[j]}
      title, color, row = self._flag(scalars, arch)
      if flagged:
        self.assertEqual(title, 'block 0: filters - unsettled: 0.36 vs 0.30')
        self.assertEqual(color, colors.to_hex('crimson'))
        self.assertIn('<td class="unsettled">unsettled: 0.36 vs 0.30</td>',
                      row)
      else:
        self.assertEqual(title, 'block 0: filters')
        self.assertEqual(color, colors.to_hex('black'))
        self.assertIn('<td>settled: 0.60 vs 0.30</td>', row)
        self.assertNotIn('unsettled', row)

  def test_unsettled_is_flagged_from_the_checkpoints_probabilities(self):
    d, final = self._probabilities(0.4, 0.35)
    probabilities = dict(self.arch.probabilities)
    probabilities['blocks/0/filters'] = tuple(final)
    arch = dataclasses.replace(self.arch, probabilities=probabilities)
    title, color, row = self._flag(self.scalars, arch)
    self.assertEqual(title, 'block 0: filters - unsettled: 0.40 vs 0.35')
    self.assertEqual(color, colors.to_hex('crimson'))
    self.assertIn('class="unsettled"', row)
    # The final probabilities are drawn as dots at the checkpoint's step.
    ax = _axes(self._figure(arch=arch))['decision blocks/0/filters']
    dots = [line.get_ydata()[0] for line in ax.lines
            if list(line.get_xdata()) == [8]]
    np.testing.assert_array_equal(dots, final)
    self.assertIn('less than 0.1 (absolute)', _words(self._page()))

  def test_a_decision_without_effect_is_not_flagged_unsettled(self):
    # The architecture with its first skippable layer skipped: the
    # decisions nested under it have no effect.
    decisions = self.arch.decisions
    k = next(i for i, d in enumerate(decisions) if 'skip' in d['choices'])
    indices = list(self.arch.indices)
    indices[k] = decisions[k]['choices'].index('skip')
    arch = dataclasses.replace(self.arch, indices=tuple(indices))
    d = next(d for d in arch.decisions
             if d['path'].startswith(decisions[k]['path'] + '/') and
             len(d['choices']) > 1)
    self.assertFalse(d['active'])
    # Two likeliest 0.04 apart: unsettled were it active.
    final = [0.0] * len(d['choices'])
    final[0], final[1] = 0.37, 0.33
    final[-1] += 1.0 - sum(final)
    probabilities = dict(arch.probabilities)
    probabilities[d['path']] = tuple(final)
    arch = dataclasses.replace(arch, probabilities=probabilities)
    ax = _axes(self._figure(arch=arch))[f"decision {d['path']}"]
    self.assertEqual(_words(ax.get_title()),
                     f"{report_text.decision_label(d['path'])} (no effect)")
    self.assertEqual(colors.to_hex(ax.title.get_color()),
                     colors.to_hex('black'))
    row = _html_row(self._page(arch=arch), d['path'])
    self.assertIn('<td>not judged: no effect</td>', row)
    self.assertNotIn('unsettled', row)

  def test_phase_labels_sit_above_their_charts_clear_of_the_curves(self):
    # A synthetic run whose curves fill every chart's whole height at every
    # step, so a label inside a chart would cover them; marks at three
    # steps (near the start, the middle and the end) and at one.
    steps = range(0, 9)
    scalars = {tag: {s: (s % 2) * 2.0 - 1.0 for s in steps}
               for tag in ('rlcontroller/reward',
                           'rlcontroller/validation_accuracy',
                           'rlcontroller/baseline',
                           'rlcontroller/estimated_cost')}
    for d in self._charted():
      for j, label in enumerate(d['choices']):
        scalars[f"rlprobs/{d['path']}/{label}"] = {
            s: float((s + j) % 2) for s in steps}
    arch = dataclasses.replace(self.arch, probabilities=None)
    configs = (self.config, dataclasses.replace(
        self.config, increase_ops_warmup_steps_fraction=0.125,
        increase_filters_warmup_steps_fraction=0.5,
        rl_delay_steps_fraction=0.875))
    self.assertEqual(report_text.phase_marks(configs[1]),
                     [(1, ['op warm-up ends']), (4, ['filter warm-up ends']),
                      (7, ['RL delay ends'])])
    for config in configs:
      fig = report.build_figure(scalars, arch, config,
                                report.layer_table(arch))
      self.addCleanup(plt.close, fig)
      fig.canvas.draw()
      renderer = fig.canvas.get_renderer()
      titles = [fig._suptitle] + [ax.title for ax in fig.axes]  # pylint: disable=protected-access
      title_boxes = [t.get_window_extent(renderer) for t in titles
                     if t is not None and t.get_text()]
      charts = [ax for ax in fig.axes
                if ax.get_gid() in ('reward', 'cost') or
                ax.get_gid().startswith('decision ')]
      self.assertEqual(len(charts), 2 + len(self._charted()))
      for ax in charts:
        labels = [t for t in ax.texts if t.get_gid() == report.MARK_GID]
        self.assertLen(labels, len(report_text.phase_marks(config)))
        boxes = [t.get_window_extent(renderer) for t in labels]
        for text, box in zip(labels, boxes):
          where = f'{ax.get_gid()}: {text.get_text()!r} at {box}'
          # Above the chart's data area, within its width, in the figure.
          self.assertGreater(box.y0, ax.bbox.y1, where)
          self.assertGreaterEqual(box.x0, ax.bbox.x0 - 0.5, where)
          self.assertLessEqual(box.x1, ax.bbox.x1 + 0.5, where)
          self.assertTrue(fig.bbox.contains(box.x0, box.y0) and
                          fig.bbox.contains(box.x1, box.y1), where)
          # Covering no chart, title or other label.
          for other in fig.axes:
            self.assertFalse(box.overlaps(other.bbox), where)
          for title in title_boxes:
            self.assertFalse(box.overlaps(title), where)
          for other in boxes:
            if other is not box:
              self.assertFalse(box.overlaps(other), where)

  def test_a_config_of_another_space_is_refused(self):
    with self.assertRaisesRegex(ValueError, "^the config is a search of "
                                "'cifar_search', the architecture of "
                                "'digits_search'$"):
      report.write_report(tempfile.mkdtemp(), self.scalars, self.arch,
                          types.SimpleNamespace(ssd='cifar_search'))

  def test_layer_table_shares_add_up_to_the_estimated_macs(self):
    rows = report.layer_table(self.arch)
    self.assertEqual(rows[-1]['op'], 'classifier')
    total = sum(row['MACs'] for row in rows)
    # The search's cost model is the exact MACs model of the space.
    self.assertEqual(self.arch.cost_model, 'macs')
    self.assertAlmostEqual(total, self.arch.estimated_cost, delta=0.5)
    shares = sum(float(row['MACs share'].rstrip('%')) for row in rows)
    self.assertAlmostEqual(shares, 100.0, delta=0.1 * len(rows))

  def test_probabilities_over_time_from_summaries_or_logits(self):
    decision = self.arch.decisions[0]
    steps, probs = report.probabilities_over_time(
        self.scalars, decision['path'], decision['choices'])
    self.assertEqual(steps, sorted(self.scalars['rlcontroller/reward']))
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    # Searches from before the rlprobs/ summaries: the logits' softmax.
    old = {k: v for k, v in self.scalars.items()
           if not k.startswith('rlprobs/')}
    old_steps, old_probs = report.probabilities_over_time(
        old, decision['path'], decision['choices'])
    self.assertEqual(old_steps, steps)
    np.testing.assert_allclose(old_probs, probs, atol=1e-5)

  def test_summary_line_names_units_and_target(self):
    line = report.summary_line(self.scalars, self.arch)
    self.assertRegex(line, r'cost [\d,]+ MACs \(target [\d,.]+, [+-]\d+\.\d%\)')


if __name__ == '__main__':
  absltest.main()
