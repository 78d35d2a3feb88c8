"""Where architectures are timed (`make_device`): this host's TFLite
interpreter or TF function, or a device through a command printing
`benchmark_model`'s `Inference (avg): N`; converted models are cached
(`ModelCache`), threads and CPUs pinned (`pin_cpus`) and recorded."""


from __future__ import annotations

import dataclasses
import os
import re
import shlex
import subprocess
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from tunas_tf.io import checks
from tunas_tf.io import files
from tunas_tf.io import lite
from tunas_tf.cost_model import macs
from tunas_tf.cost_model import provenance as provenance_lib
from tunas_tf.latency import protocol as protocol_lib
from tunas_tf.latency.protocol import Device, Protocol, Row, Visit

TFLITE, TF, COMMAND = 'tflite', 'tf', 'command'
BACKENDS = (TFLITE, TF)
MODEL_PLACEHOLDER = '{model}'
# benchmark_model's summary line, e.g. 'Inference timings in us: Init: 3518,
# First inference: 1541, Warmup (avg): 1063.5, Inference (avg): 1041.23'.
_AVERAGE = re.compile(r'Inference \(avg\):\s*([0-9.eE+-]+)')


# indices -> (concrete single-image inference function, the network holding
# its variables): `graph.inference.builder(ssd, shape)`, passed in.
Build = Callable[[str], Tuple[Any, Any]]


class DeviceError(ValueError):
  """A device command failed or printed no latency (the message says how)."""


@dataclasses.dataclass(frozen=True)
class ModelCache:
  """Converted models, written once (atomically) to `directory/<ssd>_<size>px
  _<classes>c_<channels>ch[_int8]/<indices, ':' as '-'>.tflite`."""
  directory: str
  ssd: str
  shape: macs.InputSpec
  build: Optional[Build] = dataclasses.field(default=None, compare=False)
  precision: str = lite.FLOAT32

  def path(self, indices: str) -> str:
    s = self.shape
    folder = (f'{self.ssd}_{s.image_size}px_{s.num_classes}c_'
              f'{s.input_channels}ch' +
              ('' if self.precision == lite.FLOAT32 else f'_{self.precision}'))
    return os.path.join(self.directory, folder,
                        indices.replace(':', '-') + '.tflite')

  def get(self, indices: str) -> str:
    """The .tflite path of `indices`, converted first if not cached."""
    path = self.path(indices)
    if not files.exists(path):
      # Atomic: a killed conversion leaves no bad model.
      files.write_bytes(convert(self.build, indices, self.precision), path)
    return path


def convert(build: Build, indices: str, precision: str = lite.FLOAT32) -> bytes:
  """The TFLite flatbuffer of one architecture or unit (untrained, seeded);
  int8 with int8 input and output, calibrated on seeded images in [0, 1]
  (its time does not depend on the values). ValueError naming `indices` if
  the conversion fails."""
  concrete, net = build(indices)
  shape = concrete.inputs[0].shape.as_list()
  try:
    return lite.convert(concrete, net, precision, calibration=[
        _image(shape, seed) for seed in range(4)])
  except ValueError as e:
    raise ValueError(f'converting {indices}: {e}') from None


def _image(shape: Sequence[int], seed: int = 0) -> np.ndarray:
  return np.random.RandomState(seed).uniform(size=list(shape)).astype(
      np.float32)


def tflite_runner(model_path: str,
                  num_threads: int = 1) -> Callable[[], np.ndarray]:
  """Runs a .tflite model once per call on a fixed image (of the model's
  input shape: a network's, or a block-table unit's); returns its output."""
  with open(model_path, 'rb') as f:
    interpreter = lite.interpreter(f.read(), num_threads=num_threads)
  interpreter.allocate_tensors()
  details = interpreter.get_input_details()[0]
  output_index = interpreter.get_output_details()[0]['index']
  interpreter.set_tensor(details['index'],
                         lite.quantize(_image(details['shape']), details))

  def run():
    interpreter.invoke()
    return interpreter.get_tensor(output_index)

  return run


def tf_runner(build: Build, indices: str) -> Callable[[], np.ndarray]:
  """Runs the architecture's (or unit's) TF function once per call on a
  fixed image of its input shape; returns its output."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  concrete, _ = build(indices)
  tensor = tf.constant(_image(concrete.inputs[0].shape.as_list()))
  return lambda: concrete(tensor).numpy()


def parse_benchmark_output(text: str) -> float:
  """Latency (ms) from TFLite benchmark_model's output: the last
  'Inference (avg): N' (microseconds). Raises DeviceError if there is none."""
  found = _AVERAGE.findall(text)
  if not found:
    raise DeviceError('its output has no "Inference (avg): N" line (TFLite '
                      "benchmark_model's)")
  try:
    value = float(found[-1])
  except ValueError:
    value = float('nan')
  if not np.isfinite(value) or value <= 0:
    raise DeviceError(f'its "Inference (avg)" is {found[-1]!r}, not a '
                      'positive number of microseconds')
  return value / 1e3


def _output_tail(stdout: Any, stderr: Any) -> str:
  """"stderr 'a | b', stdout 'c'": the last 3 lines of a command's stderr
  (where adb and ssh say what went wrong) and the last of its stdout."""
  def tail(text, count):
    if isinstance(text, bytes):
      text = text.decode(errors='replace')
    lines = [line.strip()[:200] for line in (text or '').splitlines()
             if line.strip()]
    return ' | '.join(lines[-count:]) or '(none)'
  return f'stderr {tail(stderr, 3)!r}, stdout {tail(stdout, 1)!r}'


def make_device(ssd: str, shape: macs.InputSpec, protocol: Protocol,
                build: Build, *, backend: str = TFLITE, num_threads: int = 1,
                model_cache: Optional[str] = None,
                device_command: Optional[str] = None,
                command_timeout: float = 600.0,
                precision: str = lite.FLOAT32) -> Device:
  """The device that times architectures of `ssd` at `shape`.

  Args:
    backend: 'tflite' or 'tf' on this host; ignored with `device_command`.
    model_cache: directory of converted models (tflite and command).
    device_command: run per visit with `{model}` the .tflite path, its
      output read by `parse_benchmark_output`; after `command_timeout`
      seconds the device counts as gone.
    precision: one of `lite.PRECISIONS`.

  Raises:
    ValueError: an unknown backend or precision, int8 on 'tf', a command
      without `{model}` or that does not parse as a shell command line.
  """
  checks.one_of('precision', precision, list(lite.PRECISIONS))
  if device_command is not None:
    return _command_device(ssd, shape, build, device_command, model_cache,
                           command_timeout, precision)
  checks.one_of('backend', backend, list(BACKENDS))
  if backend == TF and precision != lite.FLOAT32:
    raise ValueError(f"backend 'tf' runs float32 only; {precision} is timed "
                     "as TFLite (backend 'tflite' or a device command)")
  if backend == TFLITE and not model_cache:
    raise ValueError('the tflite backend needs a model cache directory')
  cache = (ModelCache(model_cache, ssd, shape, build, precision)
           if model_cache else None)
  # A one-thread interpreter runs on the calling thread: its CPU time.
  clock = (time.thread_time if backend == TFLITE and num_threads == 1
           else time.process_time)

  def open_one(indices: str) -> Visit:
    run = (tflite_runner(cache.get(indices), num_threads)
           if backend == TFLITE else tf_runner(build, indices))

    def visit(first: bool) -> Tuple[float, float]:
      if first:
        protocol_lib.warm_up(run, protocol.runs, protocol.max_warmup_runs,
                             protocol.stable_tolerance, clock)
      else:
        for _ in range(protocol.warmup_runs):
          run()
      return protocol_lib.time_runs(run, protocol.runs, clock)[::2]

    return visit

  return Device(backend, host_settings(backend, num_threads, precision),
                open_one)


def _command_device(ssd: str, shape: macs.InputSpec, build: Build,
                    command: str, model_cache: Optional[str],
                    timeout: float, precision: str) -> Device:
  if MODEL_PLACEHOLDER not in command:
    raise ValueError(f'--device_command {command!r} has no {MODEL_PLACEHOLDER}'
                     ' (where the .tflite path goes)')
  try:
    argv = shlex.split(command)
  except ValueError as e:
    raise ValueError(f'--device_command {command!r} does not parse: {e}'
                     ) from None
  if not model_cache:
    raise ValueError('a device command needs a model cache directory')
  cache = ModelCache(model_cache, ssd, shape, build, precision)

  def open_one(indices: str) -> Visit:
    path = cache.get(indices)
    args = [a.replace(MODEL_PLACEHOLDER, path) for a in argv]

    def visit(first: bool) -> Tuple[float, float]:
      del first  # benchmark_model warms up itself.
      # DeviceError quoting the command's output (`_output_tail`).
      what = f'device command for {indices}'
      try:
        done = subprocess.run(args, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
      except FileNotFoundError:
        raise DeviceError(f'{what}: {args[0]!r} not found') from None
      except PermissionError:
        raise DeviceError(f'{what}: {args[0]!r} is not executable') from None
      except subprocess.TimeoutExpired as e:
        raise DeviceError(f'{what}: no answer within {timeout:g} s (device '
                          f'gone?): {_output_tail(e.stdout, e.stderr)}'
                          ) from None
      tail = _output_tail(done.stdout, done.stderr)
      if done.returncode != 0:
        raise DeviceError(f'{what} exited with {done.returncode}: {tail}')
      try:
        return parse_benchmark_output(done.stdout + '\n' + done.stderr), 0.0
      except DeviceError as e:
        raise DeviceError(f'{what}: {e}: {tail}') from None

    return visit

  settings = {'backend': COMMAND, 'device_command': command,
              'device': f'command: {command}', 'precision': precision}
  return Device(COMMAND, settings, open_one)


def host_settings(backend: str, num_threads: int,
                  precision: str) -> Dict[str, Any]:
  """This host as the rows' context: backend, threads, CPUs, CPU model,
  precision."""
  import platform  # pylint: disable=g-import-not-at-top
  name = platform.processor() or platform.machine()
  try:
    with open('/proc/cpuinfo') as f:
      name = next((line.split(':', 1)[1].strip() for line in f
                   if line.startswith('model name')), name)
  except OSError:
    pass
  return {'backend': backend, 'num_threads': num_threads,
          'cpus': sorted(os.sched_getaffinity(0)),
          'device': f'{name}, {os.cpu_count()} cores', 'precision': precision}


def pin_cpus(cpus: Sequence[int]) -> List[int]:
  """Pins this process (and threads it starts later) to `cpus`, sorted;
  ValueError for CPUs this process may not use."""
  allowed = sorted(os.sched_getaffinity(0))
  bad = [c for c in cpus if c not in allowed]
  if bad or not cpus:
    raise ValueError(f'--cpus {list(cpus)}: this process may use CPUs '
                     f'{allowed}')
  os.sched_setaffinity(0, set(cpus))
  return sorted(cpus)


def measure_one(ssd: str, indices: str,
                measured_with: provenance_lib.Provenance, model_cache: str,
                build_for: Callable[[str, macs.InputSpec], Build],
                protocol: Protocol = Protocol()) -> Row:
  """Times one architecture as a fitted model's rows were (`measured_with`):
  same backend, threads, CPUs or device command, input shape, precision.
  `build_for(ssd, shape)` gives the `Build`; timed against their reference
  if they were. ValueError for CPUs this process may not use or a failing
  device command."""
  m = measured_with
  if m.cpus and not m.device_command:
    pin_cpus(m.cpus)
  device = make_device(ssd, m.shape, protocol, build_for(ssd, m.shape),
                       backend=m.backend, num_threads=m.num_threads or 1,
                       model_cache=model_cache,
                       device_command=m.device_command,
                       precision=m.precision)
  reference = ((device.open(m.reference), m.reference_ms) if m.reference
               else None)
  return next(protocol_lib.measure(device, [indices], protocol,
                                   reference=reference))


def closing_line(measured_ms: float, predicted_ms: float,
                 target_ms: Optional[float], device: str) -> str:
  """'Measured 0.412 ms on DEVICE: predicted 0.405 ms (+1.7%), target
  0.400 ms (+3.0%)': the searched architecture held against the model."""
  text = (f'Measured {measured_ms:.6g} ms on {device}: predicted '
          f'{predicted_ms:.6g} ms '
          f'({100 * (measured_ms / predicted_ms - 1):+.1f}%)')
  if target_ms:
    text += (f', target {target_ms:.6g} ms '
             f'({100 * (measured_ms / target_ms - 1):+.1f}%)')
  return text


def fitted_settings(measured_with: Optional[provenance_lib.Provenance],
                    source: str) -> provenance_lib.Provenance:
  """A cost model's `measured_with`; ValueError without one (released, macs,
  hand-written): nothing says where to measure."""
  if measured_with is None:
    raise ValueError(
        f'cost model {source} does not say how its latencies were measured '
        "(no 'measured_with', as tools/fit_cost_model writes from the CSV's "
        'settings): nothing to measure against')
  return measured_with
