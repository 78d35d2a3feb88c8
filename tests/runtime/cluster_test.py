"""Tests of `runtime.cluster`: which worker TF_CONFIG makes this process."""

import json
import os
from unittest import mock

from absl.testing import absltest

from tunas_tf.runtime import cluster

_TWO = {'worker': ['localhost:1234', 'localhost:1235']}


def _tf_config(cluster_spec, task_type='worker', index=0) -> str:
  return json.dumps({'cluster': cluster_spec,
                     'task': {'type': task_type, 'index': index}})


class ClusterTest(absltest.TestCase):

  def test_worker_0_is_the_chief_unless_there_is_one(self):
    self.assertEqual(cluster.parse(_tf_config(_TWO)),
                     cluster.Worker('worker', 0, 2, True))
    second = cluster.parse(_tf_config(_TWO, index=1))
    self.assertEqual(second, cluster.Worker('worker', 1, 2, False))
    self.assertEqual(second.text(), 'worker 1 of a cluster of 2')
    with_chief = dict(_TWO, chief=['host:1'])
    self.assertFalse(cluster.parse(_tf_config(with_chief)).chief)
    self.assertEqual(cluster.parse(_tf_config(with_chief, 'chief')),
                     cluster.Worker('chief', 0, 3, True))

  def test_unset_or_empty_is_no_cluster_and_the_chief(self):
    for env in ({}, {'TF_CONFIG': ''}, {'TF_CONFIG': ' \n'}):
      with mock.patch.dict(os.environ, env, clear=True):
        self.assertIsNone(cluster.worker())
        self.assertTrue(cluster.is_chief())
    with mock.patch.dict(os.environ,
                         TF_CONFIG=_tf_config(_TWO, index=1)):
      self.assertFalse(cluster.is_chief())

  def test_malformed_is_refused_in_one_line(self):
    for text, why in [
        ('x', 'not JSON'),
        ('[1]', 'not a JSON object'),
        ('{}', 'no "cluster" object'),
        ('{"cluster": {}}', 'no "cluster" object'),
        (_tf_config({'ps': ['h:1'], 'worker': ['h:2']}),
         "jobs ['ps']: only \"chief\" and \"worker\" train"),
        (_tf_config({'worker': ['localhost']}),
         '"worker" must be a list of "host:port"'),
        (_tf_config({'worker': 'h:1'}), '"worker" must be a list of'),
        (_tf_config({'worker': []}), '"worker" must be a list of'),
        (_tf_config({'worker': ['h:99999']}), '"worker" must be a list of'),
        (_tf_config({'chief': ['h:1', 'h:2'], 'worker': ['h:3']}, 'chief'),
         'more than one "chief"'),
        (json.dumps({'cluster': _TWO}), 'no "task" object'),
        (_tf_config(_TWO, 'chief'),
         "task type 'chief' is not a job of the cluster"),
        (_tf_config(_TWO, index=2),
         'task index 2 is not one of the 2 "worker" tasks'),
        (_tf_config(_TWO, index='1'), "task index '1' is not one of"),
        (_tf_config(_TWO, index=True), 'task index True is not one of'),
    ]:
      with mock.patch.dict(os.environ, TF_CONFIG=text), \
          self.assertRaises(ValueError) as raised:
        cluster.worker()
      line = str(raised.exception)
      self.assertStartsWith(line, 'TF_CONFIG is not a multi-worker cluster '
                            f'({why}')
      self.assertNotIn('\n', line)


if __name__ == '__main__':
  absltest.main()
