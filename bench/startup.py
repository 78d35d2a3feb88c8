"""Seconds from process start to the first finished step, search vs train_eval.

Usage:
  python bench/startup.py [--timeout 600] [--skip_proxylessnas]

Each run is a fresh process (`bench/_child.py`) on `bench_images` (32x32
RGB noise in 10 classes, built offline by `_harness.bench_data_dir`) resized
to the space's side, CPU only, stopped right after its first step:

* `cifar_search`: the search (`train_search`, sampled mode, 32x32, batch 64);
* `cifar_search` widest architecture: `train_eval` of the space's largest
  architecture (`schema.extreme_indices`), same side and batch;
* `proxylessnas_search`: the search at 224x224, batch 8, sampled mode.

For each it prints the seconds since process start at which TF was imported,
the graph was built, the TF session existed (`-` on the distribute engine,
the binaries' only one where TF has no Estimator: it has no session) and the
first step finished, and the graph's op count (on the distribute engine the
top level of the traced loop function, whose body holds the step). A run
past `--timeout` is reported as `>timeout`. The last line is
`first_step_s_cifar=<f> startup_ratio_cifar=<f> first_step_s_proxylessnas=<f>`
(the ratio: search / train_eval, process start to first step).
"""

from __future__ import annotations

import argparse

import _harness

_COMMON = ['--log_every_steps=1000', '--tpu_iterations_per_loop=1',
           '--save_checkpoints_steps=100000']


def runs(skip_proxylessnas: bool):
  """(label, kind, flags) of the benchmark's runs."""
  cifar = ['--ssd=cifar_search', '--train_batch_size=64'] + (
      _harness.data_flags(32))
  yield ('cifar_search search', 'search',
         cifar + _COMMON + ['--supernet_mode=sampled', '--max_steps=100'])
  yield ('cifar_search widest train_eval', 'train_eval',
         cifar + _COMMON + [f'--indices={_harness.widest_indices("cifar_search")}',
                            '--max_steps=100', '--noexport'])
  if not skip_proxylessnas:
    yield ('proxylessnas_search search', 'search',
           ['--ssd=proxylessnas_search', '--train_batch_size=8'] +
           _harness.data_flags(224) + [ '--supernet_mode=sampled',
            '--max_steps=100'] + _COMMON)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--timeout', type=float, default=600.0)
  parser.add_argument('--skip_proxylessnas', action='store_true')
  args = parser.parse_args()
  print(f'{"run":32s} {"import":>7s} {"built":>7s} {"session":>8s} '
        f'{"1st step":>9s} {"ops":>7s}')
  first = {}
  for label, kind, flags in runs(args.skip_proxylessnas):
    record = _harness.run_child(kind, flags, 1, args.timeout)
    if record is None:
      print(f'{label:32s} did not finish its first step in {args.timeout:.0f} s')
      first[label] = float('inf')
      continue
    first[label] = record['first_step_s']
    # The distribute engine has no session: its loop is a tf.function.
    session = record.get('session_created_s')
    session = '-' if session is None else f'{session:.1f}'
    print(f'{label:32s} {record["imported_s"]:7.1f} '
          f'{record["graph_built_s"]:7.1f} {session:>8s} '
          f'{record["first_step_s"]:9.1f} {record["graph_ops"]:7d}',
          flush=True)
  search = first['cifar_search search']
  ratio = search / first['cifar_search widest train_eval']
  proxyless = first.get('proxylessnas_search search', float('nan'))
  fmt = lambda v: f'>{args.timeout:.0f}' if v == float('inf') else f'{v:.1f}'
  _harness.finish('startup',
                  f'first_step_s_cifar={search:.1f} '
                  f'startup_ratio_cifar={ratio:.2f} '
                  f'first_step_s_proxylessnas={fmt(proxyless)}')


if __name__ == '__main__':
  main()
