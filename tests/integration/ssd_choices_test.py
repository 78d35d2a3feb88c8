"""Every `--ssd` choice of `train_search` is a search or a one-line refusal.

A reference model (a fixed architecture) has no decision: its controller has
nothing to learn, so the search refuses it before anything is written, on
both engines alike (the distribute engine used to crash after writing a
checkpoint; the Estimator's ran a search of nothing to the end).
"""

import os
import tempfile

from absl.testing import absltest

from tunas_tf import train_search
from tunas_tf.runtime import estimator
from tunas_tf.search_space import mobile
from tests.testing import searches
from tests.testing import forked

# Two steps of 8 images: what the loop runs.
_TWO_STEPS = ('--max_steps=2', '--train_batch_size=8',
              '--tpu_iterations_per_loop=1')


def _choices():
  values = searches.search_flags()
  return values['ssd'].parser.enum_values


def _refusal(ssd: str) -> str:
  return (f'--ssd={ssd} is a reference model (a fixed architecture): it has '
          'no decision to search; search one of cifar_search, digits_search, '
          'mcu_search, '
          'mobilenet_v3_like_search, proxylessnas_enlarged_search, '
          f'proxylessnas_search, or train it with train_eval --ssd={ssd}')


class SsdChoicesTest(absltest.TestCase):

  def test_every_choice_is_a_search_or_refused_before_anything_is_written(
      self):
    choices = _choices()
    self.assertCountEqual(choices, mobile.SEARCH_SPACES)
    refused = []
    for ssd in choices:
      model_dir = os.path.join(tempfile.mkdtemp(), 'run')
      args = (f'--model_dir={model_dir}', f'--ssd={ssd}', *_TWO_STEPS)
      if mobile.space_info(ssd).searchable:
        config = train_search.config_from_flags(searches.search_flags(*args))
        self.assertEqual((config.ssd, config.max_global_step), (ssd, 2))
      else:
        refused.append(ssd)
        self.assertEqual(searches.refusal_line(*args),
                         'train_search: ' + _refusal(ssd))
        self.assertFalse(os.path.exists(model_dir), ssd)
    self.assertCountEqual(refused, ['mnasnet_b1', 'mobilenet_v2',
                                    'mobilenet_v3_large',
                                    'proxylessnas_mobile'])

  def test_help_says_which_choices_are_searched(self):
    text = searches.search_flags()['ssd'].help
    for ssd in _choices():
      self.assertIn(ssd, text)
    self.assertIn('Reference models (fixed architectures, nothing to search;'
                  ' train_eval trains them): mnasnet_b1, mobilenet_v2, '
                  'mobilenet_v3_large, proxylessnas_mobile.', text)

  def test_a_reference_model_is_refused_alike_on_each_engine(self):
    # The real process, as the issue ran it: one line, exit 1, no directory.
    engines = ['distribute'] + (['estimator'] if estimator.has_estimator()
                                else [])
    runs = []
    for engine in engines:
      model_dir = os.path.join(tempfile.mkdtemp(), 'run')
      runs.append((model_dir, forked.Child(
          searches.search_command(model_dir, '--ssd=mobilenet_v2',
                                  f'--engine={engine}', *_TWO_STEPS),
          env=searches.QUIET)))
    for (model_dir, process), engine in zip(runs, engines):
      stdout, stderr = process.communicate(timeout=300)
      self.assertEqual(process.returncode, 1, (engine, stderr))
      self.assertEqual(stdout, '')
      self.assertEqual(stderr.splitlines()[-1],
                       'train_search: ' + _refusal('mobilenet_v2'), engine)
      self.assertFalse(os.path.exists(model_dir), engine)


if __name__ == '__main__':
  absltest.main()
