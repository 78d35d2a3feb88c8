"""Many command lines from one interpreter, each in a child forked from it.

Importing TensorFlow takes 2-4 s of a fresh Python process on 2 cores, most
of what `--help` or a refused flag costs. `run` starts one Python process
that imports TensorFlow (and what else `preload` names) once, then runs each
command line `python -m module args...` or `python script.py args...` in a
child forked from it (`runpy`, as `python -m` runs a module: `__main__`,
`sys.argv`), its stdout and stderr captured. What a child cannot show is
what the import of TensorFlow itself writes (the parent did it): the tests of
that keep a fresh process of their own.
"""

import json
import subprocess
import sys
from typing import List, NamedTuple, Optional, Sequence

_DRIVER = r'''
import importlib, json, os, runpy, sys, tempfile
commands, preload = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for name in preload:
  importlib.import_module(name)
results = []
for kind, target, args in commands:
  out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
  sys.stdout.flush(); sys.stderr.flush()
  pid = os.fork()
  if pid == 0:
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    code = 0
    try:
      sys.argv = [target, *args]
      if kind == 'module':
        runpy.run_module(target, run_name='__main__', alter_sys=True)
      else:
        sys.path[0] = os.path.dirname(os.path.abspath(target))
        runpy.run_path(target, run_name='__main__')
    except SystemExit as e:
      if e.code is None:
        code = 0
      elif isinstance(e.code, int):
        code = e.code
      else:
        print(e.code, file=sys.stderr)
        code = 1
    except BaseException:
      import traceback
      traceback.print_exc()
      code = 1
    sys.stdout.flush(); sys.stderr.flush()
    os._exit(code)
  _, status = os.waitpid(pid, 0)
  texts = []
  for f in (out, err):
    f.seek(0)
    texts.append(f.read().decode('utf-8', 'replace'))
  results.append([os.waitstatus_to_exitcode(status)] + texts)
print(json.dumps(results))
'''


class Done(NamedTuple):
  returncode: int
  stdout: str
  stderr: str


def run(commands: Sequence[Sequence[str]], env: Optional[dict] = None,
        cwd: Optional[str] = None,
        preload: Sequence[str] = ('tensorflow',),
        timeout: float = 600) -> List[Done]:
  """Runs each command (`['-m', module, *args]` or `[script.py, *args]`)
  in a child of one process that imported `preload` first.

  Raises:
    AssertionError: when the parent process fails (with its stderr) or
      did not run every command.
  """
  specs = [('module', c[1], list(c[2:])) if c[0] == '-m'
           else ('path', c[0], list(c[1:])) for c in commands]
  done = subprocess.run(
      [sys.executable, '-c', _DRIVER, json.dumps(specs),
       json.dumps(list(preload))], capture_output=True, text=True, env=env,
      cwd=cwd, timeout=timeout, check=False)
  if done.returncode:
    raise AssertionError(f'forked.run failed:\n{done.stderr[-3000:]}')
  results = [Done(*r) for r in json.loads(done.stdout.splitlines()[-1])]
  if len(results) != len(specs):
    raise AssertionError(f'forked.run ran {len(results)} of {len(specs)}')
  return results
