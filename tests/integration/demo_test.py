"""The offline demo search with the flag defaults lands near its target (smoke).

One full run of the defaults (digits, digits_search, its MACs model and rule
target, seed 0): about a minute on 2 cores.
"""

import tempfile

from absl import flags
from absl.testing import absltest
import numpy as np

from tunas_tf import train_search
from tunas_tf.search import extract
from tunas_tf.search import runner


class DemoSearchTest(absltest.TestCase):

  def test_stochastic_smoke_default_demo_lands_within_5pct_and_learns(self):
    # The default engine of this TF (the Estimator on TF 2.15, the distribute
    # engine on TF 2.16+). The default extraction starts from the most likely
    # architecture within 5% of the target, the argmax whenever it is there
    # (then the best by one-shot accuracy of it and 49 drawn in the band):
    # the argmax (`--argmax`) of seeds 0-4 landed -2.3% to +3.2% on a Zen 4
    # EPYC (TF 2.15 and 2.21), seed 0 -5.25% on a Xeon with AMX under Eigen's
    # kernels (a search's end depends on its seed and on the kernels'
    # rounding). So this checks that the band held one of the controller's
    # 20,000 most likely architectures (else the argmax is taken, without
    # `cost_tolerance`), and, through the gains below, that it learned.
    model_dir = tempfile.mkdtemp()
    values = flags.FlagValues()
    train_search.define_flags(values)
    values(['train_search', f'--model_dir={model_dir}'])
    config = train_search.config_from_flags(values)
    self.assertEqual((config.job.dataset, config.ssd, config.cost_model),
                     ('digits', 'digits_search', 'macs'))
    runner.run_search(config)
    # As make search extracts it.
    arch, line = extract.pick(model_dir, oneshot=extract.ONESHOT)
    self.assertEqual(arch.global_step, config.max_global_step)
    self.assertEqual(arch.cost_tolerance, extract.OFF_TARGET, line)
    # The one-shot step ran and says what it did (kept or took).
    self.assertRegex(line, r'One-shot accuracy kept it|by one-shot accuracy')
    target = config.rl_cost_model_target
    self.assertLessEqual(abs(arch.estimated_cost / target - 1), 0.05,
                         (arch.estimated_cost, target))
    # The controller learned: every decision's argmax is above uniform, and
    # on average the chosen probability is well above it (0.50-0.60 above
    # for those runs; 0.43-0.49 at --rl_learning_rate=0.1).
    gains = []
    for path, probs in arch.probabilities.items():
      if len(probs) < 2:
        continue
      gains.append(max(probs) - 1 / len(probs))
      self.assertGreater(gains[-1], 0.0, path)
    self.assertGreater(np.mean(gains), 0.2, gains)

if __name__ == '__main__':
  absltest.main()
