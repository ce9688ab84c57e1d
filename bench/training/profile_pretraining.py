"""Where the time of one of our pretraining train steps goes: a tf.profiler trace, summed by op.

    python -m bench.training.profile_pretraining                  # BERT-Base, seq 128, fp32
    python -m bench.training.profile_pretraining --model=small --precision=bf16 --top=30

The step is pretraining_throughput.py's (same model, batch, optimizer and train loop). Inter-op
parallelism is set to 1 so that ops run one after another and their times add up to the step;
each matmul then still uses every core. Prints the step times, then the time per op type and the
split into matmuls (oneDNN), XLA kernels (the fused LayerNorm/GELU/dropout kernels and the AdamW
update) and the rest, then the slowest single ops.
"""
import argparse
import collections
import glob
import os
import tempfile
import time

from bench.common import BERT_SIZES
from bench.training import pretraining_throughput


def op_times(logdir):
    """{(op name, op type): milliseconds} of the TensorFlow ops in the trace under `logdir`."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    path = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))[-1]
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    times = collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if name == "ExecutorState::ProcessAsync::Start":
                    # An async op: here the XLA kernels, whose own events carry no op name.
                    name = "(XLA kernel launches):XLA"
                elif name.split(":")[0] in _WRAPPERS or ":" not in name or name.startswith("__"):
                    continue
                op_name, op_type = name.rsplit(":", 1)
                times[(op_name, op_type)] += event.duration_ps / 1e9
    return times


# Trace events that enclose op events (counting them would count time twice).
_WRAPPERS = {"ExecutorState", "CpuExecutable", "ThunkExecutor", "KernelAndDeviceFunc",
             "EagerLocalExecute", "Iterator", "InstantiatedCapturedFunction"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="base",
                        choices=sorted(BERT_SIZES))
    parser.add_argument("--seq", type=int, default=128,
                        choices=sorted(pretraining_throughput.BATCH))
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--top", type=int, default=15, help="slowest single ops to list")
    args = parser.parse_args()

    import tensorflow as tf

    tf.config.threading.set_inter_op_parallelism_threads(1)
    loop, iterator = pretraining_throughput.build_ours(args.model, args.seq, args.precision, False)
    step_times = pretraining_throughput.time_steps(
        lambda: float(loop(iterator, tf.constant(1))[2]), steps=3, warmup=2)
    print(f"{args.model} seq {args.seq} {args.precision}: step times "
          + ", ".join(f"{t:.3f} s" for t in step_times))

    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        start = time.perf_counter()
        float(loop(iterator, tf.constant(1))[2])
        profiled = time.perf_counter() - start
        tf.profiler.experimental.stop()
        times = op_times(logdir)

    by_type = collections.Counter()
    for (_, op_type), ms in times.items():
        by_type[op_type] += ms
    groups = collections.Counter()
    for op_type, ms in by_type.items():
        group = ("matmuls" if "MatMul" in op_type else
                 "XLA kernels" if op_type == "XLA" else "rest")
        groups[group] += ms
    print(f"profiled step: {profiled:.3f} s; op time {sum(by_type.values()) / 1e3:.3f} s = "
          + ", ".join(f"{group} {ms / 1e3:.3f} s" for group, ms in groups.most_common()))
    print("\nby op type:")
    for op_type, ms in by_type.most_common(25):
        print(f"  {ms:9.1f} ms  {op_type}")
    print(f"\nslowest {args.top} ops:")
    for (op_name, op_type), ms in times.most_common(args.top):
        print(f"  {ms:9.1f} ms  {op_type:28s} {op_name[-100:]}")


if __name__ == "__main__":
    main()
