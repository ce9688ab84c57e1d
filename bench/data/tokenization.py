"""Tokenization throughput: the reference FullTokenizer vs ours vs Hugging Face vs keras-hub.

Corpus: every line of ../shared/data/wikitext-2/{valid,test}.txt and every distinct SQuAD dev
context (v1.1 and v2.0), uncased vocabulary, do_lower_case=True (what tests/corpora.py yields).
Peers, each given the whole corpus as a list of strings and returning each line's word pieces
(strings), run interleaved --rounds times in one process; each round builds every tokenizer anew
(outside the timing), so word caches start empty in every round (FastTokenizer's compiled
WordPiece models are built on first use and shared by the process: the warm-up builds them):

  reference         bert-tensorflow 1.0.4 FullTokenizer.tokenize, one line at a time
  bert_tf Full      bert_tf.tokenization.FullTokenizer.tokenize, one line at a time
  bert_tf Fast      bert_tf.text.fast_tokenization.FastTokenizer.tokenize_batch, on the library
                    from the first call (library_after_chars=0)
  bert_tf Fast+off  FastTokenizer.encode_batch (tokens, ids and character offsets: an int32
                    [pieces, 2] numpy array per line), the same
  bert_tf Fast, Python alone
                    FastTokenizer.tokenize_batch with no library, what a tokenizer does with
                    its first LIBRARY_AFTER_CHARS characters
  HF tokenizers     tokenizers.BertWordPieceTokenizer.encode_batch(add_special_tokens=False),
                    .tokens of each Encoding (offsets are computed by it too)
  keras-hub         keras_hub.tokenizers.BertTokenizer on tf.string batches, ids -> tokens
  bert_tf Graph     bert_tf.text.graph_tokenization.GraphTokenizer.tokenize (core TensorFlow ops
                    only) on tf.string batches, ids -> tokens

Batch peers get --batch_size lines per call. Printed: a markdown table of medians over rounds
(MB/s of UTF-8 input, tokens/s of the peer's own output, speed-up vs the reference and vs HF) and
each peer's share of lines whose tokens equal the reference's.

    python -m bench.data.tokenization                  # 3 rounds, all peers
    python -m bench.data.tokenization --rounds=5 --batch_size=10000
"""
import argparse
import gc
import os
import sys
import time

from bench import harness
from bench.common import DATA, VOCAB, batches, import_refbert
from bert_tf import tokenization
from bert_tf.progress import Progress
from bert_tf.text import fast_tokenization
from tests import corpora


def load_corpus():
    texts = list(corpora.wikitext2_texts(DATA))
    texts += list(dict.fromkeys(corpora.squad_contexts(DATA)))
    return texts


def make_peers(batch_size):
    """name -> factory returning a function texts -> list of token lists (built per round)."""
    reference = import_refbert().tokenization

    def per_line(tokenizer):
        return lambda texts: [tokenizer.tokenize(t) for t in texts]

    def batched(function):
        return lambda texts: [tokens for chunk in batches(texts, batch_size) for tokens in function(chunk)]

    def fast(library_after_chars=0):
        return batched(fast_tokenization.FastTokenizer(
            str(VOCAB), True, library_after_chars=library_after_chars).tokenize_batch)

    def fast_offsets():
        tokenizer = fast_tokenization.FastTokenizer(str(VOCAB), True, library_after_chars=0)
        return batched(lambda chunk: [e.tokens for e in tokenizer.encode_batch(chunk)])

    def hugging_face():
        from tokenizers import BertWordPieceTokenizer
        tokenizer = BertWordPieceTokenizer(str(VOCAB), lowercase=True)
        return batched(lambda chunk: [e.tokens for e in
                                      tokenizer.encode_batch(chunk, add_special_tokens=False)])

    def keras_hub_peer():
        import keras_hub
        import tensorflow as tf
        tokenizer = keras_hub.tokenizers.BertTokenizer(vocabulary=str(VOCAB), lowercase=True)
        vocabulary = tokenizer.get_vocabulary()

        def run(chunk):
            ids = tokenizer(tf.constant(chunk))
            ids = ids.to_list() if hasattr(ids, "to_list") else ids  # eager: already lists
            return [[vocabulary[i] for i in row] for row in ids]
        return batched(run)

    def graph_peer():
        import tensorflow as tf
        from bert_tf.text.graph_tokenization import GraphTokenizer
        tokenizer = GraphTokenizer(str(VOCAB), do_lower_case=True)
        vocabulary = list(tokenization.load_vocab(str(VOCAB)))

        def run(chunk):
            ids = tokenizer.tokenize(tf.constant(chunk)).to_list()
            return [[vocabulary[i] for i in row] for row in ids]
        run(["trace the tf.functions here, outside the timing"])
        return batched(run)

    return {
        "reference FullTokenizer": lambda: per_line(reference.FullTokenizer(str(VOCAB), True)),
        "bert_tf FullTokenizer": lambda: per_line(tokenization.FullTokenizer(str(VOCAB), True)),
        "bert_tf FastTokenizer.tokenize_batch": fast,
        "bert_tf FastTokenizer.encode_batch (+offsets)": fast_offsets,
        "bert_tf FastTokenizer.tokenize_batch, Python alone": lambda: fast(1 << 62),
        "HF tokenizers BertWordPieceTokenizer": hugging_face,
        "keras-hub BertTokenizer": keras_hub_peer,
        "bert_tf GraphTokenizer (core TF ops)": graph_peer,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_rounds(parser, 3, "interleaved rounds (median quoted)")
    parser.add_argument("--batch_size", type=int, default=1000, help="lines per batch call")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before the peers import TensorFlow

    texts = load_corpus()
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    print(f"corpus: {len(texts)} lines, {megabytes:.2f} MB (WikiText-2 valid+test, SQuAD dev "
          f"contexts); batch_size={args.batch_size}; {args.rounds} rounds; "
          f"{os.cpu_count()} CPUs", file=sys.stderr)
    peers = make_peers(args.batch_size)
    warm_up = texts[:50] + ["naïve café", "中文 \x00"]  # every FastTokenizer route
    for factory in peers.values():  # warm-up: imports, TensorFlow start-up, model building
        factory()(warm_up)

    outputs = {}
    progress = Progress("bench.data.tokenization", total=args.rounds * len(peers), unit="runs",
                        interval=0)

    def measure(name, round_index):
        tokenize = peers[name]()
        gc.collect()
        start = time.perf_counter()
        outputs[name] = tokenize(texts)
        seconds = time.perf_counter() - start
        progress.update(1, peer=name, seconds=round(seconds, 2))
        return seconds

    seconds = harness.interleave(args.rounds, list(peers), measure, alternate=True)
    progress.summary()

    reference = outputs["reference FullTokenizer"]
    median = harness.medians(seconds)
    hf = median["HF tokenizers BertWordPieceTokenizer"]
    ref = median["reference FullTokenizer"]
    print(f"\n{len(texts)} lines, {megabytes:.2f} MB, median of {args.rounds} interleaved rounds, "
          f"batch_size={args.batch_size}\n")
    rows = []
    for name in peers:
        tokens = sum(map(len, outputs[name]))
        same = sum(a == b for a, b in zip(outputs[name], reference)) / len(texts)
        rows.append([name, f"{megabytes / median[name]:.2f}", f"{tokens / median[name]:,.0f}",
                     harness.ratio(ref, median[name], 1), harness.ratio(hf, median[name]),
                     f"{100 * same:.2f}%"])
    print("\n".join(harness.markdown(
        ["tokenizer", "MB/s", "tokens/s", "vs reference", "vs HF tokenizers",
         "lines identical to reference"], rows, align="lrrrrr")))


if __name__ == "__main__":
    main()
