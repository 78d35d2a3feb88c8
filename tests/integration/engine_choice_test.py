"""`--engine`: a search on the distribute engine, on any TF, is extracted and
reported like the Estimator's; the engine is part of the run (a restart on
the other one is refused); the Estimator engine is refused where TF has none.
"""

import glob
import os
import tempfile
from unittest import mock

from absl.testing import absltest

from tunas_tf.io import files
from tunas_tf.runtime import estimator as estimator_lib
from tunas_tf.runtime import jobs
from tunas_tf.search import config as config_lib
from tunas_tf.search import extract
from tunas_tf.search import report
from tunas_tf.search import runner
from tests.testing import searches

_SHORT = list(searches.SHORT_SEARCH_FLAGS)


class DistributeSearchTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model_dir = os.path.join(tempfile.mkdtemp(), 'distribute')
    runner.run_search(searches.search_config(cls.model_dir, *_SHORT,
                                             '--engine=distribute'))

  def test_writes_what_the_tools_read(self):
    self.assertEqual(config_lib.read(self.model_dir).job.engine, 'distribute')
    self.assertEqual(searches.global_step(self.model_dir), 8)
    self.assertEqual(
        sorted(os.path.basename(p) for p in glob.glob(
            os.path.join(self.model_dir, 'model.ckpt-*.index'))),
        ['model.ckpt-0.index', 'model.ckpt-4.index', 'model.ckpt-8.index'])
    events = searches.events(self.model_dir)
    self.assertContainsSubset(searches.scalar_tags(), events)
    self.assertEqual(sorted(events['rlcontroller/reward']), [0, 2, 4, 6])
    self.assertIn('rlprobs_heatmap', searches.images(self.model_dir))
    result = extract.pick(self.model_dir)[0].to_json()
    self.assertEqual(result['global_step'], 8)
    self.assertLen(result['probabilities'], 18)
    arch = extract.pick(self.model_dir)[0]
    self.assertEqual(arch.global_step, 8)
    output = tempfile.mkdtemp()
    png, html = report.write_report(output, report.read_scalars(
        self.model_dir), arch, config_lib.read(self.model_dir))
    self.assertGreater(os.path.getsize(png), 0)
    self.assertIn('digits_search', files.read_text(html))

  def test_a_restart_on_the_other_engine_is_refused_in_one_line(self):
    before = sorted(os.listdir(self.model_dir))
    with self.assertRaisesRegex(
        ValueError, r"^[^\n]*config.json was written by a different run: "
        r"engine is 'distribute' there and 'estimator' now"):
      runner.run_search(searches.search_config(
          self.model_dir, *searches.without_max_steps(_SHORT),
          '--max_steps=12', '--engine=estimator'))
    self.assertEqual(sorted(os.listdir(self.model_dir)), before)


class EstimatorEngineTest(absltest.TestCase):

  def test_is_refused_where_tf_has_no_estimator_before_anything_is_written(
      self):
    model_dir = os.path.join(tempfile.mkdtemp(), 'run')
    with mock.patch.object(estimator_lib, 'has_estimator',
                           return_value=False):
      config = searches.search_config(model_dir, *_SHORT, '--engine=estimator')
      with self.assertRaisesRegex(
          ValueError, r'^--engine=estimator needs tf.estimator, which TF '
          r'\S+ does not have \(TF 2.16\+\): use --engine=distribute'):
        runner.run_search(config)
    self.assertFalse(os.path.exists(os.path.join(model_dir,
                                                 jobs.CONFIG_FILE)))

  def test_the_default_is_the_estimator_where_tf_has_it(self):
    for has, engine in ((True, 'estimator'), (False, 'distribute')):
      with mock.patch.object(estimator_lib, 'has_estimator',
                             return_value=has):
        config = searches.search_config('/tmp/unused', *_SHORT)
      self.assertEqual(config.job.engine, engine)


if __name__ == '__main__':
  absltest.main()
