"""Tests for tunas_tf/architecture: the record and its architecture.json."""

import dataclasses
import json
import os
import shutil
import tempfile

from absl.testing import absltest

from tunas_tf import architecture
from tunas_tf.cost_model import memory
from tunas_tf.search_space import mobile
from tunas_tf.search_space import ops
from tunas_tf.search_space import schema
from tunas_tf.search_space import spec_io

SSD = 'digits_search'  # 18 decisions.
INDICES = '0:1:0:2:0:0:1:0:1:0:0:1:0:1:0:0:1:2'


def _write(directory, document, name='architecture.json'):
  path = os.path.join(directory, name)
  with open(path, 'w') as f:
    f.write(document if isinstance(document, str) else json.dumps(document))
  return path


def _touch_checkpoint(directory, prefix):
  """An empty `prefix.index` in `directory`: where `read` looks for one."""
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, prefix + '.index'), 'w'):
    pass


def _searched():
  return architecture.Architecture(
      SSD, INDICES, estimated_cost=251234.0, cost_model='macs',
      cost_target=3e5, global_step=300, max_global_step=300,
      checkpoint='/runs/demo/model.ckpt-300', dataset='digits', image_size=8,
      num_classes=10, num_channels=1, preprocessing='none',
      validation_examples=359,
      probabilities={'blocks/0/filters': (0.1, 0.2, 0.3, 0.4)})


class ArchitectureTest(absltest.TestCase):

  def test_write_read_round_trip(self):
    searched = _searched()
    path = os.path.join(tempfile.mkdtemp(), 'sub', 'architecture.json')
    architecture.write(searched, path)
    self.assertEqual(architecture.read(path), searched)
    with open(path) as f:
      written = json.load(f)
    self.assertEqual(
        list(written),
        ['format_version', 'ssd', 'indices', 'estimated_cost', 'cost_model',
         'cost_target', 'global_step', 'max_global_step', 'checkpoint',
         'dataset', 'image_size', 'num_classes', 'num_channels',
         'preprocessing', 'validation_examples', 'probabilities',
         'arena_bytes', 'flash_bytes', 'choices', 'decisions',
         'architecture'])
    self.assertEqual(written['indices'], INDICES)
    shape = memory.Shape(8, 10, 1)
    self.assertEqual(
        (written['arena_bytes'], written['flash_bytes']),
        (memory.arena_bytes(searched.spec, shape),
         memory.flash_bytes(searched.spec, shape)))
    self.assertEqual(architecture.read(path).data,
                     {'dataset': 'digits', 'image_size': 8, 'num_classes': 10,
                      'num_channels': 1, 'preprocessing': 'none',
                      'validation_examples': 359})
    self.assertEqual(spec_io.from_json(written['architecture']),
                     schema.prune(mobile.get_search_space(SSD), INDICES))
    minimal = architecture.Architecture(SSD, schema.parse_indices(INDICES))
    architecture.write(minimal, path)
    self.assertEqual(architecture.read(path), minimal)
    self.assertIsNone(architecture.read(path).estimated_cost)
    self.assertEqual(architecture.read(path).data, {})

  def test_indices_are_canonical_and_checked(self):
    record = architecture.Architecture(SSD, ' ' + INDICES)
    self.assertEqual(record.indices, tuple(schema.parse_indices(INDICES)))
    self.assertEqual(record.indices_string, INDICES)
    self.assertEmpty(schema.flatten(record.spec))
    with self.assertRaisesRegex(ValueError, 'expected 18 indices'):
      architecture.Architecture(SSD, '0:1')
    with self.assertRaisesRegex(ValueError, 'Unknown search space'):
      architecture.Architecture('nope', INDICES)

  def test_choice_values_leave_out_unchosen_alternatives(self):
    values = architecture.Architecture(SSD, INDICES).choice_values
    self.assertEqual(values['blocks/0/filters'], 8)
    self.assertEqual(values['blocks/1/layers/0/kernel_size'], 5)
    self.assertEqual(values['blocks/2/layers/0'], 'DepthwiseBottleneck')
    # An expansion of 3x the input width.
    self.assertEqual(values['blocks/2/layers/0/choices/0/expansion_filters'],
                     3.0)
    # blocks/2/layers/1 is skipped (ZeroSpec): its kernel size is moot.
    self.assertEqual(values['blocks/2/layers/1/layer'], 'skip')
    self.assertNotIn('blocks/2/layers/1/layer/choices/0/kernel_size', values)
    self.assertIn('blocks/3/layers/1/layer/choices/0/kernel_size', values)
    self.assertLen(values, 16)

  def test_written_choices_are_plain_json_scalars_in_every_space(self):
    directory = tempfile.mkdtemp()
    for ssd in mobile.SEARCH_SPACES:
      oneofs = schema.flatten(mobile.get_search_space(ssd))
      if not oneofs:
        continue  # A fixed network (mobilenet_v2, ...): no decision.
      # The first and the last choice of every decision.
      for pick in (0, -1):
        indices = [range(len(o.choices))[pick] for o in oneofs]
        path = os.path.join(directory, f'{ssd}{pick}.json')
        architecture.write(architecture.Architecture(ssd, indices), path)
        with open(path) as f:
          choices = json.load(f)['choices']
        self.assertNotEmpty(choices)
        for key, value in choices.items():
          self.assertIsInstance(value, (int, float, str), (ssd, key))
          if isinstance(value, str):
            self.assertNotRegex(value, r'\(|Spec', (ssd, key))

  def test_plain_choices_tell_every_choice_apart(self):
    self.assertEqual(
        architecture.plain_choices((ops.FilterMultiplier(3.0), 16,
                                    ops.ZeroSpec(), ops.ActivationSpec('relu'),
                                    True, None)),
        [3.0, 16, 'skip', 'relu', True, None])
    # Plain values that would read alike: the decision's labels instead.
    self.assertEqual(
        architecture.plain_choices((ops.FilterMultiplier(6.0), 6)),
        ['x6', '6'])
    self.assertEqual(
        architecture.plain_choices((ops.ConvSpec(kernel_size=3, strides=1),
                                    ops.ConvSpec(kernel_size=5, strides=1))),
        ['Conv#0', 'Conv#1'])

  def test_decisions_name_choices_and_values(self):
    rows = _searched().decisions
    self.assertEqual([r['path'] for r in rows],
                     [p for p, _ in schema.flatten_with_paths(
                         mobile.get_search_space(SSD))])
    self.assertEqual([r['index'] for r in rows],
                     schema.parse_indices(INDICES))
    first = rows[0]
    self.assertEqual(first, {'path': 'blocks/0/filters',
                             'choices': ['8', '16', '24', '32'], 'index': 0,
                             'value': '8', 'active': True,
                             'probabilities': [0.1, 0.2, 0.3, 0.4]})
    by_path = {r['path']: r for r in rows}
    expansion = by_path['blocks/2/layers/0/choices/0/expansion_filters']
    self.assertEqual((expansion['choices'], expansion['value']),
                     (['x3', 'x6'], 'x3'))
    skipped = by_path['blocks/2/layers/1/layer']
    self.assertEqual((skipped['choices'], skipped['value']),
                     (['DepthwiseBottleneck', 'skip'], 'skip'))
    # Under the skipped layer: listed, but marked as not mattering.
    self.assertFalse(
        by_path['blocks/2/layers/1/layer/choices/0/kernel_size']['active'])
    self.assertEqual(sum(r['active'] for r in rows), len(
        architecture.Architecture(SSD, INDICES).choice_values))
    self.assertNotIn('probabilities', by_path['blocks/1/filters'])

  def test_checkpoint_is_written_relative_to_the_file(self):
    run = os.path.join(tempfile.mkdtemp(), 'run')
    _touch_checkpoint(run, 'model.ckpt-300')
    inside = dataclasses.replace(
        _searched(), checkpoint=os.path.join(run, 'model.ckpt-300'))
    path = os.path.join(run, architecture.FILE_NAME)
    architecture.write(inside, path)
    with open(path) as f:
      written = json.load(f)
    self.assertEqual(written['format_version'], 2)
    self.assertEqual(written['checkpoint'], 'model.ckpt-300')
    self.assertEqual(architecture.read(path), inside)
    # Read through a relative path, it still comes back absolute.
    cwd = os.getcwd()
    try:
      os.chdir(os.path.dirname(run))
      self.assertEqual(architecture.read(os.path.join('run',
                                                      'architecture.json')),
                       inside)
    finally:
      os.chdir(cwd)
    # The directory moved: the checkpoint moved with it.
    moved = os.path.join(tempfile.mkdtemp(), 'moved')
    shutil.move(run, moved)
    self.assertEqual(
        architecture.read(os.path.join(moved, architecture.FILE_NAME)),
        dataclasses.replace(inside,
                            checkpoint=os.path.join(moved, 'model.ckpt-300')))
    # One given relative (to the working directory) is written relative to
    # the file.
    cwd = os.getcwd()
    try:
      os.chdir(os.path.dirname(moved))
      architecture.write(
          dataclasses.replace(inside, checkpoint='moved/model.ckpt-300'),
          os.path.join(moved, architecture.FILE_NAME))
    finally:
      os.chdir(cwd)
    with open(os.path.join(moved, architecture.FILE_NAME)) as f:
      self.assertEqual(json.load(f)['checkpoint'], 'model.ckpt-300')
    # A checkpoint outside the file's directory is written as it is.
    elsewhere = os.path.join(tempfile.mkdtemp(), architecture.FILE_NAME)
    architecture.write(_searched(), elsewhere)
    with open(elsewhere) as f:
      self.assertEqual(json.load(f)['checkpoint'],
                       '/runs/demo/model.ckpt-300')
    self.assertEqual(architecture.read(elsewhere), _searched())

  def test_format_1_files_still_load(self):
    run = os.path.join(tempfile.mkdtemp(), 'run')
    _touch_checkpoint(run, 'model.ckpt-300')
    checkpoint = os.path.join(run, 'model.ckpt-300')
    # As extract_architecture wrote it before: choices as Python reprs and
    # class names, an absolute checkpoint.
    old = _searched().to_json()
    old.update(format_version=1, checkpoint=checkpoint, choices={
        'blocks/0/filters': 8,
        'blocks/2/layers/0': 'DepthwiseBottleneckSpec',
        'blocks/2/layers/0/choices/0/expansion_filters':
            'FilterMultiplier(scale=3.0)',
        'blocks/2/layers/1/layer': 'ZeroSpec()'})
    path = _write(run, old)
    searched = dataclasses.replace(_searched(), checkpoint=checkpoint)
    self.assertEqual(architecture.read(path), searched)
    # The run directory moved: the absolute path is gone, and the checkpoint
    # of the same name beside the file is taken instead.
    moved = os.path.join(tempfile.mkdtemp(), 'moved')
    shutil.move(run, moved)
    self.assertEqual(
        architecture.read(os.path.join(moved, 'architecture.json')),
        dataclasses.replace(searched,
                            checkpoint=os.path.join(moved, 'model.ckpt-300')))
    # With none beside it, the path stays as written.
    os.remove(os.path.join(moved, 'model.ckpt-300.index'))
    self.assertEqual(
        architecture.read(os.path.join(moved, 'architecture.json')), searched)

  def test_older_files_still_load(self):
    directory = tempfile.mkdtemp()
    searched = _searched().to_json()
    del searched['choices']  # Written before the key existed.
    self.assertEqual(architecture.read(_write(directory, searched)),
                     _searched())
    # Written before the search's dataset, preprocessing and hold-out were.
    for name in ('dataset', 'preprocessing', 'validation_examples'):
      del searched[name]
    older = architecture.read(_write(directory, searched, 'older.json'))
    self.assertEqual(older, dataclasses.replace(
        _searched(), dataset=None, preprocessing=None,
        validation_examples=None))
    self.assertIsNone(older.dataset)
    self.assertEqual(older.data, {'image_size': 8, 'num_classes': 10,
                                  'num_channels': 1})
    # tools/describe_space's former format.
    described = {'ssd': SSD, 'num_decisions': 18, 'size': 1, 'paths': [],
                 'indices': INDICES, 'spec': {}}
    path = _write(directory, described, 'described.json')
    self.assertEqual(architecture.read(path),
                     architecture.Architecture(SSD, INDICES))

  def test_malformed_files_fail_with_one_line_naming_file_and_field(self):
    directory = tempfile.mkdtemp()
    good = _searched().to_json()
    cases = [
        ('[]', 'is not a JSON object'),
        ('{"ssd": ', 'is not valid JSON'),
        ({'ssd': SSD}, "has no field 'indices'"),
        ({'indices': INDICES}, "has no field 'ssd'"),
        ({**good, 'indices': [0, 1]},
         r"field 'indices' is \[0, 1\], expected a string"),
        ({**good, 'ssd': 'nope'}, "field 'ssd': Unknown search space"),
        ({**good, 'indices': '0:1'},
         "field 'indices' does not fit 'digits_search': .*expected 18"),
        ({**good, 'indices': '0:x'}, "field 'indices'.*Index 1 is 'x'"),
        ({**good, 'estimated_cost': 'cheap'},
         "field 'estimated_cost' is 'cheap', expected a number"),
        ({**good, 'global_step': 1.5},
         "field 'global_step' is 1.5, expected an int"),
        ({**good, 'cost_model': 3}, "field 'cost_model' is 3, expected a "
                                    'string'),
        ({**good, 'dataset': ['digits']},
         r"field 'dataset' is \['digits'\], expected a string"),
        ({**good, 'preprocessing': 0},
         "field 'preprocessing' is 0, expected a string"),
        ({**good, 'validation_examples': 3.5},
         "field 'validation_examples' is 3.5, expected an int"),
        ({**good, 'probabilities': {'a': ['x']}}, "field 'probabilities'"),
        ({**good, 'format_version': 3},
         "field 'format_version' is 3; this version reads 1 and 2"),
        ({**good, 'format_version': True}, "field 'format_version' is True"),
    ]
    for i, (document, message) in enumerate(cases):
      path = _write(directory, document, f'bad{i}.json')
      with self.assertRaises(ValueError, msg=message) as raised:
        architecture.read(path)
      text = str(raised.exception)
      self.assertRegex(text, message)
      self.assertIn(path, text)
      self.assertNotIn('\n', text)
    missing = os.path.join(directory, 'missing.json')
    with self.assertRaisesRegex(ValueError, f'Cannot read {missing}'):
      architecture.read(missing)


if __name__ == '__main__':
  absltest.main()
