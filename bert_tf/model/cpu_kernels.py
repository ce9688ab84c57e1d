"""The CPU kernels of the encoder's layers: hand-written gradients and XLA-fused elementwise
kernels, and the one switch that turns them on or off.

The layers of `bert_tf.model.layers` call these in training (none of them changes the outputs
beyond float rounding):
- GELU: the derivative (and in training the forward) as one XLA-fused elementwise kernel each
  way (`gelu`, `gelu_fused`, `gelu_exact_fused`; `bert_tf.model.activations` picks them).
- LayerNorm(x + residual): one XLA-fused pass forward and one backward, with a hand-written
  gradient (`fused_layer_norm`; `layer_norm_forward` alone, as plain ops, at inference).
- Dropout: 16 random bits per element from XLA's Threefry (`random_bits_like`), faster per bit
  than the Philox kernel behind Keras' float32 draws, and masking in one pass each way
  (`dropout_with_bits`).
- The masked-LM output: log_softmax(logits + bias) over the vocabulary as one XLA pass each way
  (`log_softmax_with_bias`), and the loss's pick of the true token's log-prob as one pass each
  way (`picked_log_probs`): on [predictions, vocabulary] these memory-bound passes cost about as
  much as the output matmul for a small model.
- The float32 intermediate layer computes its input gradient from a transposed copy of the
  kernel (`matmul_with_transposed_kernel_gradient`): oneDNN's matmul with a transposed operand is
  slow for that shape.
XLA compiles only these small elementwise kernels, in float32 also under bfloat16; the matmuls
stay oneDNN's.

The switch: these kernels were tuned on a CPU with oneDNN; on a GPU or TPU, XLA and cuDNN fuse
such ops on their own and they bring nothing. `set_cpu_kernels("on" | "off" | "auto")`, or the
environment variable BERT_TF_CPU_KERNELS, turns them all on or off. "auto" (the default) turns
them on unless a GPU is visible or a TPUStrategy is in scope. Off, the layers run the same math
as plain TensorFlow ops with autodiff; the outputs and gradients are the same up to float
rounding either way (tests/model/test_model.py), and dropout draws the same bits, so a seeded
run drops the same elements.
"""
import contextlib
import functools
import math

import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops

from bert_tf.cpu_switch import CPU_KERNELS_MODES, CPU_SWITCH_VARIABLE, cpu_switch_from_environment

_cpu_kernels = cpu_switch_from_environment()


def set_cpu_kernels(mode):
    """The CPU kernels switch (module docstring): "on", "off" or "auto". Read when a layer is
    called (traced), so set it before building the training or serving function."""
    global _cpu_kernels
    if mode not in CPU_KERNELS_MODES:
        raise ValueError(f"cpu kernels: {mode!r} is not one of {', '.join(CPU_KERNELS_MODES)}")
    _cpu_kernels = mode


def cpu_kernels_mode():
    """The switch as set: "auto", "on" or "off"."""
    return _cpu_kernels


def cpu_kernels_enabled():
    """Whether the CPU kernels are used now: "auto" means no GPU visible and no TPUStrategy."""
    if _cpu_kernels not in CPU_KERNELS_MODES:
        raise ValueError(f"{CPU_SWITCH_VARIABLE}={_cpu_kernels!r} is not one of "
                         f"{', '.join(CPU_KERNELS_MODES)}")
    if _cpu_kernels != "auto":
        return _cpu_kernels == "on"
    if isinstance(tf.distribute.get_strategy(), tf.distribute.TPUStrategy):
        return False
    return not _gpu_visible()


@functools.lru_cache(maxsize=None)
def _gpu_visible():
    # Asked by every layer call: list the devices once (they do not change in a process).
    return bool(tf.config.list_logical_devices("GPU"))


@contextlib.contextmanager
def releasing_custom_gradients():
    """Within the block, models are built, traced and trained as usual; when it ends, the
    gradient functions that `tf.custom_gradient` registered for graphs traced inside are
    dropped. TensorFlow 2.20-2.21 keeps each one in its global gradient registry for good, and
    with it the forward graph and the variables that graph captured
    (tensorflow/tensorflow#97697): a process that trains model after model (a GLUE sweep's
    runs, the Python API) would keep every one. A graph traced inside cannot be differentiated
    after the block."""
    registry = getattr(getattr(tf_ops, "_gradient_registry", None), "_registry", None)
    before = set(registry) if isinstance(registry, dict) else None
    try:
        yield
    finally:
        if before is not None:
            for name in [name for name in registry
                         if name not in before and name.startswith("CustomGradient-")]:
                del registry[name]


_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


@tf.function(jit_compile=True)
def _gelu_backward(x, dy):
    # d/dx of 0.5 x (1 + tanh(u)), u = c (x + a x^3), in float32 (XLA's CPU code for bfloat16
    # arithmetic is slower than for float32 with the casts: docs/model.md).
    dtype = x.dtype
    x, dy = tf.cast(x, tf.float32), tf.cast(dy, tf.float32)
    x2 = x * x
    t = tf.tanh(_GELU_C * x * (1.0 + _GELU_A * x2))
    return tf.cast(dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _GELU_C
                         * (1.0 + 3.0 * _GELU_A * x2)), dtype)


@tf.function(jit_compile=True)
def _gelu_forward(x):
    y = tf.nn.gelu(tf.cast(x, tf.float32), approximate=True)
    return tf.cast(y, x.dtype)


@tf.custom_gradient
def gelu(x):
    """The original's GELU: the tanh approximation (its `modeling.gelu`).

    The forward is tf.nn.gelu's (oneDNN fuses it with the preceding matmul + bias at inference);
    the derivative runs as one XLA-fused elementwise kernel instead of ~12 separate memory-bound
    ops on [B * T, intermediate] (a faster float32 train step).
    """
    return tf.nn.gelu(x, approximate=True), lambda dy: _gelu_backward(x, dy)


@tf.custom_gradient
def gelu_fused(x):
    """`gelu` for training: the backward pass keeps the pre-activation, so oneDNN cannot fuse
    the GELU into its matmul, and tf.nn.gelu would run as ~8 separate ops; here it is one XLA
    kernel each way."""
    return _gelu_forward(x), lambda dy: _gelu_backward(x, dy)


_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@tf.function(jit_compile=True)
def _gelu_exact_forward(x):
    y = tf.nn.gelu(tf.cast(x, tf.float32), approximate=False)
    return tf.cast(y, x.dtype)


@tf.function(jit_compile=True)
def _gelu_exact_backward(x, dy):
    # d/dx of x Phi(x) = Phi(x) + x phi(x), in float32 (see _gelu_backward).
    dtype = x.dtype
    x, dy = tf.cast(x, tf.float32), tf.cast(dy, tf.float32)
    cdf = 0.5 * (1.0 + tf.math.erf(x * _SQRT_HALF))
    pdf = _INV_SQRT_2PI * tf.exp(-0.5 * x * x)
    return tf.cast(dy * (cdf + x * pdf), dtype)


@tf.custom_gradient
def gelu_exact_fused(x):
    """`gelu_exact` for training, one XLA kernel each way as `gelu_fused` (Hugging Face
    checkpoints such as MiniLM use it): tf.nn.gelu's erf form and its autodiff gradient are
    ~10 separate memory-bound ops on [B * T, intermediate] otherwise."""
    return _gelu_exact_forward(x), lambda dy: _gelu_exact_backward(x, dy)


def transposes_kernel_for_gradient(input_size, units):
    """Whether a float32 Dense computes its input gradient dy @ kernel^T from a transposed copy
    of the kernel: oneDNN's float32 matmul with a transposed right operand is slower than with
    the copy for the intermediate layer of BERT-Base (768 -> 3072; docs/model.md) and of the
    small config (256 -> 1024), but not for BERT-Large's (1024 -> 4096) nor for the other layers
    (on the x86 CPU of docs/model.md; bfloat16 is fast either way).
    """
    return units == 4 * input_size and input_size <= 768


@tf.function(jit_compile=True)
def _transpose(matrix):
    # XLA: a plain tf.transpose feeding the matmul would be folded back into transpose_b by
    # TensorFlow's graph optimizer.
    return tf.transpose(matrix)


@tf.custom_gradient
def matmul_with_transposed_kernel_gradient(x, kernel):
    """x @ kernel, whose gradient for x multiplies by a transposed copy of the kernel."""
    def grad(dy):
        return tf.matmul(dy, _transpose(kernel)), tf.matmul(x, dy, transpose_a=True)
    return tf.matmul(x, kernel), grad


DROPOUT_BITS = 16


@tf.function(jit_compile=True)
def _keep_and_scale(x, bits, threshold, scale):
    """x * scale where bits >= threshold, else 0: one fused pass (scaled in float32)."""
    kept = tf.cast(tf.cast(x, tf.float32) * scale, x.dtype)
    return tf.where(bits >= threshold, kept, tf.zeros_like(kept))


@tf.function(jit_compile=True)
def random_bits_like(x, seed):
    """16 random bits per element of `x`: Threefry in XLA, faster on CPU than TF's Philox
    kernel (docs/model.md; and the same algorithm under every XLA device)."""
    size = tf.size(x)
    words = tf.random.stateless_uniform([(size + 1) // 2], seed, minval=None, maxval=None,
                                        dtype=tf.uint32, alg="threefry")
    return tf.reshape(tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size], tf.shape(x))


@tf.custom_gradient
def dropout_with_bits(x, bits, threshold, scale):
    def grad(dy):
        return _keep_and_scale(dy, bits, threshold, scale), None, None, None
    return _keep_and_scale(x, bits, threshold, scale), grad


@tf.function(jit_compile=True)
def _log_softmax_forward(logits, bias):
    return tf.nn.log_softmax(logits + bias, axis=-1)


@tf.function(jit_compile=True)
def _log_softmax_backward(dy, log_probs):
    dlogits = dy - tf.exp(log_probs) * tf.reduce_sum(dy, axis=-1, keepdims=True)
    return dlogits, tf.reduce_sum(dlogits, axis=0)


@tf.custom_gradient
def log_softmax_with_bias(logits, bias):
    """log_softmax(logits + bias) over the last axis, float32 logits [N, V] and bias [V]."""
    log_probs = _log_softmax_forward(logits, bias)
    return log_probs, lambda dy: _log_softmax_backward(dy, log_probs)


@tf.function(jit_compile=True)
def _pick(log_probs, ids):
    # A row's sum over its one-hot: every other product is a zero, so the sum is the entry
    # exactly, as the original's reduce_sum(log_probs * one_hot).
    return tf.reduce_sum(log_probs * tf.one_hot(ids, log_probs.shape[-1]), axis=-1)


@tf.function(jit_compile=True)
def _pick_backward(dy, ids, depth):
    return dy[..., None] * tf.one_hot(ids, depth)


@tf.custom_gradient
def picked_log_probs(log_probs, ids):
    """log_probs[..., ids]: float32 log_probs [..., V], int32 ids [...]."""
    return _pick(log_probs, ids), lambda dy: (_pick_backward(dy, ids, log_probs.shape[-1]), None)


@tf.function(jit_compile=True)
def layer_norm_forward(summands, gamma, beta, epsilon):
    h = tf.add_n([tf.cast(t, tf.float32) for t in summands])
    mean = tf.reduce_mean(h, axis=-1, keepdims=True)
    variance = tf.reduce_mean(tf.math.squared_difference(h, mean), axis=-1, keepdims=True)
    inv = tf.math.rsqrt(variance + epsilon)
    # The original's (tf.nn.batch_normalization's) op order: x * inv' + (beta - mean * inv').
    scaled_inv = inv * gamma
    y = h * scaled_inv + (beta - mean * scaled_inv)
    return tf.cast(y, summands[0].dtype), mean, inv


@tf.function(jit_compile=True)
def _layer_norm_backward(dy, summands, gamma, mean, inv):
    x_hat = (tf.add_n([tf.cast(t, tf.float32) for t in summands]) - mean) * inv
    dy = tf.cast(dy, tf.float32)
    g = dy * gamma
    dh = inv * (g - tf.reduce_mean(g, axis=-1, keepdims=True)
                - x_hat * tf.reduce_mean(g * x_hat, axis=-1, keepdims=True))
    return (tf.cast(dh, summands[0].dtype), tf.reduce_sum(dy * x_hat, axis=0),
            tf.reduce_sum(dy, axis=0))


def fused_layer_norm(summands, gamma, beta, epsilon):
    @tf.custom_gradient
    def fused(gamma, beta, *summands):
        y, mean, inv = layer_norm_forward(list(summands), gamma, beta, epsilon)

        def grad(dy):
            dh, dgamma, dbeta = _layer_norm_backward(dy, list(summands), gamma, mean, inv)
            return (dgamma, dbeta) + tuple(tf.cast(dh, t.dtype) for t in summands)
        return y, grad
    return fused(gamma, beta, *summands)
