"""A run's config.json written as the binaries write it, without the run."""

from typing import Any


def write_or_check(config_lib: Any, config: Any, *space: str) -> bool:
  """`check_stored`, then the write (`config_lib`'s for a search, the
  config's own for train_eval): what a run does with its config before it
  writes anything else (`search.runner.run`, `train_eval.runner.run`).

  Args:
    config_lib: `tunas_tf.search.config` or `tunas_tf.train_eval.config`.
    config: the run's config.
    *space: the search's space as JSON (`search.config` only).

  Returns:
    True when the directory already held a run's config.

  Raises:
    ValueError: as `check_stored` (then nothing is written).
  """
  if not space:  # train_eval's config checks and writes itself.
    stored = config.check_stored()
    config.write_stored(stored)
  else:
    stored = config_lib.check_stored(config, *space)
    config_lib.write(config, *space, stored)
  return stored is not None
