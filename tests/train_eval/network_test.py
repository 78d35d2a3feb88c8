"""Tests of `train_eval.network`: the architecture, its size and cost."""

from absl.testing import absltest

from tests.testing import train_eval_runs as runs
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema
from tunas_tf.train_eval import network


class NetworkTest(absltest.TestCase):

  def test_scale_architecture_by_one_is_the_identity(self):
    space = mobile.get_search_space('digits_search')
    arch = schema.prune(space, [0] * 18)
    self.assertIs(network.scale_architecture(arch, 1.0), arch)

  def test_filters_multiplier_scales_the_widths(self):
    architecture = runs.search().architecture
    base = runs.config(f'--architecture={architecture}', '--model_dir=x')
    wide = runs.config(f'--architecture={architecture}', '--model_dir=x',
                       '--filters_multiplier=2')
    narrow_arch = network.build_architecture(base)
    wide_arch = network.build_architecture(wide)
    self.assertEqual([2 * b.filters for b in narrow_arch.blocks],
                     [b.filters for b in wide_arch.blocks])
    self.assertGreater(network.count_macs(wide, wide_arch),
                       2 * network.count_macs(base, narrow_arch))
    self.assertGreater(network.count_params(wide, wide_arch),
                       network.count_params(base, narrow_arch))


if __name__ == '__main__':
  absltest.main()
