"""Tests for latency/protocol: interleaved rounds, retries, noise, timing.

The protocol runs on fake devices whose latencies and disturbances are
scripted, so nothing here depends on this machine's timing.
"""

import gc
from unittest import mock
import weakref

from absl.testing import absltest

from tunas_tf.latency import protocol as protocol_lib


class _Scripted:
  """A fake device: each architecture's visits return scripted
  (ms, disturbance) pairs in turn; `log` records the visits' order."""

  def __init__(self, script):
    self.script = {k: list(v) for k, v in script.items()}
    self.log = []

  def device(self):
    def open_one(indices):
      def visit(first):
        self.log.append((indices, first))
        step = self.script[indices].pop(0)
        if isinstance(step, Exception):
          raise step
        return step
      return visit
    return protocol_lib.Device('fake', {}, open_one)


class ProtocolTest(absltest.TestCase):

  def test_rounds_are_interleaved_and_rows_are_medians(self):
    fake = _Scripted({'a': [(1.0, 0), (1.2, 0), (1.1, 0)],
                      'b': [(2.0, 0), (2.0, 0)], 'c': [(5.0, 0), (5.0, 0)]})
    protocol = protocol_lib.Protocol(repeats=3, interleave=2)
    rows = list(protocol_lib.measure(fake.device(), ['a', 'b', 'c'], protocol))
    # Chunks of two, each round visits both (rotated), the first visit warms.
    # b and c agree within 5% after two rounds: done. a's rounds spread 9%
    # (IQR 0.1 over 1.1) and so does the device (median first-two difference
    # 9%): no retries after its 3 rounds.
    self.assertEqual(fake.log, [('a', True), ('b', True), ('b', False),
                                ('a', False), ('a', False),
                                ('c', True), ('c', False)])
    self.assertEqual([r.indices for r in rows], ['b', 'a', 'c'])
    self.assertAlmostEqual(rows[1].latency_ms, 1.1)
    self.assertAlmostEqual(rows[1].spread_ms, 0.1)  # 1.15 - 1.05
    self.assertEqual(rows[1].rounds, (1.0, 1.2, 1.1))
    self.assertEqual([r.repeats for r in rows], [2, 3, 2])
    self.assertEqual([r.remeasured for r in rows], [0, 0, 0])

  def test_visits_quiet_rows_two_noisy_device_no_retries(self):
    def device(ms):  # ms(indices, visit number) -> the visit's latency.
      made = {}

      def open_one(indices):
        def visit(first):
          made[indices] = made.get(indices, 0) + 1
          return ms(indices, made[indices]), 0.0
        return visit
      return protocol_lib.Device('fake', {}, open_one)

    names = [str(i) for i in range(10)]
    for ms, visits, rounds in (
        (lambda i, n: 1.0 + int(i), 20, [2] * 10),           # Quiet.
        (lambda i, n: 1.0 + 0.5 * (n % 2), 50, [5] * 10),    # 40% noise.
        # Quiet but for row 0's visits 2 and 3: it alone is retried (4).
        (lambda i, n: 9.0 if i == '0' and n in (2, 3) else 1.0, 27,
         [9] + [2] * 9)):
      progress = protocol_lib.Progress()
      rows = list(protocol_lib.measure(device(ms), names,
                                       protocol_lib.Protocol(), progress))
      self.assertEqual(progress.visits, visits)
      self.assertEqual(sorted(r.repeats for r in rows), sorted(rounds))

  def test_each_row_comes_when_its_rounds_are_done(self):
    # One chunk of three, two rounds: a b c, then b c a. The device fails on
    # its sixth visit (a's second): b and c are done by then.
    fake = _Scripted({'a': [(1.0, 0), RuntimeError('gone')],
                      'b': [(2.0, 0)] * 2, 'c': [(3.0, 0)] * 2})
    rows = []
    with self.assertRaisesRegex(RuntimeError, 'gone'):
      for row in protocol_lib.measure(fake.device(), ['a', 'b', 'c'],
                                      protocol_lib.Protocol(repeats=2)):
        rows.append(row)
        self.assertLen(fake.log, {'b': 4, 'c': 5}[row.indices])
    self.assertEqual([r.indices for r in rows], ['b', 'c'])

  def test_a_row_counts_its_own_seconds(self):
    # Preparing a model takes 1 s, a visit 0.25 s (a fake clock).
    clock = [0.0]

    def open_one(indices):
      clock[0] += 1.0

      def visit(first):
        clock[0] += 0.25
        return 1.0, 0.0
      return visit

    device = protocol_lib.Device('fake', {}, open_one)
    progress = protocol_lib.Progress()
    with mock.patch.object(protocol_lib.time, 'perf_counter',
                           lambda: clock[0]):
      rows = protocol_lib.measure(device, ['a', 'b'],
                                  protocol_lib.Protocol(repeats=3), progress)
      first = next(rows)
      # Rounds a b, b a: a is under way (both models prepared, a visited
      # once) when b's two agreeing rounds are done.
      self.assertEqual((first.indices, first.seconds), ('b', 1.5))
      self.assertEqual(progress.work_seconds, 2.75)
      self.assertEqual(next(rows).seconds, 1.5)
    self.assertEqual((progress.work_seconds, progress.visits), (3.0, 4))

  def test_disturbed_visits_and_spread_rows_are_measured_again(self):
    # 'a': its second visit lost 30% of its time: dropped and redone.
    # 'b': rounds 1, 3, 1 spread out (IQR 1 > 5% of 1) on a device quiet
    # otherwise ('c'): rounds are added until the spread is small.
    fake = _Scripted({'a': [(1.0, 0.0), (9.0, 0.3), (1.0, 0.01)],
                      'b': [(1.0, 0), (3.0, 0), (1.0, 0), (1.0, 0),
                            (1.0, 0), (1.0, 0)], 'c': [(2.0, 0)] * 2})
    protocol = protocol_lib.Protocol(repeats=3, interleave=3, max_retries=3)
    c, a, b = protocol_lib.measure(fake.device(), ['a', 'b', 'c'], protocol)
    self.assertEqual((a.rounds, c.rounds), ((1.0, 1.0), (2.0, 2.0)))
    self.assertEqual(a.remeasured, 1)
    self.assertEqual(b.rounds, (1.0, 3.0, 1.0, 1.0, 1.0))
    self.assertEqual(b.remeasured, 2)
    self.assertEqual(b.latency_ms, 1.0)

  def test_retries_are_bounded(self):
    fake = _Scripted({'a': [(float(i), 0.5) for i in range(1, 20)]})
    protocol = protocol_lib.Protocol(repeats=2, max_retries=2)
    (row,) = protocol_lib.measure(fake.device(), ['a'], protocol)
    self.assertEqual(row.remeasured, 2)  # Then kept as measured.
    self.assertEqual(row.repeats, 2)
    self.assertLen(fake.log, 4)

  def test_each_chunks_conversion_garbage_is_collected_before_timing(self):
    # A conversion leaves reference cycles (graphs) that a binary's raised GC
    # thresholds keep for hundreds of conversions (bench/conversions.py):
    # the pass collects them per chunk, before its first visit.
    class Garbage:
      pass

    refs, dead = {}, []

    def open_one(indices):
      cycle = Garbage()
      cycle.me = cycle
      refs[indices] = weakref.ref(cycle)

      def visit(first):
        dead.append(refs[indices]() is None)
        return 1.0, 0.0
      return visit

    device = protocol_lib.Device('fake', {}, open_one)
    gc.disable()
    try:
      list(protocol_lib.measure(device, ['a', 'b'], protocol_lib.Protocol(
          repeats=2, interleave=1)))
    finally:
      gc.enable()
    self.assertEqual(dead, [True] * 4)

  def test_a_reference_cancels_the_devices_drift(self):
    # The device slows by a factor that changes every call (1, 1.3, 0.9,
    # ...); each visit is followed by the reference's, slowed alike.
    factors = iter([1.0, 1.0, 1.3, 1.3, 0.9, 0.9, 1.6, 1.6] * 4)
    log = []

    def open_one(indices):
      base = {'a': 2.0, 'b': 6.0, 'ref': 4.0}[indices]
      def visit(first):
        log.append((indices, first))
        return base * next(factors), 0.0
      return visit

    device = protocol_lib.Device('fake', {}, open_one)
    protocol = protocol_lib.Protocol(repeats=2, interleave=2)
    rows = list(protocol_lib.measure(device, ['a', 'b'], protocol,
                                     reference=(open_one('ref'), 8.0)))
    # Rounds of base / 4 x 8 ms whatever the factor: two agree, done.
    rows = sorted(rows, key=lambda r: r.indices)
    self.assertEqual([(r.indices, r.repeats) for r in rows],
                     [('a', 2), ('b', 2)])
    for row, ms in zip(rows, (4.0, 12.0)):
      for value in row.rounds:  # 1.3 x 6 / (1.3 x 4) x 8 is 12 and 2e-15.
        self.assertAlmostEqual(value, ms, places=12)
    self.assertEqual(log[:4], [('a', True), ('ref', True), ('b', True),
                               ('ref', False)])
    # Without it, the same drift spreads the rounds (2.6 against 2.0).
    factors = iter([1.0, 1.3, 0.9, 1.6] * 4)
    rows = list(protocol_lib.measure(device, ['a'], protocol))
    self.assertEqual(rows[0].rounds[:2], (2.0, 2.6))
    # The scale: the fastest of the visits (a busy spell only slows).
    factors = iter([1.5, 1.0, 1.2])
    self.assertEqual(protocol_lib.reference_ms(open_one('ref'), visits=3),
                     4.0)

  def test_noise_figures(self):
    self.assertAlmostEqual(protocol_lib.first_difference([1.0, 1.1, 9.0]),
                           0.1 / 1.05)
    rows = [protocol_lib.Row('a', 1, 0, 4, 0, 0, (1.0, 1.1, 1.0, 1.1)),
            protocol_lib.Row('b', 1, 0, 2, 0, 0, (2.0, 2.0)),
            protocol_lib.Row('c', 1, 0, 2, 0, 0, (1.0, 3.0))]
    self.assertAlmostEqual(protocol_lib.pass_noise(rows), 0.1 / 1.05)
    self.assertIsNone(protocol_lib.pass_noise([]))
    difference, count = protocol_lib.passes_difference(
        {'a': 1.0, 'b': 2.0, 'c': 4.0, 'x': 9.0},
        {'a': 1.1, 'b': 2.0, 'c': 4.0, 'y': 1.0})
    self.assertEqual(count, 3)
    self.assertAlmostEqual(difference, 0.0)  # Median of 0.095, 0, 0.
    # An exact model within +-5% of a pass: the rows whose passes differ by
    # at most 7.07%, two of three; within +-10% (14.1%), all.
    self.assertAlmostEqual(protocol_lib.passes_reach(
        {'a': 1.0, 'b': 2.0, 'c': 4.0}, {'a': 1.1, 'b': 2.0, 'c': 4.0},
        0.05), 200 / 3)
    self.assertEqual(protocol_lib.passes_reach(
        {'a': 1.0, 'b': 2.0}, {'a': 1.1, 'b': 2.0}, 0.10), 100.0)
    with self.assertRaisesRegex(ValueError, 'share no architecture'):
      protocol_lib.passes_difference({'a': 1.0}, {'b': 1.0})

  def test_bad_protocol(self):
    for protocol, message in (
        (protocol_lib.Protocol(repeats=1), 'repeats must be an integer >= 2'),
        (protocol_lib.Protocol(runs=0), 'runs must be an integer >= 1'),
        (protocol_lib.Protocol(max_disturbance=0.0), r'max_disturbance must be '
         r'in \(0, 1\]')):
      with self.assertRaisesRegex(ValueError, message):
        list(protocol_lib.measure(_Scripted({}).device(), ['a'], protocol))


class TimingTest(absltest.TestCase):

  def test_time_runs_reports_median_iqr_and_disturbance(self):
    delays = iter([0.001, 0.002, 0.003, 0.004, 0.020])
    wall, cpu = [0.0], [0.0]

    def run():
      step = next(delays)
      wall[0] += step
      cpu[0] += step / 2  # Half of the time went to someone else.

    with mock.patch.object(protocol_lib.time, 'perf_counter', lambda: wall[0]):
      median, spread, disturbance = protocol_lib.time_runs(run, runs=5,
                                                           clock=lambda: cpu[0])
    self.assertTrue(protocol_lib.gc.isenabled())  # Off only while timing.
    self.assertAlmostEqual(median, 3.0)   # ms
    self.assertAlmostEqual(spread, 2.0)   # 4 ms - 2 ms
    self.assertAlmostEqual(disturbance, 0.5)

  def test_warm_up_stops_when_stable(self):
    delays = iter([0.010] * 3 + [0.005] * 3 + [0.005] * 3 + [1.0] * 30)
    clock = [0.0]

    def run():
      clock[0] += next(delays)

    with mock.patch.object(protocol_lib.time, 'perf_counter', lambda: clock[0]):
      self.assertEqual(protocol_lib.warm_up(run, 3, 30, 0.02), 9)
      self.assertEqual(protocol_lib.warm_up(run, 3, 4, 0.02), 4)  # Capped.


if __name__ == '__main__':
  absltest.main()
