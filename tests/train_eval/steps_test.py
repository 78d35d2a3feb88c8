"""Tests of `train_eval.steps` that need no Estimator."""

from absl.testing import absltest
import tensorflow as tf

from tunas_tf.graph import from_spec
from tunas_tf.train_eval import steps


class _FakeModel:

  def __init__(self, op_variables):
    self.op_variables = op_variables


class StepsTest(tf.test.TestCase):

  def test_regularization_loss_halves_the_strength_and_skips_the_classifier(
      self):
    model = _FakeModel({
        'stem': {'kernel': tf.constant([[1.0, 2.0]]), 'bias': tf.ones([2])},
        'conv': {'kernel': tf.constant([3.0])},
        from_spec.CLASSIFIER_NAME: {'kernel': tf.constant([100.0])},
    })
    # 0.1 / 2 * (1 + 4 + 9) = 0.7; biases and the classifier are left out.
    self.assertAllClose(steps.regularization_loss(model, 0.1), 0.7)
    self.assertAllClose(steps.regularization_loss(model, 0.0), 0.0)

  def test_variables_to_train_without_inheritance(self):
    trainable = tf.Variable(1.0)
    frozen = tf.Variable(1.0, trainable=False)
    model = _FakeModel({'a': {'kernel': trainable, 'moving_mean': frozen}})
    variables = steps.variables_to_train(model, None, False, True)
    self.assertEqual(variables.var_list, [trainable])
    self.assertEqual(variables.inherited, [])


if __name__ == '__main__':
  absltest.main()
