"""Several (cost model, target) pairs in one search, and its front.

One short digits search of three pairs (two MACs targets and a fitted
latency model's default target): each policy's state moves on its turns
only (step mod 3), TensorBoard shows each apart, `extract_architecture
--front` writes a point per pair and `--target` one between the searched
points. A search directory written before pairs existed (no `extra_pairs`
in config.json) resumes bit for bit.
"""

import glob
import json
import os
import shutil
import tempfile

from absl import flags
from absl.testing import absltest
import numpy as np
import tensorflow as tf

from tunas_tf import architecture
from tunas_tf.cost_model import linear
from tunas_tf.search import config as config_lib
from tunas_tf.search import extract
from tunas_tf.search_space import mobile
from tunas_tf.tools import extract_architecture
from tests.testing import forked
from tests.testing import searches

_TARGETS = (150000.0, 330000.0)
# Steps 0..7 of three pairs taking turns: pair k on steps t with t % 3 == k.
_TURNS = (3, 3, 2)


def _fitted_model(path: str) -> None:
  """A fitted digits_search latency model measured at 8 px, float32."""
  with open(path, 'w') as f:
    json.dump({'ssd': 'digits_search', 'units': 'ms', 'num_features': 744,
               'kernel': [0.0] + [0.01] * 743, 'bias': 0.0316,
               'measured_with': {'ssd': 'digits_search', 'image_size': 8,
                                 'num_classes': 10, 'input_channels': 1,
                                 'backend': 'tflite', 'device': 'a CPU'}}, f)


def _extract(model_dir: str, *args: str) -> None:
  values = flags.FlagValues()
  extract_architecture.define_flags(values)
  values(['extract_architecture', f'--model_dir={model_dir}', *args])
  extract_architecture.main(['extract_architecture'], values)


class FrontTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    root = tempfile.mkdtemp()
    cls.fitted = os.path.join(root, 'fitted.json')
    _fitted_model(cls.fitted)
    cls.fitted_target = linear.default_target(linear.get_cost_model(
        'digits_search', cls.fitted, image_size=8, num_classes=10,
        input_channels=1, precision='float32'))
    cls.pairs = [('macs', _TARGETS[0]), ('macs', _TARGETS[1]),
                 (cls.fitted, cls.fitted_target)]
    cls.model_dir = os.path.join(root, 'front')
    done = forked.run_one(searches.search_command(
        cls.model_dir, *searches.SHORT_SEARCH_FLAGS,
        '--cost_model=' + ','.join(m for m, _ in cls.pairs),
        '--rl_cost_model_target=' + ','.join(f'{t!r}' for _, t in cls.pairs)),
        env=searches.QUIET)
    assert done.returncode == 0, done.stderr[-3000:]

  def test_each_policy_moves_on_its_turns_only(self):
    reader = searches.reader(self.model_dir)
    logits = []
    for k, turns in enumerate(_TURNS):
      suffix = f'_{k}' if k else ''
      # Adam's powers start at beta and are multiplied on each turn.
      self.assertAlmostEqual(
          reader.get_tensor(f'controller_adam{suffix}/beta2_power'),
          0.999 ** (1 + turns), places=6)
      self.assertAlmostEqual(
          reader.get_tensor(f'rl_baseline{suffix}/denominator'),
          1 - 0.95 ** turns, places=6)
      logits.append(np.concatenate(list(extract.read_logits(
          tf.train.latest_checkpoint(self.model_dir),
          mobile.get_search_space('digits_search'), k).values())))
    # Each learned on its own (RL delay 4: steps 4 to 7 moved them).
    self.assertFalse(np.array_equal(logits[0], logits[1]))
    self.assertFalse(np.array_equal(logits[1], logits[2]))

  def test_tensorboard_shows_each_policy_apart(self):
    events = searches.events(self.model_dir)
    logged = sorted(events['rlcontroller/pair'])  # Every other step.
    self.assertEqual(logged, [0, 2, 4, 6])
    self.assertEqual(events['rlcontroller/pair'],
                     {t: float(t % 3) for t in logged})
    for k in (1, 2):
      for name in ('reward', 'baseline', 'estimated_cost', 'advantage'):
        self.assertIn(f'rlcontroller_{k}/{name}', events)
      self.assertTrue(any(t.startswith(f'rlpathlogits_{k}/') for t in events))
    # The step's cost on each pair's own model.
    for t in logged:
      self.assertNotEqual(events['rlcontroller/estimated_cost'][t],
                          events['rlcontroller_2/estimated_cost'][t])
      self.assertEqual(events['rlcontroller/estimated_cost'][t],
                       events['rlcontroller_1/estimated_cost'][t])

  def test_the_front_has_a_point_per_pair_on_its_own_model(self):
    model_dir = os.path.join(tempfile.mkdtemp(), 'front')
    shutil.copytree(self.model_dir, model_dir)
    _extract(model_dir, '--front', '--oneshot=3')
    with open(os.path.join(model_dir, config_lib.FRONT_FILE)) as f:
      front = json.load(f)
    self.assertLen(front['points'], 3)
    self.assertEqual(front['global_step'], 8)
    for k, (point, (model, target)) in enumerate(zip(front['points'],
                                                     self.pairs)):
      self.assertEqual((point['pair'], point['cost_model'],
                        point['cost_target']), (k, model, target))
      cost = linear.estimate_cost_of_indices(
          point['indices'], linear.get_cost_model('digits_search', model,
                                                  image_size=8))
      self.assertAlmostEqual(point['estimated_cost'], cost, places=3)
      self.assertBetween(point['oneshot_accuracy'], 0.0, 1.0)
    self.assertFalse(os.path.exists(os.path.join(model_dir,
                                                 architecture.FILE_NAME)))

  def test_a_target_between_the_points(self):
    model_dir = os.path.join(tempfile.mkdtemp(), 'between')
    shutil.copytree(self.model_dir, model_dir)
    target = (_TARGETS[0] * _TARGETS[1]) ** 0.5
    _extract(model_dir, f'--target={target}', '--oneshot=3')
    got = architecture.read(os.path.join(model_dir, architecture.FILE_NAME))
    self.assertEqual((got.cost_model, got.cost_target), ('macs', target))
    self.assertBetween(got.estimated_cost, 0.95 * target, 1.05 * target)

  def test_a_search_from_before_pairs_resumes_bit_for_bit(self):
    # The shared finished search, its config.json as the code before pairs
    # wrote it, cut back to its step-4 checkpoint and resumed.
    finished = searches.finished_search()
    model_dir = searches.copy_finished_search('old')
    path = os.path.join(model_dir, 'config.json')
    with open(path) as f:
      stored = json.load(f)
    self.assertEqual(stored.pop('extra_pairs'), [])
    with open(path, 'w') as f:
      json.dump(stored, f)
    for name in glob.glob(os.path.join(model_dir, 'model.ckpt-8.*')) + (
        glob.glob(os.path.join(model_dir, 'events*'))):
      os.remove(name)
    with open(os.path.join(model_dir, 'checkpoint'), 'w') as f:
      f.write('model_checkpoint_path: "model.ckpt-4"\n')
    done = forked.run_one(searches.search_command(
        model_dir, '--deterministic', *searches.SHORT_SEARCH_FLAGS),
        env=searches.QUIET)
    self.assertEqual(done.returncode, 0, done.stderr[-3000:])
    mine, theirs = searches.reader(model_dir), searches.reader(finished)
    names = theirs.get_variable_to_shape_map()
    self.assertEqual(set(mine.get_variable_to_shape_map()), set(names))
    # One pair: the original's names only.
    self.assertFalse([n for n in names if n.startswith(
        ('rl_controller_', 'rl_baseline_', 'controller_adam_'))])
    for name in names:
      np.testing.assert_array_equal(mine.get_tensor(name),
                                    theirs.get_tensor(name), err_msg=name)
    self.assertNotIn('rlcontroller/pair', searches.events(model_dir))


if __name__ == '__main__':
  absltest.main()
