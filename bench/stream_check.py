"""The cost of checking every image of a training stream (`data.unreadable`).

A `streams.keyed_batches` stream of the ImageNet train preprocessing over
`input_pipeline`'s JPEG fixture, with and without `checked` (the zip with
the stream of expected positions), on one thread, passes interleaved; CPU
ms per image of each, median of the passes. Last line:
`unchecked_ms=<f> checked_ms=<f> overhead_ms=<f>`.

  PYTHONPATH=. .venv/bin/python bench/stream_check.py [--num_images 500]
"""

import argparse
import statistics
import sys
import tempfile
import time

import tensorflow as tf

sys.path.insert(0, __file__.rsplit('/', 1)[0])
import input_pipeline  # pylint: disable=g-import-not-at-top,wrong-import-position

from tunas_tf.data import preprocessing  # pylint: disable=g-import-not-at-top,wrong-import-position
from tunas_tf.data import streams  # pylint: disable=g-import-not-at-top,wrong-import-position

BATCH = 32


def make_stream(encoded, checked):
  examples = tf.data.Dataset.from_tensor_slices(encoded)
  stream = streams.keyed_batches(
      examples, len(encoded), BATCH, key=(0, 0),
      prepare=lambda e, seed: preprocessing.imagenet_train(e, seed, 224),
      checked='fixture' if checked else None)
  return input_pipeline.on_threads(stream, 1)


@tf.function
def consume(iterator, count):
  total = tf.constant(0.0)
  for _ in tf.range(count):
    total += iterator.get_next()[0, 0, 0, 0]
  return total


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--num_images', type=int, default=500)
  parser.add_argument('--repeats', type=int, default=5)
  args = parser.parse_args()
  encoded, _ = input_pipeline.make_fixture(args.num_images,
                                           tempfile.mkdtemp())
  batches = args.num_images // BATCH
  iterators = {c: iter(make_stream(encoded, c)) for c in (False, True)}
  for iterator in iterators.values():  # Warm-up: functions instantiated.
    consume(iterator, tf.constant(2)).numpy()
  ms = {False: [], True: []}
  for _ in range(args.repeats):
    for checked, iterator in iterators.items():
      cpu = time.process_time()
      consume(iterator, tf.constant(batches)).numpy()
      ms[checked].append(1000 * (time.process_time() - cpu) /
                         (batches * BATCH))
  for checked in (False, True):
    print(f'checked={checked}: ' + ' '.join(f'{m:.3f}' for m in ms[checked])
          + ' ms/image')
  unchecked, checked = (statistics.median(ms[c]) for c in (False, True))
  print(f'unchecked_ms={unchecked:.3f} checked_ms={checked:.3f} '
        f'overhead_ms={checked - unchecked:.3f}')


if __name__ == '__main__':
  main()
