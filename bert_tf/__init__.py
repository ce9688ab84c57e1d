"""bert_tf: TensorFlow 2 / Keras reimplementation of Google's original BERT release."""

__version__ = "0.1.0"

# TensorFlow is installed through an extra (bert_tf[cpu], [gpu] or [tpu]): one line naming it
# when it is missing or outside the declared range (bert_tf/_requirements.py).
from bert_tf import _requirements

_requirements.check()
del _requirements

# TensorFlow's start-up banner (and the cuInit ERROR of a machine without a GPU driver), which
# it prints whatever its log level says, is dropped at the first `import tensorflow`.
from bert_tf.tensorflow_start_up import quiet_tensorflow_import  # noqa: E402

quiet_tensorflow_import()
del quiet_tensorflow_import
