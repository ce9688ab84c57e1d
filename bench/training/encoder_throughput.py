"""Encoder throughput: bert_tf vs keras-hub BertBackbone (TF backend) vs transformers BertModel
(PyTorch CPU), same architecture, random weights, same inputs (batch 32 x seq 128, some padding).

    python -m bench.training.encoder_throughput                   # forward, BERT-Base and small
    python -m bench.training.encoder_throughput --dtype=bfloat16  # mixed_bfloat16 / autocast
    python -m bench.training.encoder_throughput --mode=train      # forward + backward
    python -m bench.training.encoder_throughput --configs=small --repeats=3

Each framework runs in its own worker process (so that one framework's thread pools cannot slow
another), all built and warmed up first; then the parent times them interleaved, A B C A B C ...
(so that load from other processes on a shared machine hits all alike) and prints the median
sequences/s and the ratio ours / each peer. The two Keras models get their best setting:
tf.function with and without XLA (jit_compile) are both timed during warm-up and the faster one
is used. torch runs under inference_mode (forward) and autocast for bfloat16; the transformers
config uses "gelu_new" (the tanh GELU of the original). Dropout is off in forward mode and on
(0.1) in train mode for all three. Needs `pip install torch==2.13.0 transformers` for the PyTorch
peer; without them that column is skipped.
"""
import argparse
import os
import subprocess
import sys
import time

from bench import harness
from bench.common import BERT_SIZES, PROJECT_ROOT, keras_hub_backbone, transformers_config

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

FRAMEWORKS = ("bert_tf", "keras_hub", "torch")


def make_inputs(batch_size, seq_length, vocab_size, seed=0):
    import numpy as np

    rng = np.random.RandomState(seed)
    ids = rng.randint(1, vocab_size, (batch_size, seq_length)).astype(np.int32)
    mask = np.ones_like(ids)
    for row, length in enumerate(rng.randint(seq_length // 2, seq_length + 1, batch_size)):
        mask[row, length:] = 0
        ids[row, length:] = 0
    segments = np.zeros_like(ids)
    segments[:, seq_length // 2:] = 1
    return ids, mask, segments


# ----------------------------------------------------------------------------- workers


def keras_step(model, feed, output_key, train, jit):
    import tensorflow as tf

    feed = {k: tf.constant(v) for k, v in feed.items()}

    @tf.function(jit_compile=jit)
    def forward():
        return model(feed, training=False)[output_key]

    @tf.function(jit_compile=jit)
    def forward_backward():
        with tf.GradientTape() as tape:
            out = model(feed, training=True)[output_key]
            loss = tf.reduce_mean(tf.cast(out, tf.float32) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        # One scalar per gradient, so that fetching them waits for all the backward pass.
        return tf.stack([tf.reduce_sum(tf.cast(
            g.values if isinstance(g, tf.IndexedSlices) else g, tf.float32))
            for g in grads if g is not None])  # the pooler gets none

    fn = forward_backward if train else forward

    def run():
        fn().numpy()
    return run


def build_keras(framework, config, dtype):
    import keras

    policy = keras.DTypePolicy("mixed_bfloat16" if dtype == "bfloat16" else "float32")
    if framework == "bert_tf":
        from bert_tf.model.config import BertConfig
        from bert_tf.model.encoder import BertEncoder
        model = BertEncoder(BertConfig(**config, type_vocab_size=2), dtype=policy)
        return model, "sequence_output", ("input_ids", "input_mask", "segment_ids")
    model = keras_hub_backbone(config, dropout=0.1, dtype=policy)
    return model, "sequence_output", ("token_ids", "padding_mask", "segment_ids")


def build_runner(framework, config, args):
    """Returns (run, description) for one framework."""
    inputs = make_inputs(args.batch_size, args.seq_length, config["vocab_size"])
    train = args.mode == "train"
    if framework == "torch":
        import torch
        import transformers

        torch.set_num_threads(os.cpu_count())
        model = transformers.BertModel(transformers_config(config, hidden_act="gelu_new"))
        model.train(train)
        ids, mask, segments = (torch.tensor(a, dtype=torch.long) for a in inputs)
        autocast = dict(device_type="cpu", dtype=torch.bfloat16, enabled=args.dtype == "bfloat16")

        def run():
            if train:
                model.zero_grad(set_to_none=True)
                with torch.autocast(**autocast):
                    out = model(input_ids=ids, attention_mask=mask,
                                token_type_ids=segments).last_hidden_state
                (out.float() ** 2).mean().backward()
            else:
                with torch.inference_mode(), torch.autocast(**autocast):
                    model(input_ids=ids, attention_mask=mask, token_type_ids=segments)
        run()
        return run, f"torch {torch.__version__}"
    model, output_key, names = build_keras(framework, config, args.dtype)
    feed = dict(zip(names, inputs))
    trials = {}
    for jit in (True, False):
        run = keras_step(model, feed, output_key, train, jit)
        run()  # trace/compile
        run()
        start = time.perf_counter()
        run()
        trials[jit] = (time.perf_counter() - start, run)
    jit = min(trials, key=lambda k: trials[k][0])
    return trials[jit][1], (f"{'xla' if jit else 'no xla'}; warm-up xla {trials[True][0]:.2f}s "
                            f"vs no xla {trials[False][0]:.2f}s per batch")


def worker(args):
    """Builds one framework's model, then times `iterations` batches per line read on stdin."""
    run, description = build_runner(args.worker, BERT_SIZES[args.worker_config], args)
    print(f"ready {description}", flush=True)
    for line in sys.stdin:
        start = time.perf_counter()
        for _ in range(int(line)):
            run()
        print((time.perf_counter() - start) / int(line), flush=True)


# ----------------------------------------------------------------------------- parent


def start_worker(framework, config_name, args):
    line = harness.module_command(__spec__.name, f"--worker={framework}",
                                  f"--worker_config={config_name}", f"--dtype={args.dtype}",
                                  f"--mode={args.mode}", f"--batch_size={args.batch_size}",
                                  f"--seq_length={args.seq_length}")
    process = subprocess.Popen(line, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               cwd=PROJECT_ROOT)
    ready = process.stdout.readline().strip()
    if not ready.startswith("ready"):
        process.wait()
        return None, f"failed (exit {process.returncode}; see its error above)"
    return process, ready[len("ready "):]


def bench_config(name, args):
    config = BERT_SIZES[name]
    workers = {}
    for framework in args.frameworks:
        process, description = start_worker(framework, name, args)
        print(f"  {framework}: {description}", flush=True)
        if process is not None:
            workers[framework] = process

    def measure(framework, round_index):
        process = workers[framework]
        process.stdin.write(f"{args.iterations}\n")
        process.stdin.flush()
        return float(process.stdout.readline())

    times = harness.interleave(args.repeats, list(workers), measure)
    for process in workers.values():
        process.stdin.close()
        process.wait()
    rates = {k: args.batch_size / t for k, t in harness.medians(times).items()}
    print(f"\n{name} (L={config['num_hidden_layers']} H={config['hidden_size']}), {args.mode}, "
          f"batch {args.batch_size} x seq {args.seq_length}, {args.dtype}, "
          f"median of {args.repeats} interleaved repeats:")
    for framework, rate in rates.items():
        spread = ", ".join(f"{args.batch_size / t:.1f}" for t in times[framework])
        ratio = harness.ratio(rates["bert_tf"] if "bert_tf" in rates else float("nan"), rate)
        print(f"  {framework:10s} {rate:8.2f} seq/s   bert_tf/{framework} = {ratio}"
              f"   (repeats: {spread})", flush=True)
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default="base,small",
                        help=f"comma-separated, of {', '.join(BERT_SIZES)}")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--mode", default="forward", choices=["forward", "train"])
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=1, help="batches per timed repeat")
    harness.add_peers(parser, FRAMEWORKS, flag="--frameworks")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--worker_config", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    args.frameworks = harness.peers(parser, args.frameworks, FRAMEWORKS, what="frameworks")
    for name in args.configs.split(","):
        print(f"== {name} ==", flush=True)
        bench_config(name, args)


if __name__ == "__main__":
    main()
