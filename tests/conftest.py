"""Test-wide settings: quiet TensorFlow, fixed seeds where a test asks for them."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
