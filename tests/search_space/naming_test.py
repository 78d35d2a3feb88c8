"""Tests for search_space/naming.py: the name contract and the constants."""

import subprocess
import sys

from absl.testing import absltest

from tunas_tf.search_space import naming


class NamingTest(absltest.TestCase):

  def test_layer_and_part_names(self):
    prefix = naming.layer_prefix(2, 1)
    self.assertEqual(prefix, 'blocks/2/layers/1')
    self.assertEqual(naming.block_filters_path(3), 'blocks/3/filters')
    self.assertEqual(naming.join(prefix, naming.conv_part(3)),
                     'blocks/2/layers/1/conv_k3')
    self.assertEqual(naming.join(prefix, naming.depthwise_part(5)),
                     'blocks/2/layers/1/depthwise_k5')
    self.assertEqual(
        naming.variable_name(naming.join(prefix, naming.SE_REDUCE),
                             naming.KERNEL),
        'blocks/2/layers/1/se/reduce/kernel')
    self.assertEqual(
        naming.variable_name(
            naming.batch_norm_name(naming.join(prefix, naming.EXPAND)),
            naming.GAMMA),
        'blocks/2/layers/1/expand/bn/gamma')
    self.assertEqual(naming.variable_name(naming.CLASSIFIER, naming.BIAS),
                     'classifier/bias')
    self.assertEqual(naming.join(prefix, naming.SE, 'pool'),
                     'blocks/2/layers/1/se/pool')

  def test_join_skips_empty_names(self):
    self.assertEqual(naming.join('', 'a', '', 'b'), 'a/b')
    self.assertEqual(naming.join(), '')

  def test_constants(self):
    self.assertEqual(naming.MODES, ('masked', 'sampled'))
    self.assertEqual(naming.BATCH_NORM_EPSILON, 1e-3)
    self.assertEqual(naming.SE_RATIO, 0.25)
    self.assertEqual(naming.CLASSIFIER_STDDEV, 0.01)
    # The supernet's 8-decimal constant, exactly (seeded values depend on it).
    self.assertEqual(naming.TRUNCATED_NORMAL_STDDEV, 0.87962566)

  def test_imports_no_tensorflow(self):
    # search_space/ is plain Python: a fresh interpreter that imports naming
    # has not loaded TensorFlow.
    code = ('import sys, tunas_tf.search_space.naming; '
            'print("tensorflow" in sys.modules)')
    result = subprocess.run([sys.executable, '-c', code], check=True,
                            capture_output=True, text=True)
    self.assertEqual(result.stdout.strip(), 'False')


if __name__ == '__main__':
  absltest.main()
