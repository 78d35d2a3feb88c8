"""Finding the TPU a run names (`--tpu`: local, grpc://HOST:PORT or a name),
every failure in one line before anything is written (docs/tpu.md).
"""

from __future__ import annotations

import functools
import glob
import re
import socket
import urllib.error
import urllib.request
from typing import Any, Optional, Tuple

from tunas_tf.io import errors

LOCAL = 'local'
_GRPC = 'grpc://'
# The devices of a TPU VM: /dev/accel0.. (v2-v4), /dev/vfio/0.. (v5e on).
_DEVICE_PATTERNS = ('/dev/accel[0-9]*', '/dev/vfio/[0-9]*')
_METADATA_URL = 'http://metadata.google.internal/computeMetadata/v1/'
_TIMEOUT_S = 5.0


class TpuError(ValueError):
  """A TPU that cannot be used; its message is one line naming it."""


def local_devices(patterns=_DEVICE_PATTERNS) -> list:
  """The TPU device files of this machine."""
  return sorted(path for pattern in patterns for path in glob.glob(pattern))


def parse_address(tpu: str) -> Tuple[str, int]:
  """(host, port) of `grpc://HOST:PORT`; TpuError without both."""
  rest = tpu[len(_GRPC):]
  host, sep, port = rest.rpartition(':')
  if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
    raise TpuError(f'--tpu={tpu} is not an address grpc://HOST:PORT (e.g. '
                   'grpc://10.0.0.2:8470)')
  return host, int(port)


def _check_reachable(tpu: str, timeout: float) -> None:
  host, port = parse_address(tpu)
  try:
    socket.create_connection((host, port), timeout=timeout).close()
  except OSError as e:
    raise TpuError(
        f'--tpu={tpu}: no TPU answers there ({errors.one_line(e)}); check '
        'the address and that the TPU is up (TPU Nodes reached end of life in '
        '2025: on a TPU VM use --tpu=local)') from None


def _metadata(path: str, timeout: float) -> str:
  request = urllib.request.Request(_METADATA_URL + path,
                                   headers={'Metadata-Flavor': 'Google'})
  with urllib.request.urlopen(request, timeout=timeout) as response:
    return response.read().decode('utf-8')


def _project_and_zone(tpu: str, project: Optional[str], zone: Optional[str],
                      timeout: float) -> Tuple[str, str]:
  """The given project and zone, the missing ones from the VM's metadata."""
  try:
    if not project:
      project = _metadata('project/project-id', timeout)
    if not zone:
      zone = _metadata('instance/zone', timeout).split('/')[-1]
  except (OSError, urllib.error.URLError) as e:
    raise TpuError(
        f'--tpu={tpu}: cannot find its project and zone '
        f'({errors.one_line(e)} from the metadata server: this is not a '
        'Google Cloud VM); give '
        '--gcp_project and --tpu_zone') from None
  return project, zone


def api_service(tpu: str, credentials: Any = None, http: Any = None):
  """The Cloud TPU API (v1) service, built with google-auth `credentials`
  (default: application-default ones; TF 2.15's own client needs the absent
  `oauth2client`) or an `httplib2.Http`; TpuError without credentials."""
  from googleapiclient import discovery  # pylint: disable=g-import-not-at-top
  if http is None and credentials is None:
    import google.auth  # pylint: disable=g-import-not-at-top
    import google.auth.exceptions  # pylint: disable=g-import-not-at-top
    try:
      credentials, _ = google.auth.default(
          scopes=['https://www.googleapis.com/auth/cloud-platform'])
    except google.auth.exceptions.GoogleAuthError as e:
      raise TpuError(
          f'--tpu={tpu}: no Google Cloud credentials ({errors.one_line(e)});'
          ' on a Cloud VM its service account provides them, elsewhere run '
          '`gcloud auth application-default login`') from None
  return discovery.build('tpu', 'v1', credentials=credentials, http=http,
                         cache_discovery=False, static_discovery=True)


def resolve(tpu: str, zone: Optional[str] = None,
            project: Optional[str] = None, *, service: Any = None,
            timeout: float = _TIMEOUT_S):
  """The `TPUClusterResolver` of `tpu` after every lookup the engines make
  later succeeded (`zone`, `project` None: the VM's; `service` default
  `api_service(tpu)`; `timeout` seconds per network answer).

  Raises:
    TpuError: one line naming the TPU, what failed and what to check.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  resolver_type = tf.distribute.cluster_resolver.TPUClusterResolver
  if tpu == LOCAL:
    if not local_devices():
      raise TpuError(
          '--tpu=local: this machine has no TPU (no /dev/accel* or /dev/vfio '
          "device); it names a Cloud TPU VM's own TPU: run on the TPU VM, or "
          'give the TPU by name')
    return resolver_type(LOCAL)
  if tpu.startswith(_GRPC):
    _check_reachable(tpu, timeout)
    return resolver_type(tpu)
  if '://' in tpu or '/' in tpu or not tpu.strip():
    raise TpuError(f'--tpu={tpu!r} is neither local, grpc://HOST:PORT nor a '
                   'TPU name')
  project, zone = _project_and_zone(tpu, project, zone, timeout)
  where = f'project {project}, zone {zone}'
  if service is None:
    service = api_service(tpu)
  try:
    resolver = resolver_type(tpu, zone=zone, project=project, service=service)
    resolver.cluster_spec()  # Looks the TPU up; checks that it is READY.
  except RuntimeError as e:  # TF's client: 'TPU "x" is not yet ready ...'.
    raise TpuError(
        f'--tpu={tpu} ({where}) is not READY: {errors.one_line(e)}; wait for '
        f'it or check it with `gcloud compute tpus tpu-vm describe {tpu} '
        f'--zone={zone}`') from None
  except Exception as e:  # pylint: disable=broad-except
    # TF's client wraps every API error (unknown name, no permission, no
    # network) in a ValueError whose text ends with the API's answer.
    raise TpuError(
        f'--tpu={tpu}: the Cloud TPU API cannot look it up in {where} '
        f'({_api_reason(e)}); check the name, zone and project (`gcloud '
        f'compute tpus tpu-vm list --zone={zone}`), the credentials and the '
        'network') from None
  return resolver


def _api_reason(error: Exception) -> str:
  """The API's own words from TF's wrapped error, else its first line."""
  text = errors.one_line(error)
  # An HttpError reads '<HttpError 404 when requesting URL returned "why".
  # Details: ...>'.
  match = re.search(r'<HttpError (\d+) .*? returned "([^"]*)"', text)
  if match:
    return f'HTTP {match.group(1)}: {match.group(2)}'
  return text.split('Exception: ', 1)[-1][:300]


# `resolve` once per process for each (tpu, zone, project).
_cached_resolve = functools.lru_cache(maxsize=None)(resolve)


def cluster_resolver(job: Any):
  """`resolve` of a `jobs.JobConfig`'s TPU, once per process for each (tpu,
  zone, project); None off TPU; TpuError (a ValueError) as `resolve`."""
  if not job.use_tpu:
    return None
  return _cached_resolve(job.tpu, job.tpu_zone, job.gcp_project)
