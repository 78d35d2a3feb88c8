"""Tests for tools/report on the shared finished search: it writes the
picture and the page (a flip at the last step still moving), and refuses
bad input in one line (search/report's
figure, page and table: tests/search/report_test.py; its words:
tests/search/report_text_test.py)."""

import contextlib
import dataclasses
import html
import io
import os
import re
import tempfile

from absl import flags
from absl.testing import absltest
import numpy as np
import tensorflow as tf

from tunas_tf import architecture
from tunas_tf.search import extract
from tunas_tf.search import report
from tunas_tf.tools import report as report_tool
from tests.testing import searches


def _run(*args):
  values = flags.FlagValues()
  report_tool.define_flags(values)
  values(['report'] + list(args))
  report_tool.main(['report'], values)


class ReportToolTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.search_dir = searches.finished_search()
    cls.arch = extract.pick(cls.search_dir)[0]

  def test_writes_picture_and_page_with_the_table(self):
    out = tempfile.mkdtemp()
    _run(f'--model_dir={self.search_dir}', f'--output_dir={out}')
    image = tf.io.decode_png(tf.io.read_file(os.path.join(
        out, report.PNG_NAME))).numpy()
    # Wide enough for four decision charts a row, and not blank.
    self.assertGreater(image.shape[1], 800)
    self.assertGreater(image.shape[0], image.shape[1])
    self.assertGreater(np.std(image), 10.0)
    with open(os.path.join(out, report.HTML_NAME)) as f:
      page = f.read()
    self.assertIn(f'src="{report.PNG_NAME}"', page)
    rows = report.layer_table(self.arch)
    charted = [d for d in self.arch.decisions if len(d['choices']) > 1]
    # Three tables: the run's 10 facts, the layers (+ header) and the
    # decisions with two or more choices (+ header).
    self.assertEqual(page.count('<tr>'),
                     10 + len(rows) + 1 + len(charted) + 1)
    self.assertIn(self.arch.indices_string, page)
    self.assertIn('MACs (target', page)

  def test_a_flip_at_the_last_step_is_still_moving(self):
    # Summaries written as the search writes them, at steps 4 to 7 (the RL
    # steps but the last): in one decision the checkpoint's leader leads
    # there, in another a choice that is not the leader at step 8.
    run = searches.copy_finished_search('flip')
    picked = [d for d in self.arch.decisions if d['active'] and
              len(d['choices']) > 1 and np.subtract(
                  *sorted(d['probabilities'])[:-3:-1]) >= 0.1][:2]
    self.assertLen(picked, 2)
    writer = tf.summary.create_file_writer(run)
    with writer.as_default():
      for d, moves in zip(picked, (0, 1)):
        leader = int(np.argmax(d['probabilities']))
        led = (leader + moves) % len(d['choices'])
        for step in range(4, 8):
          for j, label in enumerate(d['choices']):
            tf.summary.scalar(f"rlprobs/{d['path']}/{label}",
                              0.9 if j == led else 0.0, step=step)
    writer.close()
    out = tempfile.mkdtemp()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
      _run(f'--model_dir={run}', f'--output_dir={out}')
    with open(os.path.join(out, report.HTML_NAME)) as f:
      page = f.read()
    rows = {d['path']: next(line for line in page.split('\n')
                             if f"<code>{d['path']}</code>" in line)
            for d in picked}
    self.assertIn('<td>settled: ', rows[picked[0]['path']])
    self.assertIn('led 4 of 4 RL steps</td>', rows[picked[0]['path']])
    self.assertIn('<td class="moving">still moving: ',
                  rows[picked[1]['path']])
    self.assertIn('led 0 of 4 RL steps</td>', rows[picked[1]['path']])
    # Which architecture it reports, said on the page and printed.
    line = extract.pick(run)[1]
    self.assertIn(f'<p class="pick">{line}</p>', page)
    self.assertIn(line, printed.getvalue().splitlines())

  def test_reports_what_extract_architecture_took_from_that_checkpoint(self):
    run = searches.copy_finished_search('argmax')
    likeliest, line = extract.pick(run)
    argmax = extract.pick(run, cost_tolerance=None)[0]
    self.assertNotEqual(argmax.indices, likeliest.indices)
    path = os.path.join(run, architecture.FILE_NAME)

    def reported(record):
      architecture.write(record, path)
      out, printed = tempfile.mkdtemp(), io.StringIO()
      with contextlib.redirect_stdout(printed):
        _run(f'--model_dir={run}', f'--output_dir={out}')
      with open(os.path.join(out, report.HTML_NAME)) as f:
        return f.read(), printed.getvalue()

    page, printed = reported(argmax)
    took = (f'extract_architecture took {argmax.indices_string} (the '
            f'argmax): {path}')
    self.assertIn(f'<p class="pick">{html.escape(line)}<br>\n{html.escape(took)}'
                  '</p>', page)
    self.assertIn(took, printed.splitlines())
    self.assertIn(f'indices {argmax.indices_string}', printed)
    # A record of another checkpoint is not this report's.
    page, printed = reported(dataclasses.replace(
        argmax, checkpoint=os.path.join(run, 'model.ckpt-1')))
    self.assertIn(f'<p class="pick">{html.escape(line)}</p>', page)
    self.assertIn(f'indices {likeliest.indices_string}', printed)
    # One that cannot be read: refused in one line naming it.
    with open(path, 'w') as f:
      f.write('{"ssd": ')
    with self.assertRaises(SystemExit) as e:
      _run(f'--model_dir={run}', f'--output_dir={tempfile.mkdtemp()}')
    self.assertRegex(str(e.exception), f'^report: .*{re.escape(path)}')
    self.assertNotIn('\n', str(e.exception))

  def test_bad_input_exits_with_one_line(self):
    with self.assertRaisesRegex(SystemExit, '^report: --model_dir is required$'):
      _run()
    empty = tempfile.mkdtemp()
    with self.assertRaises(SystemExit) as e:
      _run(f'--model_dir={empty}')
    self.assertTrue(re.match(r'^report: .*config\.json', str(e.exception)),
                    str(e.exception))
    self.assertNotIn('\n', str(e.exception))
    self.assertEqual(os.listdir(empty), [])
    a_file = os.path.join(empty, 'f')
    open(a_file, 'w').close()
    with self.assertRaisesRegex(
        SystemExit, '^report: --output_dir=.* is a file, not a directory$'):
      _run(f'--model_dir={self.search_dir}', f'--output_dir={a_file}')


if __name__ == '__main__':
  absltest.main()
