"""Memory and time of a training step with and without --recompute_layers.

    python -m bench.training.recompute_layers                # BERT-Base, seq 512, batch 2 and 8
    python -m bench.training.recompute_layers --model=small --batches=4 --rounds=2

Each measurement runs in its own subprocess (a process's memory high-water mark is its own),
and the two settings run interleaved, round after round; the table quotes medians over rounds
and the ratios recompute / keep. A step is one optimizer update of BERT pretraining (masked-LM
with 80 predictions at seq 512, next sentence; AdamWeightDecay) through
bert_tf.training.loops' train loop, as run_pretraining runs it, in float32 (--precision=bf16:
mixed bfloat16), dropout 0.1 as BERT's config.

Memory, two measures, both taken over the timed steps only (after the warmup step, which
traces the function and allocates the weights, gradients and Adam slots):
  tf peak      TensorFlow's CPU allocator: tf.config.experimental.get_memory_info("CPU:0")
               ["peak"] after reset_memory_stats, minus what was allocated before the steps
               (weights, slots): the step's transient memory, activations first of all
  rss peak     the process's resident-set high-water mark (VmHWM of /proc/self/status, reset
               through /proc/self/clear_refs before the steps): everything, TensorFlow's
               runtime and oneDNN's buffers included

--check_gradients also runs one child that computes the gradients of one batch with and
without recompute from the same weights and dropout seeds and prints their largest difference
relative to the largest gradient (the tests check 1e-5 on a tiny model).
"""
import argparse
import json
import os
import statistics
import time

from bench import harness
from bench.common import BERT_SIZES, MAX_PREDICTIONS
from bench.training.pretraining_throughput import random_batch

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")



def build(spec):
    """(model, optimizer, task, strategy, batch) for a child's spec."""
    import keras
    import numpy as np

    from bert_tf.model import layers
    from bert_tf.model.config import BertConfig
    from bert_tf.model.models import BertPretrainer
    from bert_tf.tasks.pretraining.task import PretrainingTask
    from bert_tf.training import distribution, loops, optimization

    keras.utils.set_random_seed(0)
    loops.set_mixed_precision("bfloat16" if spec["precision"] == "bf16" else "off")
    strategy = distribution.create_strategy("one_device")
    config = BERT_SIZES[spec["model"]]
    with strategy.scope():
        model = BertPretrainer(BertConfig(**config, max_position_embeddings=max(512, spec["seq"])))
        optimizer = optimization.create_optimizer(1e-4, 10000, 100)
        optimizer.build(model.trainable_variables)
    layers.set_recompute(model, spec["recompute"])
    batch = random_batch(np, spec["seq"], spec["batch"],
                         # the original's, or at other lengths one position in 7
                         MAX_PREDICTIONS.get(spec["seq"], max(1, spec["seq"] // 7)),
                         config["vocab_size"])
    return model, optimizer, PretrainingTask(), strategy, batch


def reset_rss_peak():
    """Resets VmHWM (Linux: writing 5 to clear_refs); False where that is not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def rss_peak_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure(spec, steps, warmup):
    import tensorflow as tf

    from bert_tf.training import loops

    model, optimizer, task, strategy, batch = build(spec)
    step = loops.make_replica_train_step(model, optimizer, task)
    loop = loops.make_train_loop(strategy, step, task.train_metric_names)
    iterator = loops.input_iterator(
        strategy, lambda ctx: tf.data.Dataset.from_tensors(batch).repeat())
    for _ in range(warmup):
        float(loop(iterator, tf.constant(1))[2])
    resident = tf.config.experimental.get_memory_info("CPU:0")["current"]
    tf.config.experimental.reset_memory_stats("CPU:0")
    rss_reset = reset_rss_peak()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        float(loop(iterator, tf.constant(1))[2])
        times.append(time.perf_counter() - start)
    return {"step_s": statistics.median(times),
            "tf_peak": tf.config.experimental.get_memory_info("CPU:0")["peak"] - resident,
            "resident": resident, "rss_peak": rss_peak_bytes(), "rss_reset": rss_reset}


def check_gradients(spec):
    """Largest |gradient difference| / largest |gradient| between recompute on and off."""
    import numpy as np
    import tensorflow as tf

    from bert_tf.model import layers

    model, _, task, _, batch = build(dict(spec, recompute=False))
    batch = {name: tf.constant(value) for name, value in batch.items()}
    seeds = [v for v in model.variables if v.path.endswith("seed_generator_state")]
    initial = [v.numpy() for v in seeds]

    def gradients():
        with tf.GradientTape() as tape:
            outputs = task.outputs(model, batch, training=True)
            loss = task.train_metrics(batch, outputs, task.normalizers(batch))["loss"]
        return loss, [tf.convert_to_tensor(g) for g in tape.gradient(loss,
                                                                     model.trainable_variables)]

    results = []
    for recompute in (False, True):
        for variable, value in zip(seeds, initial):
            variable.assign(value)
        layers.set_recompute(model, recompute)
        loss, grads = tf.function(gradients)()
        results.append((float(loss), [g.numpy() for g in grads]))
    (loss_kept, kept), (loss_recomputed, recomputed) = results
    largest = max(float(np.abs(g).max()) for g in kept)
    difference = max(float(np.abs(a - b).max()) for a, b in zip(kept, recomputed))
    return {"loss_kept": loss_kept, "loss_recomputed": loss_recomputed,
            "max_difference": difference, "largest_gradient": largest,
            "relative": difference / largest}


def run_child(spec, args):
    return harness.run_child(harness.child_command(__spec__.name, spec, f"--steps={args.steps}",
                                                   f"--warmup={args.warmup}"), spec)


def gib(n):
    return f"{n / 2 ** 30:.2f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="base", choices=sorted(BERT_SIZES))
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--batches", default="2,8")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    harness.add_rounds(parser, 3)
    parser.add_argument("--steps", type=int, default=2, help="timed steps per measurement")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--check_gradients", action="store_true")
    harness.add_child(parser)
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        return harness.answer(check_gradients(spec) if spec.get("check")
                              else measure(spec, args.steps, args.warmup))

    base = {"model": args.model, "seq": args.seq, "precision": args.precision}
    print(f"== {args.model} seq {args.seq} {args.precision}: {args.rounds} rounds of "
          f"{args.steps} timed steps (after {args.warmup}), recompute off/on interleaved",
          flush=True)
    if args.check_gradients:
        out = run_child(dict(base, batch=int(args.batches.split(",")[0]), check=True), args)
        if out:
            print(f"gradients, recompute vs keep: max |difference| {out['max_difference']:.3g} "
                  f"= {out['relative']:.2g} of the largest gradient ({out['largest_gradient']:.3g})"
                  f"; loss {out['loss_kept']:.6f} vs {out['loss_recomputed']:.6f}", flush=True)

    def run(key, round_index):
        batch, recompute = key
        out = run_child(dict(base, batch=batch, recompute=recompute), args)
        if out:
            print(f"  batch {batch} recompute {'on ' if recompute else 'off'}: "
                  f"{out['step_s']:.2f} s/step, tf peak {gib(out['tf_peak'])} GiB, "
                  f"rss peak {gib(out['rss_peak'])} GiB", flush=True)
        return out

    results = harness.interleave(args.rounds, [(int(b), recompute) for b in args.batches.split(",")
                                               for recompute in (False, True)], run)
    print(f"\n{'batch':>5} {'recompute':>9} {'step s':>8} {'tf peak GiB':>12} "
          f"{'rss peak GiB':>13} {'resident GiB':>13}")
    medians = {}
    for (batch, recompute), outs in sorted(results.items()):
        m = {key: harness.median(outs, key) for key in ("step_s", "tf_peak", "rss_peak",
                                                        "resident")}
        medians[batch, recompute] = m
        print(f"{batch:>5} {'on' if recompute else 'off':>9} {m['step_s']:>8.2f} "
              f"{gib(m['tf_peak']):>12} {gib(m['rss_peak']):>13} {gib(m['resident']):>13}")
    print("\nratios, recompute on / off:")
    for batch in sorted({b for b, _ in medians}):
        if (batch, False) in medians and (batch, True) in medians:
            on, off = medians[batch, True], medians[batch, False]
            print(f"  batch {batch}: step time {on['step_s'] / off['step_s']:.2f}x, tf peak "
                  f"{on['tf_peak'] / off['tf_peak']:.2f}x, rss peak "
                  f"{on['rss_peak'] / off['rss_peak']:.2f}x")
    if any(not o["rss_reset"] for outs in results.values() for o in outs):
        print("note: /proc/self/clear_refs could not be written: rss peak is the whole "
              "process's high-water mark")


if __name__ == "__main__":
    main()
