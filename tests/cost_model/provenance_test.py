"""Tests for cost_model/provenance: the record, read and compared."""

import dataclasses

from absl.testing import absltest

from tunas_tf.cost_model import macs
from tunas_tf.cost_model import provenance

HOST = {'ssd': 'digits_search', 'image_size': 8, 'num_classes': 10,
        'input_channels': 1, 'backend': 'tflite', 'device': 'a CPU, 2 cores',
        'num_threads': 1, 'cpus': [1]}
COMMAND = {'ssd': 'digits_search', 'image_size': 8, 'num_classes': 10,
           'input_channels': 1, 'backend': 'command',
           'device': 'command: adb {model}', 'device_command': 'adb {model}'}


class ProvenanceTest(absltest.TestCase):

  def test_round_trip_and_notes(self):
    for data in (HOST, COMMAND):
      record = provenance.Provenance.from_dict(
          dict(data, protocol={'repeats': 5}, load_at_start=1.5), 'here')
      self.assertEqual(record.precision, 'float32')
      self.assertEqual(provenance.Provenance.from_dict(record.as_dict(),
                                                       'again'), record)
    record = provenance.Provenance.from_dict(HOST, 'here')
    self.assertEqual(record.cpus, (1,))
    self.assertEqual(record.as_dict()['cpus'], [1])
    self.assertEqual(record.shape, macs.InputSpec(8, 10, 1))
    # A list and a tuple of CPUs are one record.
    self.assertEqual(provenance.Provenance(**HOST), record)

  def test_difference_names_the_first_key(self):
    record = provenance.Provenance(**HOST)
    other = provenance.Provenance(**dict(HOST, cpus=[0], num_threads=2))
    self.assertIsNone(record.difference(record))
    self.assertEqual(record.difference(other), 'num_threads=1, not 2')
    self.assertEqual(record.difference(other, ('cpus',)),
                     'cpus=(1,), not (0,)')
    self.assertIsNone(record.difference(other, provenance.SHAPE))

  def test_a_command_is_the_same_device_whatever_its_paths_spelling(self):
    record = provenance.Provenance(**dict(
        COMMAND, device='command: /opt/bin/dev --m=/data/{model}',
        device_command='/opt/bin/dev --m=/data/{model}'))
    spelled = '/opt//bin/./dev --m=/data//{model}'
    self.assertIsNone(record.difference(provenance.Provenance(**dict(
        COMMAND, device=f'command: {spelled}', device_command=spelled))))
    other = '/opt/bin/other --m=/data/{model}'
    self.assertEqual(
        record.difference(provenance.Provenance(**dict(
            COMMAND, device=f'command: {other}', device_command=other))),
        "device='command: /opt/bin/dev --m=/data/{model}', not 'command: "
        "/opt/bin/other --m=/data/{model}'")
    self.assertEqual(provenance.normalized_command("a 'b//c' http://x"),
                     'a b//c http://x')  # Only path-like tokens.

  def test_a_named_device_is_its_name_whatever_its_command(self):
    phone = provenance.Provenance(**dict(COMMAND, device='pixel7'))
    moved = provenance.Provenance(**dict(COMMAND, device='pixel7',
                                         device_command='adb -s 2 {model}'))
    self.assertIsNone(phone.difference(moved))
    unnamed = provenance.Provenance(**COMMAND)  # Its command is its identity.
    self.assertIn('device_command=', unnamed.difference(dataclasses.replace(
        unnamed, device_command='adb -s 2 {model}')))
    self.assertEqual(phone.difference(dataclasses.replace(moved,
                                                          device='pixel8')),
                     "device='pixel7', not 'pixel8'")

  def test_bad_records_are_refused_in_one_line(self):
    cases = [
        ([1], r'^here is not a JSON object$'),
        (dict(HOST, thread=1), r"^here has unknown fields \['thread'\]; a "
         r"provenance has \['ssd', "),
        ({k: v for k, v in HOST.items() if k != 'device'},
         r"^here has no field 'device'"),
        (dict(HOST, image_size=None),
         r"^here: field 'image_size' is None, expected an int$"),
        (dict(HOST, device=3), r"field 'device' is 3, expected a string"),
        (dict(HOST, image_size=0), 'image_size must be an integer >= 1, got 0'),
        (dict(HOST, num_classes=True),
         "field 'num_classes' is True, expected an int"),
        (dict(HOST, num_threads=0), 'num_threads must be an integer >= 1'),
        (dict(HOST, backend='onnx'), "unknown backend 'onnx'; expected one "
         r"of \['tflite', 'tf', 'command'\]"),
        (dict(HOST, precision='int4'), "unknown precision 'int4'"),
        (dict(COMMAND, device_command=None), "backend 'command' with "
         'device_command None'),
        (dict(HOST, device_command='adb {model}'), "backend 'tflite' with "
         "device_command 'adb {model}'"),
        (dict(HOST, reference='0:1'), "reference '0:1' with reference_ms "
         r'None \(both or neither\)'),
        (dict(HOST, reference='0:1', reference_ms=0.0),
         'reference_ms must be .*> 0'),
    ]
    for data, message in cases:
      with self.assertRaisesRegex(ValueError, message, msg=str(data)):
        provenance.Provenance.from_dict(data, 'here')


if __name__ == '__main__':
  absltest.main()
