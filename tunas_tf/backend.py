"""What the search and train_eval binaries share: data/backend flags, the Estimator.

Both binaries run their model_fn on `TPUEstimator`: on Cloud TPU with
`--tpu=NAME` (resolved by `TPUClusterResolver`), and with `use_tpu=False` on
CPU/GPU. Flags are defined on a caller's `FlagValues` so tests can build
their own.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from absl import flags


def define_data_flags(f: flags.FlagValues, model_dir_help: str) -> None:
  """--model_dir (alias --checkpoint_dir), --dataset, --data_dir (alias
  --dataset_dir), --[no]download, --num_classes, --image_size."""
  flags.DEFINE_string('model_dir', None, model_dir_help, flag_values=f)
  flags.DEFINE_alias('checkpoint_dir', 'model_dir', flag_values=f)
  flags.DEFINE_string('dataset', 'digits', "'digits' (offline, bundled) or a "
                      'TFDS image-classification dataset name.', flag_values=f)
  flags.DEFINE_string('data_dir', None, 'TFDS data directory.', flag_values=f)
  flags.DEFINE_alias('dataset_dir', 'data_dir', flag_values=f)
  flags.DEFINE_boolean('download', True, 'Let TFDS download and prepare a '
                       'missing dataset; with --nodownload a missing dataset '
                       'fails at once.', flag_values=f)
  flags.DEFINE_integer('num_classes', None, "Classes of the classifier; "
                       "default the dataset's own count.", flag_values=f)
  flags.DEFINE_integer('image_size', None, 'Input side in pixels; default the '
                       "dataset's own (digits: 8).", flag_values=f)


def define_tpu_flags(f: flags.FlagValues, iterations_per_loop: int) -> None:
  """--tpu, --tpu_zone, --gcp_project, --use_tpu, --tpu_iterations_per_loop."""
  flags.DEFINE_string('tpu', '', 'Cloud TPU name or grpc://ip:port; implies '
                      '--use_tpu.', flag_values=f)
  flags.DEFINE_string('tpu_zone', None, 'TPU zone.', flag_values=f)
  flags.DEFINE_string('gcp_project', None, 'GCP project.', flag_values=f)
  flags.DEFINE_boolean('use_tpu', None, 'Run on TPU; default: whether --tpu is '
                       'set.', flag_values=f)
  flags.DEFINE_integer('tpu_iterations_per_loop', iterations_per_loop,
                       'Steps per TPU loop; also the summary cadence.',
                       flag_values=f)


def resolve_use_tpu(tpu: str, use_tpu: Optional[bool]) -> bool:
  """--use_tpu defaults to whether --tpu is set; --use_tpu needs --tpu."""
  resolved = bool(tpu) if use_tpu is None else use_tpu
  if resolved and not tpu:
    raise ValueError('--use_tpu needs --tpu=NAME')
  return resolved


def make_estimator(model_fn: Callable[..., Any], config: Any, *,
                   eval_batch_size: Optional[int] = None):
  """TPUEstimator on TPU (`config.use_tpu`) or on CPU/GPU.

  Args:
    model_fn: the TPUEstimator model_fn.
    config: a config with `use_tpu`, `tpu`, `tpu_zone`, `gcp_project`,
      `model_dir`, `seed`, `save_checkpoints_steps`, `keep_checkpoint_max`,
      `tpu_iterations_per_loop` and `train_batch_size`.
    eval_batch_size: the eval and predict batch, when the run evaluates.

  Raises:
    ValueError: when the TPU name cannot be resolved (one line).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tpu = tf.compat.v1.estimator.tpu
  cluster = None
  if config.use_tpu:
    try:
      cluster = tf.distribute.cluster_resolver.TPUClusterResolver(
          config.tpu, zone=config.tpu_zone, project=config.gcp_project)
    except Exception as e:  # The resolver raises several kinds of errors.
      raise ValueError(f'Cannot resolve TPU {config.tpu!r}: {e}') from None
  run_config = tpu.RunConfig(
      cluster=cluster, model_dir=config.model_dir,
      tf_random_seed=config.seed,
      save_checkpoints_steps=config.save_checkpoints_steps,
      keep_checkpoint_max=config.keep_checkpoint_max,
      log_step_count_steps=None,
      # The search graph is large (~5 MB serialised for digits_search);
      # writing it with every checkpoint cost seconds per save.
      checkpoint_save_graph_def=False,
      tpu_config=tpu.TPUConfig(
          iterations_per_loop=config.tpu_iterations_per_loop,
          per_host_input_for_training=(
              tpu.InputPipelineConfig.PER_HOST_V2)))
  return tpu.TPUEstimator(
      model_fn=model_fn, config=run_config, use_tpu=config.use_tpu,
      train_batch_size=config.train_batch_size,
      eval_batch_size=eval_batch_size, predict_batch_size=eval_batch_size)
