"""TFDS datasets by name: prepared, downloaded and prepared, or refused in one
line saying how to prepare it offline, leaving no directory behind."""

from __future__ import annotations

import os
import socket
from typing import Optional
import urllib.parse

import tensorflow as tf

from tunas_tf.io import commands

# Seconds to wait for a download host before calling a dataset unreachable.
_CONNECT_TIMEOUT_S = 5.0
_PROXY_VARIABLES = ('https_proxy', 'HTTPS_PROXY', 'http_proxy', 'HTTP_PROXY',
                    'all_proxy', 'ALL_PROXY')


def _unreachable_host(builder) -> Optional[str]:
  """'host: why' of the first download host not reached within
  `_CONNECT_TIMEOUT_S`, or None (all reachable, none known, or a proxy set)."""
  if any(os.environ.get(name) for name in _PROXY_VARIABLES):
    return None
  try:
    urls = list(builder.url_infos or {})
  except Exception:  # pylint: disable=broad-except
    urls = []  # No registered checksums: TFDS will say what it lacks.
  hosts = sorted({(u.hostname, u.port or (80 if u.scheme == 'http' else 443))
                  for u in map(urllib.parse.urlparse, urls) if u.hostname})
  for host, port in hosts:
    try:
      with socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S):
        pass
    except OSError as e:
      return f'{host}: {e.strerror or e}'
  return None


def _prepare_offline_hint(name: str) -> str:
  return (f'prepare it where there is network with `tfds build {name} '
          '--data_dir=DIR`, copy DIR here and pass --data_dir=DIR')


def _download_and_prepare(builder, name: str, root: str, where: str) -> None:
  """`builder.download_and_prepare()`; a failure is one ValueError line and
  leaves none of the directories this call created under `root`."""
  made = [path for path in (root, os.path.join(root, 'downloads'),
                            os.path.join(root, name))
          if not tf.io.gfile.exists(path)]
  try:
    builder.download_and_prepare()
  except Exception as e:  # pylint: disable=broad-except
    for path in made:
      if tf.io.gfile.exists(path):
        tf.io.gfile.rmtree(path)
    reason = str(e).strip().splitlines()[0] if str(e).strip() else ''
    raise ValueError(f'Dataset {name!r} could not be downloaded and prepared '
                     f'in {where} ({type(e).__name__}: {reason[:300]}); '
                     f'{_prepare_offline_hint(name)}') from None


def tfds_builder(name: str, data_dir: Optional[str], download: bool):
  """The prepared TFDS builder of `name` (downloading only if `download`);
  ValueError for an unknown name, or an unprepared dataset when downloads
  are off, the host is unreachable or the download fails."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  try:
    builder = tfds.builder(name, data_dir=data_dir)
  except Exception as e:  # TFDS raises its own DatasetNotFoundError.
    # An unregistered name is looked up as a prepared dataset in data_dir
    # (what tools/import_dataset writes).
    prepare = commands.module_command('tunas_tf.tools.import_dataset')
    raise ValueError(f'Unknown dataset {name!r}: not \'digits\', not a '
                     'registered TFDS dataset and not prepared in '
                     f'data_dir={data_dir!r} ({type(e).__name__}); '
                     f'`{prepare}` prepares local data') from None
  # TFDS's own check warns 'Variant folder ... has no dataset_info.json' for
  # a version folder that does not exist, beside this module's line.
  if (tf.io.gfile.exists(os.fspath(builder.data_path)) and
      builder.is_prepared()):
    return builder
  root = data_dir or tfds.core.constants.DATA_DIR
  where = f'data_dir={root!r}'
  if not download:
    raise ValueError(
        f'Dataset {name!r} is not prepared in {where} and downloads are off '
        f'(--nodownload); {_prepare_offline_hint(name)}, or allow downloads')
  unreachable = _unreachable_host(builder)
  if unreachable:
    raise ValueError(f'Dataset {name!r} is not prepared in {where} and '
                     f'cannot be downloaded ({unreachable}); '
                     f'{_prepare_offline_hint(name)}')
  _download_and_prepare(builder, name, root, where)
  return builder
