"""The supernet: a search space's network at its widest, run on sampled masks.

As the original's `mobile_model_v3.py`: op choices are Switches
(sum_i mask[i] * branch_i(x), no gradient through the mask), filter choices
take n = choices[argmax(mask)] channels. Pass masks into a `tf.function` as
tensors: a spec argument would trace as a constant.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Tuple

import tensorflow as tf

from tunas_tf.io import checks
from tunas_tf.layers import masked
from tunas_tf.layers import regularization
from tunas_tf.models import supernet_nodes as nodes
from tunas_tf.models import supernet_widths as widths
from tunas_tf.search_space import naming
from tunas_tf.search_space import ops as ops_lib
from tunas_tf.search_space import schema
from tunas_tf.search_space import structure
from tunas_tf.search_space import walker

MODES = naming.MODES
COMPUTE_DTYPES = (tf.float32, tf.bfloat16)


def _first_difference(a: Any, b: Any, path: str = ''
                      ) -> Optional[Tuple[str, Any, Any]]:
  """(path, a's value, b's value) where two specs first differ (masks
  ignored), or None."""
  if type(a) is not type(b):
    return path, a, b
  if dataclasses.is_dataclass(a) and not isinstance(a, type):
    pairs = [(f.name, getattr(a, f.name), getattr(b, f.name))
             for f in dataclasses.fields(a) if f.compare]
  elif isinstance(a, (list, tuple)) and len(a) == len(b):
    pairs = list(zip(range(len(a)), a, b))
  elif isinstance(a, dict) and sorted(a) == sorted(b):
    pairs = [(k, a[k], b[k]) for k in sorted(a)]
  else:
    return None if a == b else (path, a, b)
  for key, x, y in pairs:
    found = _first_difference(x, y, naming.join(path, key))
    if found is not None:
      return found
  return None


_short = structure.short


class Supernet(tf.Module):
  """A search space's network with weights at the widest width."""

  def __init__(self, spec: ops_lib.ConvTowerSpec, num_classes: int,
               mode: str = naming.SAMPLED, dropout_rate: float = 0.0,
               input_channels: int = 3, seed: Optional[int] = None,
               batch_norm_epsilon: float = naming.BATCH_NORM_EPSILON,
               compute_dtype: tf.DType = tf.float32,
               name: Optional[str] = None):
    """Builds the network and creates its float32 variables.

    Args:
      spec: a `ConvTowerSpec`, a search space or a fixed architecture.
      mode: `'masked'` (static shapes; TPU) or `'sampled'` (CPU/GPU).
      dropout_rate: in [0, 1), before the classifier when training.
      seed: None, or an int fixing every initial value by variable name.
      compute_dtype: tf.float32 or tf.bfloat16, of the forward pass and logits.

    Raises:
      ValueError: for a bad argument (named) or a spec it cannot build.
    """
    super().__init__(name=name)
    self.mode = masked.check_mode(mode)
    if not isinstance(spec, ops_lib.ConvTowerSpec):
      raise ValueError(f'Supernet needs a ConvTowerSpec, got {_short(spec)}')
    checks.positive_int('num_classes', num_classes)
    checks.number('dropout_rate', dropout_rate, 0, 1, high_open=True,
                  prefix='')
    checks.positive_int('input_channels', input_channels)
    if not isinstance(spec.filters_base, int) or spec.filters_base <= 0:
      raise ValueError(
          f'filters_base must be a positive int, got {spec.filters_base!r}')
    checks.number('batch_norm_epsilon', batch_norm_epsilon, 0, low_open=True,
                  prefix='')
    try:
      dtype = tf.as_dtype(compute_dtype)
    except TypeError:
      dtype = None
    if dtype not in COMPUTE_DTYPES:
      raise ValueError('compute_dtype must be one of '
                       f'{[d.name for d in COMPUTE_DTYPES]}, got '
                       f'{compute_dtype!r}')
    self.compute_dtype = dtype
    self.spec = spec
    self.num_classes = num_classes
    self.input_channels = input_channels
    self.dropout_rate = float(dropout_rate)
    self._epsilon = float(batch_norm_epsilon)

    self._store = nodes.VariableStore(seed)
    network = walker.describe_network(spec, input_channels)
    self._layers: List[nodes.Node] = [
        nodes.build(layer.part, self._store) for layer in network.layers
        if layer.part is not None]
    self._classifier = nodes.Classifier(self._store, network.output_width,
                                        num_classes, self.dropout_rate)
    self._width_rules = network.widths
    self._store.build()
    # An attribute, so that tf.train.Checkpoint tracks the variables.
    self._named_variables = dict(self._store.variables)

  def variables_by_name(self) -> Dict[str, tf.Variable]:
    """All float32 variables at their widest, by name, in network order."""
    return dict(self._store.variables)

  @property
  def trainable_variables(self) -> Tuple[tf.Variable, ...]:
    """Every variable (all are trainable), in creation order."""
    return tuple(self._store.variables.values())

  @property
  def variables(self) -> Tuple[tf.Variable, ...]:
    """Same as `trainable_variables` (there are no moving statistics)."""
    return self.trainable_variables

  def _context(self, sampled_spec: Any, training: bool,
               dropout_seed: Optional[tf.Tensor] = None) -> widths.CallContext:
    """`sampled_spec`'s `CallContext`; in a graph, one resolution per replica
    and spec object (masks, widths, slice bounds built once)."""
    if tf.executing_eagerly():
      return self._resolve(sampled_spec, training, dropout_seed)
    graph = tf.compat.v1.get_default_graph()
    calls = masked.graph_cache(graph, 'supernet_calls')
    replica = tf.distribute.get_replica_context()
    key = (id(self), id(sampled_spec), id(replica))
    if key not in calls:
      # The objects are kept, so that their ids stay unique in the key.
      calls[key] = (self, sampled_spec, replica,
                    self._resolve(sampled_spec, training, dropout_seed))
    return calls[key][3].for_call(bool(training), dropout_seed)

  def _resolve(self, sampled_spec: Any, training: bool,
               dropout_seed: Optional[tf.Tensor]) -> widths.CallContext:
    """A new `CallContext` of `sampled_spec` (checked)."""
    difference = _first_difference(sampled_spec, self.spec)
    if difference is not None:
      path, got, expected = difference
      raise ValueError(
          'The sampled spec does not match the supernet\'s spec at '
          f'{path or "<root>"!r}: got {_short(got)}, expected '
          f'{_short(expected)}')
    masks = {}
    for path, oneof in schema.flatten_with_paths(sampled_spec):
      n = len(oneof.choices)
      if oneof.mask is None:
        if n > 1:
          raise ValueError(f'The OneOf at {path!r} has {n} choices but no '
                           'mask; sample the spec first')
        continue
      mask = tf.stop_gradient(tf.cast(oneof.mask, tf.float32))
      shape = mask.shape
      if shape.rank is not None and (shape.rank != 1 or (
          shape[0] is not None and shape[0] != n)):
        raise ValueError(f'The mask at {path!r} has shape {shape}; expected '
                         f'[{n}] (one entry per choice)')
      if shape.rank is None or shape[0] is None:
        mask = tf.ensure_shape(mask, [n])
      masks[path] = mask
    return widths.CallContext(masks, self._width_rules, self.mode,
                              bool(training), self._epsilon,
                              self.compute_dtype, dropout_seed)

  @tf.autograph.experimental.do_not_convert
  def __call__(self, sampled_spec: Any, images: tf.Tensor,
               training: bool = False,
               dropout_seed: Optional[tf.Tensor] = None) -> tf.Tensor:
    """The sampled architecture's logits [batch, num_classes] (`compute_dtype`).

    Args:
      sampled_spec: the spec with a rank-1 mask on every multi-choice OneOf.
      images: float [batch, H, W, input_channels].
      training: enables dropout (batch norm always uses batch statistics).
      dropout_seed: None (stateful) or an integer [2] Tensor.

    Raises:
      ValueError: naming the first path where `sampled_spec` differs from the
        spec, a missing or misshapen mask, or misshapen images.
    """
    ctx = self._context(sampled_spec, training, dropout_seed)
    images = tf.convert_to_tensor(images)
    if not images.dtype.is_floating:
      raise ValueError(f'images must be a float Tensor, got {images.dtype}')
    if images.shape.rank != 4 or images.shape[-1] != self.input_channels:
      raise ValueError(f'images must be [batch, H, W, {self.input_channels}], '
                       f'got shape {images.shape}')
    x = tf.cast(images, self.compute_dtype)
    for node in self._layers:
      x = node(x, ctx)
    return self._classifier(x, ctx)

  @tf.autograph.experimental.do_not_convert
  def regularization_loss(self, sampled_spec: Any,
                          weight_decay: float) -> tf.Tensor:
    """(weight_decay / 2) * sum over kernels of sum((kernel * mask)^2), each
    Switch branch's terms times its mask value; a kernel reached from several
    branches counts once, with its largest term. ValueError as `__call__`, or
    for a negative `weight_decay`."""
    ctx = self._context(sampled_spec, training=False)
    terms = nodes.merge_max([node.regularizers(ctx) for node in self._layers])
    return regularization.weight_decay_loss(list(terms.values()),
                                            weight_decay)
