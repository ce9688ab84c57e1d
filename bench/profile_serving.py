"""Where batch-1 serving time goes: the token-id classifier (what every string signature runs
after its tokenizer), op by op, beside XLA and int8, at a few sentence lengths.

    python bench/profile_serving.py                          # batch 1, lengths 16 and 32
    python bench/profile_serving.py --batch=32 --lengths=48

Model: the all-MiniLM-L6-v2 encoder with a seeded 2-class head (bench_finetuning.write_init_dir),
as bench/bench_serving.py serves it. Printed:
  1. median ms per call, variants interleaved over --calls rounds, of the model on token ids as
     `serving_default` runs it (a tf.function: float32; `quantization.quantize`'s int8), and the
     float32 one with jit_compile=True (XLA; a first call per shape compiles);
  2. a kernel-time profile of the float32 graph at the first length (its weights frozen into
     constants, run in a session with FULL_TRACE): time per op type summed over the graph, the
     node count, and the dense products' share, beside what they compute (GFLOP, MB of weights
     read per call).
bench/bench_serving.py gives the end-to-end figures beside ONNX Runtime; this says why batch 1
stays behind it (docs/export.md#serving-latency-and-throughput).
"""
import argparse
import collections
import os
import statistics
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)

from bench_finetuning import load_average, minilm_dir, write_init_dir  # noqa: E402
from bench_serving import classifier  # noqa: E402


def serving_function(task, model, jit_compile=False):
    import tensorflow as tf
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[spec] * 3, jit_compile=jit_compile)
    def serve(input_ids, input_mask, segment_ids):
        outputs = task.outputs(model, {"input_ids": input_ids, "input_mask": input_mask,
                                       "segment_ids": segment_ids}, training=False)
        return task.serving_outputs(outputs)["probabilities"]
    return serve


def inputs(batch, length):
    import numpy as np
    ids = np.random.RandomState(length).randint(1000, 20000, (batch, length)).astype(np.int32)
    return ids, np.ones_like(ids), np.zeros_like(ids)


def op_profile(function, feed, runs=20):
    """{op type: kernel µs per call}, node count, session ms per call: `function`'s graph with
    its variables frozen, run in a session with FULL_TRACE."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2)

    concrete = convert_variables_to_constants_v2(function.get_concrete_function())
    graph_def = concrete.graph.as_graph_def()
    graph = tf.Graph()
    with graph.as_default():
        placeholders = [tf.compat.v1.placeholder(tf.int32, [None, None]) for _ in feed]
        output, = tf.graph_util.import_graph_def(
            graph_def, input_map={t.name: p for t, p in zip(concrete.inputs, placeholders)},
            return_elements=[concrete.outputs[0].name])
    session = tf.compat.v1.Session(graph=graph)
    values = dict(zip(placeholders, feed))
    for _ in range(10):
        session.run(output, values)
    times = []
    for _ in range(100):
        start = time.perf_counter()
        session.run(output, values)
        times.append((time.perf_counter() - start) * 1e3)
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    micros = collections.Counter()
    for _ in range(runs):
        metadata = tf.compat.v1.RunMetadata()
        session.run(output, values, options=options, run_metadata=metadata)
        for device in metadata.step_stats.dev_stats:
            for node in device.node_stats:
                label = node.timeline_label
                op = label.split("(")[0].split("=")[-1].strip() if "=" in label else "other"
                micros[op] += node.all_end_rel_micros / runs
    return micros, len(graph_def.node), statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--lengths", default="16,32", help="tokens per text, [CLS]/[SEP] in")
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np

    from bert_tf.model import quantization

    init_dir = write_init_dir(minilm_dir(), os.path.join(tempfile.mkdtemp(), "init"))
    task, model, _, _ = classifier(init_dir)
    config = task.config.bert_config
    variants = {"float32": serving_function(task, model),
                "xla": serving_function(task, model, jit_compile=True)}
    if quantization.available():
        quantized = task.build_model()
        quantized.set_weights(model.get_weights())
        variants["int8"] = serving_function(task, quantization.quantize(quantized))
    lengths = [int(n) for n in args.lengths.split(",")]
    print(f"batch {args.batch}, MiniLM-L6 classifier on token ids; median ms per call of "
          f"{args.calls}, interleaved")
    print("| tokens | " + " | ".join(variants) + " | load |")
    print("|---" * (len(variants) + 2) + "|")
    for length in lengths:
        feed = inputs(args.batch, length)
        expected = variants["float32"](*feed).numpy()
        for name, function in variants.items():
            got = function(*feed).numpy()  # XLA compiles this shape here
            assert np.abs(got - expected).max() < (0.1 if name == "int8" else 1e-5), name
        times = collections.defaultdict(list)
        for _ in range(args.calls):
            for name, function in variants.items():
                start = time.perf_counter()
                function(*feed).numpy()
                times[name].append((time.perf_counter() - start) * 1e3)
        print(f"| {length} | " + " | ".join(f"{statistics.median(times[name]):.2f}"
                                          for name in variants) + f" | {load_average():.1f} |",
              flush=True)

    length = lengths[0]
    micros, nodes, session_ms = op_profile(variants["float32"], inputs(args.batch, length))
    total = sum(micros.values())
    dense = sum(t for op, t in micros.items() if "MatMul" in op and "Batch" not in op)
    hidden, intermediate = config.hidden_size, config.intermediate_size
    weights = config.num_hidden_layers * (4 * hidden * hidden + 2 * hidden * intermediate)
    gflop = 2 * weights * args.batch * length / 1e9
    print(f"\nfloat32 graph at {length} tokens: {nodes} nodes; a session call takes "
          f"{session_ms:.2f} ms; kernel time summed over ops {total / 1e3:.2f} ms (2 threads "
          f"overlap some)")
    print(f"dense products: {dense / 1e3:.2f} ms for {gflop:.2f} GFLOP "
          f"({gflop / (dense / 1e6):.0f} GFLOP/s), {weights * 4 / 1e6:.0f} MB of float32 "
          f"weights read per call; everything else: {(total - dense) / 1e3:.2f} ms")
    print("| op | µs per call | share |\n|---|---|---|")
    for op, t in micros.most_common(15):
        print(f"| {op} | {t:.0f} | {t / total:.0%} |")


if __name__ == "__main__":
    main()
