"""The ImageNet search recipe on CPU: a flagfile shrunk in batch, image size
and steps, on a folder of mixed-size JPEGs with ImageNet preprocessing, then
its architecture trained for 2 steps with `train_eval`."""

import json
import os
import sys
import tempfile

from absl.testing import absltest
import pytest

from tests.testing import jpeg_folder
from tunas_tf import architecture
from tests.testing import forked

_CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'tunas_tf', 'configs')
_ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')


def _run(*args: str) -> forked.Done:
  return forked.run_one([sys.executable, '-m', *args], env=_ENV, timeout=600)


@pytest.mark.estimator
class ImagenetRecipeTest(absltest.TestCase):

  def test_search_then_train_on_mixed_size_jpegs(self):
    root = tempfile.mkdtemp()
    data_dir, name = jpeg_folder.import_jpeg_dataset(tempfile.mkdtemp())
    search_dir, train_dir = f'{root}/search', f'{root}/train'
    data = [f'--dataset={name}', f'--data_dir={data_dir}', '--nodownload',
            '--image_size=32']
    # 24 images: 16 held out, one validation batch of 4 x 4 (the recipe's
    # multiplier); 8 to train on, in batches of 4.
    done = _run('tunas_tf.train_search',
                f'--flagfile={_CONFIGS}/proxylessnas_search.cfg',
                f'--model_dir={search_dir}', *data,
                '--validation_examples=16', '--train_batch_size=4',
                '--max_steps=2', '--tpu_iterations_per_loop=1')
    self.assertEqual(done.returncode, 0, done.stderr[-3000:])
    with open(os.path.join(search_dir, 'config.json')) as f:
      config = json.load(f)
    self.assertEqual(
        (config['preprocessing'], config['image_size'], config['ssd'],
         config['supernet_mode'], config['validation_batch_size']),
        ('imagenet', 32, 'proxylessnas_search', 'masked', 16))
    done = _run('tunas_tf.tools.extract_architecture',
                f'--model_dir={search_dir}')
    self.assertEqual(done.returncode, 0, done.stderr[-3000:])
    searched = os.path.join(search_dir, architecture.FILE_NAME)
    # The dataset's default preprocessing (images of varying sizes).
    done = _run('tunas_tf.train_eval', f'--architecture={searched}',
                f'--model_dir={train_dir}', *data, '--max_steps=2',
                '--train_batch_size=4', '--eval_batch_size=6', '--noexport')
    self.assertEqual(done.returncode, 0, done.stderr[-3000:])
    metrics = json.loads(done.stdout.strip().splitlines()[-1])
    self.assertEqual(metrics['global_step'], 2)
    with open(os.path.join(train_dir, 'config.json')) as f:
      self.assertEqual(json.load(f)['preprocessing'], 'imagenet')


if __name__ == '__main__':
  absltest.main()
