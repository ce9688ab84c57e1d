"""The activation functions a config's `hidden_act` names, and the kernel each runs on.

`get_activation` maps a name to its function: the original's tanh GELU ("gelu"), the exact erf
GELU ("gelu_exact", Hugging Face's "gelu"), relu, tanh, swish or linear (None). In a training
pass with the CPU kernels switch on, the GELUs run as the fused kernels of
`bert_tf.model.cpu_kernels`; with it off, as plain TensorFlow ops.
"""
import tensorflow as tf

from bert_tf.model.cpu_kernels import cpu_kernels_enabled, gelu, gelu_exact_fused, gelu_fused


def gelu_exact(x):
    """Exact GELU, x * Phi(x) with erf (Hugging Face's "gelu")."""
    return tf.nn.gelu(x, approximate=False)


_ACTIVATIONS = {
    "gelu": gelu,
    "gelu_exact": gelu_exact,
    "relu": tf.nn.relu,
    "tanh": tf.tanh,
    "linear": None,
    "swish": tf.nn.silu,
}


# Variants for training, where the backward pass keeps the pre-activation (see `gelu_fused`).
_TRAINING_ACTIVATIONS = {"gelu": gelu_fused, "gelu_exact": gelu_exact_fused}


# Plain TensorFlow ops, autodiff gradients: the CPU kernels switch off.
_PLAIN_ACTIVATIONS = {"gelu": lambda x: tf.nn.gelu(x, approximate=True)}


def get_activation(name, training=False):
    """Maps a config's `hidden_act` to a function (None for linear), as the original; with
    `training`, the variant to use in a training pass (the same math). With the CPU kernels
    switch off, plain TensorFlow ops."""
    if name not in _ACTIVATIONS:
        raise ValueError(f"unsupported activation {name!r} (supported: {', '.join(_ACTIVATIONS)})")
    if not cpu_kernels_enabled():
        return _PLAIN_ACTIVATIONS.get(name, _ACTIVATIONS[name])
    return _TRAINING_ACTIVATIONS.get(name, _ACTIVATIONS[name]) if training else _ACTIVATIONS[name]
