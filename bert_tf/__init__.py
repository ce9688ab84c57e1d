"""bert_tf: TensorFlow 2 / Keras reimplementation of Google's original BERT release."""

__version__ = "0.1.0"
