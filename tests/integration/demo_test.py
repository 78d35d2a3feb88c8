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

  def test_stochastic_smoke_default_demo_lands_within_10pct_and_learns(self):
    # The default engine of this TF (the Estimator on TF 2.15, the distribute
    # engine on TF 2.16+). A search's end depends on its seed and on the
    # kernels' rounding (another CPU's oneDNN takes other code paths, Eigen's
    # matrix products among them), so this asserts what held with a margin
    # for every seed and CPU tried: the argmax's cost within 10% of the target
    # and decisions the controller has made. Seeds 0-4 landed -2.3% to +3.2%
    # on a Zen 4 EPYC (TF 2.15 and 2.21); on a Sapphire-Rapids-class Xeon
    # with AMX -5.25% to +2.2% under Eigen's kernels (the same on TF 2.15 and
    # 2.21; seed 0 the -5.25%), -2.6% to +2.2% under oneDNN's; seed 0 there
    # with oneDNN held to AVX2 (ONEDNN_MAX_CPU_ISA) -1.1% to +0.0% under
    # either kernels and TF. 10% is about twice the widest; the space spans
    # 0.18x to 5.5x of the target, and a uniformly drawn architecture lands
    # within 10% of it with p = 0.13, so the gains below check that the
    # controller learned.
    model_dir = tempfile.mkdtemp()
    values = flags.FlagValues()
    train_search.define_flags(values)
    values(['train_search', f'--model_dir={model_dir}'])
    config = train_search.config_from_flags(values)
    self.assertEqual((config.job.dataset, config.ssd, config.cost_model),
                     ('digits', 'digits_search', 'macs'))
    runner.run_search(config)
    result = extract.extract(model_dir)
    self.assertEqual(result['global_step'], config.max_global_step)
    target = config.rl_cost_model_target
    self.assertLess(abs(result['estimated_cost'] / target - 1), 0.10,
                    (result['estimated_cost'], target))
    # The controller learned: every decision's argmax is above uniform, and
    # on average the chosen probability is well above it (0.50-0.60 above
    # for those runs; 0.43-0.49 at --rl_learning_rate=0.1).
    gains = []
    for path, probs in result['probabilities'].items():
      if len(probs) < 2:
        continue
      gains.append(max(probs) - 1 / len(probs))
      self.assertGreater(gains[-1], 0.0, path)
    self.assertGreater(np.mean(gains), 0.2, gains)

if __name__ == '__main__':
  absltest.main()
