"""Real tokens trained per second: packed records vs the original's, same model and step shape.

    python -m bench.training.packing_throughput                 # seq 128 and 512, both corpora
    python -m bench.training.packing_throughput --seqs=512 --corpora=short --rounds=3

For each corpus and sequence length, create_pretraining_data writes the original's records
(masked-LM + next sentence, static masks, --dupe_factor=1) and the same instances packed
(--pack_sequences); run_pretraining then trains the same BERT (L=4 H=256 A=4 I=1024, the uncased
vocabulary) on each, with the same batch of rows (--batch_<seq>), fp32, 2 threads.

The time of a step is measured on whole processes without their start: each layout is trained
for --short_steps and for --long_steps from scratch, and a step takes
(wall(long) - wall(short)) / (long_steps - short_steps); the runs alternate between the layouts,
round after round, and the table quotes the median over rounds. Real tokens are the records'
input_mask ones ([CLS]/[SEP] included, padding not; bert_tf.data.pretraining.record_stats), so

    real tokens / s = batch * real tokens per record / seconds per step

and the ratio packed / original is what packing buys. Corpora (from ../shared/data):
  wikitext2   WikiText-2 valid: long Wikipedia articles
  short       CoNLL-2003 train: short Reuters news documents (a few sentences each)
Writes results.md and results.tsv into --out_dir and prints the table.
"""
import argparse
import json
import os
import pathlib
import shutil
import sys

from bench import harness
from bench.common import MAX_PREDICTIONS as PREDICTIONS
from bench.common import write_documents
from bench.training.pretraining_quality import (DATA, PROJECT_ROOT, THREAD_ENV, VOCAB,
                                                conll_documents, log, model_config,
                                                wikitext_documents)

MODEL = model_config("L4-H256")
CORPORA = {
    "wikitext2": lambda: wikitext_documents(DATA / "wikitext-2" / "valid.txt"),
    "short": lambda: conll_documents(DATA / "conll2003" / "train.txt"),
}


def run(line, label):
    """The wall seconds of `line`, run with 2 threads."""
    return harness.run_command(line, label, env=dict(os.environ, **THREAD_ENV)).seconds


def make_records(corpus, seq, packed, out_dir):
    path = out_dir / f"{corpus.stem}-{seq}-{'packed' if packed else 'original'}.tfrecord"
    if not path.exists():
        run([sys.executable, "-m", "data_tools.create_pretraining_data",
             f"--input_file={corpus}", f"--output_file={path}", f"--vocab_file={VOCAB}",
             "--do_lower_case", f"--max_seq_length={seq}",
             f"--max_predictions_per_seq={PREDICTIONS[seq]}", "--dupe_factor=1",
             "--random_seed=12345", *(["--pack_sequences"] if packed else [])],
            f"create_pretraining_data {path.name}")
    return path


def train_seconds(records, seq, batch, steps, out_dir, config):
    output_dir = out_dir / f"run-{records.stem}-{steps}"
    shutil.rmtree(output_dir, ignore_errors=True)
    seconds = run([sys.executable, "-m", "run.run_pretraining", f"--bert_config_file={config}",
                   f"--input_file={records}", f"--output_dir={output_dir}", "--do_train",
                   f"--train_batch_size={batch}", f"--max_seq_length={seq}",
                   f"--max_predictions_per_seq={PREDICTIONS[seq]}",
                   f"--num_train_steps={steps}", "--num_warmup_steps=0",
                   "--learning_rate=1e-4", f"--save_checkpoints_steps={steps}",
                   f"--iterations_per_loop={steps}", f"--log_steps={steps}", "--seed=0"],
                  f"run_pretraining {records.name}")
    shutil.rmtree(output_dir)
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seqs", default="128,512")
    parser.add_argument("--corpora", default="wikitext2,short")
    parser.add_argument("--batch_128", type=int, default=32)
    parser.add_argument("--batch_512", type=int, default=8)
    parser.add_argument("--short_steps", type=int, default=5)
    parser.add_argument("--long_steps", type=int, default=35)
    harness.add_rounds(parser, 3)
    parser.add_argument("--out_dir", default=str(PROJECT_ROOT / "bench" / "out" / "packing"))
    args = parser.parse_args()
    from bert_tf.data.pretraining.record_stats import count_tokens

    out_dir = pathlib.Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = out_dir / "bert_config.json"
    config.write_text(json.dumps(MODEL))
    rows = []
    for name in args.corpora.split(","):
        corpus = out_dir / f"{name}.txt"
        if not corpus.exists():
            write_documents(corpus, CORPORA[name]())
        for seq in map(int, args.seqs.split(",")):
            batch = getattr(args, f"batch_{seq}")
            records = {packed: make_records(corpus, seq, packed, out_dir)
                       for packed in (False, True)}
            counts = {packed: count_tokens(str(path)) for packed, path in records.items()}

            def measure(packed, round_index):
                short = train_seconds(records[packed], seq, batch, args.short_steps, out_dir,
                                      config)
                long = train_seconds(records[packed], seq, batch, args.long_steps, out_dir,
                                     config)
                step = (long - short) / (args.long_steps - args.short_steps)
                log(f"{name} seq {seq} {'packed' if packed else 'original'} round "
                    f"{round_index + 1}: {step:.3f} s/step")
                return step

            step_seconds = harness.medians(harness.interleave(args.rounds, (False, True),
                                                              measure))
            result = {"corpus": name, "seq": seq, "batch": batch}
            for packed, label in ((False, "original"), (True, "packed")):
                seconds = step_seconds[packed]
                count = counts[packed]
                result[label] = dict(
                    records=count.records, sequences=count.sequences,
                    padding=count.padding_fraction, real_per_row=count.real_tokens_per_record,
                    step_seconds=seconds,
                    tokens_per_second=batch * count.real_tokens_per_record / seconds)
            result["ratio"] = (result["packed"]["tokens_per_second"]
                               / result["original"]["tokens_per_second"])
            rows.append(result)
            log(f"{name} seq {seq}: packed / original = {result['ratio']:.2f}x")
    report(rows, out_dir, args)


def report(rows, out_dir, args):
    lines = harness.markdown(["corpus", "seq", "batch", "layout", "records", "padding",
                              "real tokens/row", "s/step", "real tokens/s", "packed / original"],
                             [])
    tsv = ["corpus\tseq\tbatch\tlayout\trecords\tpadding\treal_tokens_per_row\tstep_seconds\t"
           "real_tokens_per_second\tratio"]
    for row in rows:
        for label in ("original", "packed"):
            r = row[label]
            ratio = f"**{row['ratio']:.2f}x**" if label == "packed" else ""
            lines.append(f"| {row['corpus']} | {row['seq']} | {row['batch']} | {label} | "
                         f"{r['records']} | {r['padding']:.1%} | {r['real_per_row']:.1f} | "
                         f"{r['step_seconds']:.3f} | {r['tokens_per_second']:.0f} | {ratio} |")
            tsv.append("\t".join(map(str, (row["corpus"], row["seq"], row["batch"], label,
                                           r["records"], f"{r['padding']:.4f}",
                                           f"{r['real_per_row']:.2f}",
                                           f"{r['step_seconds']:.4f}",
                                           f"{r['tokens_per_second']:.1f}",
                                           f"{row['ratio']:.3f}"))))
    lines.append("")
    lines.append(f"Median of {args.rounds} rounds; a step = (wall of {args.long_steps} steps - "
                 f"wall of {args.short_steps}) / {args.long_steps - args.short_steps}.")
    (out_dir / "results.md").write_text("\n".join(lines) + "\n")
    (out_dir / "results.tsv").write_text("\n".join(tsv) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
