"""Predict passes over GLUE dev with the CPU kernels switch on and off, side by side in one
process: what the first pass (pipeline set-up, tracing, any per-shape compile) costs on top of
a warm one, and whether the switch changes either.

    python -m bench.finetuning.predict_passes                    # MRPC and SST-2, 5 rounds
    python -m bench.finetuning.predict_passes --tasks=MRPC --rounds=7

The model and data are glue_throughput.py's (all-MiniLM-L6-v2 plus a fresh 2-class head,
dev records padded to a multiple of 32, batch 32, fp32, bucket_by_length=True: batches sorted
by length and cut to their longest example), run through gathering.gather_outputs, what
the runner's predict runs. One model; one ClassificationTask per switch position, each with its own
traced predict step (the switch is read when a step is traced). Rounds alternate the order
of the two variants; the 1st pass of each variant is reported alone, then the median of the
others. The first variant's 1st pass also pays the process's one-time costs (oneDNN
primitives for each new shape, TensorFlow start-up), so the 1st-pass comparison is made twice,
with each variant first.
"""
import argparse
import os
import statistics
import tempfile
import time

from bench import harness
from bench.common import PROJECT_ROOT, minilm_dir, write_init_dir
from bench.finetuning import glue_throughput

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

MODES = ("on", "off")


def measure(task_name, init_dir, work_dir, rounds, first):
    """{mode: [seconds of each pass]}; `first` is the mode that runs the process's first pass."""
    from bert_tf.model import cpu_kernels
    from bert_tf.training import gathering, runner
    from bert_tf.training.settings import RunSettings
    from bert_tf.model.checkpoints import hf_directory_files
    from bert_tf.tasks.base import Records
    from bert_tf.tasks.classification import ClassificationConfig, ClassificationTask

    spec = glue_throughput.prepare_task(task_name, init_dir, work_dir)
    config = hf_directory_files(init_dir)[0]
    settings = RunSettings(output_dir=tempfile.mkdtemp(prefix="bench_passes_"),
                                  do_predict=True, init_checkpoint=init_dir,
                                  predict_batch_size=glue_throughput.PREDICT_BATCH)
    _, strategy = runner.build_strategy(settings)

    def make_task():
        return ClassificationTask(ClassificationConfig(
            bert_config=config, max_seq_length=glue_throughput.MAX_SEQ_LENGTH,
            labels=[str(i) for i in range(glue_throughput.NUM_LABELS)], bucket_by_length=True,
            records={"predict": Records((spec["dev_records"],), spec["num_dev_records"])}))

    tasks = {mode: make_task() for mode in MODES}
    with strategy.scope():
        model = tasks["on"].build_model()
    tasks["on"].initialize(model, init_dir, log=lambda message: None)
    num_steps = spec["num_dev_records"] // glue_throughput.PREDICT_BATCH
    def measure(mode, round_index):
        cpu_kernels.set_cpu_kernels(mode)
        task = tasks[mode]
        start = time.perf_counter()
        outputs = gathering.gather_outputs(
            strategy, model, task, task.dataset_fn("predict", glue_throughput.PREDICT_BATCH),
            num_steps, "predict")
        assert len(outputs["probabilities"]) == spec["num_dev_records"]
        return time.perf_counter() - start

    try:
        seconds = harness.interleave(rounds, [first] + [m for m in MODES if m != first], measure,
                                     alternate=True)
    finally:
        cpu_kernels.set_cpu_kernels("auto")
    return spec["num_dev"], seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="MRPC,SST-2")
    harness.add_rounds(parser, 5)
    harness.add_child(parser)
    args = parser.parse_args()
    if args.rounds < 2:  # the first pass is compared with the median of the later ones
        parser.error(f"--rounds must be at least 2 (a first pass and later ones), got "
                     f"{args.rounds}")
    if args.child:  # one (task, first mode) per process: the 1st pass is the process's first
        task_name, first, work_dir = args.child.split("|")
        num_dev, seconds = measure(task_name, write_init_dir(
            minilm_dir(), os.path.join(work_dir, "init")), work_dir, args.rounds, first)
        for mode in MODES:
            rest = statistics.median(seconds[mode][1:])
            print(f"{task_name:6s} {first:>3s} first  kernels {mode:>3s}: 1st pass "
                  f"{seconds[mode][0]:5.2f} s ({num_dev / seconds[mode][0]:6.1f} ex/s), "
                  f"later passes {rest:5.2f} s ({num_dev / rest:6.1f} ex/s; median of "
                  f"{len(seconds[mode]) - 1})", flush=True)
        return
    import subprocess
    print(f"{harness.stamp()}; batch {glue_throughput.PREDICT_BATCH}, fp32, {args.rounds} rounds", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_passes_") as work_dir:
        for task_name in args.tasks.split(","):
            for first in MODES:
                subprocess.run(harness.module_command(__spec__.name, f"--rounds={args.rounds}",
                                                      f"--child={task_name}|{first}|{work_dir}"),
                               cwd=PROJECT_ROOT, check=True)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
