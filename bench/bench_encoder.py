"""Encoder forward throughput: bert_tf vs keras-hub BertBackbone (TF backend) vs transformers
BertModel (PyTorch CPU), same architecture, random weights, same inputs.

    python bench/bench_encoder.py                         # BERT-Base and a small config, fp32
    python bench/bench_encoder.py --dtype=bfloat16        # Keras mixed_bfloat16 / torch autocast
    python bench/bench_encoder.py --configs=small --repeats=3

Prints sequences/s per framework (median over interleaved repeats: A B C A B C ..., so that load
from other processes on a shared machine hits all alike) and ratios to ours. Each framework gets
its best setting: for the two Keras models, tf.function with and without XLA (jit_compile) are
both timed and the faster one is used; torch runs under inference_mode (and autocast for bf16).
Dropout is off (inference). Needs `pip install torch==2.13.0 transformers` for the PyTorch peer;
without them that column is skipped.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

CONFIGS = {
    "base": dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072),
    "small": dict(vocab_size=30522, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                  intermediate_size=1024),
}


def make_inputs(batch_size, seq_length, vocab_size, seed=0):
    rng = np.random.RandomState(seed)
    ids = rng.randint(1, vocab_size, (batch_size, seq_length)).astype(np.int32)
    mask = np.ones_like(ids)
    lengths = rng.randint(seq_length // 2, seq_length + 1, batch_size)
    for row, length in enumerate(lengths):  # realistic padding
        mask[row, length:] = 0
        ids[row, length:] = 0
    segments = np.zeros_like(ids)
    segments[:, seq_length // 2:] = 1
    return ids, mask, segments


def keras_runner(model_fn, inputs, jit):
    import tensorflow as tf

    model, feed = model_fn()
    fn = tf.function(lambda x: model(x, training=False), jit_compile=jit)
    feed = {k: tf.constant(v) for k, v in feed(inputs).items()}

    def run():
        out = fn(feed)
        first = out["sequence_output"] if isinstance(out, dict) else out
        first.numpy()
    return run


def ours(config, dtype):
    def build():
        import keras

        from bert_tf.config import BertConfig
        from bert_tf.encoder import BertEncoder
        policy = "mixed_bfloat16" if dtype == "bfloat16" else "float32"
        model = BertEncoder(BertConfig(**config, type_vocab_size=2), dtype=keras.DTypePolicy(policy))
        return model, lambda x: {"input_ids": x[0], "input_mask": x[1], "segment_ids": x[2]}
    return build


def keras_hub_backbone(config, dtype):
    def build():
        import keras_hub
        policy = "mixed_bfloat16" if dtype == "bfloat16" else "float32"
        model = keras_hub.models.BertBackbone(
            vocabulary_size=config["vocab_size"], num_layers=config["num_hidden_layers"],
            num_heads=config["num_attention_heads"], hidden_dim=config["hidden_size"],
            intermediate_dim=config["intermediate_size"], dropout=0.1, dtype=policy)
        return model, lambda x: {"token_ids": x[0], "padding_mask": x[1], "segment_ids": x[2]}
    return build


def torch_runner(config, dtype, inputs):
    import torch
    import transformers

    torch.set_num_threads(os.cpu_count())
    hf_config = transformers.BertConfig(
        vocab_size=config["vocab_size"], hidden_size=config["hidden_size"],
        num_hidden_layers=config["num_hidden_layers"],
        num_attention_heads=config["num_attention_heads"],
        intermediate_size=config["intermediate_size"], hidden_act="gelu_new")
    model = transformers.BertModel(hf_config).eval()
    ids, mask, segments = (torch.tensor(a, dtype=torch.long) for a in inputs)

    def run():
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16,
                                                    enabled=dtype == "bfloat16"):
            model(input_ids=ids, attention_mask=mask, token_type_ids=segments).last_hidden_state
    return run


def timed(run, iterations):
    start = time.perf_counter()
    for _ in range(iterations):
        run()
    return (time.perf_counter() - start) / iterations


def bench_config(name, args):
    config = CONFIGS[name]
    inputs = make_inputs(args.batch_size, args.seq_length, config["vocab_size"])
    runners = {}
    for framework, builder in (("bert_tf", ours), ("keras_hub", keras_hub_backbone)):
        if framework not in args.frameworks:
            continue
        # Pick the faster of XLA / no XLA with a short trial (after warm-up).
        trials = {}
        for jit in (True, False):
            run = keras_runner(builder(config, args.dtype), inputs, jit)
            run()
            run()
            trials[jit] = (timed(run, 1), run)
        jit = min(trials, key=lambda k: trials[k][0])
        runners[f"{framework} ({'xla' if jit else 'no xla'})"] = trials[jit][1]
        print(f"  {framework}: jit_compile={jit} "
              f"(xla {trials[True][0]:.3f}s vs {trials[False][0]:.3f}s per batch)", flush=True)
    if "torch" in args.frameworks:
        try:
            run = torch_runner(config, args.dtype, inputs)
            run()
            runners["transformers (torch)"] = run
        except ImportError as e:
            print(f"  transformers/torch not installed ({e}); skipped", flush=True)
    times = {key: [] for key in runners}
    for _ in range(args.repeats):
        for key, run in runners.items():
            times[key].append(timed(run, args.iterations))
    rates = {key: args.batch_size / statistics.median(t) for key, t in times.items()}
    ours_key = next(k for k in rates if k.startswith("bert_tf"))
    print(f"\n{name} (L={config['num_hidden_layers']} H={config['hidden_size']}), "
          f"batch {args.batch_size} x seq {args.seq_length}, {args.dtype}, "
          f"median of {args.repeats} interleaved repeats:")
    for key, rate in rates.items():
        spread = ", ".join(f"{args.batch_size / t:.1f}" for t in times[key])
        print(f"  {key:28s} {rate:8.1f} seq/s   ours/this = {rates[ours_key] / rate:.2f}x"
              f"   (repeats: {spread})")
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default="base,small", help="comma-separated: base, small")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=1, help="batches per timed repeat")
    parser.add_argument("--frameworks", default="bert_tf,keras_hub,torch")
    args = parser.parse_args()
    args.frameworks = args.frameworks.split(",")
    for name in args.configs.split(","):
        print(f"== {name} ==", flush=True)
        bench_config(name, args)


if __name__ == "__main__":
    main()
