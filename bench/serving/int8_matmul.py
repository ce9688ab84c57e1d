"""The int8 dense layer (bert_tf.model.quantization.quantized_dense: oneDNN's _QuantizedMatMul,
activations quantized to uint8 per tensor on the fly) beside the float32 one, on MiniLM-L6's
dense shapes.

    python -m bench.serving.int8_matmul            # 5 rounds
    python -m bench.serving.int8_matmul --rows=32,1024 --rounds=7

One tf.function per variant runs a transformer layer's four dense products (QKV 384 -> 1152,
attention output 384 -> 384, intermediate 384 -> 1536 with GELU, output 1536 -> 384) for 6
layers at M rows (M = batch x tokens: 32 is one SST-2 sentence, 1,024 a batch of 32 of them):
  float32   tf.matmul + bias (+ GELU), what the float32 export runs;
  int8      quantized_dense on the kernels of `quantize_kernel`, the input quantized on the fly
            (what the int8 export runs; its bias and GELU fused into the op).
Rounds interleave the variants; printed: median ms per 6-layer pass, int8's speed-up, and the
relative error of int8's outputs (|int8 - float32| / |float32|, largest over the outputs).
"""
import argparse
import sys
import time

import numpy as np
import tensorflow as tf

from bench import harness
from bert_tf.model import quantization

SHAPES = ((384, 1152, None), (384, 384, None), (384, 1536, "gelu_exact"), (1536, 384, None))
LAYERS = 6


def weights(seed=0):
    rng = np.random.RandomState(seed)
    return [[(rng.normal(0, 0.04, (k, n)).astype(np.float32),
              rng.normal(0, 0.02, n).astype(np.float32), activation)
             for k, n, activation in SHAPES] for _ in range(LAYERS)]


def float32_pass(layers):
    layers = [[(tf.constant(w), tf.constant(b), a) for w, b, a in layer] for layer in layers]

    @tf.function
    def run(inputs):
        outputs = []
        for layer in layers:
            for (w, b, activation), x in zip(layer, inputs):
                y = tf.nn.bias_add(tf.matmul(x, w), b)
                outputs.append(tf.nn.gelu(y, approximate=False) if activation else y)
        return outputs
    return run


def int8_pass(layers):
    quantized = [[(*(tf.constant(t) for t in quantization.quantize_kernel(w)), tf.constant(b), a)
                  for w, b, a in layer] for layer in layers]

    @tf.function
    def run(inputs):
        outputs = []
        for layer in quantized:
            for (w, scale, sums, b, activation), x in zip(layer, inputs):
                y, activated = quantization.quantized_dense(x, w, scale, sums, b, activation)
                outputs.append(tf.nn.gelu(y, approximate=False)
                               if activation and not activated else y)
        return outputs
    return run


def milliseconds(run, inputs, repeats):
    run(inputs)
    start = time.perf_counter()
    for _ in range(repeats):
        run(inputs)
    return (time.perf_counter() - start) / repeats * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="32,1024")
    harness.add_rounds(parser, 5)
    args = parser.parse_args()
    if not quantization.available():
        sys.exit(f"this TensorFlow has no {quantization.OP}")
    layers = weights()
    variants = {"float32": float32_pass(layers), "int8": int8_pass(layers)}
    print("\n".join(harness.markdown(["rows", "float32 ms", "int8 ms", "int8 speed-up",
                                      "int8 relative error"], [])))
    for rows in (int(r) for r in args.rows.split(",")):
        rng = np.random.RandomState(rows)
        inputs = [tf.constant(rng.normal(0, 1, (rows, k)).astype(np.float32))
                  for k, _, _ in SHAPES]
        reference = [y.numpy() for y in variants["float32"](inputs)]
        error = max(np.abs(y.numpy() - r).max() / np.abs(r).max()
                    for y, r in zip(variants["int8"](inputs), reference))
        repeats = max(3, 20000 // rows)
        times = harness.medians(harness.interleave(
            args.rounds, list(variants),
            lambda name, round_index: milliseconds(variants[name], inputs, repeats)))
        fp32, int8 = times["float32"], times["int8"]
        print(f"| {rows} | {fp32:.2f} | {int8:.2f} | {harness.ratio(fp32, int8)} | {error:.1e} |",
              flush=True)


if __name__ == "__main__":
    main()
