"""The bad-input table: every binary refuses bad input in one line, unchanged.

Each row runs one binary's `main(argv, flag_values)` in-process in a fresh
directory `root` (which its `prepare` fills first: a copy of the shared
finished search, a train_eval directory, a file where a directory belongs,
...). Every row must exit non-zero with one line (`sys.exit` of one line; a
flag the parser refuses keeps absl's two-line form, of which the first
names the flag), that line must match the row's pattern, and every file and
directory under `root` must be byte-for-byte as before (a model directory
that did not exist still does not). Every row fails while checking its
input, before any graph is built. A few rows run again as real processes
for the exit code and the absence of a traceback.
"""

import os
import shutil
import sys
import tempfile
from unittest import mock

from absl import flags
from absl.testing import absltest
from absl.testing import parameterized

from tests.testing import bad_input_rows as table
from tests.testing import jpeg_folder
from tests.testing import searches
from tunas_tf import train_search
from tunas_tf.data import importing
from tunas_tf.data import local_data
from tunas_tf.search import runner as search_runner
from tunas_tf.search_space import mobile
from tunas_tf.train_eval import __main__ as train_eval_main
from tests.testing import forked

class BadInputTest(parameterized.TestCase):

  def _root(self) -> str:
    root = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, root, ignore_errors=True)
    return root

  @parameterized.named_parameters(*table.rows())
  def test_refused_in_one_line_and_nothing_changes(self, binary, args,
                                                   pattern, prepare):
    root = self._root()
    if prepare:
      prepare(root)
    args = [a.format(root=root) for a in args]
    before = table.snapshot(root)
    values, argv = table.parse(binary, args)
    proxies = {k: '' for k in ('https_proxy', 'HTTPS_PROXY', 'http_proxy',
                               'HTTP_PROXY', 'all_proxy', 'ALL_PROXY')}
    with table.OFFLINE, mock.patch.dict(os.environ, proxies):
      with self.assertRaises(SystemExit) as caught:
        table.BINARIES[binary].main(argv, values)
    line = caught.exception.code
    self.assertIsInstance(line, str, f'exit code {line!r}')
    self.assertNotIn('\n', line)
    self.assertTrue(line.startswith(f'{binary}: '), line)
    self.assertRegex(line, pattern)
    self.assertEqual(table.snapshot(root), before, 'the directory changed')

  @parameterized.parameters(*table.FLAG_ROWS)
  def test_flag_parser_names_the_flag(self, binary, args, flag):
    with self.assertRaisesRegex(flags.Error, flag):
      table.parse(binary, args)

  def test_a_finished_search_started_again_writes_nothing(self):
    root = self._root()
    table.finished_search(root)
    model_dir = os.path.join(root, 'search')
    before = table.snapshot(root)
    # The same flags, then another cadence (which a restart may change).
    for extra in ([], ['--save_checkpoints_steps=2', '--log_every_steps=1']):
      values, argv = table.parse('train_search', [f'--model_dir={model_dir}',
                                             *table.SHORT, *extra])
      with self.assertLogs('absl', level='INFO') as logs:
        self.assertEqual(train_search.main(argv, values), 0)
      self.assertTrue(any('has finished (step 8 of 8); nothing to do' in line
                          for line in logs.output), logs.output)
      self.assertEqual(table.snapshot(root), before)
    config = searches.search_config(model_dir, *table.SHORT)
    self.assertFalse(search_runner.run_search(config))

  def test_real_processes_exit_non_zero_without_a_traceback(self):
    root = self._root()
    table.file_in_place(root)
    cases = [
        ('train_search', [f'--model_dir={root}/run', '--rl_learning_rate=-1'],
         'train_search: --rl_learning_rate must be >= 0, got -1.0'),
        ('train_search', [f'--model_dir={root}/afile'],
         f'train_search: --model_dir={root}/afile is a file, not a directory'),
        ('train_eval', [f'--model_dir={root}/run', f'--indices={table.ZEROS}',
                        '--momentum=-3'],
         'train_eval: --momentum must be in [0, 1), got -3.0'),
        ('train_search', [f'--model_dir={root}/run', '--tpu=local'],
         'train_search: --tpu=local: this machine has no TPU (no /dev/accel* '
         "or /dev/vfio device); it names a Cloud TPU VM's own TPU: run on "
         'the TPU VM, or give the TPU by name'),
        ('train_eval', [f'--model_dir={root}/run', f'--indices={table.ZEROS}',
                        '--tpu=grpc://10.0.0.2'],
         'train_eval: --tpu=grpc://10.0.0.2 is not an address '
         'grpc://HOST:PORT (e.g. grpc://10.0.0.2:8470)'),
        ('train_search', ['--ssd=no_such_space'],
         'train_search: flag --ssd=no_such_space: value should be one of '
         f"<{'|'.join(sorted(mobile.SEARCH_SPACES))}> (--help lists the "
         'flags)'),
    ]
    before = table.snapshot(root)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
    processes = [forked.Child(
        [sys.executable, '-m', table.MODULES[binary], *args], env=env)
                 for binary, args, _ in cases]
    for process, (_, args, last) in zip(processes, cases):
      _, stderr = process.communicate(timeout=300)
      self.assertNotEqual(process.returncode, 0, args)
      self.assertNotIn('Traceback', stderr)
      lines = [line for line in stderr.splitlines() if line.strip()]
      self.assertEqual(lines[-1], last)
    self.assertEqual(table.snapshot(root), before)

  def test_a_sixty_image_folder_is_refused_once_with_sizes_that_fit(self):
    # 30 + 30 images of 16 x 16, imported as tools/import_dataset does; the
    # search holds out 10% (6) for its controller.
    root = self._root()
    sizes = {'train': {c: [(16, 16)] * 30 for c in ('cat', 'dog')},
             'test': {c: [(16, 16)] * 2 for c in ('cat', 'dog')}}
    folder = jpeg_folder.make_jpeg_folder(os.path.join(root, 'images'),
                                          sizes, seed=0)
    data_dir = os.path.join(root, 'tfds')
    importing.write_dataset(local_data.read_folder(folder), 'sixty', data_dir,
                            'sixty images')
    data = ['--dataset=sixty', f'--data_dir={data_dir}', '--nodownload',
            '--image_size=16']
    cases = {
        'train_search': (
            [f'--model_dir={root}/search', *data],
            "train_search: --train_batch_size=64 is more than the 54 "
            "search-train examples of 'sixty': use --train_batch_size=54 or "
            'less; and the validation batch (--train_batch_size x '
            '--rl_batch_size_multiplier = 64 x 4.0) is 256, more than the 6 '
            "search-validation examples of 'sixty': at --train_batch_size=54 "
            'use --rl_batch_size_multiplier=0.111 or less'),
        'train_eval': (
            [f'--model_dir={root}/train_eval', f'--indices={table.ZEROS}', *data],
            "train_eval: --train_batch_size=64 is more than the 60 training "
            "examples of 'sixty': use --train_batch_size=60 or less"),
    }
    before = table.snapshot(root)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
    processes = {binary: forked.Child(
        [sys.executable, '-m', table.MODULES[binary], *args], env=env)
                 for binary, (args, _) in cases.items()}
    for binary, process in processes.items():
      _, stderr = process.communicate(timeout=300)
      self.assertNotEqual(process.returncode, 0, binary)
      self.assertNotIn('Traceback', stderr)
      lines = [line for line in stderr.splitlines() if line.strip()]
      self.assertEqual(lines[-1], cases[binary][1])
    self.assertEqual(table.snapshot(root), before)
    # The sizes advised are accepted.
    values, _ = table.parse('train_search', [f'--model_dir={root}/search', *data,
                                        '--train_batch_size=54',
                                        '--rl_batch_size_multiplier=0.111'])
    config = train_search.config_from_flags(values)
    self.assertEqual((config.search_train_examples, config.train_batch_size,
                      config.validation_batch_size), (54, 54, 6))
    values, _ = table.parse('train_eval', [f'--model_dir={root}/train_eval',
                                      f'--indices={table.ZEROS}', *data,
                                      '--train_batch_size=60'])
    self.assertEqual(train_eval_main.config_from_flags(values).train_examples,
                     60)


if __name__ == '__main__':
  absltest.main()
