"""Tests that README.md and docs/*.md stay true to the code.

Every `--flag` a doc shows with a binary (`python -m tunas_tf.X`, `X --flag`
in a code span, `make search SEARCH_FLAGS=...`) is one of that binary's
flags, and every other `--flag` in a code span one of some binary's; every
fenced shell command of a binary parses with its flag definitions, as the
binary's start would parse it (`$VARS` stand for any text, flagfiles are
read, nothing runs); every repository path and relative link named exists;
every make target and variable shown is the Makefile's; every module of
docs/layout.md's map exists; docs/tpu.md gives each TPU generation its
engine and image. No TensorFlow graph is built.
"""

import functools
import glob
import importlib
import os
import re
import shlex
from typing import Dict, Iterator, List, Optional, Set, Tuple

from absl import app
from absl import flags
from absl import logging  # pylint: disable=unused-import (--verbosity)
from absl.testing import absltest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ['README.md'] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, 'docs',
                                                             '*.md')))
# Flags of other programs a doc names in a code span, and why.
OTHER_FLAGS = {
    'spot': 'gcloud compute tpus tpu-vm create',
    'service-account': 'gcloud compute tpus tpu-vm create',
    'system-site-packages': 'python -m venv',
    'jit_compile': 'docs/scaling.md says there is no such flag',
}
# Programs whose words are not the binaries' (their flags are their own).
OTHER_PROGRAMS = {'gcloud', 'pip', 'git', 'tfds', 'tensorboard', 'sudo',
                  'apt-get', 'ls', 'export', 'cd', 'rm', 'cp', 'echo', 'ssh'}
# Absl's own flag names, handled by FlagValues itself.
_ABSL_SPECIAL = {'flagfile', 'undefok'}
# Top directories of the repository whose paths the docs name.
_PATH = re.compile(
    r'(?<![\w./$-])((?:tunas_tf|docs|bench|tests)/[\w./*-]*[\w*])')
_LINK = re.compile(r'\]\(([^)\s]+)\)')
_FLAG = re.compile(r'(?<![\w-])--(\[no\])?([A-Za-z][\w-]*)')
_VAR = re.compile(r'\$\{?([A-Za-z_]\w*)\}?')


@functools.lru_cache(maxsize=None)
def bench_flags(script: str) -> Set[str]:
  """The flags a bench script's argparse takes (from its source)."""
  return set(re.findall(r"add_argument\(\s*'--([\w-]+)'", _read(script)))


def _binaries() -> Dict[str, str]:
  """{binary module as `python -m` names it: the module defining its flags}."""
  found = {'tunas_tf.train_search': 'tunas_tf.train_search',
           'tunas_tf.train_eval': 'tunas_tf.train_eval.__main__'}
  for path in glob.glob(os.path.join(ROOT, 'tunas_tf', 'tools', '*.py')):
    name = os.path.basename(path)[:-3]
    if name != '__init__':
      found[f'tunas_tf.tools.{name}'] = f'tunas_tf.tools.{name}'
  return found


BINARIES = _binaries()
# A binary by its last name (`train_search --replicas=N` in a span).
SHORT_NAMES = {name.split('.')[-1]: name for name in BINARIES}


@functools.lru_cache(maxsize=None)
def _absl_flags() -> Set[str]:
  """The names (long and short) of absl's flags every binary takes."""
  app.define_help_flags()  # What `app.run` defines: --help, --helpfull...
  names = set(_ABSL_SPECIAL)
  for module, module_flags in flags.FLAGS.flags_by_module_dict().items():
    if module.startswith('absl.'):
      for flag in module_flags:
        names.add(flag.name)
        if flag.short_name:
          names.add(flag.short_name)
  return names


def _flag_values(binary: str) -> flags.FlagValues:
  """A fresh FlagValues with `binary`'s own flags defined."""
  values = flags.FlagValues()
  importlib.import_module(BINARIES[binary]).define_flags(values)
  return values


@functools.lru_cache(maxsize=None)
def _names(binary: Optional[str]) -> Set[str]:
  """The flag names `binary` takes (None: any binary's)."""
  if binary is None:
    return set().union(*(_names(b) for b in BINARIES))
  return set(_flag_values(binary)) | _absl_flags()


def _is_flag_of(name: str, binary: Optional[str]) -> bool:
  """Whether `--name` (or `--noname` of a boolean) is `binary`'s flag."""
  known = _names(binary)
  if name in known:
    return True
  if name.startswith('no') and name[2:] in known:
    return binary is None or _flag_values(binary)[name[2:]].boolean
  return False


def _read(doc: str) -> str:
  with open(os.path.join(ROOT, doc)) as f:
    return f.read()


def _fenced(text: str, shell: bool) -> List[str]:
  """The bodies of the fenced code blocks: of the shell's (```sh), or of
  the others but Python's and JSON's (a tree, a tool's output)."""
  return [body for lang, body in
          re.findall(r'^```([^\n]*)\n(.*?)^```', text, re.M | re.S)
          if (lang.strip() == 'sh') == shell and
          lang.strip() not in ('python', 'json')]


def _prose(text: str) -> str:
  return re.sub(r'^```[^\n]*\n.*?^```', '', text, flags=re.M | re.S)


def _spans(text: str) -> List[str]:
  """The inline code spans of the prose (which may cross a line break),
  then the lines of the fenced blocks that are not the shell's."""
  return [' '.join(m.group(1).split())
          for m in re.finditer(r'`([^`]+)`', _prose(text))] + [
              line for body in _fenced(text, shell=False)
              for line in body.split('\n')]


def _shell_lines(block: str) -> str:
  """A fenced block as shell text: heredoc bodies and comments dropped,
  continuation lines joined, and line ends outside quotes made ';'."""
  lines, heredoc = [], None
  for line in block.split('\n'):
    if heredoc is not None:
      if line.strip() == heredoc:
        heredoc = None
      continue
    match = re.search(r"<<-?\s*'?\"?(\w+)'?\"?", line)
    if match:
      heredoc = match.group(1)
      line = line[:match.start()]
    lines.append(line)
  text = re.sub(r'\\\n', ' ', '\n'.join(lines))
  out, quote, comment = [], None, False
  for char in text:
    if comment:
      if char != '\n':
        continue
      comment = False
    if quote:
      quote = None if char == quote else quote
    elif char in '"\'':
      quote = char
    elif char == '#' and (not out or out[-1][-1].isspace()):
      comment = True
      continue
    if char == '\n' and not quote:
      char = ' ; '
    out.append(char)
  return ''.join(out)


def _commands(shell: str) -> Iterator[List[str]]:
  """The simple commands of shell text, as words: split at ; & && | ||,
  redirections and comments left out."""
  lexer = shlex.shlex(shell, posix=True, punctuation_chars=True)
  lexer.whitespace_split = True
  words: List[str] = []
  skip_next = False
  for token in lexer:
    if skip_next:
      skip_next = False
    elif token in (';', '&', '&&', '|', '||', '(', ')'):
      if words:
        yield words
      words = []
    elif token in ('>', '>>', '<', '>&', '&>', '2>', '<<'):
      if words and words[-1].isdigit():
        words.pop()  # The file descriptor of `2>&1`.
      skip_next = True
    else:
      words.append(token)
  if words:
    yield words


def _invocation(words: List[str]) -> Tuple[Optional[str], List[str]]:
  """(what runs, its arguments) of a command's words: a binary's module for
  `... python -m tunas_tf.X` or `X` alone, 'make', another program's name,
  or None for no command; environment assignments, `nohup` and
  `taskset -c CPUS` skipped."""
  while words and (re.match(r'^[A-Za-z_]\w*=', words[0]) or
                   words[0] in ('nohup', 'env', 'time', 'taskset')):
    words = words[3:] if words[:2] == ['taskset', '-c'] else words[1:]
  if not words:
    return None, []
  program = os.path.basename(words[0])
  if re.match(r'^(python[\d.]*|\$\w*PY\w*)$', program) and len(words) > 1:
    if words[1] == '-m' and len(words) > 2:
      return words[2], words[3:]
    if re.match(r'^bench/\w+\.py$', words[1]):
      return words[1], words[2:]
  if words[0] in SHORT_NAMES:
    return SHORT_NAMES[words[0]], words[1:]
  return program, words[1:]


def _flag_names(args: List[str]) -> List[str]:
  return [m.group(2) for a in args for m in [_FLAG.match(a)] if m]


def _makefile() -> str:
  return _read('Makefile')


def _doc_commands(doc: str, fenced: bool
                  ) -> Iterator[Tuple[str, List[str], str]]:
  """(program, arguments, the command's text) of a doc's fenced blocks or
  of its code spans."""
  text = _read(doc)
  sources = ([_shell_lines(b) for b in _fenced(text, shell=True)] if fenced
             else _spans(text))
  for source in sources:
    try:
      commands = list(_commands(source))
    except ValueError as e:
      if fenced:  # Unbalanced quotes: a broken command.
        yield 'unreadable', [str(e)], source
      continue  # A span of prose with an apostrophe.
    for words in commands:
      program, args = _invocation(words)
      if program:
        yield program, args, ' '.join(words)


def _resolve(arg: str) -> str:
  """A fenced command's argument as the binary would get it from a user:
  `$VAR` is some text; a relative flagfile is the repository's."""
  arg = _VAR.sub(lambda m: m.group(1).lower(), arg)
  match = re.match(r'^--flagfile=(?!/)(.+)$', arg)
  return f'--flagfile={os.path.join(ROOT, match.group(1))}' if match else arg


def parse_command(binary: str, args: List[str]) -> List[str]:
  """Parses a fenced command's `args` with `binary`'s flags, as its start
  would; returns the problems (an unknown flag, a bad value, a stray
  argument), empty when it parses."""
  if binary not in BINARIES:
    return [f'no binary {binary}']
  values = _flag_values(binary)
  argv = [binary]
  problems = []
  for arg in (_resolve(a) for a in args):
    match = _FLAG.match(arg)
    name = match and match.group(2)
    if name in _absl_flags() - _ABSL_SPECIAL:
      continue  # absl's own (--help, --verbosity): not the binary's.
    argv.append(arg)
  try:
    rest = values(argv)
  except flags.Error as e:
    return [f'{binary}: {e}']
  if rest[1:]:
    problems.append(f'{binary}: stray arguments {rest[1:]}')
  if binary == 'tunas_tf.tools.compare_random' and values.train_eval_flags:
    # Its --train_eval_flags are train_eval's, comma-separated.
    problems += parse_command('tunas_tf.train_eval',
                              values.train_eval_flags)
  return problems


def check_make(args: List[str], strict: bool) -> List[str]:
  """The problems of `make TARGET VAR=value ...`: an unknown target or
  variable, SEARCH_FLAGS that train_search does not take."""
  makefile = _makefile()
  problems = []
  for arg in args:
    if '=' in arg:
      name, value = arg.split('=', 1)
      if not re.search(rf'^{name}\s*\??=|\$\({name}\)', makefile, re.M):
        problems.append(f'make: no variable {name} in the Makefile')
      if name == 'SEARCH_FLAGS':
        words = shlex.split(value)
        if strict:
          problems += parse_command('tunas_tf.train_search', words)
        else:
          problems += [f'make SEARCH_FLAGS: train_search has no --{n}'
                       for n in _flag_names(words)
                       if not _is_flag_of(n, 'tunas_tf.train_search')]
    elif not arg.startswith('-') and not re.search(
        rf'^{re.escape(arg)}:', makefile, re.M):
      problems.append(f'make: no target {arg} in the Makefile')
  return problems


def fenced_problems(doc: str) -> List[str]:
  """Every fenced command of a binary (or make) of `doc` that does not
  parse."""
  problems = []
  for program, args, command in _doc_commands(doc, fenced=True):
    if program == 'unreadable':
      problems.append(f'{doc}: `{command}`: the shell cannot read it: '
                      f'{args[0]}')
    elif program.startswith('tunas_tf.'):
      problems += [f'{doc}: `{command}`: {p}'
                   for p in parse_command(program, args)]
    elif program == 'make':
      problems += [f'{doc}: `{command}`: {p}' for p in check_make(args, True)]
    elif program.startswith('bench/'):
      problems += [f'{doc}: `{command}`: {p}'
                   for p in _bench_problems(program, args)]
  return problems


def _bench_problems(script: str, args: List[str]) -> List[str]:
  if not os.path.exists(os.path.join(ROOT, script)):
    return [f'no {script}']
  return [f'{script} has no --{n}' for n in _flag_names(args)
          if n not in bench_flags(script)]


def span_problems(doc: str) -> List[str]:
  """Every `--flag` of a code span that its binary (named in the span) or,
  without one, no binary takes; an unknown binary or make target."""
  problems = []
  for span in _spans(_read(doc)):
    try:
      commands = list(_commands(span))
    except ValueError:
      commands = [span.split()]
    for words in commands:
      program, args = _invocation(words)
      if program is None:
        continue
      if program in OTHER_PROGRAMS:
        continue
      if program == 'make':
        problems += [f'{doc}: `{span}`: {p}' for p in check_make(args, False)]
        continue
      if program.startswith('bench/'):
        problems += [f'{doc}: `{span}`: {p}'
                     for p in _bench_problems(program, args)]
        continue
      if re.match(r'^tunas_tf\.tools\.[A-Z]+$', program):
        program = None  # `python -m tunas_tf.tools.NAME`: any tool.
      binary = program if program and program.startswith('tunas_tf.') else None
      if binary and binary not in BINARIES:
        problems.append(f'{doc}: `{span}`: no binary {binary}')
        continue
      for name in _flag_names(words):
        if not (_is_flag_of(name, binary) or binary is None and (
            name in OTHER_FLAGS or name in _all_bench_flags(doc))):
          owner = binary or 'any binary'
          problems.append(f'{doc}: `{span}`: --{name} is not a flag of '
                          f'{owner}')
  return problems


def _all_bench_flags(doc: str) -> Set[str]:
  """The flags of the bench scripts `doc` names."""
  scripts = set(re.findall(r'bench/\w+\.py', _read(doc)))
  return set().union(*(bench_flags(s) for s in scripts
                       if os.path.exists(os.path.join(ROOT, s))))


def path_problems(doc: str) -> List[str]:
  """Every repository path (tunas_tf/, docs/, bench/, tests/; globs
  allowed) or relative link of `doc` that does not exist."""
  text = _read(doc)
  problems = []
  for path in sorted(set(_PATH.findall(text))):
    path = path.rstrip('.')
    exists = (glob.glob(os.path.join(ROOT, path)) if '*' in path else
              os.path.exists(os.path.join(ROOT, path)))
    if not exists:
      problems.append(f'{doc}: no {path} in the repository')
  for link in sorted(set(_LINK.findall(text))):
    target = link.split('#')[0]
    if not target or re.match(r'^[a-z]+:', target):
      continue
    if not os.path.exists(os.path.join(ROOT, os.path.dirname(doc), target)):
      problems.append(f'{doc}: the link {link} leads nowhere')
  return problems


def layout_problems() -> List[str]:
  """Every module that docs/layout.md's map of tunas_tf/ names and that
  is not in its package (`  search/  config.py (...), steps.py ...`)."""
  tree = _fenced(_read(os.path.join('docs', 'layout.md')), shell=False)[0]
  problems, package = [], None
  for line in tree.split('\n'):
    match = re.match(r'^  (\w+)(/|\.py)\s', line)
    if match:
      package = match.group(1) if match.group(2) == '/' else ''
    elif not line.startswith('   '):
      package = None  # Out of tunas_tf/.
    if package is None:
      continue
    for name in re.findall(r'(?<![\w/])(\w+\.py)\b', line):
      if not os.path.exists(os.path.join(ROOT, 'tunas_tf', package, name)):
        problems.append(f'docs/layout.md: no tunas_tf/{package}/{name}'
                        .replace('//', '/'))
  return problems


class DocsTest(absltest.TestCase):

  def test_every_fenced_command_of_a_binary_parses(self):
    self.assertEqual([p for doc in DOCS for p in fenced_problems(doc)], [])

  def test_every_flag_in_a_code_span_exists(self):
    self.assertEqual([p for doc in DOCS for p in span_problems(doc)], [])

  def test_every_path_and_link_exists(self):
    self.assertEqual([p for doc in DOCS for p in path_problems(doc)], [])

  def test_the_layout_map_names_existing_modules(self):
    self.assertEqual(layout_problems(), [])

  def test_the_tpu_runbook_gives_each_generation_its_engine_and_image(self):
    text = _read(os.path.join('docs', 'tpu.md'))
    for generation in ('v2', 'v3', 'v4', 'v5e', 'v5p', 'v6e'):
      section = re.search(rf'^### TPU {generation}\b.*?(?=^##)', text,
                          re.M | re.S)
      self.assertIsNotNone(section, f'docs/tpu.md has no TPU {generation}')
      self.assertRegex(section.group(0), r'Engine:? .*`(estimator|'
                       r'--engine=distribute)`', generation)
      self.assertRegex(section.group(0), r'tpu-vm-tf-[\d.]+-(pod-)?(se|pjrt)',
                       generation)

  def test_no_doc_calls_the_distribute_engine_planned(self):
    self.assertEqual([f'{doc}: {line.strip()}' for doc in DOCS
                      for line in _read(doc).split('\n')
                      if re.search(r'(?i)\bplanned\b', line)], [])

  def test_the_docs_show_every_binary_in_a_fenced_command(self):
    shown = {program for doc in DOCS
             for program, _, _ in _doc_commands(doc, fenced=True)}
    # Each binary is run in a fenced command somewhere, so each is parsed.
    self.assertEqual(sorted(set(BINARIES) - shown), [])


class CheckerTest(absltest.TestCase):
  """The checks find what they are for (so the tests above can fail)."""

  def test_a_misspelled_or_misplaced_flag_is_found(self):
    problems = parse_command('tunas_tf.train_search',
                             ['--model_dir=x', '--max_step=3'])
    self.assertLen(problems, 1)
    self.assertRegex(problems[0], "^tunas_tf.train_search: Unknown command "
                     "line flag 'max_step'")
    # A flag of another binary: extract_architecture's, not train_search's.
    self.assertLen(parse_command('tunas_tf.train_search',
                                 ['--cost_tolerance=0.05']), 1)
    self.assertRegex(parse_command('tunas_tf.train_search',
                                   ['--ssd=no_such_space'])[0],
                     'ssd')
    self.assertRegex(parse_command('tunas_tf.train_search',
                                   ['--model_dir', 'x', 'stray'])[0],
                     "stray arguments \\['stray'\\]")
    problems = parse_command('tunas_tf.tools.compare_random', [
        '--search_dir=x', '--train_eval_flags=--epochs=4,--noexprot'])
    self.assertLen(problems, 1)
    self.assertRegex(problems[0], "^tunas_tf.train_eval: Unknown command "
                     "line flag 'noexprot'")

  def test_a_fenced_command_is_read_as_the_shell_reads_it(self):
    block = ('TF_CONFIG=\'{"a": 1}\' nohup .venv/bin/python -m '
             'tunas_tf.train_search --flagfile=tunas_tf/configs/'
             'proxylessnas_search.cfg \\\n    --tpu=$TPU_NAME '
             '--model_dir=gs://$BUCKET/x > log 2>&1 &   # [GCP]\n'
             "python - dir <<'EOF'\nimport sys --not_a_flag\nEOF\n"
             'make search SEARCH_FLAGS="--seed=1"\n')
    commands = [_invocation(w) for w in _commands(_shell_lines(block))]
    self.assertEqual(commands, [
        ('tunas_tf.train_search',
         ['--flagfile=tunas_tf/configs/proxylessnas_search.cfg',
          '--tpu=$TPU_NAME', '--model_dir=gs://$BUCKET/x']),
        ('python', ['-', 'dir']),
        ('make', ['search', 'SEARCH_FLAGS=--seed=1'])])
    self.assertEqual(parse_command(*commands[0]), [])
    self.assertEqual(check_make(['search', 'SEARCH_FLAGS=--seed=1'], True),
                     [])
    problems = check_make(['serch', 'RUNDIR=x', 'SEARCH_FLAGS=--sed=1'],
                          True)
    self.assertEqual(problems[:2], ['make: no target serch in the Makefile',
                                    'make: no variable RUNDIR in the '
                                    'Makefile'])
    self.assertRegex(problems[2], "Unknown command line flag 'sed'")
    self.assertLen(problems, 3)

  def test_flags_in_spans(self):
    self.assertTrue(_is_flag_of('nodownload', None))
    self.assertTrue(_is_flag_of('noexport', 'tunas_tf.train_eval'))
    self.assertFalse(_is_flag_of('nomodel_dir', 'tunas_tf.train_search'))
    self.assertFalse(_is_flag_of('cost_tolerance', 'tunas_tf.train_search'))
    self.assertTrue(_is_flag_of('cost_tolerance', None))
    self.assertTrue(_is_flag_of('helpfull', 'tunas_tf.tools.report'))


if __name__ == '__main__':
  absltest.main()
