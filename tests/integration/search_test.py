"""End-to-end tests of `train_search` on digits: a few steps each, CPU."""

import glob
import json
import os
import random
import re
import signal
import socket
import tempfile
import time

from absl import flags
from absl.testing import absltest
import numpy as np
import pytest
import tensorflow as tf

from tunas_tf import architecture
from tunas_tf.io import commands
from tunas_tf.controller import reinforce
from tunas_tf.runtime import preemption
from tunas_tf.search import config as config_lib
from tunas_tf.search import extract
from tunas_tf.search import runner
from tunas_tf.search import steps
from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema
from tunas_tf.search_space import spec_io
from tunas_tf.tools import extract_architecture
from tests.testing import configs
from tests.testing import searches
from tests.testing import tiny_tfds
from tests.testing import forked


_config = searches.search_config
_events = searches.events
_global_step = searches.global_step
_SHORT = list(searches.SHORT_SEARCH_FLAGS)


def _latest_step(model_dir):
  """The step of the checkpoint the `checkpoint` file names, or -1.

  (It names a checkpoint once it is complete: its data and index files are
  written first.)
  """
  latest = tf.train.latest_checkpoint(model_dir)
  return int(latest.rsplit('-', 1)[1]) if latest else -1


class ShortSearchTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model_dir = searches.finished_search()
    cls.config = config_lib.read(cls.model_dir)
    cls.events = _events(cls.model_dir)

  def test_runs_to_max_steps_with_one_increment_per_step(self):
    self.assertEqual(_global_step(self.model_dir), 8)
    # The logged step is the global step before the step's increment.
    self.assertEqual(sorted(self.events['rlcontroller/reward']), [0, 2, 4, 6])

  def test_the_next_steps_name_the_running_python(self):
    # Not a bare `python`: the virtualenv's interpreter has the package.
    log = searches.finished_search_log()
    python = commands.python()
    self.assertNotEqual(python, 'python')
    self.assertIn(
        f'Search finished (8 steps). Next: {python} -m '
        f'tunas_tf.tools.extract_architecture --model_dir={self.model_dir}, '
        f'then {python} -m tunas_tf.tools.report '
        f'--model_dir={self.model_dir}\n', log)

  def test_the_docs_python_reads_the_probabilities(self):
    # docs/search.md's snippet, on this run: event_accumulator files them
    # under tensors (its scalars are empty).
    with open(os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))), 'docs',
                           'search.md')) as f:
      text = f.read()
    snippet = re.search(r'## TensorBoard\n.*?```python\n(.*?)```', text,
                        re.S).group(1)
    scope = {}
    exec(snippet.replace("'runs/digits_search'", repr(self.model_dir)),  # pylint: disable=exec-used
         scope)
    self.assertEqual(sorted(scope['probs']), [0, 2, 4, 6])
    self.assertTrue(all(0 < p < 1 for p in scope['probs'].values()))
    self.assertEqual(scope['events'].Tags()['scalars'], [])

  def test_events_files_hold_no_graph(self):
    kinds = set()
    for path in glob.glob(os.path.join(self.model_dir, 'events*')):
      for record in tf.data.TFRecordDataset(path):
        kinds.add(tf.compat.v1.Event.FromString(record.numpy())
                  .WhichOneof('what'))
    self.assertIn('summary', kinds)
    self.assertEmpty(kinds & {'graph_def', 'meta_graph_def'})
    self.assertEqual(glob.glob(os.path.join(self.model_dir, '*.meta')) +
                     glob.glob(os.path.join(self.model_dir, '*.pbtxt')), [])
    # The checkpoints are the Estimator's (at start, every 4 steps, the end).
    state = tf.train.get_checkpoint_state(self.model_dir)
    self.assertEqual(
        [os.path.basename(p) for p in state.all_model_checkpoint_paths],
        ['model.ckpt-0', 'model.ckpt-4', 'model.ckpt-8'])

  def test_every_scalar_is_logged(self):
    expected = searches.scalar_tags()
    missing = [t for t in expected if t not in self.events]
    self.assertEqual(missing, [])
    # The original's logits by tag only with --summarize_tag_logits.
    self.assertFalse(any(t.startswith('rltaglogits/') for t in self.events))

  def test_probabilities_read_like_the_controller(self):
    spec = mobile.get_search_space('digits_search')
    steps = sorted(self.events['rlcontroller/reward'])
    for path, oneof in schema.flatten_with_paths(spec):
      labels = ops.choice_labels(oneof.choices)
      for step in steps:
        probs = [self.events[f'rlprobs/{path}/{label}'][step]
                 for label in labels]
        self.assertAlmostEqual(sum(probs), 1.0, places=5, msg=path)
        logits = np.array([self.events[f'rlpathlogits/{path}/{j}'][step]
                           for j in range(len(labels))])
        np.testing.assert_allclose(
            probs, np.exp(logits) / np.exp(logits).sum(), rtol=1e-5)
        self.assertGreaterEqual(self.events[f'rlentropy/{path}'][step], 0.0)
    heatmaps = searches.images(self.model_dir)['rlprobs_heatmap']
    self.assertEqual(sorted(heatmaps), steps)
    widest = max(len(o.choices) for o in schema.flatten(spec))
    self.assertEqual(heatmaps[steps[-1]].shape[:2],
                     (12 * len(schema.flatten(spec)), 24 * widest))

  def test_schedules_and_first_baseline(self):
    e = self.events
    # Warm-ups: ops over 2 steps, filters over 4; RL delay 4 steps.
    self.assertEqual([e['rlcontroller/increase_ops_prob'][s]
                      for s in (0, 2, 4)], [1.0, 0.0, 0.0])
    self.assertEqual([e['rlcontroller/increase_filters_prob'][s]
                      for s in (0, 2, 4)], [1.0, 0.5, 0.0])
    self.assertEqual([e['rlcontroller/learning_rate'][s] for s in (0, 2)],
                     [0.0, 0.0])
    self.assertGreater(e['rlcontroller/learning_rate'][4], 0.0)
    # Logits stay zero during the delay (read before the step's update).
    for tag, values in e.items():
      if tag.startswith('rlpathlogits/'):
        self.assertEqual((values[0], values[2], values[4]), (0.0, 0.0, 0.0),
                         tag)
    self.assertAlmostEqual(e['rlcontroller/baseline'][0],
                           e['rlcontroller/reward'][0], places=6)
    self.assertAlmostEqual(e['rlcontroller/advantage'][0], 0.0, places=6)

  def test_reward_recomputes_from_logged_accuracy_and_cost(self):
    e = self.events
    target = self.config.rl_cost_model_target
    beta = self.config.rl_cost_model_exponent
    for step in e['rlcontroller/reward']:
      acc = e['rlcontroller/validation_accuracy'][step]
      cost = e['rlcontroller/estimated_cost'][step]
      self.assertAlmostEqual(e['rlcontroller/cost_ratio'][step],
                             cost / target, places=5)
      self.assertAlmostEqual(e['rlcontroller/reward'][step],
                             acc + beta * abs(cost / target - 1), places=5)

  def test_extract_architecture(self):
    result = extract.pick(self.model_dir,
                          cost_tolerance=None)[0].to_json()  # --argmax
    spec = mobile.get_search_space('digits_search')
    reader = searches.reader(self.model_dir)
    logits = {path: reader.get_tensor('rl_controller/logits/' + path)
              for path, _ in schema.flatten_with_paths(spec)}
    self.assertEqual(
        result['indices'],
        ':'.join(map(str, reinforce.argmax_indices(logits, spec))))
    self.assertEqual(result['global_step'], 8)
    self.assertEqual(result['cost_target'], self.config.rl_cost_model_target)
    self.assertLen(result['probabilities'], 18)
    for probs in result['probabilities'].values():
      self.assertAlmostEqual(sum(probs), 1.0, places=4)
    self.assertEqual(schema.flatten(schema.prune(spec, result['indices'])), [])
    json.dumps(result)  # JSON-able.

  def test_resume_skips_an_unreadable_checkpoint_and_continues_its_state(self):
    # A copy of the finished search whose newest checkpoint is truncated
    # (as a kill or a full disk leaves it), without the events of the run.
    model_dir = searches.copy_finished_search('fallback')
    data = os.path.join(model_dir, 'model.ckpt-8.data-00000-of-00001')
    with open(data, 'r+b') as f:
      f.truncate(100)
    for path in glob.glob(os.path.join(model_dir, 'events*')):
      os.remove(path)
    runner.run_search(_config(model_dir, *_SHORT))
    # It resumed from model.ckpt-4: steps 4 to 7 ran again.
    self.assertEqual(_global_step(model_dir), 8)
    events = _events(model_dir)
    self.assertEqual(sorted(events['rlcontroller/reward']), [4, 6])
    # Step 4 ran with the state saved at step 4: its baseline continues the
    # stored moving average.
    saved = searches.reader(os.path.join(self.model_dir,
                                                  'model.ckpt-4'))
    m = self.config.rl_baseline_momentum
    numerator = saved.get_tensor('rl_baseline/numerator')
    denominator = saved.get_tensor('rl_baseline/denominator')
    self.assertGreater(denominator, 0.0)
    reward = events['rlcontroller/step_baseline'][4]
    self.assertAlmostEqual(
        events['rlcontroller/baseline'][4],
        (m * numerator + (1 - m) * reward) / (m * denominator + 1 - m),
        places=5)
    # The truncated files are kept aside, not deleted or overwritten.
    with open(data + '.unreadable', 'rb') as f:
      self.assertLen(f.read(), 100)
    self.assertTrue(os.path.exists(os.path.join(
        model_dir, 'model.ckpt-8.index.unreadable')))
    # The optimizers' slots are checkpointed (and so restored with the rest).
    names = searches.reader(model_dir).get_variable_to_shape_map()
    self.assertTrue(any(n.endswith('/RMSProp') for n in names))
    spec = mobile.get_search_space('digits_search')
    for path, _ in schema.flatten_with_paths(spec):
      for slot in ('m', 'v'):
        self.assertIn(f'controller_adam/{slot}/rl_controller/logits/{path}',
                      names)
    with self.assertRaisesRegex(
        ValueError, r'rl_cost_model_exponent is -0.5 there and -0.3 now'):
      runner.run_search(_config(model_dir, *_SHORT,
                                '--rl_cost_model_exponent=-0.3'))

  def test_no_readable_checkpoint_is_refused_in_one_line(self):
    model_dir = searches.copy_finished_search('broken')
    for step in (0, 4, 8):
      with open(os.path.join(model_dir, f'model.ckpt-{step}.data-00000-of-'
                             '00001'), 'r+b') as f:
        f.truncate(100)
    before = sorted(os.listdir(model_dir))
    with self.assertRaisesRegex(
        ValueError, r'No readable checkpoint in .*broken \(model.ckpt-8: '
        r'Read less bytes.*model.ckpt-0: Read less bytes'):
      runner.run_search(_config(model_dir, *_SHORT))
    self.assertEqual(sorted(os.listdir(model_dir)), before)


class Bfloat16SearchTest(absltest.TestCase):
  """The short search with --use_bfloat16=true: bfloat16 input and compute
  on CPU, run by the binary with a time limit (the original's `true` could
  hang in its input pipeline)."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.model_dir = os.path.join(tempfile.mkdtemp(), 'bfloat16')
    done = forked.run_one(
        searches.search_command(cls.model_dir, *_SHORT,
                                '--use_bfloat16=true'),
        env=searches.QUIET, timeout=600)
    if done.returncode:
      raise AssertionError(f'the search failed:\n{done.stderr[-3000:]}')
    cls.config = config_lib.read(cls.model_dir)
    cls.events = _events(cls.model_dir)

  def test_runs_with_float32_state_and_finite_summaries(self):
    self.assertEqual((self.config.use_bfloat16,
                      self.config.model_weight_decay), ('true', 3e-5))
    self.assertEqual(_global_step(self.model_dir), 8)
    self.assertEqual(sorted(self.events['rlcontroller/reward']), [0, 2, 4, 6])
    for tag, values in self.events.items():
      self.assertTrue(np.all(np.isfinite(list(values.values()))), tag)
    # Variables, RMSProp slots (gradients' squares) and Adam slots: float32.
    reader = searches.reader(self.model_dir)
    dtypes = reader.get_variable_to_dtype_map()
    self.assertTrue(any(n.endswith('/RMSProp') for n in dtypes))
    self.assertIn('controller_adam/v/rl_controller/logits/blocks/0/filters',
                  dtypes)
    self.assertEqual({d for n, d in dtypes.items() if n != 'global_step'},
                     {tf.float32})

  def test_first_step_is_the_float32_step_in_bfloat16(self):
    # Step 0 samples no architecture (all ops, widest filters: warm-up
    # probabilities 1) and reads the same initial weights and batch as the
    # shared float32 search: its loss differs by bfloat16 rounding only
    # (2.31600 against 2.31627 when written).
    float32 = _events(searches.finished_search())
    loss = 'model/empirical_loss'
    self.assertNotEqual(self.events[loss][0], float32[loss][0])
    self.assertAlmostEqual(self.events[loss][0], float32[loss][0], delta=5e-3)
    # The regulariser reads the float32 variables: the same sum of squares
    # (the strength is 3e-5 here, 4e-5 there).
    reg = 'model/regularization_loss'
    self.assertAlmostEqual(self.events[reg][0] / 3e-5,
                           float32[reg][0] / 4e-5,
                           delta=1e-6 * float32[reg][0] / 4e-5)

  def test_extract_architecture(self):
    result = extract.pick(self.model_dir)[0].to_json()
    self.assertEqual(result['global_step'], 8)
    spec = mobile.get_search_space('digits_search')
    self.assertEqual(schema.flatten(schema.prune(spec, result['indices'])),
                     [])


class TfdsSearchTest(absltest.TestCase):

  def test_search_on_a_tfds_dataset(self):
    data_dir = tempfile.mkdtemp()
    tiny_tfds.TinyImages(data_dir=data_dir).download_and_prepare()
    model_dir = tempfile.mkdtemp()
    config = _config(model_dir, '--dataset=tiny_images',
                     f'--data_dir={data_dir}', '--nodownload',
                     '--validation_examples=8', '--train_batch_size=4',
                     '--rl_batch_size_multiplier=1', '--max_steps=3',
                     '--tpu_iterations_per_loop=1')
    # TinyImages: 8x8 RGB, 3 classes, 20 training images (8 held out).
    self.assertEqual((config.job.num_channels, config.job.num_classes,
                      config.job.image_size, config.search_train_examples,
                      config.validation_examples), (3, 3, 8, 12, 8))
    runner.run_search(config)
    self.assertEqual(_global_step(model_dir), 3)
    events = _events(model_dir)
    self.assertEqual(sorted(events['rlcontroller/reward']), [0, 1, 2])
    self.assertEqual(extract.pick(model_dir)[0].num_classes, 3)


class CommandLineTest(absltest.TestCase):

  def _kill_after_checkpoint(self, cmd, model_dir, step):
    """Runs `cmd` and SIGKILLs it once it has saved a checkpoint >= `step`."""
    process = forked.Child(cmd, env=searches.QUIET)
    deadline = time.time() + 300
    try:
      while time.time() < deadline:
        if _latest_step(model_dir) >= step:
          break
        if process.poll() is not None:
          self.fail(f'the search ended before step {step}, unkilled')
        time.sleep(0.005)  # A step takes ~50 ms here.
      else:
        self.fail(f'no checkpoint at step {step} after 300 s')
    finally:
      process.send_signal(signal.SIGKILL)
      process.wait()
    return _global_step(model_dir)

  def _stop_after_step(self, cmd, step, while_building=None):
    """Runs `cmd`, SIGTERMs it once it has logged `step`; (its stderr, the
    seconds from the signal to its exit). While it builds its graph (it
    holds the directory then) it is paused and `while_building(pid)` runs.
    """
    log = os.path.join(tempfile.mkdtemp(), 'log')
    process = forked.Child(cmd, env=searches.QUIET, log=log)
    lines, signalled = [], None
    try:
      for line in forked.follow(process, log):
        lines.append(line)
        if while_building and 'building the search graph' in line:
          process.send_signal(signal.SIGSTOP)
          try:
            while_building(process.pid)
          finally:
            process.send_signal(signal.SIGCONT)
        if signalled is None and f'step {step}/' in line:
          process.send_signal(signal.SIGTERM)
          signalled = time.time()
      process.wait(timeout=300)
    finally:
      if process.poll() is None:
        process.kill()
    self.assertIsNotNone(signalled, ''.join(lines[-20:]))
    self.assertEqual(process.returncode, preemption.EXIT_CODE,
                     ''.join(lines[-20:]))
    return ''.join(lines), time.time() - signalled

  def test_killed_then_preempted_ends_bit_identical_to_an_uninterrupted_run(
      self):
    # The shared finished search (SHORT_SEARCH_FLAGS --deterministic: RL
    # delay 4 of 8 steps) is the uninterrupted run. This one saves every
    # step and is SIGKILLed after a checkpoint at a random step before the
    # RL delay; restarted with no checkpoint cadence to speak of, it gets a
    # SIGTERM (a preemption) after a random step past the delay, saves there
    # and exits 75; restarted again, it runs to the end. The first restart
    # takes the directory over from the killed process; a second search
    # started while it runs is refused.
    kills = (random.choice((1, 2)), random.choice((4, 5)))
    model_dir = os.path.join(tempfile.mkdtemp(), 'killed')
    # One step per loop: the distribute engine logs, saves and stops
    # between loops.
    flags_ = ['--deterministic', '--log_every_steps=1',
              '--tpu_iterations_per_loop=1',
              *[a for a in _SHORT if not a.startswith(
                  ('--save_checkpoints', '--tpu_iterations_per_loop'))]]
    cmd = searches.search_command(model_dir, *flags_,
                                  '--save_checkpoints_steps=1')
    killed = self._kill_after_checkpoint(cmd, model_dir, kills[0])
    self.assertBetween(killed, kills[0], 3, kills)  # RL delay 4.
    def second_search(pid):
      second = forked.run_one(cmd, env=searches.QUIET)
      self.assertNotEqual(second.returncode, 0)
      self.assertRegex(
          second.stderr.strip().splitlines()[-1],
          rf'^train_search: {model_dir} is in use by train_search on host '
          rf'{socket.gethostname()}, pid {pid}, since .* UTC')

    log, seconds = self._stop_after_step(
        searches.search_command(model_dir, *flags_,
                                '--save_checkpoints_steps=100'), kills[1],
        while_building=second_search)
    self.assertRegex(log, r'Taking over .*killed from train_search on host '
                     r'.*: pid \d+ on host .* is gone')
    stopped = _global_step(model_dir)
    self.assertBetween(stopped, kills[1], 7, kills)
    self.assertLess(seconds, 30, 'a preemption gives ~30 s')
    self.assertIn(f'from step {killed} (model.ckpt-{killed})', log)
    self.assertEqual(
        log.strip().splitlines()[-1],
        f'train_search: stopped at step {stopped} by SIGTERM, checkpoint '
        'saved: run the same command to resume')
    done = forked.run_one(cmd, env=searches.QUIET)
    self.assertEqual(done.returncode, 0, done.stderr[-2000:])
    self.assertIn(f'Resuming search digits_search in {model_dir} from step '
                  f'{stopped} (model.ckpt-{stopped})', done.stderr)
    # The restart continued the run: it logged steps after the stop only.
    logged = [int(line.split('step ')[1].split('/')[0])
              for line in done.stderr.splitlines() if 'steps/s' in line]
    self.assertTrue(all(step > stopped for step in logged), logged)
    values = flags.FlagValues()
    extract_architecture.define_flags(values)
    values(['extract_architecture', f'--model_dir={model_dir}',
            '--oneshot=0'])
    extract_architecture.main(['extract_architecture'], values)
    got, want = [architecture.read(os.path.join(d, architecture.FILE_NAME))
                 for d in (model_dir, searches.finished_search())]
    self.assertEqual((got.global_step, got.indices), (8, want.indices), kills)
    self.assertEqual(got.probabilities, want.probabilities, kills)
    # Bit for bit: the controller's logits and every weight.
    mine, theirs = [searches.reader(d)
                    for d in (model_dir, searches.finished_search())]
    for name in theirs.get_variable_to_shape_map():
      np.testing.assert_array_equal(mine.get_tensor(name),
                                    theirs.get_tensor(name),
                                    err_msg=f'{name} (kills at {kills})')

  def test_bad_input_exits_with_one_line(self):
    # In-process through main (the kill test above runs the real binary).
    model_dir = tempfile.mkdtemp()
    configs.write_or_check(
        config_lib,
        _config(model_dir, '--max_steps=8', '--train_batch_size=16'),
        spec_io.dumps(mobile.get_search_space('digits_search')))
    for args, message in (
        (['--max_steps=8', '--rl_reward_function=mnas'],
         'rl_reward_function is'),
        (['--max_steps=8', '--cost_model=/no/such.json'], 'no/such.json'),
        (['--max_steps=8', '--epochs=0', '--max_steps=0'],
         '--max_steps must be an integer >= 1'),
    ):
      line = searches.refusal_line(f'--model_dir={model_dir}',
                                   '--train_batch_size=16', *args)
      self.assertTrue(line.startswith('train_search: '), line)
      self.assertIn(message, line)
      self.assertNotIn('\n', line)
    # An unknown space is refused by the flag parser itself.
    with self.assertRaisesRegex(flags.IllegalFlagValueError, 'no_such_space'):
      searches.search_flags('--ssd=no_such_space')


if __name__ == '__main__':
  absltest.main()
