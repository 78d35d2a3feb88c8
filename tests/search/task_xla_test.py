"""XLA as the TPU proxy: the search's per-replica step compiles.

On TPU, XLA compiles the whole per-replica step, `SearchTask.step` (sample,
supernet forward and backward, RMSProp update, validation accuracy, reward
and baseline, controller gradients and Adam), whichever engine runs it
(`TPUStrategy`, or TPUEstimator's model_fn, `runtime.estimator.task_model_fn`).
Without a TPU:

* a masked-mode digits_search (every kind of decision: ProxylessNAS ops with
  skippable layers and searched widths, and the same op types in its step as
  `proxylessnas_enlarged_search`, which took 6 times as long to lower) whose
  config says `use_tpu`, in bfloat16 as TPU computes, at batch 2: its replica
  step as the engines take it (`task.from_infeed` of the HWCN input that
  `distribute.dataset_fn` sends, then the task's step) is traced with
  `jit_compile=True` and lowered by tf2xla to HLO
  (`experimental_get_compiler_ir`): every op has an XLA kernel, every shape
  is static, 64-bit integers appear only as scalars (the global step) and as
  the stateless random ops' two-word counters, which TPUs emulate, the
  controller samples with stateless ops, the HWCN images are turned back on
  the device, no assertion is left for XLA to drop. The CPU backend's own
  code generation is not run: it is not what a TPU runs, and on these spaces
  it is slow and large (3.5 min and 5 GB for digits_search);
* the Estimator's model_fn built in a TF1 graph inside
  `tf.compat.v1.xla.experimental.compile`, an XLA compile context like
  TPUEstimator's: it builds (a variable whose initial value is a tensor made
  inside such a context is refused; the controller's logits and Adam slots
  were);
* the HWCN round trip. (The loss and the reward are checked finite on the
  host, by either engine: `runtime.guards`.)
"""

import dataclasses
import tempfile

from absl.testing import absltest
import numpy as np
import pytest
import tensorflow as tf

from tunas_tf.runtime import distribute
from tunas_tf.runtime import estimator
from tunas_tf.runtime import task as runtime_task
from tunas_tf.search import task as task_lib
from tests.testing import hlo
from tests.testing import searches

_BATCH = 2


def _configs(*args):
  """(off TPU, as on TPU) configs of a masked digits_search at batch 2."""
  config = searches.search_config(
      tempfile.mkdtemp(), '--supernet_mode=masked', '--max_steps=40',
      f'--train_batch_size={_BATCH}', '--rl_batch_size_multiplier=1', *args)
  return config, dataclasses.replace(config, job=dataclasses.replace(
      config.job, use_tpu=True, tpu='local'))


def _first_batch(config):
  dataset = distribute.dataset_fn(task_lib.SearchTask(config),
                                 config.job.use_tpu)(
                                     tf.distribute.InputContext(), 0)
  return next(iter(dataset))


class LayoutTest(absltest.TestCase):

  def test_on_tpu_the_images_go_hwcn_and_come_back(self):
    off_tpu, on_tpu = _configs()
    (nhwc, labels), (hwcn, tpu_labels) = map(_first_batch, (off_tpu, on_tpu))
    for side in ('train', 'validation'):
      self.assertEqual(nhwc[side].shape, [_BATCH, 8, 8, 1])
      self.assertEqual(hwcn[side].shape, [8, 8, 1, _BATCH])
      np.testing.assert_array_equal(hwcn[side],
                                    np.transpose(nhwc[side], [1, 2, 3, 0]))
      np.testing.assert_array_equal(
          runtime_task.from_infeed((hwcn, tpu_labels), True)[0][side],
          nhwc[side])
      np.testing.assert_array_equal(tpu_labels[side], labels[side])


class SearchTaskXlaTest(absltest.TestCase):

  def test_the_replica_step_lowers_to_hlo(self):
    _, config = _configs('--use_bfloat16=true', '--sram_kb=12',
                         '--flash_kb=48')
    features, labels = _first_batch(config)
    task = task_lib.SearchTask(config)
    objects = task.build()

    def step(features, labels, global_step):
      return task.step(objects,
                       runtime_task.from_infeed((features, labels), True),
                       global_step)

    compiled = tf.function(step, jit_compile=True, autograph=False)
    module = hlo.module(compiled.experimental_get_compiler_ir(
        features, labels, tf.constant(0, tf.int64))(stage='hlo_serialized'))
    opcodes, op_types, parameters, bf16_convolutions = set(), set(), [], 0
    for instruction in hlo.instructions(module):
      opcodes.add(instruction.opcode)
      op_types.add(instruction.metadata.op_type)
      if instruction.opcode == 'parameter':
        parameters.append(list(instruction.shape.dimensions))
      if (instruction.opcode == 'convolution' and
          instruction.shape.element_type == hlo.BF16):
        bf16_convolutions += 1
    # HWCN images in, turned back (Transpose) before the convolutions.
    self.assertIn([8, 8, 1, _BATCH], parameters)
    self.assertContainsSubset({'Transpose', 'Conv2D', 'If'}, op_types)
    self.assertContainsSubset({'convolution', 'conditional'}, opcodes)
    # No assertion (XLA would drop it): the host checks these instead.
    self.assertNotIn('Assert', op_types)
    self.assertContainsSubset(task.finite_scalars, searches.scalar_tags())
    # The controller samples with stateless draws (a pure function of the
    # seed, the step and the replica); no stateful RNG.
    self.assertNotIn('rng', opcodes)
    self.assertContainsSubset({'StatelessMultinomial',
                               'StatelessRandomUniformV2'}, op_types)
    # 64-bit integers only as scalars (the global step and its schedules),
    # but for the stateless random ops' two-word counters.
    self.assertEqual(hlo.vector_s64(module), [])
    # The Switches are XLA conditionals, the convolutions TPU's bfloat16.
    self.assertGreater(bf16_convolutions, 10)
    # The memory limits' planner replay: a while loop of static shapes, no
    # host call (py_function), so it runs on a TPU as on CPU.
    self.assertIn('while', opcodes)
    self.assertNotIn('custom-call', opcodes)


@pytest.mark.estimator
class EstimatorXlaContextTest(absltest.TestCase):

  def test_model_fn_builds_in_an_xla_compile_context(self):
    config, _ = _configs()
    model_fn = estimator.task_model_fn(task_lib.SearchTask(config),
                                       config.job, config.max_global_step)

    def step(train_images, train_labels, valid_images, valid_labels):
      spec = model_fn({'train': train_images, 'validation': valid_images},
                      {'train': train_labels, 'validation': valid_labels},
                      tf.estimator.ModeKeys.TRAIN, {})
      with tf.control_dependencies([spec.train_op]):
        return tf.identity(spec.loss)

    with tf.Graph().as_default():
      images = [_BATCH, 8, 8, 1]
      labels = [_BATCH, config.job.num_classes]
      inputs = [tf.compat.v1.placeholder(tf.float32, shape)
                for shape in (images, labels) * 2]
      loss, = tf.compat.v1.xla.experimental.compile(step, inputs)
    self.assertEqual(loss.dtype, tf.float32)


if __name__ == '__main__':
  absltest.main()
