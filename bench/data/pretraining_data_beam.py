"""create_pretraining_data on Apache Beam's DirectRunner next to the streaming mode: throughput
at 1 and 2 workers, and peak memory as the corpus grows.

    python -m bench.data.pretraining_data_beam                # scales 1,2,4; 2 rounds
    python -m bench.data.pretraining_data_beam --scales=1,4,8 --rounds=3

Corpus: WikiText-2 test + valid ($BERT_TF_WIKITEXT, default ../shared/data/wikitext-2; 2.4 MB,
about 0.5 M words) listed `scale` times as input files, so the text grows with the scale and
every window is real text. Flags: the original's defaults (max_seq_length 128, 20 predictions,
masked_lm_prob 0.15) with --dupe_factor=5, --window_bytes=1000000, 2 output shards, the
uncased BERT vocabulary, --tokenizer=full. Peers, each the command line in its own process:

  streaming     python -m data_tools.create_pretraining_data --num_workers=N (forked workers)
  beam          the same with --runner=DirectRunner --num_workers=N (Beam's multi_processing
                mode for N > 1: N SDK worker processes)

Per run: wall seconds, text MB/s, instances/s, and the peak resident memory of the whole process
tree (the command and its workers, summed; sampled every 50 ms from /proc). Every Beam run's
output files are compared with the streaming run's of the same scale (byte-identical expected).
Rounds interleave the peers; the table gives medians over rounds.
"""
import argparse
import filecmp
import os
import subprocess
import sys
import tempfile
import time

from bench import harness
from bench.common import DATA, PROJECT_ROOT, PeakSampler, load_average, tree_kb
from bench.common import VOCAB as UNCASED_VOCAB

WIKITEXT = os.environ.get("BERT_TF_WIKITEXT", str(DATA / "wikitext-2"))
VOCAB = os.environ.get("BERT_TF_VOCAB", str(UNCASED_VOCAB))
PEERS = (("streaming", 1), ("beam", 1), ("streaming", 2), ("beam", 2))


def run(peer, workers, input_files, output, args):
    command = [sys.executable, "-m", "data_tools.create_pretraining_data",
               f"--input_file={','.join(input_files)}", f"--output_file={output}",
               f"--vocab_file={VOCAB}", "--output_shards=2", f"--num_workers={workers}",
               f"--dupe_factor={args.dupe_factor}", f"--window_bytes={args.window_bytes}",
               "--progress_interval=1000"]
    if peer == "beam":
        command.append("--runner=DirectRunner")
    # Beam's SDK worker processes import this checkout's bert_tf (not an installed one).
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    with PeakSampler(lambda: 1024 * tree_kb(process.pid, "status", "VmRSS"),
                     interval=0.05) as tree:
        log, _ = process.communicate()
    seconds = time.perf_counter() - start
    if process.returncode:
        raise SystemExit(f"{peer} failed:\n{log}")
    instances = int(log.split("Wrote ")[1].split()[0])
    return seconds, instances, tree.peak


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", default="1,2,4")
    harness.add_rounds(parser, 2)
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--window_bytes", type=int, default=1_000_000)
    args = parser.parse_args()
    files = [os.path.join(WIKITEXT, name) for name in ("test.txt", "valid.txt")]
    unit_mb = sum(os.path.getsize(f) for f in files) / 1e6
    work = tempfile.mkdtemp(prefix="bench_beam_")
    mismatches = 0
    print(f"{harness.stamp()}; corpus unit {unit_mb:.2f} MB, dupe_factor {args.dupe_factor}, "
          f"window_bytes {args.window_bytes}", flush=True)

    def measure(key, round_index):
        nonlocal mismatches
        scale, peer, workers = key
        output = os.path.join(work, f"{peer}{workers}-x{scale}.tfrecord")
        seconds, instances, peak = run(peer, workers, files * scale, output, args)
        same = ""
        if peer == "beam":
            reference = os.path.join(work, f"streaming1-x{scale}.tfrecord")
            equal = all(filecmp.cmp(f"{output}-{i:05d}-of-00002",
                                    f"{reference}-{i:05d}-of-00002", shallow=False)
                        for i in range(2))
            mismatches += not equal
            same = ", files equal to streaming's" if equal else ", FILES DIFFER"
        print(f"round {round_index + 1} x{scale} {peer} {workers} worker(s): "
              f"{seconds:.1f} s, {unit_mb * scale / seconds:.2f} MB/s, "
              f"{instances / seconds:.0f} instances/s, peak {peak / 2**20:.0f} MiB"
              f"{same}; load {load_average():.2f}", flush=True)
        return seconds, instances, peak

    keys = [(int(scale), peer, workers) for scale in args.scales.split(",")
            for peer, workers in PEERS]
    results = harness.interleave(args.rounds, keys, measure)
    print(f"\nMedians of {args.rounds} rounds:")
    rows = []
    for (scale, peer, workers), runs in results.items():
        seconds = harness.median(runs, 0)
        rows.append([f"{unit_mb * scale:.1f} MB", peer, workers, f"{seconds:.1f}",
                     f"{unit_mb * scale / seconds:.2f}", f"{runs[0][1] / seconds:.0f}",
                     f"{harness.median(runs, 2) / 2**20:.0f}"])
    print("\n".join(harness.markdown(["corpus", "peer", "workers", "seconds", "MB/s",
                                      "instances/s", "peak memory MiB"], rows)))
    if mismatches:
        raise SystemExit(f"{mismatches} Beam runs wrote files that differ from the streaming "
                         "mode's")


if __name__ == "__main__":
    main()
