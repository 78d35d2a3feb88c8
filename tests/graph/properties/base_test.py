"""Tests for the AbstractProperty base: p validation, satisfaction, verify."""

import random

import tensorflow as tf

from tunas_tf.graph.properties import base


class _Fixed(base.AbstractProperty):
  """A property whose inferred value and distance are fixed numbers."""

  def __init__(self, value=0.0, fail=False, **kwargs):
    super().__init__(**kwargs)
    self.value, self.fail = value, fail

  def infer(self, subgraph_model, abstract=True):
    if self.fail:
      raise RuntimeError('cannot infer')
    return _Fixed(subgraph_model)

  def mutate(self, rng=None):
    return _Fixed(self.value + (rng or random).random())

  def distance_from(self, other):
    if other.value is None:
      raise ValueError('undefined')
    return self.value - other.value


class AbstractPropertyTest(tf.test.TestCase):

  def test_init_rejects_p_outside_unit_interval(self):
    with self.assertRaisesRegex(ValueError, r'_Fixed: p must be in \[0, 1\]'):
      _Fixed(p=-0.1)
    self.assertEqual(_Fixed(p=1).p, 1.0)

  def test_is_satisfied_by(self):
    self.assertTrue(_Fixed(2.0).is_satisfied_by(_Fixed(3.0)))
    self.assertTrue(_Fixed(2.0).is_satisfied_by(_Fixed(2.0)))
    self.assertFalse(_Fixed(2.0).is_satisfied_by(_Fixed(1.0)))
    self.assertFalse(_Fixed(2.0).is_satisfied_by(_Fixed(None)))

  def test_verify_infers_on_candidate_and_maps_errors_to_false(self):
    self.assertTrue(_Fixed(2.0).verify(5.0))   # infers _Fixed(5.0)
    self.assertFalse(_Fixed(2.0).verify(1.0))
    self.assertFalse(_Fixed(2.0, fail=True).verify(5.0))


if __name__ == '__main__':
  tf.test.main()
