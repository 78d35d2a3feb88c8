"""Synthetic latency measurements and CSVs for the cost-model tests."""

import json
import os
import stat
import sys

import numpy as np

from tunas_tf.search import random_search

SSD = 'digits_search'  # 18 decisions, 744 coupled features.
HEADER = 'indices,latency_ms,spread_ms'
# How the synthetic rows were "measured" (`provenance.Provenance`).
SETTINGS = {'ssd': SSD, 'image_size': 8, 'num_classes': 10,
            'input_channels': 1, 'backend': 'tflite', 'num_threads': 1,
            'cpus': [0], 'device': 'a test CPU, 2 cores'}


def write_csv(path, indices, latencies, header=HEADER, settings=SETTINGS):
  """Writes a latency CSV with `header`, one row per architecture, and
  `settings` beside it (none if None)."""
  with open(path, 'w') as f:
    f.write(header + '\n')
    for i, latency in zip(indices, latencies):
      f.write(f'{i},{latency},0.01\n')
  if settings is not None:
    with open(path + '.settings.json', 'w') as f:
      json.dump(settings, f)


def synthetic(num, seed, noise=1e-3):
  """Architectures whose latency is exactly linear in the features, + noise.

  The latency is the architecture's MAC count / 1e4 (9 to 64 "ms" in
  digits_search), times (1 + noise * N(0, 1)).

  Returns:
    (indices, noisy latencies, exact latencies).
  """
  kept = random_search.sample_architectures(SSD, num, seed=seed,
                                            cost_model='macs')
  indices = [k['indices'] for k in kept]
  exact = np.array([k['estimated_cost'] for k in kept]) / 1e4
  rng = np.random.RandomState(seed)
  return indices, exact * (1 + noise * rng.randn(num)), exact


def fake_device_script(directory, fail_after=None, output=None,
                       interrupt_at=None):
  """A device command: checks its argument is a TFLite file, prints
  benchmark_model's line with a latency of (file size / 1000) us; after
  `fail_after` calls it prints 'STARTING!' and exits 1 with adb's error on
  stderr (a device gone); `output` replaces the line; its call
  `interrupt_at` (from 0) sends its caller SIGINT first (Ctrl-C)."""
  path = os.path.join(directory, 'fake_device.py')
  counter = os.path.join(directory, 'calls')
  line = output or ('Inference timings in us: Init: 100, First inference: '
                    '50, Warmup (avg): 40, Inference (avg): {size}')
  with open(path, 'w') as f:
    f.write(f'''#!{sys.executable}
import os, sys
path = sys.argv[1] if len(sys.argv) == 2 else ''
head = open(path, 'rb').read(8) if os.path.isfile(path) else b''
if not path.endswith('.tflite') or head[4:8] != b'TFL3':
  sys.exit('fake device: not a TFLite file: ' + repr(sys.argv[1:]))
calls = 0
if os.path.exists({counter!r}):
  calls = int(open({counter!r}).read())
open({counter!r}, 'w').write(str(calls + 1))
if calls == {interrupt_at!r}:
  import signal, time
  os.kill(os.getppid(), signal.SIGINT)
  time.sleep(5)
fail_after = {fail_after!r}
if fail_after is not None and calls >= fail_after:
  print('STARTING!', flush=True)
  sys.exit('error: no devices/emulators found')
print('STARTING!')
print({line!r}.format(size=os.path.getsize(path) / 1000))
''')
  os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
  return path
