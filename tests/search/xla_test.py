"""XLA as the TPU proxy: the masked per-replica search step compiles.

On TPU, TPUEstimator builds the search's model_fn inside an XLA compile
context and XLA compiles the whole per-replica step (sample, supernet
forward and backward, RMSProp update, validation accuracy, reward and
baseline, controller gradients and Adam). Without a TPU, two checks on the
real model_fn (`search.runner.make_model_fn`, masked mode, off TPU):

* built in a TF1 graph inside `tf.compat.v1.xla.experimental.compile`, an
  XLA compile context like TPU's: the graph builds (a variable whose initial
  value is a tensor made inside such a context is refused; the controller's
  logits and Adam slots were);
* traced in an XLA context and lowered by tf2xla to HLO (`jit_compile=True`,
  `experimental_get_compiler_ir(stage='hlo')`) for `digits_search` (every
  kind of decision, and the same 90 op types in its step's graph as
  `proxylessnas_enlarged_search`, which took 6 times as long to lower) in
  bfloat16 at batch 2: every op has an XLA kernel, every shape
  is static, 64-bit integers appear only as scalars (the global step) and
  as the stateless random ops' two-word counters, which TPUs emulate, and
  the controller samples with stateless ops. The CPU backend's own code
  generation is not run: it is not what a TPU runs, and on these spaces it
  is slow and large (3.5 min and 5 GB for digits_search; cifar_search
  passed 23 GB; README "bfloat16 and XLA"). About 25 s on 2 busy cores.
"""

import tempfile

from absl.testing import absltest
import pytest
import tensorflow as tf
from tensorflow.python.ops import control_flow_ops  # pylint: disable=g-direct-tensorflow-import

from tunas_tf.data import datasets
from tunas_tf.search import runner
from tunas_tf.search_space import mobile
from tests.testing import hlo
from tests.testing import searches


def _config(ssd: str, image_size: int, batch: int, *args: str):
  """A masked-mode search config for `ssd` on a made-up RGB dataset."""
  info = datasets.DatasetInfo(
      'made_up', image_size, 3 if ssd != 'digits_search' else 1, 10,
      {'search_train': 1000, 'search_validation': 100, 'test': 100})
  flag_values = searches.search_flags(
      f'--model_dir={tempfile.mkdtemp()}', f'--ssd={ssd}', '--max_steps=40',
      '--supernet_mode=masked', f'--train_batch_size={batch}',
      '--rl_batch_size_multiplier=1', '--cost_model=macs',
      '--preprocessing=none', *args)  # (The input is made up here.)
  from tunas_tf import train_search  # pylint: disable=g-import-not-at-top
  return train_search.config_from_flags(flag_values, info)


def _per_replica_step(config):
  """(train images, labels, validation images, labels) -> loss, after the
  step's model and controller updates: the search's model_fn."""
  model_fn = runner.make_model_fn(config)

  def step(train_images, train_labels, valid_images, valid_labels):
    spec = model_fn({'train': train_images, 'validation': valid_images},
                    {'train': train_labels, 'validation': valid_labels},
                    tf.estimator.ModeKeys.TRAIN, {})
    with tf.control_dependencies([spec.train_op]):
      return tf.identity(spec.loss)

  return step


def _inputs(config, as_specs=False):
  job = config.job
  shape = [config.train_batch_size, job.image_size, job.image_size,
           job.num_channels]
  labels = [config.train_batch_size, job.num_classes]
  if as_specs:
    return [tf.TensorSpec(shape), tf.TensorSpec(labels)] * 2
  return [tf.zeros(shape), tf.one_hot(tf.range(shape[0]) % labels[1],
                                       labels[1])] * 2


def lower_to_hlo(config):
  """The per-replica step of `config` as tf2xla's HLO module.

  The step is traced once, as TF1 code (`wrap_function`: its variables are
  created on the first and only trace), inside an XLA control-flow context
  as a `jit_compile` function or TPU's replicate context would be (so that
  `tf.cond` / `tf.switch_case` gradients keep their intermediates in a form
  XLA takes), then lowered by `jit_compile=True`.
  """
  context = control_flow_ops.XLAControlFlowContext()
  context.Enter()
  try:
    step = tf.compat.v1.wrap_function(_per_replica_step(config),
                                      _inputs(config, as_specs=True))
  finally:
    context.Exit()
  compiled = tf.function(step, jit_compile=True, autograph=False)
  return hlo.module(compiled.experimental_get_compiler_ir(
      *_inputs(config))(stage='hlo_serialized'))


@pytest.mark.estimator
class XlaTest(absltest.TestCase):

  def test_model_fn_builds_in_an_xla_compile_context(self):
    config = _config('digits_search', 8, 2)
    with tf.Graph().as_default():
      inputs = [tf.compat.v1.placeholder(s.dtype, s.shape)
                for s in _inputs(config, as_specs=True)]
      loss, = tf.compat.v1.xla.experimental.compile(
          _per_replica_step(config), inputs)
    self.assertEqual(loss.dtype, tf.float32)

  def test_per_replica_step_lowers_to_hlo(self):
    # Both kinds of decision (ProxylessNAS ops with skippable layers, and
    # searched widths) at the space's own 8x8. In bfloat16, as TPU's `ontpu`
    # computes (float32 lowers the same ops with float32 shapes).
    ssd = 'digits_search'
    module = lower_to_hlo(_config(ssd, mobile.get_image_size(ssd), 2,
                                  '--use_bfloat16=true'))
    opcodes, op_types, bf16_convolutions = set(), set(), 0
    for instruction in hlo.instructions(module):
      opcodes.add(instruction.opcode)
      op_types.add(instruction.metadata.op_type)
      if (instruction.opcode == 'convolution' and
          instruction.shape.element_type == hlo.BF16):
        bf16_convolutions += 1
    # The Switches are XLA conditionals; the controller samples on device
    # with stateless draws (no stateful RNG: the sample at a step is a
    # function of the seed, the step and the replica).
    self.assertContainsSubset({'convolution', 'conditional'}, opcodes)
    self.assertNotIn('rng', opcodes)
    self.assertContainsSubset({'StatelessMultinomial',
                               'StatelessRandomUniformV2'}, op_types)
    # 64-bit integers only as scalars (the global step and its schedules),
    # but for the stateless random ops' two-word counters.
    self.assertEqual(hlo.vector_s64(module), [])
    self.assertGreater(bf16_convolutions, 10)


if __name__ == '__main__':
  absltest.main()
