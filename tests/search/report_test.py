"""Tests for search/report on the shared finished search (8 steps: op
warm-up 2, filter warm-up 4, RL delay 4): the figure's charts, marks and
labels, the page's tables, what is still moving, the layer table, the
probabilities over time and the summary line (the tool that writes them:
tests/tools/report_test.py; the report's words:
tests/search/report_text_test.py)."""

import dataclasses
import json
import os
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
    cls.arch = extract.pick(cls.search_dir)[0]
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
    self.assertIn('search space digits_search; dataset digits 8x8, '
                  'preprocessing none; steps 8 of 16 images; cost model '
                  f'macs; cost target {target} MACs; reward abs, beta -0.5; '
                  'RL delay 4 steps; op warm-up 2 steps; filter warm-up 4 '
                  'steps', title)
    self.assertIn('step 8 of 8', title)
    page = self._page()
    self.assertIn('<title>Search report: digits_search on digits, cost model '
                  'macs</title>',
                  page)
    for name, value in (('search space', 'digits_search'),
                        ('dataset', 'digits 8x8, preprocessing none'),
                        ('cost model', 'macs'),
                        ('cost target', f'{target} MACs'),
                        ('steps', '8 of 16 images'),
                        ('RL delay', '4 steps'), ('checkpoint step', '8')):
      self.assertIn(f'<tr><th>{name}</th><td>{value}</td></tr>', page)

  def _flip(self, settled):
    """(scalars, arch, config) of a 100-step search (RL delay 50) whose
    blocks/0/filters has the chosen choice at 0.8 at the checkpoint (step
    100), led from step 60 on (settled), or by another choice at 0.7 at
    every logged step to 90 (a flip in the last tenth)."""
    config = dataclasses.replace(self.config, max_steps=100)
    self.assertEqual(config.rl_delay_steps, 50)
    d = self.arch.decisions[0]
    self.assertEqual(d['path'], 'blocks/0/filters')
    leader = d['index'] if settled else (d['index'] + 1) % 4
    scalars = dict(self.scalars)
    for j, label in enumerate(d['choices']):
      scalars[f'rlprobs/blocks/0/filters/{label}'] = {
          s: 0.25 if s < 60 else 0.7 if j == leader else 0.1
          for s in range(0, 100, 10)}
    final = [0.2 / 3] * 4
    final[d['index']] = 0.8
    arch = dataclasses.replace(
        self.arch, global_step=100, max_global_step=100,
        probabilities=dict(self.arch.probabilities,
                           **{'blocks/0/filters': tuple(final)}))
    return scalars, arch, config

  def test_a_flip_in_the_last_steps_is_drawn_and_still_moving(self):
    for settled in (True, False):
      scalars, arch, config = self._flip(settled)
      fig = report.build_figure(scalars, arch, config,
                                report.layer_table(arch))
      self.addCleanup(plt.close, fig)
      ax = _axes(fig)['decision blocks/0/filters']
      curves = [line for line in ax.lines if line.get_gid() != report.MARK_GID]
      # Each choice's curve runs to the checkpoint's step, its last point
      # (marked) the checkpoint's probability.
      self.assertLen(curves, 4)
      for j, line in enumerate(curves):
        self.assertEqual(list(line.get_xdata()[-2:]), [90, 100])
        self.assertEqual(line.get_ydata()[-1],
                         arch.probabilities['blocks/0/filters'][j])
        self.assertEqual(line.get_markevery(), [10])
      page = report.page(scalars, arch, config, report.layer_table(arch))
      row = _html_row(page, 'blocks/0/filters')
      title = _words(ax.get_title())
      if settled:
        self.assertEqual(title, 'block 0: filters')
        self.assertEqual(colors.to_hex(ax.title.get_color()),
                         colors.to_hex('black'))
        self.assertIn('<td>settled: 0.80 vs 0.07, led 40 of 50 RL steps</td>',
                      row)
      else:
        self.assertEqual(title, 'block 0: filters - still moving: 0.80 vs '
                         '0.07, led 0 of 50 RL steps')
        self.assertEqual(colors.to_hex(ax.title.get_color()),
                         colors.to_hex('crimson'))
        self.assertIn('<td class="moving">still moving: 0.80 vs 0.07, led 0 '
                      'of 50 RL steps</td>', row)
    self.assertIn('at least 0.1 at every logged step of the last 25% of the '
                  "controller's learning steps (the RL steps: from the RL "
                  "delay's end, step 50,", _words(page))

  def test_a_choice_the_cost_band_took_is_said_so(self):
    d = self.arch.decisions[0]
    final = [0.1] * 4
    final[(d['index'] + 1) % 4] = 0.7
    arch = dataclasses.replace(self.arch, probabilities=dict(
        self.arch.probabilities, **{'blocks/0/filters': tuple(final)}))
    row = _html_row(self._page(arch=arch), 'blocks/0/filters')
    self.assertIn(f"<td>{d['value']} (for the cost band; not the most "
                  'likely)</td>', row)
    self.assertNotIn('cost band', _html_row(self._page(), 'blocks/0/filters'))
    # The one-shot step's pick says so, not the band.
    row = _html_row(self._page(arch=dataclasses.replace(arch, oneshot=50)),
                    'blocks/0/filters')
    self.assertIn(f"<td>{d['value']} (by one-shot accuracy in the cost band; "
                  'not the most likely)</td>', row)

  def test_a_decision_without_effect_is_not_judged(self):
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
    # Two likeliest 0.04 apart: still moving were it active.
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
    self.assertNotIn('moving', row)

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

  def test_the_front_is_drawn_when_the_directory_holds_one(self):
    model_dir = tempfile.mkdtemp()
    self.assertNotIn('front.png', report.page(
        self.scalars, self.arch, self.config, report.layer_table(self.arch)))
    report.write_report(model_dir, self.scalars, self.arch, self.config)
    self.assertFalse(os.path.exists(os.path.join(model_dir, 'front.png')))
    points = [{'pair': k, 'cost_model': model, 'cost_target': target,
               'estimated_cost': target * 1.01, 'oneshot_accuracy': acc}
              for k, (model, target, acc) in enumerate(
                  (('macs', 1e5, 0.8), ('macs', 2e5, 0.85),
                   ('fitted.json', 3.0, 0.84)))]
    with open(os.path.join(model_dir, config_lib.FRONT_FILE), 'w') as f:
      json.dump({'points': points}, f)
    _, page_path = report.write_report(model_dir, self.scalars, self.arch,
                                       self.config)
    with open(page_path) as f:
      self.assertIn('<h2>Front</h2><img src="front.png"', f.read())
    image = plt.imread(os.path.join(model_dir, 'front.png'))
    # A panel per cost model: wider than tall.
    self.assertGreater(image.shape[1], 1.5 * image.shape[0])

  def test_layer_table_shares_add_up_to_the_estimated_macs(self):
    rows = report.layer_table(self.arch)
    self.assertEqual(rows[-1]['op'], 'classifier')
    total = sum(row['MACs'] for row in rows)
    # The search's cost model is the exact MACs model of the space.
    self.assertEqual(self.arch.cost_model, 'macs')
    self.assertAlmostEqual(total, self.arch.estimated_cost, delta=0.5)
    shares = sum(float(row['MACs share'].rstrip('%')) for row in rows)
    self.assertAlmostEqual(shares, 100.0, delta=0.1 * len(rows))

  def test_probabilities_over_time_from_summaries(self):
    decision = self.arch.decisions[0]
    steps, probs = report.probabilities_over_time(
        self.scalars, decision['path'], decision['choices'])
    self.assertEqual(steps, sorted(self.scalars['rlcontroller/reward']))
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    self.assertEqual(report.probabilities_over_time(
        {}, decision['path'], decision['choices'])[0], [])

  def test_summary_line_names_units_and_target(self):
    line = report.summary_line(self.scalars, self.arch)
    self.assertRegex(line, r'cost [\d,]+ MACs \(target [\d,]+ MACs, '
                     r'[+-]\d+%\)')

  def test_summary_line_says_what_the_accuracy_is_a_mean_of(self):
    # The shared search logs at steps 0, 2, 4 and 6.
    accuracy = {s: s / 100 for s in range(0, 7, 2)}
    line = report.summary_line(
        {'rlcontroller/validation_accuracy': accuracy}, self.arch)
    self.assertIn('validation accuracy 0.030 (mean over steps 0-6, all 4 '
                  'logged)', line)
    accuracy = {s: s / 100 for s in range(0, 24, 2)}
    line = report.summary_line(
        {'rlcontroller/validation_accuracy': accuracy}, self.arch)
    # (4 + 6 + ... + 22) / 100 / 10 = 0.13.
    self.assertIn('validation accuracy 0.130 (mean over steps 4-22, the '
                  'last 10 logged)', line)

if __name__ == '__main__':
  absltest.main()
