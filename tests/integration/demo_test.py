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
    # engine on TF 2.16+). A search's end depends on its seed and on the
    # kernels' rounding, so this asserts what held for every seed tried: the
    # argmax's cost within 5% of the target, the threshold of extract's
    # note (seeds 0-4 on a 2-core AMD EPYC, AVX-512: TF 2.15 +1.3%, +3.2%,
    # +0.6%, +0.2%, -2.3%; TF 2.21 -0.7%, +0.6%, -0.4%, -1.2%, +2.2%; the
    # space spans 0.18x to 5.5x of it; before, at --rl_learning_rate=0.1, a
    # filter count or two ended split and seed 0 landed -0.3% on TF 2.15 but
    # +7.0% on TF 2.21, -8.5% under Eigen's kernels), and decisions the
    # controller has made.
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
    self.assertLess(abs(result['estimated_cost'] / target - 1), 0.05,
                    (result['estimated_cost'], target))
    # The controller learned: every decision's argmax is above uniform, and
    # on average the chosen probability is well above it (0.53-0.60 above
    # for those seeds; 0.43-0.49 at --rl_learning_rate=0.1).
    gains = []
    for path, probs in result['probabilities'].items():
      if len(probs) < 2:
        continue
      gains.append(max(probs) - 1 / len(probs))
      self.assertGreater(gains[-1], 0.0, path)
    self.assertGreater(np.mean(gains), 0.2, gains)

if __name__ == '__main__':
  absltest.main()
