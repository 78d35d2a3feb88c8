"""Tests for tunas_tf/cloud_tpu: finding a TPU, and refusing in one line.

The Cloud TPU API is answered by `googleapiclient.http.HttpMockSequence`,
through the service `cloud_tpu.api_service` builds with what setup.py
installs (google-api-python-client, google-auth; not oauth2client, which
TF's bundled client would need to build one itself).
"""

import json
import os
import socket
import tempfile
from unittest import mock

from absl.testing import absltest
from googleapiclient import http as api_http

from tunas_tf.runtime import cloud_tpu

_NODE = {
    'name': 'projects/p/locations/z/nodes/my-pod', 'state': 'READY',
    'networkEndpoints': [{'ipAddress': '10.0.0.2', 'port': 8470},
                         {'ipAddress': '10.0.0.3', 'port': 8470}]}


def _service(*responses):
  """The TPU API service answering each request with the next response."""
  answers = [({'status': str(status)}, json.dumps(body))
             for status, body in responses]
  return cloud_tpu.api_service('t', http=api_http.HttpMockSequence(answers))


def _closed_port() -> int:
  """A local port nothing listens on (bound, then closed)."""
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


class ByNameTest(absltest.TestCase):

  def test_a_ready_tpu_resolves_to_every_host_of_the_slice(self):
    # cluster_spec() looks the TPU up once per call: resolve checks it once,
    # and the Estimator's RunConfig asks for the master again.
    service = _service((200, _NODE), (200, _NODE), (200, _NODE))
    resolver = cloud_tpu.resolve('my-pod', 'z', 'p', service=service)
    self.assertEqual(resolver.cluster_spec().as_dict(),
                     {'worker': ['10.0.0.2:8470', '10.0.0.3:8470']})
    self.assertEqual(resolver.master(), 'grpc://10.0.0.2:8470')

  def test_the_request_names_project_zone_and_tpu(self):
    sequence = api_http.HttpMockSequence([({'status': '200'},
                                           json.dumps(_NODE))])
    service = cloud_tpu.api_service('my-pod', http=sequence)
    request = service.projects().locations().nodes().get(
        name='projects/p/locations/z/nodes/my-pod')
    self.assertEqual(
        request.uri,
        'https://tpu.googleapis.com/v1/projects/p/locations/z/nodes/my-pod'
        '?alt=json')

  def test_not_ready_is_one_line_with_the_state(self):
    with self.assertRaises(cloud_tpu.TpuError) as caught:
      cloud_tpu.resolve('my-pod', 'z', 'p', service=_service(
          (200, dict(_NODE, state='CREATING'))))
    line = str(caught.exception)
    self.assertNotIn('\n', line)
    self.assertRegex(line, r'^--tpu=my-pod \(project p, zone z\) is not '
                     r'READY: .*state: "CREATING"; wait for it')

  def test_an_unknown_name_is_one_line_with_the_api_answer(self):
    error = {'error': {'code': 404, 'status': 'NOT_FOUND', 'message':
                       'Resource projects/p/locations/z/nodes/nope not found'}}
    with self.assertRaises(cloud_tpu.TpuError) as caught:
      cloud_tpu.resolve('nope', 'z', 'p', service=_service((404, error)))
    self.assertEqual(
        str(caught.exception),
        '--tpu=nope: the Cloud TPU API cannot look it up in project p, zone z '
        '(HTTP 404: Resource projects/p/locations/z/nodes/nope not found); '
        'check the name, zone and project (`gcloud compute tpus tpu-vm list '
        '--zone=z`), the credentials and the network')

  def test_without_project_and_zone_off_cloud(self):
    with mock.patch.object(socket, 'create_connection',
                           side_effect=OSError(101, 'Network is unreachable')):
      with self.assertRaisesRegex(
          cloud_tpu.TpuError, r'^--tpu=my-pod: cannot find its project and '
          r'zone \(.*Network is unreachable.*\); give --gcp_project and '
          r'--tpu_zone$'):
        cloud_tpu.resolve('my-pod')

  def test_without_credentials(self):
    empty = tempfile.mkdtemp()
    env = {'GOOGLE_APPLICATION_CREDENTIALS': os.path.join(empty, 'none.json')}
    with mock.patch.dict(os.environ, env):
      with self.assertRaisesRegex(cloud_tpu.TpuError,
                                  r'^--tpu=my-pod: no Google Cloud '
                                  r'credentials \(.*none.json.*\); on a Cloud '
                                  r'VM its service account provides them'):
        cloud_tpu.resolve('my-pod', 'z', 'p')

  def test_the_service_builds_with_google_auth_credentials(self):
    from google.auth import credentials  # pylint: disable=g-import-not-at-top
    service = cloud_tpu.api_service(
        'my-pod', credentials=credentials.AnonymousCredentials())
    self.assertTrue(hasattr(service.projects().locations().nodes(), 'get'))


class LocalAndAddressTest(absltest.TestCase):

  def test_local_needs_tpu_devices(self):
    with mock.patch.object(cloud_tpu, 'local_devices', return_value=[]):
      with self.assertRaisesRegex(cloud_tpu.TpuError,
                                  r'^--tpu=local: this machine has no TPU'):
        cloud_tpu.resolve('local')
    with mock.patch.object(cloud_tpu, 'local_devices',
                           return_value=['/dev/accel0']):
      resolver = cloud_tpu.resolve('local')
    self.assertEqual(resolver.master(), '')

  def test_local_devices_are_accel_or_vfio_files(self):
    root = tempfile.mkdtemp()
    for name in ('accel0', 'accel1', 'vfio_0', 'other'):
      open(os.path.join(root, name), 'w').close()
    found = cloud_tpu.local_devices((os.path.join(root, 'accel[0-9]*'),))
    self.assertEqual([os.path.basename(p) for p in found],
                     ['accel0', 'accel1'])

  def test_an_address_where_nothing_answers(self):
    port = _closed_port()
    with self.assertRaisesRegex(
        cloud_tpu.TpuError, rf'^--tpu=grpc://127.0.0.1:{port}: no TPU '
        r'answers there \(.*refused\); check the address'):
      cloud_tpu.resolve(f'grpc://127.0.0.1:{port}')

  def test_an_address_that_answers(self):
    with socket.socket() as server:
      server.bind(('127.0.0.1', 0))
      server.listen(1)
      port = server.getsockname()[1]
      resolver = cloud_tpu.resolve(f'grpc://127.0.0.1:{port}')
    self.assertEqual(resolver.master(), f'grpc://127.0.0.1:{port}')

  def test_malformed(self):
    for tpu in ('grpc://10.0.0.2', 'grpc://:8470', 'grpc://h:port',
                'grpc://h:0'):
      with self.assertRaisesRegex(cloud_tpu.TpuError,
                                  'is not an address grpc://HOST:PORT'):
        cloud_tpu.resolve(tpu)
    for tpu in ('http://10.0.0.2:8470', 'a/b', ' '):
      with self.assertRaisesRegex(cloud_tpu.TpuError, 'is neither local'):
        cloud_tpu.resolve(tpu)


if __name__ == '__main__':
  absltest.main()
