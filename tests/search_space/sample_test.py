"""Tests for search_space/sample: uniform, seeded draws of a space."""

import collections
import itertools

from absl.testing import absltest
import numpy as np

from tunas_tf.search_space import mobile
from tunas_tf.search_space import sample
from tunas_tf.search_space import schema

SSD = 'digits_search'


class SampleTest(absltest.TestCase):

  def test_each_decision_is_uniform(self):
    space = mobile.get_search_space(SSD)
    counts = schema.num_choices(space)
    drawn = sample.sample_indices(SSD, 600, seed=0)
    columns = np.array([schema.parse_indices(i) for i in drawn])
    self.assertEqual(columns.shape, (600, len(counts)))
    for j, n in enumerate(counts):
      frequency = collections.Counter(columns[:, j].tolist())
      self.assertEqual(set(frequency), set(range(n)))  # Every choice drawn.
      for count in frequency.values():
        # Binomial(600, 1/n): within 5 standard deviations of the mean.
        mean = 600 / n
        self.assertLessEqual(abs(count - mean),
                             5 * np.sqrt(mean * (1 - 1 / n)))

  def test_draws_are_seeded_and_sample_indices_formats_them(self):
    def first_four(seed):
      return list(itertools.islice(sample.draws(SSD, seed), 4))
    first = first_four(3)
    self.assertEqual(first, first_four(3))
    self.assertNotEqual(first, first_four(4))
    self.assertEqual(sample.sample_indices(SSD, 4, seed=3),
                     [schema.format_indices(i) for i in first])

  def test_draws_are_one_randint_per_index_in_visit_order(self):
    # The definition: one `randint(n)` per OneOf, in visit order, draw after
    # draw (1-choice OneOfs draw nothing); `draws` makes them per draw.
    counts = [1, 3, 1, 2, 7, 4]
    rng, reference = (np.random.RandomState(5) for _ in range(2))
    for _ in range(50):
      self.assertEqual(rng.randint(np.array(counts)).tolist(),
                       [int(reference.randint(n)) for n in counts])
    for ssd in sorted(mobile.SEARCH_SPACES):
      counts = schema.num_choices(mobile.get_search_space(ssd))
      reference = np.random.RandomState(2)
      for drawn in itertools.islice(sample.draws(ssd, 2), 5):
        self.assertEqual(drawn, [int(reference.randint(n)) for n in counts])
        self.assertTrue(all(type(i) is int for i in drawn))  # pylint: disable=unidiomatic-typecheck

  def test_bad_arguments(self):
    for num in (0, -3, True, 1.5):
      with self.assertRaisesRegex(ValueError, 'num must be a positive int'):
        sample.sample_indices(SSD, num)
    with self.assertRaisesRegex(ValueError, 'Unknown search space'):
      sample.sample_indices('nope', 1)
    with self.assertRaisesRegex(ValueError, 'Unknown search space'):
      sample.draws('nope')  # At once, not at the first draw.


if __name__ == '__main__':
  absltest.main()
