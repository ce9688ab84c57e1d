"""What a domain vocabulary buys: WordPiece pieces of in-domain and held-out text before and
after data_tools.extend_vocab (the released uncased vocabulary, the [unusedN] slots).

    python -m bench.data.extend_vocab                     # 200 words, SQuAD v1.1 dev halves
    python -m bench.data.extend_vocab --num_words=500

SQuAD v1.1 dev split by article: the words are chosen from the contexts of the first 24
articles (the "domain") and the pieces counted, with bert_tf.tokenization.FullTokenizer (the
original's tokens), on those contexts and on the other 24 articles' (held out). Also printed:
the pieces the ranking predicted to save (count * (pieces - 1) summed over the chosen words).
"""
import argparse
import json
import os
import tempfile

from bench import harness
from bench.common import DATA, VOCAB


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num_words", type=int, default=200)
    args = parser.parse_args()
    from bert_tf.tokenization import FullTokenizer

    vocab = str(VOCAB)
    with open(DATA / "SQuAD" / "dev-v1.1.json", encoding="utf-8") as f:
        articles = json.load(f)["data"]
    work = tempfile.mkdtemp(prefix="bench_extend_vocab_")
    halves = {"domain (articles 1-24)": articles[:24], "held out (articles 25-48)": articles[24:]}
    files = {}
    for name, part in halves.items():
        files[name] = os.path.join(work, f"{len(files)}.txt")
        with open(files[name], "w", encoding="utf-8") as f:
            f.write("\n".join(p["context"] for a in part for p in a["paragraphs"]) + "\n")
    domain_file = next(iter(files.values()))
    new_vocab = os.path.join(work, "domain_vocab.txt")
    process = harness.run_command(harness.module_command(
        "data_tools.extend_vocab", f"--vocab_file={vocab}", f"--input_file={domain_file}",
        f"--output_vocab_file={new_vocab}", f"--num_words={args.num_words}"), "extend_vocab")
    summary = process.stderr.strip().splitlines()[-1]
    predicted = int(summary.split("pieces_saved=")[1].split()[0])
    before, after = FullTokenizer(vocab), FullTokenizer(new_vocab)
    with open(new_vocab, encoding="utf-8") as f:
        words = [line.strip() for line in f][1:1 + args.num_words]
    print(f"{args.num_words} words in the [unusedN] slots, e.g. {', '.join(words[:8])}")
    print(f"predicted pieces saved on the domain text: {predicted}")
    for name, path in files.items():
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        old = sum(len(before.tokenize(line)) for line in lines)
        new = sum(len(after.tokenize(line)) for line in lines)
        print(f"{name}: {len(lines)} contexts, {old} -> {new} pieces "
              f"({100 * (new - old) / old:+.2f}%)")


if __name__ == "__main__":
    main()
