"""The package's layout rules (docs/layout.md), checked on the source.

Flags only in entry points; no tool imports another tool; imports flow
downward; no module over 600 lines, no function over 80 lines (docstring
aside), no module docstring over 10 lines. The tests mirror the package: a module's unit tests in the file
named for it (`tests/<package>/<module>_test.py`, or `<module>_<aspect>_test.py`
when they need more than one file), the scenarios that run whole binaries
or several modules together in `tests/integration/`, the project's own
checks (docs, layout, Makefile, bench, stack, the suite's conftest) at the top of `tests/`; no
test file over 600 lines either.
"""

import ast
import os
import re
import subprocess
import sys

from absl.testing import absltest

_TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ROOT = os.path.join(_TOP, 'tunas_tf')
_TESTS = os.path.join(_TOP, 'tests')
# The project's own checks: of the repository, not of one module.
_PROJECT_CHECKS = ('bench_test.py', 'conftest_test.py', 'docs_test.py',
                   'layout_test.py', 'makefile_test.py', 'stack_test.py')
_MAX_FILE_LINES = 600
_MAX_FUNCTION_LINES = 80
_MAX_MODULE_DOCSTRING_LINES = 10
# Modules whose docstring is still longer (issue 62): the list shrinks to
# none, and a module leaves it once its docstring fits.
_LONG_MODULE_DOCSTRINGS = ()
# Modules that may define absl flags: the binaries and the shared flag groups.
_ENTRY_POINTS = re.compile(
    r'^(train_search\.py|train_eval/__main__\.py|cli/flags\.py|tools/\w+\.py)$')
# Packages a package must not import (imports flow one way).
_FORBIDDEN = {
    'search_space': ('tensorflow', 'tunas_tf.layers', 'tunas_tf.controller',
                     'tunas_tf.cost_model', 'tunas_tf.models', 'tunas_tf.graph',
                     'tunas_tf.search', 'tunas_tf.tools'),
    'controller': ('tunas_tf.models', 'tunas_tf.graph', 'tunas_tf.tools'),
    'cost_model': ('tunas_tf.models', 'tunas_tf.graph', 'tunas_tf.tools',
                   'tunas_tf.latency'),
    # Measurement builds networks; it knows no binary.
    'latency': ('tunas_tf.search', 'tunas_tf.train_eval', 'tunas_tf.tools',
                'tunas_tf.cli.flags', 'absl.flags'),
    'layers': ('tunas_tf.models', 'tunas_tf.graph', 'tunas_tf.tools'),
    'graph': ('tunas_tf.models', 'tunas_tf.search', 'tunas_tf.tools'),
    'models': ('tunas_tf.search', 'tunas_tf.tools'),
    'search': ('tunas_tf.tools', 'tunas_tf.cli.flags', 'absl.flags',
               'tunas_tf.train_eval'),
    # The binaries share the runtime, not each other's modules.
    'train_eval': ('tunas_tf.search', 'tunas_tf.tools',
                   'tunas_tf.train_search'),
    # The runtime knows neither binary.
    'runtime': ('tunas_tf.search', 'tunas_tf.train_eval',
                'tunas_tf.train_search', 'tunas_tf.tools', 'tunas_tf.cli.flags',
                'absl.flags'),
    'tools': ('tunas_tf.tools',),
    # What crosses the package's edge: below everything else.
    'io': tuple(f'tunas_tf.{p}' for p in (
        'architecture', 'cli', 'controller', 'cost_model', 'data', 'graph',
        'latency', 'layers', 'models', 'runtime', 'search', 'search_space',
        'tools', 'train_eval', 'train_search')),
}
# Only the entry points (and cli itself) import cli/.
_CLI_USERS = re.compile(
    r'^(train_search\.py|train_eval/__main__\.py|cli/\w+\.py|tools/\w+\.py)$')


def _modules():
  for directory, _, names in os.walk(_ROOT):
    for name in names:
      if name.endswith('.py'):
        path = os.path.join(directory, name)
        yield os.path.relpath(path, _ROOT).replace(os.sep, '/'), path


def _imports(tree):
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        yield alias.name
    elif isinstance(node, ast.ImportFrom) and node.module:
      yield node.module
      for alias in node.names:
        yield f'{node.module}.{alias.name}'


class LayoutTest(absltest.TestCase):

  def test_the_slowest_first_list_names_existing_files(self):
    from tests import conftest  # pylint: disable=g-import-not-at-top
    missing = [p for p in conftest.SLOWEST_FIRST
               if not os.path.isfile(os.path.join(os.path.dirname(_ROOT), p))]
    self.assertEqual(missing, [], 'tests/conftest.py SLOWEST_FIRST')

  def test_sizes(self):
    too_long = []
    for relative, path in _modules():
      with open(path) as f:
        source = f.read()
      if source.count('\n') > _MAX_FILE_LINES:
        too_long.append(f'{relative}: {source.count(chr(10))} lines')
      for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
          body = node.body
          if (body and isinstance(body[0], ast.Expr) and
              isinstance(body[0].value, ast.Constant) and
              isinstance(body[0].value.value, str)):
            body = body[1:] or body
          length = node.end_lineno - body[0].lineno + 1
          if length > _MAX_FUNCTION_LINES:
            too_long.append(f'{relative}:{node.lineno} {node.name}: {length} '
                            'lines')
    self.assertEqual(too_long, [])

  def test_module_docstrings_are_short(self):
    too_long, fits = [], []
    for relative, path in _modules():
      with open(path) as f:
        doc = ast.get_docstring(ast.parse(f.read()), clean=False) or ''
      lines = doc.count('\n') + 1
      if relative in _LONG_MODULE_DOCSTRINGS:
        if lines <= _MAX_MODULE_DOCSTRING_LINES:
          fits.append(relative)
      elif lines > _MAX_MODULE_DOCSTRING_LINES:
        too_long.append(f'{relative}: {lines} lines')
    missing = [m for m in _LONG_MODULE_DOCSTRINGS
               if not os.path.isfile(os.path.join(_ROOT, m))]
    self.assertEqual(too_long, [])
    self.assertEqual(fits + missing, [], 'remove from _LONG_MODULE_DOCSTRINGS')

  def test_flags_only_in_entry_points(self):
    found = []
    for relative, path in _modules():
      with open(path) as f:
        source = f.read()
      if 'DEFINE_' in source and not _ENTRY_POINTS.match(relative):
        found.append(relative)
    self.assertEqual(found, [])

  def test_imports_flow_downward(self):
    found = []
    for relative, path in _modules():
      package = relative.split('/')[0]
      forbidden = _FORBIDDEN.get(package, ())
      with open(path) as f:
        tree = ast.parse(f.read())
      for name in _imports(tree):
        if any(name == f or name.startswith(f + '.') for f in forbidden):
          found.append(f'{relative} imports {name}')
        elif (name.startswith('tunas_tf.cli') and
              not _CLI_USERS.match(relative)):
          found.append(f'{relative} imports {name}')
    self.assertEqual(found, [])


  def test_tests_mirror_the_package(self):
    misplaced, too_long = [], []
    for directory, _, names in os.walk(_TESTS):
      for name in names:
        path = os.path.join(directory, name)
        relative = os.path.relpath(path, _TESTS).replace(os.sep, '/')
        if name.endswith('.py'):
          with open(path) as f:
            lines = f.read().count('\n')
          if lines > _MAX_FILE_LINES:
            too_long.append(f'tests/{relative}: {lines} lines')
        if (not name.endswith('_test.py') or
            relative.startswith('integration/') or
            relative in _PROJECT_CHECKS):
          continue
        module = relative[:-len('_test.py')].split('/')
        # `<module>_test.py`, or `<module>_<aspect>_test.py`.
        candidates = ['/'.join(module[:-1] + ['_'.join(
            module[-1].split('_')[:n])]) for n in range(
                len(module[-1].split('_')), 0, -1)]
        if not any(os.path.isfile(os.path.join(_ROOT, c + '.py')) or
                   os.path.isdir(os.path.join(_ROOT, c))
                   for c in candidates):
          misplaced.append(f'tests/{relative}')
    self.assertEqual(too_long, [])
    self.assertEqual(misplaced, [], 'not named for a module of tunas_tf/: '
                     'a scenario goes to tests/integration/')
    self.assertTrue(any(n.endswith('_test.py') for n in os.listdir(
        os.path.join(_TESTS, 'integration'))))


  def test_tf_free_tests_import_no_tensorflow(self):
    from tests import conftest  # pylint: disable=g-import-not-at-top
    modules = []
    for directory, _, names in os.walk(_TESTS):
      for name in sorted(names):
        relative = os.path.relpath(os.path.join(directory, name), _TOP)
        relative = relative.replace(os.sep, '/')
        if name.endswith('_test.py') and conftest.tf_free(relative):
          modules.append(relative[:-3].replace('/', '.'))
    self.assertGreater(len(modules), 10)
    done = subprocess.run(
        [sys.executable, '-c', 'import importlib, sys\n'
         f'for m in {modules!r}:\n'
         '  importlib.import_module(m)\n'
         '  assert "tensorflow" not in sys.modules, m'],
        cwd=_TOP, capture_output=True, text=True, check=False)
    self.assertEqual(done.returncode, 0, done.stderr[-2000:])


if __name__ == '__main__':
  absltest.main()
