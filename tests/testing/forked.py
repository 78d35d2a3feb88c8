"""Python command lines run as children of one warm interpreter (a zygote).

Importing TensorFlow and tunas_tf takes 2-4 s of every fresh Python process
on 2 cores, most of what a tool's refusal costs and a good share of a short
search; the suite starts about a hundred such processes. A test process (a
pytest worker) starts one server here, once: it imports `PRELOAD` and then
forks a child for each command line `[python, '-m', module, *args]`,
`[python, '-c', code, *args]` or `[python, script, *args]`, which runs it as
Python would (`runpy`, as `__main__`, with `sys.argv`, the environment, the
working directory and stdout/stderr of the request, stdin /dev/null; atexit
handlers and non-daemon threads
at the end; exit codes as a process gives them, -N for signal N). The child
is a real process: its pid takes signals (`Child.send_signal`, `kill`).

What a child cannot show is what a fresh interpreter does before `main`:
the import of TensorFlow itself (its log lines; an environment variable
read there). A request whose environment differs from a server's in a
variable read at import (`_IMPORT_TIME`) gets a server of its own; the
tests of the import itself keep fresh processes (`subprocess`).
"""

import atexit
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from typing import (Dict, Iterator, List, NamedTuple, Optional, Sequence,
                    Tuple)

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

# What every server imports before it forks (a module missing on this stack,
# tensorflow_estimator on the newest TF, is skipped). Library modules only:
# a binary's module is run as `__main__`, where it defines its flags.
PRELOAD = ('tensorflow', 'tensorflow_estimator', 'tunas_tf.search.runner',
           'tunas_tf.train_eval.runner', 'tunas_tf.latency.rows',
           'tunas_tf.graph.from_spec', 'tunas_tf.search.extract',
           'tunas_tf.search.report')

# Environment variables read when TensorFlow or Python starts (a server per
# distinct set of values); TF_CONFIG is read when a strategy is made.
_IMPORT_TIME = re.compile(
    r'^(TF_|ONEDNN_|DNNL_|XLA_|OMP_|KMP_|MKL_|OPENBLAS_|PYTHON|CUDA_|LD_)')
_RUNTIME = ('TF_CONFIG', 'PYTHONPATH')  # PYTHONPATH: put on sys.path.
# Set by importing scikit-learn (`os.environ.setdefault`, for Intel's OpenMP,
# which neither stack loads): a test process has them once it has imported
# it. They start no server of their own (a twin per worker, 2.3 s each,
# before); a child runs with the request's environment either way.
_SET_ON_IMPORT = {'KMP_DUPLICATE_LIB_OK': 'True', 'KMP_INIT_AT_FORK': 'FALSE'}

_SERVER = r'''
import atexit, importlib, json, os, runpy, select, sys, traceback
sys.path[0] = os.getcwd()
for name in json.loads(sys.argv[1]):
  try:
    importlib.import_module(name)
  except ImportError:
    pass
requests, replies = os.dup(0), os.dup(1)
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)
os.dup2(null, 1)


def child(request):
  os.close(requests)
  os.close(replies)
  for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                          (1, request['stdout'], os.O_WRONLY | os.O_APPEND),
                          (2, request['stderr'], os.O_WRONLY | os.O_APPEND)):
    opened = os.open(path, flags)
    os.dup2(opened, fd)
    os.close(opened)
  if request['new_session']:
    os.setsid()
  os.chdir(request['cwd'])
  os.environ.clear()
  os.environ.update(request['env'])
  import tempfile
  tempfile.tempdir = None  # TMPDIR of the request.
  paths = [p for p in request['env'].get('PYTHONPATH', '').split(os.pathsep)
           if p]
  sys.path[1:1] = paths  # After sys.path[0], set below, as Python does.
  code = 0
  try:
    sys.argv = [request['target'], *request['args']]
    if request['kind'] == 'module':
      sys.path[0] = os.getcwd()
      runpy.run_module(request['target'], run_name='__main__', alter_sys=True)
    elif request['kind'] == 'code':
      sys.argv[0] = '-c'
      sys.path[0] = os.getcwd()
      exec(compile(request['target'], '<string>', 'exec'),
           {'__name__': '__main__', '__builtins__': __builtins__})
    else:
      sys.path[0] = os.path.dirname(os.path.abspath(request['target']))
      runpy.run_path(request['target'], run_name='__main__')
  except SystemExit as e:
    if e.code is None:
      code = 0
    elif isinstance(e.code, int):
      code = e.code
    else:
      print(e.code, file=sys.stderr)
      code = 1
  except BaseException:  # As the interpreter: the traceback, exit code 1.
    traceback.print_exc()
    code = 1
  try:
    import threading
    threading._shutdown()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
  finally:
    os._exit(code & 0xff)


running, pending = {}, b''
while True:
  ready, _, _ = select.select([requests], [], [], 0.02 if running else None)
  if ready:
    chunk = os.read(requests, 1 << 16)
    if not chunk:
      break
    pending += chunk
    while b'\n' in pending:
      line, pending = pending.split(b'\n', 1)
      request = json.loads(line)
      pid = os.fork()
      if pid == 0:
        child(request)
      running[pid] = request['id']
      os.write(replies, b'started %d %d\n' % (request['id'], pid))
  while running:
    pid, status = os.waitpid(-1, os.WNOHANG)
    if pid == 0:
      break
    os.write(replies, b'exited %d %d\n' % (
        running.pop(pid), os.waitstatus_to_exitcode(status)))
'''


class Done(NamedTuple):
  returncode: int
  stdout: str
  stderr: str


class _Server:
  """One zygote and the thread that reads its replies."""

  def __init__(self, env: Dict[str, str]):
    self._process = subprocess.Popen(
        [sys.executable, '-c', _SERVER, json.dumps(PRELOAD)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=_ROOT, env=env)
    self._ids = itertools.count()
    self._lock = threading.Condition()
    self._pids: Dict[int, int] = {}
    self._codes: Dict[int, int] = {}
    threading.Thread(target=self._read, daemon=True).start()

  def _read(self) -> None:
    for line in self._process.stdout:
      what, request, value = line.split()
      with self._lock:
        (self._pids if what == b'started' else self._codes)[
            int(request)] = int(value)
        self._lock.notify_all()
    with self._lock:
      self._lock.notify_all()

  def start(self, request: dict) -> Tuple[int, int]:
    """Sends `request`; returns its id and the child's pid."""
    with self._lock:
      request = dict(request, id=next(self._ids))
      self._process.stdin.write(json.dumps(request).encode() + b'\n')
      self._process.stdin.flush()
      self._lock.wait_for(lambda: request['id'] in self._pids or
                          self._process.poll() is not None)
      if request['id'] not in self._pids:
        raise AssertionError('the test zygote exited')
      return request['id'], self._pids[request['id']]

  def wait(self, request: int, timeout: Optional[float]) -> Optional[int]:
    with self._lock:
      self._lock.wait_for(lambda: request in self._codes or
                          self._process.poll() is not None, timeout)
      return self._codes.get(request)

  def close(self) -> None:
    self._process.stdin.close()
    self._process.wait()


_servers: Dict[Tuple[Tuple[str, str], ...], _Server] = {}
_servers_lock = threading.Lock()


def _server(env: Dict[str, str]) -> _Server:
  key = tuple(sorted((k, v) for k, v in env.items()
                     if _IMPORT_TIME.match(k) and k not in _RUNTIME and
                     _SET_ON_IMPORT.get(k) != v))
  with _servers_lock:
    if key not in _servers:
      _servers[key] = _Server({k: v for k, v in env.items()
                               if k not in _RUNTIME})
    return _servers[key]


@atexit.register
def _close_servers() -> None:
  for server in _servers.values():
    server.close()


class Child:
  """A command line running in a zygote's child, as `subprocess.Popen`
  gives it: `pid`, `returncode`, `poll`, `wait`, `send_signal`, `kill`,
  `communicate` (stdout and stderr as text)."""

  def __init__(self, argv: Sequence[str], env: Optional[dict] = None,
               cwd: Optional[str] = None, log: Optional[str] = None,
               new_session: bool = False):
    """`argv`: `[sys.executable, '-m', module | '-c', code | script,
    *args]`; `log` a file that both stdout and stderr are appended to,
    made if missing (else they are captured for `communicate`);
    `new_session`: the child calls `os.setsid()`."""
    if argv[0] != sys.executable:
      raise ValueError(f'not this Python: {argv[0]!r}')
    kind = {'-m': 'module', '-c': 'code'}.get(argv[1], 'path')
    target, args = ((argv[2], argv[3:]) if kind != 'path'
                    else (argv[1], argv[2:]))
    env = dict(os.environ if env is None else env)
    # The files `communicate` reads stdout and stderr from (none with a log).
    self._captured = ([] if log else
                      [tempfile.NamedTemporaryFile(delete=False).name
                       for _ in range(2)])
    if log:
      open(log, 'a').close()  # The child opens it to append.
    out, err = self._captured or (log, log)
    self._server = _server(env)
    self._id, self.pid = self._server.start(dict(
        kind=kind, target=target, args=list(args), env=env,
        cwd=os.path.abspath(cwd or os.getcwd()), new_session=new_session,
        stdout=out, stderr=err))
    self.returncode: Optional[int] = None
    self.args = list(argv)
    self._texts: Optional[List[str]] = None

  def poll(self) -> Optional[int]:
    return self.wait(timeout=0, _raise=False)

  def wait(self, timeout: Optional[float] = None,
           _raise: bool = True) -> Optional[int]:
    if self.returncode is None:
      self.returncode = self._server.wait(self._id, timeout)
      if self.returncode is None and _raise:
        raise subprocess.TimeoutExpired(self.args, timeout)
    return self.returncode

  def send_signal(self, signal: int) -> None:
    if self.returncode is None:
      os.kill(self.pid, signal)

  def kill(self) -> None:
    self.send_signal(9)

  def communicate(self, timeout: Optional[float] = None) -> Tuple[str, str]:
    """Waits for the end (killing the child at `timeout`, as
    `subprocess.run` does) and returns its stdout and stderr ('' with a
    `log`)."""
    try:
      self.wait(timeout)
    except subprocess.TimeoutExpired:
      self.kill()
      self.wait()
      raise
    if self._texts is None:
      self._texts = ['', '']
      for i, path in enumerate(self._captured):
        with open(path, encoding='utf-8', errors='replace') as f:
          self._texts[i] = f.read()
        os.unlink(path)
    return self._texts[0], self._texts[1]


def follow(child: Child, log: str) -> Iterator[str]:
  """The lines of `child`'s `log` as they are written (`for line in
  process.stderr` of a pipe), until the child has exited and the log is
  read to its end."""
  with open(log, encoding='utf-8', errors='replace') as f:
    pending = ''
    while True:
      exited = child.poll() is not None
      chunk = f.read()
      *lines, pending = (pending + chunk).split('\n')
      for line in lines:
        yield line + '\n'
      if not chunk:
        if exited:
          if pending:
            yield pending
          return
        time.sleep(0.005)


def run_one(argv: Sequence[str], env: Optional[dict] = None,
            cwd: Optional[str] = None,
            timeout: Optional[float] = 1200) -> Done:
  """`subprocess.run(argv, capture_output=True, text=True, ...)` in a
  zygote's child; a child still running at `timeout` is killed
  (`subprocess.TimeoutExpired`)."""
  child = Child(argv, env=env, cwd=cwd)
  out, err = child.communicate(timeout)
  return Done(child.returncode, out, err)


def run(commands: Sequence[Sequence[str]], env: Optional[dict] = None,
        cwd: Optional[str] = None, timeout: float = 1200) -> List[Done]:
  """Each command (`['-m', module, *args]` or `[script.py, *args]`) in
  turn, each in a zygote's child."""
  return [run_one([sys.executable, *c], env=env, cwd=cwd, timeout=timeout)
          for c in commands]
