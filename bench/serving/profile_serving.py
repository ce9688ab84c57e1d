"""Where batch-1 serving time goes: the token-id classifier (what every string signature runs
after its tokenizer), op by op, beside XLA and int8, at a few sentence lengths.

    python -m bench.serving.profile_serving                  # batch 1, lengths 16 and 32
    python -m bench.serving.profile_serving --batch=32 --lengths=48

Model: the all-MiniLM-L6-v2 encoder with a seeded 2-class head (bench.common.write_init_dir),
as bench/serving/latency.py serves it. Printed:
  1. median ms per call, variants interleaved over --calls rounds, of the model on token ids as
     `serving_default` runs it (export.token_id_signature: float32, and export.quantized_copy's
     int8), and the float32 one with jit_compile=True (XLA; a first call per shape compiles);
  2. a kernel-time profile of the float32 graph at the first length (its weights frozen into
     constants, run in a session with FULL_TRACE): time per op type summed over the graph, the
     node count, and the dense products' share, beside what they compute (GFLOP, MB of weights
     read per call);
  3. the encoder's dense products alone (its 4 per layer, the model's own kernels and biases, a
     chain of matmul + bias with one slice between the fused QKV product and the next), at
     each length: TensorFlow (tf.function, and XLA) in this process, and ONNX Runtime's MLAS
     (MatMul + Add, which ORT fuses to Gemm; 2 intra-op threads, sequential) in the venv of
     bench/envs/serving_env.sh, --rounds interleaved rounds, medians; outputs compared.
bench/serving/latency.py gives the end-to-end figures beside ONNX Runtime; this says why batch 1
stays behind it (docs/export.md#serving-latency-and-throughput): part 3 shows TensorFlow's
kernels alone taking longer on the products than ONNX Runtime takes for its whole call.
"""
import argparse
import collections
import os
import statistics
import sys
import tempfile
import time

from bench import harness
from bench.common import load_average, minilm_dir, write_init_dir
from bench.serving.latency import classifier


def serving_function(task, model, jit_compile=False):
    """The probabilities of export's `serving_default` (export.token_id_signature), optionally
    compiled by XLA."""
    import tensorflow as tf

    from bert_tf.serving import export
    signature = export.token_id_signature(task, model)
    return tf.function(lambda *ids: signature.python_function(*ids)["probabilities"],
                       input_signature=signature.input_signature, jit_compile=jit_compile)


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


def encoder_products(model, config):
    """[(kernel, bias)] (numpy) of the encoder's dense products in the order they run: per
    layer the fused QKV product, the attention output, the intermediate and the output."""
    values = {v.path: v.numpy() for v in model.variables}
    products = []
    for layer in range(config.num_hidden_layers):
        prefix = f"bert/layer_{layer}/"
        products.append((values[prefix + "self/qkv_kernel"], values[prefix + "self/qkv_bias"]))
        for name in ("attention_output_dense", "intermediate_dense", "output_dense"):
            products.append((values[f"{prefix}{name}/kernel"], values[f"{prefix}{name}/bias"]))
    return products


def chain_input(length, hidden):
    import numpy as np
    return np.random.RandomState(length).randn(length, hidden).astype(np.float32)


def tensorflow_chain(products, hidden, jit_compile=False):
    """The products as one tf.function over [tokens, hidden]: each layer's QKV output is cut to
    its first `hidden` columns (the query's) for the next product, as ORT_CHAIN does."""
    import tensorflow as tf
    weights = [(tf.Variable(kernel), tf.Variable(bias)) for kernel, bias in products]

    @tf.function(input_signature=[tf.TensorSpec([None, hidden], tf.float32)],
                 jit_compile=jit_compile)
    def chain(h):
        for i, (kernel, bias) in enumerate(weights):
            if i % 4 == 1:
                h = h[:, :hidden]
            h = tf.matmul(h, kernel) + bias
        return h
    return chain


# Run by SERVING_PYTHON from the project root: argv npz of kernels k0.. and biases b0.., hidden,
# lengths, calls, output npz; prints {length: [ms per call]} as JSON. The same chain as
# tensorflow_chain.
ORT_CHAIN = r"""
import json, sys, time
import numpy as np, onnx
from onnx import TensorProto, helper, numpy_helper
from bench.serving.peers import ort_session
from bench.serving.profile_serving import chain_input
weights_file, hidden, lengths, calls, out_file = sys.argv[1:6]
hidden, calls = int(hidden), int(calls)
weights = np.load(weights_file)
count = len([k for k in weights.files if k.startswith("k")])
initializers = [numpy_helper.from_array(weights[n], n) for n in weights.files]
initializers += [numpy_helper.from_array(np.array(v, np.int64), n)
                 for n, v in (("start", [0]), ("end", [hidden]), ("axis", [1]))]
nodes, h = [], "x"
for i in range(count):
    if i % 4 == 1:
        nodes.append(helper.make_node("Slice", [h, "start", "end", "axis"], [f"s{i}"]))
        h = f"s{i}"
    nodes.append(helper.make_node("MatMul", [h, f"k{i}"], [f"m{i}"]))
    nodes.append(helper.make_node("Add", [f"m{i}", f"b{i}"], [f"h{i}"]))
    h = f"h{i}"
graph = helper.make_graph(
    nodes, "dense_products", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", hidden])],
    [helper.make_tensor_value_info(h, TensorProto.FLOAT, ["n", hidden])], initializers)
model_file = weights_file + ".onnx"
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model_file)
session = ort_session(model_file, threads=2)
times, outputs = {}, {}
for length in map(int, lengths.split(",")):
    x = chain_input(length, hidden)
    for _ in range(10):
        outputs[str(length)] = session.run(None, {"x": x})[0]
    times[length] = []
    for _ in range(calls):
        start = time.perf_counter()
        session.run(None, {"x": x})
        times[length].append((time.perf_counter() - start) * 1e3)
np.savez(out_file, **outputs)
print(json.dumps(times))
"""


def agree(got, expected):
    """Within 1e-4 of the largest output: the chains sum in different orders."""
    import numpy as np
    return np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max()


def compare_dense_products(products, hidden, lengths, calls, rounds):
    """Part 3: {variant: {rows: median ms}} of the products alone on [rows, hidden] inputs, for
    each of `lengths` (rows), in TensorFlow, XLA and (with the serving venv) ONNX Runtime, over
    interleaved rounds; exits when the outputs disagree."""
    import numpy as np
    variants = {"tensorflow": tensorflow_chain(products, hidden),
                "xla": tensorflow_chain(products, hidden, jit_compile=True)}
    work_dir = tempfile.mkdtemp()
    weights_file = os.path.join(work_dir, "products.npz")
    arrays = {}
    for i, (kernel, bias) in enumerate(products):
        arrays[f"k{i}"], arrays[f"b{i}"] = kernel, bias
    np.savez(weights_file, **arrays)
    with_ort = harness.SERVING.exists()
    if not with_ort:
        print(f"(ONNX Runtime left out: {harness.SERVING.missing()})")
    medians = collections.defaultdict(lambda: collections.defaultdict(list))
    for _ in range(rounds):
        for length in lengths:
            x = chain_input(length, hidden)
            expected = variants["tensorflow"](x).numpy()
            for name, function in variants.items():
                for _ in range(10):
                    got = function(x).numpy()
                if not agree(got, expected):
                    sys.exit(f"{name} differs from tensorflow at {length} rows")
            times = collections.defaultdict(list)
            for _ in range(calls):
                for name, function in variants.items():
                    start = time.perf_counter()
                    function(x).numpy()
                    times[name].append((time.perf_counter() - start) * 1e3)
            for name in variants:
                medians[name][length].append(statistics.median(times[name]))
        if with_ort:
            out_file = os.path.join(work_dir, "ort_outputs.npz")
            ort_times = harness.run_child(
                harness.script_command(ORT_CHAIN, weights_file, hidden,
                                       ",".join(map(str, lengths)), calls, out_file,
                                       venv=harness.SERVING),
                "ONNX Runtime's chain", check=True)
            ort_outputs = np.load(out_file)
            for length in lengths:
                expected = variants["tensorflow"](chain_input(length, hidden)).numpy()
                if not agree(ort_outputs[str(length)], expected):
                    sys.exit(f"ONNX Runtime differs from tensorflow at {length} rows")
                medians["onnxruntime"][length].append(statistics.median(ort_times[str(length)]))
    return {name: {length: statistics.median(values) for length, values in by_length.items()}
            for name, by_length in medians.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--lengths", default="16,32", help="tokens per text, [CLS]/[SEP] in")
    parser.add_argument("--calls", type=int, default=100)
    harness.add_rounds(parser, 3, "interleaved rounds of part 3 (TensorFlow, then ONNX Runtime)")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np

    from bert_tf.model import quantization
    from bert_tf.serving import export

    init_dir = write_init_dir(minilm_dir(), os.path.join(tempfile.mkdtemp(), "init"))
    task, model, _, _ = classifier(init_dir)
    config = task.config.bert_config
    variants = {"float32": serving_function(task, model),
                "xla": serving_function(task, model, jit_compile=True)}
    if quantization.available():
        variants["int8"] = serving_function(task, export.quantized_copy(task, model))
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

    products = encoder_products(model, config)
    medians = compare_dense_products(products, hidden, [args.batch * n for n in lengths],
                                     args.calls, args.rounds)
    print(f"\nthe {len(products)} dense products alone (the model's kernels and biases), batch "
          f"{args.batch} as {args.batch} x tokens rows: median ms per call over {args.rounds} "
          f"rounds (GFLOP/s)")
    names = list(medians)
    print("| tokens | " + " | ".join(names) + (" | TensorFlow's best / onnxruntime |"
                                                 if "onnxruntime" in medians else " |"))
    print("|---" * (len(names) + 1 + ("onnxruntime" in medians)) + "|")
    for length in lengths:
        rows = args.batch * length
        gflop = 2 * rows * sum(k.size for k, _ in products) / 1e9
        cells = [f"{medians[n][rows]:.2f} ({gflop / medians[n][rows] * 1e3:.0f})" for n in names]
        if "onnxruntime" in medians:
            best = min(medians["tensorflow"][rows], medians["xla"][rows])
            cells.append(f"{best / medians['onnxruntime'][rows]:.2f}x")
        print(f"| {length} | " + " | ".join(cells) + " |", flush=True)
    print(f"load {load_average():.1f}")


if __name__ == "__main__":
    main()
