"""Tests of `train_eval.steps` that need no Estimator."""

import math

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
    variables = steps.variables_to_train(model, None, False)
    self.assertEqual(variables.var_list, [trainable])
    self.assertEqual(variables.inherited, [])

  def test_example_metrics_by_hand(self):
    # Three classes (k = 3: top-5 is every class); example 0 right, example
    # 1 wrong, example 2 the padding of a TPU's last batch (all-zero label).
    labels = tf.constant([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    logits = tf.constant([[0.0, 2.0, 0.0], [0.0, 0.0, 3.0], [5.0, 0.0, 0.0]])
    m = steps.example_metrics(labels, logits, num_classes=3)
    self.assertAllEqual(m.weight, [1.0, 1.0, 0.0])
    self.assertAllEqual(m.correct, [1.0, 0.0, 1.0])
    self.assertAllEqual(m.in_top_k, [1.0, 1.0, 1.0])
    # -log softmax of the label's logit: log(2 + e^2) - 2, log(2 + e^3).
    self.assertAllClose(m.cross_entropy[:2],
                        [math.log(2 + math.e**2) - 2, math.log(2 + math.e**3)])
    # Ten classes: top-k is top-5; the label's logit second is no miss.
    ten = tf.one_hot([3], 10)
    close = steps.example_metrics(ten, tf.one_hot([4], 10) * 2.0 + ten, 10)
    self.assertAllEqual(close.correct, [0.0])
    self.assertAllEqual(close.in_top_k, [1.0])


if __name__ == '__main__':
  absltest.main()
