"""create_pretraining_data: the reference release vs bert_tf, side by side, same corpus and flags.

Builds a ~10 MB corpus in the input format (one sentence per line, a blank line between
documents) from WikiText-2 (../shared/data/wikitext-2 valid+test: one document per article,
paragraphs split into sentences after " . ", the whole repeated --repeat times) in a temporary
directory, then runs, interleaved, --rounds times each:

  reference: the original script (bert-tensorflow 1.0.4, ../shared/reference) through absl
  bert_tf:   python -m data_tools.create_pretraining_data

with the same flags (the original's defaults unless given after "--"), and prints each wall time
(including start-up), peak memory (the process tree's summed PSS - resident memory with pages
shared between forked processes counted once - sampled every 20 ms; and the largest single
process's peak RSS from getrusage) and the ratios, medians over rounds.
bert_tf is run once first to fill numba's compilation cache (that cold run is printed too).
--verify then checks that both wrote the same records (decoded and re-serialized
deterministically). --streaming instead measures the streaming mode's peak memory on the corpus
and on the corpus four times over (the bound does not grow with the corpus).

    python -m bench.data.create_pretraining_data                  # speed and memory vs reference
    python -m bench.data.create_pretraining_data --streaming      # streaming memory bound
    python -m bench.data.create_pretraining_data -- --dupe_factor=5 --max_seq_length=512
"""
import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from bench import harness
from bench.common import (DATA, PROJECT_ROOT, REFERENCE, VOCAB, PeakSampler, tree_kb,
                          wikitext_documents, write_documents)

WIKITEXT = DATA / "wikitext-2"

# The original script through absl, run from the project root (bench.common loads refbert).
REFERENCE_RUNNER = """
from absl import app
from bench.common import import_refbert
app.run(import_refbert().create_pretraining_data.main)
"""


def write_corpus(path, repeat, sources=("valid.txt", "test.txt")):
    """Writes WikiText-2 in the input format, `repeat` times over; returns its size in bytes."""
    return write_documents(path, wikitext_documents([WIKITEXT / name for name in sources]), repeat)


def measure(command, cwd):
    """Runs `command`; returns (wall seconds, peak summed PSS MB of its process tree, largest
    single process's peak RSS MB from getrusage)."""
    wrapper = ("import resource, subprocess, sys; rc = subprocess.call(sys.argv[1:]); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
               "sys.exit(rc)")
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", wrapper, *command], cwd=cwd,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # PSS (proportional set size) splits each shared page between the processes sharing it, so
    # forked workers are not charged again for the pages they share with their parent.
    with PeakSampler(lambda: tree_kb(process.pid, "smaps_rollup", "Pss")) as tree:
        _, stderr = process.communicate()
        wall = time.perf_counter() - start
    if process.returncode != 0:
        raise SystemExit(f"failed ({process.returncode}): {' '.join(command)}\n{stderr[-3000:]}")
    max_single_kb = int(stderr.strip().splitlines()[-1])
    return wall, tree.peak / 1024, max_single_kb / 1024


def reference_command(corpus, output, flags):
    return [sys.executable, "-c", REFERENCE_RUNNER, f"--input_file={corpus}",
            f"--output_file={output}", f"--vocab_file={VOCAB}", *flags]


def ours_command(corpus, output, flags):
    return [sys.executable, "-m", "data_tools.create_pretraining_data", f"--input_file={corpus}",
            f"--output_file={output}", f"--vocab_file={VOCAB}", *flags]


def verify(reference_output, our_output):
    """Both files hold the same records (decoded, re-serialized deterministically)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    def records(path):
        return tf.data.TFRecordDataset(path).as_numpy_iterator()

    count = 0
    for ref, ours in zip(records(reference_output), records(our_output), strict=True):
        if tf.train.Example.FromString(ref).SerializeToString(deterministic=True) != ours:
            raise SystemExit(f"record {count} differs")
        count += 1
    return count


def fmt(values, unit):
    return f"{statistics.median(values):8.2f} {unit}" + (
        f" (runs: {', '.join(f'{v:.2f}' for v in values)})" if len(values) > 1 else "")


def bench_speed(args, workdir, flags):
    corpus = workdir / "corpus.txt"
    size = write_corpus(corpus, args.repeat)
    print(f"corpus: {corpus} ({size / 1e6:.1f} MB, WikiText-2 valid+test x{args.repeat}); "
          f"flags: {' '.join(flags) or '(defaults)'}")
    ours_out, ref_out = workdir / "ours.tfrecord", workdir / "reference.tfrecord"
    cold = measure(ours_command(corpus, ours_out, flags), PROJECT_ROOT)
    print(f"bert_tf first run (fills the numba cache if empty): {cold[0]:.2f} s")

    def run(name, round_index):
        command = (reference_command(corpus, ref_out, flags) if name == "reference"
                   else ours_command(corpus, ours_out, flags))
        wall, tree, single = result = measure(command, PROJECT_ROOT)
        print(f"  round {round_index + 1} {name:9s}: {wall:7.2f} s  peak memory {tree:7.0f} MB "
              f"(largest process's peak RSS {single:.0f} MB)")
        return result

    results = harness.interleave(args.rounds, ("reference", "bert_tf"), run, alternate=True)
    print()
    for name in ("reference", "bert_tf"):
        walls = [r[0] for r in results[name]]
        trees = [r[1] for r in results[name]]
        print(f"{name:9s}: wall {fmt(walls, 's')}  peak memory {fmt(trees, 'MB')}")
    wall, memory = harness.medians(results, 0), harness.medians(results, 1)
    print(f"speed-up (reference wall / bert_tf wall): "
          f"{harness.ratio(wall['reference'], wall['bert_tf'], 1)}")
    print(f"peak memory (bert_tf / reference): {memory['bert_tf'] / memory['reference']:.2f}")
    if args.verify:
        print(f"verify: {verify(ref_out, ours_out)} records identical")


def bench_streaming(args, workdir, flags):
    extra = ["--num_workers=2", "--output_shards=4", *flags]
    print(f"streaming mode: {' '.join(extra)}")
    rows = []
    for times in (1, 4):
        corpus = workdir / f"corpus_x{times}.txt"
        size = write_corpus(corpus, args.repeat * times)
        measure(ours_command(corpus, workdir / "warm.tfrecord", extra), PROJECT_ROOT)  # cache
        walls, trees, singles = [], [], []
        for _ in range(args.rounds):
            wall, tree, single = measure(
                ours_command(corpus, workdir / f"stream_x{times}.tfrecord", extra), PROJECT_ROOT)
            walls.append(wall)
            trees.append(tree)
            singles.append(single)
        rows.append((times, size, walls, trees, singles))
        for shard in workdir.glob(f"stream_x{times}.tfrecord-*"):
            shard.unlink()
        corpus.unlink()
    for times, size, walls, trees, singles in rows:
        print(f"corpus x{times} ({size / 1e6:6.1f} MB): wall {fmt(walls, 's')}  peak memory "
              f"{fmt(trees, 'MB')}  largest process's peak RSS "
              f"{statistics.median(singles):.0f} MB")
    print(f"peak memory ratio (x4 corpus / x1 corpus): "
          f"{statistics.median(rows[1][3]) / statistics.median(rows[0][3]):.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5,
                        help="WikiText-2 valid+test copies in the corpus (5 = 11.6 MB)")
    harness.add_rounds(parser, 3, "interleaved runs of each")
    parser.add_argument("--verify", action=argparse.BooleanOptionalAction, default=True,
                        help="check that both wrote the same records")
    parser.add_argument("--streaming", action="store_true",
                        help="measure the streaming mode's memory bound instead")
    parser.add_argument("--workdir", help="keep files here instead of a temporary directory")
    parser.add_argument("flags", nargs="*", help="flags for both scripts (after --)")
    args = parser.parse_args()
    for path in (WIKITEXT, VOCAB, REFERENCE):
        if not path.exists():
            raise SystemExit(f"needs {path}")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = pathlib.Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        if args.streaming:
            bench_streaming(args, workdir, args.flags)
        else:
            bench_speed(args, workdir, args.flags)


if __name__ == "__main__":
    main()
