"""Test-wide settings: quiet TensorFlow, fixed seeds where a test asks for them."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')


def pytest_collection_modifyitems(config, items):
  """Drops `tf.test.TestCase.test_session`, a deprecated helper, not a test."""
  del config
  items[:] = [item for item in items if item.name != 'test_session']
