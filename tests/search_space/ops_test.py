"""Tests for search_space/ops: the choice labels tables and tags use."""

from absl.testing import absltest

from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema


class ChoiceLabelTest(absltest.TestCase):

  def test_labels_of_each_kind_of_choice(self):
    self.assertEqual(ops.choice_label(24), '24')
    self.assertEqual(ops.choice_label(0.5), '0.5')
    self.assertEqual(ops.choice_label(ops.FilterMultiplier(6.0)), 'x6')
    self.assertEqual(ops.choice_label(ops.FilterMultiplier(2.5)), 'x2.5')
    self.assertEqual(ops.choice_label(ops.ZeroSpec()), 'skip')
    self.assertEqual(ops.choice_label(True), 'on')
    self.assertEqual(ops.choice_label(ops.ActivationSpec(ops.SWISH6)),
                     'swish6')
    self.assertEqual(ops.choice_label(ops.ConvSpec(kernel_size=3, strides=1)),
                     'Conv')

  def test_repeated_labels_get_their_index(self):
    convs = (ops.ConvSpec(kernel_size=3, strides=1),
             ops.ConvSpec(kernel_size=5, strides=1), ops.ZeroSpec())
    self.assertEqual(ops.choice_labels(convs), ('Conv#0', 'Conv#1', 'skip'))

  def test_every_registered_space_has_unique_labels_per_decision(self):
    for ssd in mobile.SEARCH_SPACES:
      for path, oneof in schema.flatten_with_paths(
          mobile.get_search_space(ssd)):
        labels = ops.choice_labels(oneof.choices)
        self.assertLen(set(labels), len(labels), f'{ssd} {path}')
        self.assertTrue(all(labels), f'{ssd} {path}')


if __name__ == '__main__':
  absltest.main()
