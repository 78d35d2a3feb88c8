"""tunas_tf: TuNAS-style one-shot, hardware-aware architecture search in TensorFlow."""

import setuptools

INSTALL_REQUIRES = [
    # Any TF 2.15 (TPUEstimator's last release): an installed build of it, as
    # a Cloud TPU VM's own TPU build, satisfies this and is kept, never
    # replaced by the CPU/GPU wheel from the package index.
    'tensorflow>=2.15,<2.16',
    'tensorflow-estimator>=2.15,<2.16',
    'tensorflow-datasets==4.9.10',
    # tensorflow-metadata>=1.18 needs protobuf 5, which TF 2.15 refuses.
    'tensorflow-metadata<1.18',
    # TFDS needs it: without it, building or loading a dataset fails.
    'importlib_resources',
    'absl-py>=1.4,<3',
    'numpy>=1.23,<2',
    # protobuf 3.x has no binary wheel for Python 3.11: its pure-Python
    # implementation made a search start ~3x slower (graph serialisation).
    'protobuf>=4.25,<5',
    # The Cloud TPU API service that `cloud_tpu` hands TF's bundled Cloud TPU
    # client (which would build one with oauth2client, deprecated since 2017;
    # cloud-tpu-client 0.10 pins google-api-python-client 1.8, which holds
    # protobuf below 4), with google-auth's application-default credentials.
    'google-api-python-client>=2,<3',
    'google-auth>=2,<3',
    # 2.28+ warns at every import that Python 3.11 will lose support.
    'google-api-core<2.28',
    'scikit-learn>=1.3,<1.7',
    'matplotlib>=3.7,<3.10',
    # tools/import_dataset reads image folders (PNG/JPEG headers, then pixels);
    # matplotlib already installs it.
    'pillow>=8,<14',
]

setuptools.setup(
    name='tunas_tf',
    version='0.1.0',
    description=__doc__,
    # 3.10: the Python of Cloud TPU VMs' TF 2.15 images; TF 2.15 has no
    # wheels past 3.11.
    python_requires='>=3.10,<3.12',
    packages=setuptools.find_packages(include=['tunas_tf', 'tunas_tf.*']),
    package_data={'tunas_tf': ['cost_model/data/*.json', 'configs/*.cfg']},
    install_requires=INSTALL_REQUIRES,
    extras_require={'test': ['pytest>=7.4,<9', 'pytest-xdist>=3.5,<4']},
)
