"""int8 inference for the dense layers: TensorFlow's oneDNN quantized matmul.

`quantize(model)` turns the model's transformer dense layers into int8 ones (each layer's
`quantize("int8")`, Keras 3's method name: `bert_tf.model.layers.Dense` and the QKV projection
of `BertSelfAttention`). Such a layer keeps its kernel as int8 with one float32 scale per output
unit (symmetric, round(kernel / scale), scale = max |kernel column| / 64) and, when called,
quantizes its input to uint8 over the tensor's [min, max] (zero included; computed on the fly:
"dynamic" quantization with a zero point, as ONNX Runtime's quantize_dynamic does), then
multiplies uint8 by int8 and dequantizes in one oneDNN kernel with the bias (and GELU) fused
(`quantized_dense`; the zero point's share comes back through the bias and the kernel's column
sums, kept beside it).

Why this op: on an AVX-512 VNNI CPU, oneDNN's `_QuantizedMatMul` (the input's quantization
included) is faster than the float32 matmul on MiniLM-L6's dense shapes, from one sentence's rows
to a batch's (`python -m bench.serving.int8_matmul`; figures in docs/export.md), while an int8
`tf.matmul` (Eigen) is slower than float32 and weight-only int8 (dequantize, then a float
matmul) is no faster. `_QuantizedMatMul` is an internal op of TensorFlow's x86 builds with
oneDNN (registered in the `tensorflow` wheels for Linux and Windows on x86-64, without
tensorflow-text): a SavedModel holding it loads there and runs on the CPU; elsewhere (ARM, a
GPU) serve the float32 export. `available()` says whether this TensorFlow has it.

What is quantized (`quantize`'s `skip`): every transformer dense layer, the feed-forward output
(1536 -> 384 in MiniLM-L6, whose input is the GELU's output, in [-0.17, large)) included. With a
symmetric int8 input (max |x| / 127: half the levels for a side GELU's output barely has) that
layer loses accuracy after fine-tuning, and left in float32 it takes a large share of an int8
batch's time; with uint8 over [min, max] it keeps the float32 export's accuracy
(`python -m bench.serving.int8_accuracy`; figures in docs/export.md). The embeddings, the
pooler and the task heads stay float32. The per-tensor input range makes an example's int8
outputs depend a little on the other texts of its batch (as ONNX Runtime's dynamic quantization
does).
"""
import numpy as np
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.framework import op_def_registry

OP = "_QuantizedMatMul"
# The oneDNN fused activations, by our activation names.
_FUSED_ACTIVATIONS = {"gelu": "GeluApproximate", "gelu_exact": "GeluExact", "relu": "Relu",
                      "tanh": "Tanh"}


def available():
    """Whether this TensorFlow registers oneDNN's quantized matmul (x86 builds with oneDNN)."""
    return op_def_registry.get(OP) is not None


# The kernel's int8 values are in [-64, 64]. On a CPU without VNNI (AVX2, AVX-512 before
# Cascade Lake, AMD before Zen 4) oneDNN multiplies uint8 by int8 with vpmaddubsw, which adds
# each pair of products in int16 and saturates: two inputs of 255 times two weights of 127 are
# 64,770 > 32,767 (oneDNN's "Nuances of int8 Computations"; measured on an AMD Zen 3: 13% of a
# layer's output spread off). 2 * 255 * 64 = 32,640 fits, so the product is the exact integer
# one on every x86 CPU (the outputs agree across CPUs up to float32 rounding), at the cost of a
# kernel step twice as coarse (ONNX Runtime's `reduce_range` does the same).
KERNEL_LEVELS = 64


def quantize_kernel(kernel):
    """(int8 kernel [in, units], float32 scale [units], float32 column sums [units] of the
    dequantized kernel): symmetric per output unit, the int8 values in [-KERNEL_LEVELS,
    KERNEL_LEVELS]."""
    kernel = np.asarray(kernel, np.float32)
    scale = (np.maximum(np.abs(kernel).max(axis=0), 1e-12) / KERNEL_LEVELS).astype(np.float32)
    values = np.clip(np.round(kernel / scale), -KERNEL_LEVELS, KERNEL_LEVELS).astype(np.int8)
    return values, scale, (values.astype(np.float32) * scale).sum(axis=0)


def _attr(value):
    if isinstance(value, bool):
        return attr_value_pb2.AttrValue(b=value)
    if isinstance(value, str):
        return attr_value_pb2.AttrValue(s=value.encode())
    if isinstance(value, tf.DType):
        return attr_value_pb2.AttrValue(type=value.as_datatype_enum)
    if isinstance(value, float):
        return attr_value_pb2.AttrValue(f=value)
    values = list(value)
    if values and isinstance(values[0], tf.DType):
        return attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(
            type=[v.as_datatype_enum for v in values]))
    return attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(
        s=[v.encode() for v in values]))


def _quantized_matmul(x_uint8, x_high, kernel, scale, bias, fused_activation):
    """dequantize(x_uint8 @ kernel) + bias (+ activation) as one `_QuantizedMatMul` node: x is
    quint8 over [0, x_high], kernel qint8 with per-unit step s: the op is given the range
    [-127 s, 127 s] because SCALED qint8 maps q to q * range / 127; the values use
    [-KERNEL_LEVELS, KERNEL_LEVELS]. The bias is computed per call (not cached as a constant
    by oneDNN)."""
    ranges = scale * 127.0
    fused_ops = ["BiasAdd"] + ([fused_activation] if fused_activation else []) + ["Dequantize"]
    inputs = [x_uint8, kernel, bias, tf.zeros_like(x_high), x_high, -ranges, ranges]
    attrs = {"Tdevice_inputs": [], "Thost_inputs": [t.dtype for t in inputs],
             "Tdevice_outputs": [], "Thost_outputs": [tf.float32], "T1": tf.quint8,
             "T2": tf.qint8, "Tbias": tf.float32, "U": tf.float32, "Tout": tf.float32,
             "transpose_a": False, "transpose_b": False, "is_weight_const": True,
             "is_bias_const": False, "fused_ops": fused_ops, "input_quant_mode": "SCALED",
             "output_quant_mode": "SCALED", "leakyrelu_alpha": 0.2}
    graph = tf.compat.v1.get_default_graph()
    op = graph.create_op(OP, inputs, [tf.float32], name="QuantizedMatMul",
                         attrs={name: _attr(value) for name, value in attrs.items()})
    return op.outputs[0]


@tf.function(autograph=False, reduce_retracing=True)
def _quantized_dense(x, kernel_int8, kernel_scale, kernel_sum, bias, activation):
    x = tf.cast(x, tf.float32)
    # uint8 q = (x - low) * 255 / (high - low) (MIN_COMBINED), multiplied as x - low over
    # [0, high - low]; the low's product with the kernel comes back through the bias:
    # (x - low) @ W + (b + low * column sums of W) = x @ W + b. (oneDNN's own zero point,
    # MIN_FIRST, gives the same result but sums the kernel's columns at every call, slower
    # than float32 at batch 1.)
    low = tf.minimum(tf.reduce_min(x), 0.0)
    high = tf.maximum(tf.reduce_max(x), low + 1e-12)
    quantized = tf.raw_ops.QuantizeV2(input=x, min_range=low, max_range=high, T=tf.quint8,
                                      mode="MIN_COMBINED")
    low, high = quantized.output_min, quantized.output_max
    return _quantized_matmul(quantized.output, high - low, tf.bitcast(kernel_int8, tf.qint8),
                             kernel_scale, bias + low * kernel_sum, activation)


def quantized_dense(x, kernel_int8, kernel_scale, kernel_sum, bias, activation=None):
    """float32 [N, units] = activation(x @ dequantized kernel + bias), the int8 way (module
    docstring); `kernel_sum`: the dequantized kernel's column sums (`quantize_kernel`).
    `activation`: one of our activation names, fused when oneDNN has it; returns
    (y, whether the activation was applied)."""
    fused = _FUSED_ACTIVATIONS.get(activation) if activation else None
    # Tensors (not Keras variables) into the tf.function, which traces on their specs.
    kernel_int8, kernel_scale, kernel_sum, bias = (
        tf.convert_to_tensor(t) for t in (kernel_int8, kernel_scale, kernel_sum, bias))
    # The op is a graph node (it has no eager kernel wrapper): inside a traced function it is
    # built in place, eagerly through a small tf.function.
    dense = _quantized_dense if tf.executing_eagerly() else _quantized_dense.python_function
    return dense(x, kernel_int8, kernel_scale, kernel_sum, tf.cast(bias, tf.float32),
                 fused or ""), \
        bool(fused)


def quantize(model, skip=()):
    """Quantizes the transformer layers of `model` (a BertEncoder or a task model holding one as
    `encoder`) to int8 in place (module docstring): in each layer the QKV projection, the
    attention output, the intermediate dense and the feed-forward output, less those named in
    `skip` ("self", "attention_output_dense", "intermediate_dense", "output_dense"). Raises
    RuntimeError when this TensorFlow lacks the op."""
    if not available():
        raise RuntimeError(f"this TensorFlow has no {OP} (oneDNN's int8 matmul, in the x86 "
                           f"builds): export the float32 model instead")
    encoder = getattr(model, "encoder", model)
    for layer in encoder.transformer_layers:
        for name, sublayer in (("self", layer.attention),
                               ("attention_output_dense", layer.attention_output),
                               ("intermediate_dense", layer.intermediate),
                               ("output_dense", layer.output_dense)):
            if name not in skip:
                sublayer.quantize("int8")
    return model
