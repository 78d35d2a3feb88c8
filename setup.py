"""tunas_tf: TuNAS-style one-shot, hardware-aware architecture search in TensorFlow."""

import setuptools

# Two stacks, chosen by the Python that installs the package: TF 2.15 with
# TPUEstimator on Python 3.10-3.11 (what the binaries run on today), the
# newest TF on 3.12-3.13 (no tf.estimator: the binaries need the tf.distribute
# engine there; the rest of the package runs).
OLD = 'python_version < "3.12"'
NEW = 'python_version >= "3.12"'

INSTALL_REQUIRES = [
    # Any TF 2.15 (TPUEstimator's last release): an installed build of it, as
    # a Cloud TPU VM's own TPU build, satisfies this and is kept, never
    # replaced by the CPU/GPU wheel from the package index.
    f'tensorflow>=2.15,<2.16; {OLD}',
    f'tensorflow-estimator>=2.15,<2.16; {OLD}',
    # Tested on 2.21 (Keras 3, protobuf 6+, numpy 2).
    f'tensorflow>=2.16,<2.22; {NEW}',
    # tf.summary is TensorBoard's: TF 2.15 installs it, TF 2.16+ does not.
    'tensorboard>=2.15',
    'tensorflow-datasets==4.9.10',
    # tensorflow-metadata>=1.18 needs protobuf 5, which TF 2.15 refuses.
    f'tensorflow-metadata<1.18; {OLD}',
    # TFDS needs it: without it, building or loading a dataset fails.
    'importlib_resources',
    'absl-py>=1.4,<3',
    # TF 2.15 is built against numpy 1.
    f'numpy>=1.23,<2; {OLD}',
    f'numpy>=1.26,<3; {NEW}',
    # protobuf 3.x has no binary wheel for Python 3.11: its pure-Python
    # implementation made a search start ~3x slower (graph serialisation).
    # TF 2.15 refuses 5. (Newer TF pins its own: 6 or 7.)
    f'protobuf>=4.25,<5; {OLD}',
    # The Cloud TPU API service that `cloud_tpu` hands TF's bundled Cloud TPU
    # client (which would build one with oauth2client, deprecated since 2017;
    # cloud-tpu-client 0.10 pins google-api-python-client 1.8, which holds
    # protobuf below 4), with google-auth's application-default credentials.
    'google-api-python-client>=2,<3',
    'google-auth>=2,<3',
    # 2.28+ warns at every import that Python 3.11 will lose support.
    f'google-api-core<2.28; {OLD}',
    f'scikit-learn>=1.3,<1.7; {OLD}',
    f'scikit-learn>=1.5,<1.10; {NEW}',
    f'matplotlib>=3.7,<3.10; {OLD}',
    f'matplotlib>=3.9,<3.12; {NEW}',
    # The TFLite interpreter (tunas_tf/io/lite.py: train_eval's export check,
    # tools/measure_latency): TF 2.16+ deprecates tf.lite.Interpreter for
    # LiteRT's, warning at each use that it is scheduled for deletion.
    f'ai-edge-litert>=2,<3; {NEW}',
    # TFLite Micro's interpreter on the host (tunas_tf/io/lite.py: the arena
    # an int8 model needs, train_eval's microcontroller figures). Only dev
    # releases exist (hence >=0.dev0), as wheels for CPython 3.10-3.13 on
    # x86-64 Linux; elsewhere those figures are refused naming the package.
    'tflite-micro>=0.dev0; sys_platform == "linux" and '
    'platform_machine == "x86_64"',
    # tools/import_dataset reads image folders (PNG/JPEG headers, then pixels);
    # matplotlib already installs it.
    'pillow>=8,<14',
]

setuptools.setup(
    name='tunas_tf',
    version='0.1.0',
    description=__doc__,
    # 3.10: the Python of Cloud TPU VMs' TF 2.15 images; TF 2.15 has no
    # wheels past 3.11. 3.12-3.13: the newest TF (see OLD and NEW).
    python_requires='>=3.10,<3.14',
    packages=setuptools.find_packages(include=['tunas_tf', 'tunas_tf.*']),
    package_data={'tunas_tf': ['cost_model/data/*.json', 'configs/*.cfg']},
    install_requires=INSTALL_REQUIRES,
    extras_require={'test': ['pytest>=7.4,<9', 'pytest-xdist>=3.5,<4']},
)
