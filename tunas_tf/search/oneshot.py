"""One-shot accuracy: architectures scored with a search checkpoint's
supernet weights, as its validation step does, on one pass over a split."""

from __future__ import annotations

from typing import List, Optional, Sequence, Union

import tensorflow as tf

from tunas_tf.data import datasets
from tunas_tf.graph import inherit
from tunas_tf.models import supernet as supernet_lib
from tunas_tf.search import config as config_lib
from tunas_tf.search_space import mobile
from tunas_tf.search_space import schema

Indices = Union[str, Sequence[int]]


def _supernet(config: config_lib.SearchConfig, spec, search_dir: str,
              checkpoint: Optional[str]) -> supernet_lib.Supernet:
  """The search's supernet for `spec` (sampled mode, float32) with a
  checkpoint's weights (default the latest); ValueError for none, or one
  lacking a supernet variable or holding it in another shape."""
  checkpoint = checkpoint or inherit.search_checkpoint(search_dir)
  values = inherit.read_supernet_values(checkpoint)
  net = supernet_lib.Supernet(spec, config.job.num_classes, mode='sampled',
                              input_channels=config.job.num_channels)
  for name, variable in net.variables_by_name().items():
    if name not in values:
      raise ValueError(f'{checkpoint} has no {name}: not a {config.ssd} '
                       'search checkpoint')
    if tuple(values[name].shape) != tuple(variable.shape):
      raise ValueError(f'{checkpoint}: {name} has shape '
                       f'{list(values[name].shape)}, the {config.ssd} '
                       f'supernet {variable.shape.as_list()}')
    variable.assign(values[name])
  return net


def accuracies(search_dir: str, architectures: Sequence[Indices], *,
               checkpoint: Optional[str] = None,
               split: str = datasets.SEARCH_VALIDATION,
               batch_size: Optional[int] = None) -> List[float]:
  """Top-1 of each index vector ('2:1:0' or ints), in order, with the
  supernet's weights at `checkpoint` (default the latest); `batch_size`
  defaults to the search's (batch norm uses each batch's statistics).
  ValueError for a malformed vector, no config or checkpoint, another
  space's checkpoint, or as `datasets.eval_dataset`."""
  config = config_lib.read(search_dir)
  spec = mobile.get_search_space(config.ssd)
  checked = [schema.check_indices(spec, a) for a in architectures]
  net = _supernet(config, spec, search_dir, checkpoint)
  job = config.job
  dataset = datasets.eval_dataset(
      job.dataset, split, job.num_classes,
      batch_size or config.validation_batch_size, data_dir=job.data_dir,
      validation_examples=config.validation_examples,
      image_size=job.image_size)

  # One trace serves every architecture (the masks are arguments; the spec
  # with masks is built inside) and every batch (the last may be short);
  # the supernet is built as in the Estimator's graph, without autograph.
  sizes = [len(o.choices) for o in schema.flatten(spec)]

  @tf.function(input_signature=(
      [tf.TensorSpec([n], tf.float32) for n in sizes], *dataset.element_spec),
               autograph=False)
  def correct(masks, images, labels):
    logits = net(schema.with_masks(spec, masks), images, training=False)
    hits = tf.equal(tf.argmax(logits, -1), tf.argmax(labels, -1))
    return tf.reduce_sum(tf.cast(hits, tf.int64))

  # One pass over the split, every architecture on each batch.
  masks = [[tf.one_hot(i, n) for i, n in zip(indices, sizes)]
           for indices in checked]
  hits, total = [0] * len(masks), 0
  for images, labels in dataset:
    for k, architecture in enumerate(masks):
      hits[k] += int(correct(architecture, images, labels))
    total += int(images.shape[0])
  if not total:
    raise ValueError(f'split {split!r} of {job.dataset} is empty')
  return [h / total for h in hits]

