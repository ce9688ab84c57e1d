"""The wheel's packages: bert_tf and every package below it, found, and the repository's run/
and data_tools/ as bert_tf.run and bert_tf.data_tools (`package_dir` in setup.cfg, which holds
the rest of the metadata)."""
from setuptools import find_packages, setup

setup(packages=find_packages(include=["bert_tf", "bert_tf.*"])
      + ["bert_tf.run", "bert_tf.data_tools"])
