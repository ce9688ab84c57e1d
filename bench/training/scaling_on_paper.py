"""How a data-parallel training step scales with replicas, on paper (docs/scaling.md).

    python -m bench.training.scaling_on_paper

Model: step time = compute + all-reduce (our training loop all-reduces the gradients once per
optimizer step, after the backward pass, as tf.distribute's Mirrored and MultiWorkerMirrored
strategies do: no overlap), so scaling efficiency = compute / (compute + all-reduce).

- Gradient bytes all-reduced per step: 4 x parameters (the gradients of float32 variables stay
  float32 under mixed precision): BERT-Base 110M parameters, BERT-Large 335M.
- Ring all-reduce, bandwidth-bound: each replica sends and receives 2 (N - 1) / N x bytes over
  its link (latency ignored: a few ms at most for the ~200 tensors, fewer after tf.distribute's
  packing).
- Compute per replica step: tokens x training FLOP per token / sustained FLOP/s. FLOP per token
  = 6 x non-embedding parameters + 12 x layers x seq x hidden (attention scores and values);
  for BERT-Base at seq 128 that is 0.52 GFLOP, and our measured step (docs/run_pretraining.md:
  2.97 s for 8 x 128 tokens, 85% of this CPU's 215 GFLOP/s fp32 peak) implies 0.53.
- Sustained FLOP/s: this CPU as measured (183 GFLOP/s fp32); accelerators at an assumed 40% of
  their dense bf16/fp16 peak (A100 312 TFLOP/s, TPU v4 chip 275 TFLOP/s): the CPU-specific
  kernels do not run there (bert_tf.model.cpu_kernels' switch is off), and 40% is a typical BERT
  pretraining utilisation, not a figure measured here.
- Links: 10, 25 and 100 Gb/s Ethernet between workers; TPU v4's inter-chip interconnect at
  2,400 Gb/s per chip (Cloud TPU documentation), with the all-reduce assumed to run at that rate.
"""
import itertools

MODELS = {  # parameters, non-embedding parameters, layers, hidden
    "BERT-Base": (110e6, 85e6, 12, 768),
    "BERT-Large": (335e6, 302e6, 24, 1024),
}
SEQ = 128
DEVICES = {  # sustained FLOP/s, sequences per replica step, links (name, bits/s)
    "this CPU (fp32, measured)": (183e9, 32, [("10 Gb/s", 10e9), ("25 Gb/s", 25e9),
                                             ("100 Gb/s", 100e9)]),
    "A100 (bf16, 40% assumed)": (0.4 * 312e12, 32, [("10 Gb/s", 10e9), ("25 Gb/s", 25e9),
                                                     ("100 Gb/s", 100e9)]),
    "TPU v4 chip (bf16, 40% assumed)": (0.4 * 275e12, 32, [("ICI 2,400 Gb/s", 2400e9)]),
}
REPLICAS = (2, 8, 64)


def flop_per_token(model):
    _, non_embedding, layers, hidden = MODELS[model]
    return 6 * non_embedding + 12 * layers * SEQ * hidden


def all_reduce_seconds(model, replicas, bits_per_second):
    gradient_bytes = 4 * MODELS[model][0]
    return 2 * (replicas - 1) / replicas * gradient_bytes * 8 / bits_per_second


def main():
    print(f"seq {SEQ}; gradient bytes per step: "
          + ", ".join(f"{m} {4 * p[0] / 1e9:.2f} GB" for m, p in MODELS.items()))
    print("| model | replica | compute s/step (32 x 128 tokens) | link | all-reduce s, N=2 / 8 / 64 "
          "| scaling efficiency, N=2 / 8 / 64 |")
    print("|---|---|---|---|---|---|")
    for model, (device, (flops, sequences, links)) in itertools.product(MODELS, DEVICES.items()):
        compute = sequences * SEQ * flop_per_token(model) / flops
        for link, bits in links:
            reduce = [all_reduce_seconds(model, n, bits) for n in REPLICAS]
            efficiency = [compute / (compute + r) for r in reduce]
            print(f"| {model} | {device} | {compute:.3g} | {link} | "
                  + " / ".join(f"{r:.3g}" for r in reduce) + " | "
                  + " / ".join(f"{e:.0%}" for e in efficiency) + " |")


if __name__ == "__main__":
    main()
