"""bench/: every script answers --help; the harness's last line and JSON row.

The benchmarks' figures come from their own runs (bench/README.md); these
tests time nothing. They check that every script still starts and parses
its arguments, that `bench/run.py` knows every script, and what
`_harness.finish` prints and appends: a benchmark's last line as it was
given and a row whose figures are that line's, with the commit, the
machine and the date.
"""

import ast
import datetime
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap

from absl.testing import absltest

from tests.testing import forked

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BENCH = os.path.join(_ROOT, 'bench')


def _load(name: str):
  spec = importlib.util.spec_from_file_location(
      f'bench_{name}', os.path.join(_BENCH, f'{name}.py'))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


harness = _load('_harness')
run = _load('run')


def _scripts():
  """bench/'s runnable scripts (not the helpers starting with _)."""
  return sorted(n for n in os.listdir(_BENCH)
                if n.endswith('.py') and not n.startswith('_'))


def _environ(**extra):
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', CUDA_VISIBLE_DEVICES='',
              **extra)


class ScriptsTest(absltest.TestCase):

  def test_every_script_answers_help(self):
    # Most import TensorFlow: each script's --help in a child of the
    # worker's process that imported it (`forked`; the environment of every
    # other test's children, so no process of its own).
    names = _scripts()
    done = dict(zip(names, forked.run(
        [[os.path.join(_BENCH, name), '--help'] for name in names],
        cwd=_ROOT)))
    for name, result in done.items():
      self.assertEqual(result.returncode, 0,
                       f'{name} --help: {result.stderr[-1000:]}')
      self.assertIn('usage:', result.stdout.lower(), name)

  def test_run_knows_every_script_and_each_has_a_smallest_run(self):
    registered = {b.script for b in run.BENCHMARKS.values()}
    self.assertEqual(sorted(set(_scripts()) - registered - {'run.py'}), [])
    for name, benchmark in run.BENCHMARKS.items():
      if os.path.exists(os.path.join(_BENCH, benchmark.script)):
        line = run.command(name, ['--extra'], smallest=True)
        self.assertEqual(line[:2], [sys.executable,
                                    os.path.join(_BENCH, benchmark.script)])
        self.assertEqual(line[2:], list(benchmark.smallest) + ['--extra'])

  def test_every_benchmark_ends_through_the_harness_under_its_name(self):
    # --help stops before the end: that a script imports what it finishes
    # with, and names itself as run.py does, is read from its source.
    for name, benchmark in run.BENCHMARKS.items():
      path = os.path.join(_BENCH, benchmark.script)
      if not os.path.exists(path):
        continue
      with open(path) as f:
        tree = ast.parse(f.read())
      imported = {alias.name for node in tree.body
                  if isinstance(node, ast.Import) for alias in node.names}
      self.assertIn('_harness', imported, benchmark.script)
      finishes = [node.args[0].value for node in ast.walk(tree)
                  if isinstance(node, ast.Call)
                  and ast.unparse(node.func) == '_harness.finish']
      self.assertEqual(finishes, [name], benchmark.script)

  def test_run_refuses_an_unknown_name_in_one_line(self):
    result = subprocess.run(
        [sys.executable, os.path.join(_BENCH, 'run.py'), 'no_such_bench'],
        capture_output=True, text=True, env=_environ(), check=False)
    self.assertNotEqual(result.returncode, 0)
    self.assertEqual(result.stderr.strip().splitlines(), [
        "bench/run.py: unknown benchmark 'no_such_bench' (known: "
        f'{", ".join(run.BENCHMARKS)})'])


class HarnessTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.dir = tempfile.mkdtemp()
    self.results = os.path.join(self.dir, 'results.jsonl')

  def _stub(self, line_expression: str, **env):
    """Runs a stub benchmark script whose figures come from a function."""
    script = os.path.join(self.dir, 'stub.py')
    with open(script, 'w') as f:
      f.write(textwrap.dedent(f'''\
          import sys
          sys.path.insert(0, {_BENCH!r})
          import _harness

          def figures(n):
            return sum(range(n)), n / 8

          total, share = figures(10)
          print('a table line')
          _harness.finish('stub', {line_expression})
          '''))
    return subprocess.run(
        [sys.executable, script, '--steps', '10'], capture_output=True,
        text=True, env=_environ(**env), check=False)

  def _rows(self):
    with open(self.results) as f:
      return [json.loads(line, parse_constant=self.fail) for line in f]

  def test_prints_the_line_last_and_appends_one_row_a_run(self):
    expression = ("f'total={total} share={share:.3f} "
                  "beats=7/10 proxyless=nan slow=>600'")
    before = datetime.datetime.now(datetime.timezone.utc)
    for _ in range(2):
      result = self._stub(expression, TUNAS_BENCH_RESULTS=self.results)
      self.assertEqual(result.returncode, 0, result.stderr)
      self.assertEqual(result.stdout.splitlines(), [
          'a table line', 'total=45 share=1.250 beats=7/10 proxyless=nan '
          'slow=>600'])
    rows = self._rows()
    self.assertLen(rows, 2)
    row = rows[0]
    self.assertEqual(row['benchmark'], 'stub')
    self.assertEqual(row['figures'], {'total': 45, 'share': 1.25,
                                      'beats': '7/10', 'proxyless': 'nan',
                                      'slow': '>600'})
    self.assertIsInstance(row['figures']['total'], int)
    self.assertEqual(row['args'], ['--steps', '10'])
    head = subprocess.run(['git', '-C', _ROOT, 'rev-parse', '--short',
                           'HEAD'], capture_output=True, text=True,
                          check=True).stdout.strip()
    self.assertIn(row['commit'], (head, head + '-dirty'))
    date = datetime.datetime.fromisoformat(row['date'])
    self.assertLessEqual(before.replace(microsecond=0), date)
    self.assertLessEqual(date, datetime.datetime.now(datetime.timezone.utc))
    machine = row['machine']
    self.assertEqual(machine['cores'], os.cpu_count())
    self.assertIn(machine['isa'], ('AVX-512', 'AVX2', 'no AVX2', 'unknown'))
    if os.path.exists('/proc/cpuinfo'):
      with open('/proc/cpuinfo') as f:
        flags = next(l for l in f if l.startswith('flags')).split()
      self.assertEqual(machine['isa'] == 'AVX-512', 'avx512f' in flags)
    self.assertEqual(machine['tensorflow'],
                     importlib.metadata.version('tensorflow'))
    self.assertEqual(machine['python'], '%d.%d.%d' % sys.version_info[:3])
    self.assertEqual(rows[1]['figures'], row['figures'])

  def test_records_the_settings_that_move_figures(self):
    result = self._stub("f'total={total}'", TUNAS_BENCH_RESULTS=self.results,
                        TF_ENABLE_ONEDNN_OPTS='0')
    self.assertEqual(result.returncode, 0, result.stderr)
    self.assertEqual(self._rows()[0]['machine']['settings'],
                     {'TF_ENABLE_ONEDNN_OPTS': '0'})

  def test_a_line_not_of_pairs_stops_before_printing_or_writing(self):
    result = self._stub("f'total={total} seconds: 3'",
                        TUNAS_BENCH_RESULTS=self.results)
    self.assertNotEqual(result.returncode, 0)
    self.assertEqual(result.stdout.splitlines(), ['a table line'])
    self.assertEqual(result.stderr.strip(),
                     "stub: not a name=value pair: 'seconds:' in "
                     "'total=45 seconds: 3'")
    self.assertFalse(os.path.exists(self.results))

  def test_an_empty_setting_writes_no_row(self):
    result = self._stub("f'total={total}'", TUNAS_BENCH_RESULTS='')
    self.assertEqual(result.returncode, 0, result.stderr)
    self.assertEqual(result.stdout.splitlines()[-1], 'total=45')
    self.assertEqual(os.listdir(self.dir), ['stub.py'])

  def test_an_unwritable_results_file_is_named_after_the_line(self):
    result = self._stub("f'total={total}'", TUNAS_BENCH_RESULTS=self.dir)
    self.assertNotEqual(result.returncode, 0)
    self.assertEqual(result.stdout.splitlines()[-1], 'total=45')
    self.assertIn(f'stub: cannot append to the results file {self.dir}',
                  result.stderr)

  def test_figures_of(self):
    self.assertEqual(list(harness.figures_of('b=1 a=2e-3 c=inf d=-')),
                     ['b', 'a', 'c', 'd'])
    self.assertEqual(harness.figures_of('a=2e-3 c=inf'),
                     {'a': 0.002, 'c': 'inf'})
    for line in ('', 'a=', '=1', 'a=1 b'):
      with self.assertRaises(ValueError, msg=line):
        harness.figures_of(line)


if __name__ == '__main__':
  absltest.main()
