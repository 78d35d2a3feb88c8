"""Tests for tunas_tf/flags: the binaries' --help (exit 0, their own flags,
no internal names) and their one-line refusal of a bad flag."""

import ast
import functools
import importlib
import os
import re
import subprocess
import sys
from typing import List

from absl import flags
from absl.testing import absltest

from tests.testing import forked

BINARIES = ('tunas_tf.train_search', 'tunas_tf.train_eval.__main__') + tuple(
    f'tunas_tf.tools.{name}' for name in (
        'extract_architecture', 'describe_space', 'random_architectures',
        'compare_random', 'fit_cost_model', 'measure_latency',
        'import_dataset', 'report'))
_OUTSIDE = ('reference/', 'DESIGN', '§', 'STYLE')
_PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'tunas_tf')
# What follows a dot in a file name, not in a module's attribute.
_EXTENSIONS = {'json', 'md', 'py', 'cfg', 'png', 'html', 'csv', 'tflite',
               'jpg', 'npz', 'ckpt'}
# Class names that are the search's own words (the paper's OneOf).
_CONCEPTS = {'OneOf'}


@functools.lru_cache(maxsize=None)
def _source_names():
  """(module and package names, public top-level function names with an
  underscore, CamelCase class names) of tunas_tf, from its source."""
  modules, functions, classes = set(), set(), set()
  for directory, packages, names in os.walk(_PACKAGE):
    modules.update(p for p in packages if p != '__pycache__')
    for name in names:
      if not name.endswith('.py'):
        continue
      modules.add(name[:-3])
      with open(os.path.join(directory, name)) as f:
        tree = ast.parse(f.read())
      for node in tree.body:
        if (isinstance(node, ast.FunctionDef) and '_' in node.name and
            not node.name.startswith('_')):
          functions.add(node.name)
        elif (isinstance(node, ast.ClassDef) and
              len(re.findall('[A-Z]', node.name)) > 1):
          classes.add(node.name)
  return modules, functions, classes - _CONCEPTS


@functools.lru_cache(maxsize=None)
def _user_words():
  """Names a user types, which may share a function's name: every binary's
  flags, the binaries and the search spaces."""
  from tunas_tf.search_space import mobile  # pylint: disable=g-import-not-at-top
  words = set(mobile.SEARCH_SPACES)
  for name in BINARIES:
    words.add(name.split('.')[-1])
    values = flags.FlagValues()
    importlib.import_module(name).define_flags(values)
    words.update(values)
  return words


def _leaks(text: str) -> List[str]:
  """What in a --help text is not for its reader: a doubled percent sign, a
  dotted path into tunas_tf (but `python -m tunas_tf.BINARY`), a module's
  attribute (`search.config.X`, `schema.f`), or a class or public function
  of the source by name."""
  modules, functions, classes = _source_names()
  found = ['%%'] if '%%' in text else []
  text = re.sub(r'python -m tunas_tf\.[\w.]+', 'python -m BINARY', text)
  found += re.findall(r'tunas_tf\.\w+', text)
  found += [m.group(0) for m in re.finditer(r'\b(\w+)\.([A-Za-z_]\w*)', text)
            if m.group(1) in modules and m.group(2) not in _EXTENSIONS]
  found += [name for name in sorted((functions - _user_words()) | classes)
            if re.search(rf'\b{name}\b', text)]
  return found


def _help_texts(name: str) -> str:
  """What `--help` of binary `name` prints but absl's own lines: its
  description and the help of each of its flags."""
  module = importlib.import_module(name)
  values = flags.FlagValues()
  module.define_flags(values)
  return '\n'.join([module.__doc__] + [values[f].help for f in values])


class HelpTest(absltest.TestCase):

  def test_binaries_help_with_their_shared_flags_and_exit_zero(self):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
    shared = ('--model_dir', '--dataset', '--data_dir', '--tpu:',
              '--[no]deterministic:')
    modules = {'tunas_tf.train_search': shared, 'tunas_tf.train_eval': shared,
               'tunas_tf.tools.measure_latency': (
                   '--ssd:', '--seed:', '--image_size:', '--precision:')}
    for module, (returncode, out, err) in zip(modules, forked.run(
        [['-m', m, '--help'] for m in modules], env=env)):
      self.assertEqual(returncode, 0, f'{module}: {err[-500:]}')
      for flag in modules[module]:
        self.assertIn(flag, out, f'{module} --help lacks {flag}')
      for outside in _OUTSIDE:
        self.assertNotIn(outside, out, module)
      self.assertEqual(_leaks(out), [], module)
      # (absl prints the help as written: no %-formatting.)
      if module == 'tunas_tf.train_search':
        self.assertRegex(out, r'default\s+10%\s+of the train split')

  def test_no_help_text_names_the_source_or_doubles_a_percent_sign(self):
    for name in BINARIES:
      self.assertEqual(_leaks(_help_texts(name)), [], name)

  def test_leaks_finds_internal_names(self):
    self.assertEqual(
        _leaks('default 10%% of it; see `search.config.RUN_ONLY_FIELDS`, '
               'graph.from_spec.graph_from_spec and SearchConfig; '
               'python -m tunas_tf.train_search --ssd=digits_search '
               '(tunas_tf.tools.report) writes architecture.json'),
        ['%%', 'tunas_tf.tools', 'search.config', 'graph.from_spec',
         'SearchConfig', 'graph_from_spec'])

  def test_every_binary_runs_through_flags_run_and_cites_nothing_outside(self):
    for name in BINARIES:
      module = importlib.import_module(name)
      for outside in _OUTSIDE:
        self.assertNotIn(outside, module.__doc__, name)
      with open(module.__file__) as f:
        self.assertIn('common_flags.run(main, define_flags)', f.read(), name)


class OneLineRefusalTest(absltest.TestCase):

  def test_every_binary_refuses_a_bad_flag_in_one_line_on_stderr(self):
    # On TF 2.16+ the import of TF alone wrote six lines (absl's C++ log
    # before InitializeLog ignores TF_CPP_MIN_LOG_LEVEL), and absl's flag
    # parser two. Without TF_CPP_MIN_LOG_LEVEL the package sets it. The
    # package's import is the same for every binary: train_search's run with
    # a flag it does not know is a fresh process (what importing TF writes),
    # the other refusals run in children of the worker's process that
    # imported TF and the package once (`forked`), where the variable can no
    # longer change what the import writes.
    env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
    fresh = [('tunas_tf.train_search', ['--no_such_flag=1'])]
    running = [subprocess.Popen([sys.executable, '-m', module, *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env) for module, args in fresh]
    others = [(m.removesuffix('.__main__'), ['--no_such_flag=1'])
              for m in BINARIES if m != 'tunas_tf.train_search']
    others.append(('tunas_tf.train_search', ['--ssd=nonexistent']))
    results = forked.run([['-m', module, *args] for module, args in others])
    for process in running:
      out, err = process.communicate(timeout=300)
      results.append(forked.Done(process.returncode, out, err))
    for (module, args), (returncode, out, err) in zip(others + fresh,
                                                      results):
      self.assertEqual((returncode, out), (1, ''), (module, args, err))
      binary = module.rsplit('.', 1)[-1]
      self.assertLen(err.splitlines(), 1, (module, err))
      self.assertRegex(err, f'^{binary}: ', module)
      self.assertTrue(err.endswith(' (--help lists the flags)\n'), err)


if __name__ == '__main__':
  absltest.main()
