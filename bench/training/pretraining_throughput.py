"""Pretraining train-step throughput and MFU: bert_tf vs keras-hub vs transformers (PyTorch CPU)
vs TF Model Garden.

    bash bench/envs/model_garden_env.sh                     # once: the Model Garden venv
    python -m bench.training.pretraining_throughput         # BERT-Base + small, seq 128 and 512
    python -m bench.training.pretraining_throughput --models=small --seqs=128 --rounds=3

Each measurement runs in its own subprocess (so dtype policies, thread pools and memory do not
leak between peers), and the peers run interleaved, round after round, on the same random batch
shape; the table quotes the median step time over rounds. A "step" is one optimizer update on one
batch: forward, backward, gradient clipping (where the peer does it) and AdamW.

  ours          bert_tf BertPretrainer + bert_tf.training.loops's train loop (AdamWeightDecay,
                masked-LM + next-sentence loss), `iterations_per_loop` steps per call;
                fp32, bf16 (mixed_bfloat16), each with and without XLA (jit_compile)
  keras_hub     keras_hub.models.BertMaskedLM (TF backend; masked-LM only, no next-sentence
                head), compiled with AdamW, train_on_batch; jit_compile on and off
  transformers  BertForPreTraining (PyTorch CPU), AdamW, loss over the masked positions; bf16 via
                torch.autocast
  model_garden  TF Model Garden (tf-models-official, tf_keras): networks.BertEncoderV2 +
                models.BertPretrainerV2 with the masked-LM head and a next-sentence
                ClassificationHead, its masked-LM task's loss, its AdamWeightDecay (global-norm
                clipping 1.0) in a tf.function train step; fp32, bf16, with and without XLA.
                Model Garden pins its own TensorFlow and Keras 2, so this peer's child runs with
                the python of its own venv (bench/envs/model_garden_env.sh;
                $BERT_TF_MODEL_GARDEN_VENV) and is skipped, with a message, when that venv is
                missing.

MFU = model FLOPs per second / this machine's fp32 matmul peak (measured here with a large
tf.matmul). Model FLOPs of a train step = 3 x forward FLOPs of BERT pretraining counted on the
*masked positions only* for the masked-LM head (what the original computes); a peer computing
more (transformers scores every position) gets no credit for it.

Also measured: the input pipeline alone (records/s of bert_tf.data.input_pipeline over TFRecords), to
show that it is never the bottleneck.
"""
import argparse
import json
import os
import statistics
import tempfile
import time

from bench import harness
from bench.common import BERT_SIZES, MAX_PREDICTIONS, keras_hub_backbone, transformers_config

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

BATCH = {128: 8, 512: 2}          # 1,024 tokens per step either way


def train_flops(model, seq, batch, predictions):
    """3 x forward FLOPs (2 per multiply-add) of one BERT pretraining step."""
    m = BERT_SIZES[model]
    h, i, layers, v = m["hidden_size"], m["intermediate_size"], m["num_hidden_layers"], m["vocab_size"]
    per_token_layer = 2 * (4 * h * h + 2 * h * i) + 2 * 2 * seq * h  # projections + attention
    encoder = batch * seq * layers * per_token_layer
    pooler_nsp = batch * (2 * h * h + 2 * h * 2)
    mlm = batch * predictions * (2 * h * h + 2 * h * v)
    return 3 * (encoder + pooler_nsp + mlm)


def matmul_peak(dtype="float32", n=4096, repeats=12):
    import tensorflow as tf
    a = tf.random.normal([n, n], dtype=tf.float32)
    a = tf.cast(a, dtype)
    b = tf.cast(tf.random.normal([n, n]), dtype)
    tf.matmul(a, b).numpy()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        tf.matmul(a, b).numpy()
        times.append(time.perf_counter() - start)
    return 2 * n ** 3 / min(times)  # the peak: best of the repeats on a shared machine


def random_batch(np, seq, batch, predictions, vocab):
    rng = np.random.RandomState(0)
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq), predictions, replace=False)
                                  for _ in range(batch)]), axis=1)
    return {
        "input_ids": rng.randint(1000, vocab, (batch, seq)).astype(np.int32),
        "input_mask": np.ones((batch, seq), np.int32),
        "segment_ids": (np.arange(seq)[None, :] >= seq // 2).repeat(batch, 0).astype(np.int32),
        "masked_lm_positions": positions.astype(np.int32),
        "masked_lm_ids": rng.randint(1000, vocab, (batch, predictions)).astype(np.int32),
        "masked_lm_weights": np.ones((batch, predictions), np.float32),
        "next_sentence_labels": rng.randint(0, 2, (batch, 1)).astype(np.int32),
    }


def time_steps(step, steps, warmup):
    """Calls `step()` `warmup` times, then `steps` times; returns the seconds of each of those.
    (`step` must wait for its result: the peers run asynchronously otherwise.)"""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


def build_ours(model, seq, precision, jit):
    """Our train loop on a repeated random batch: (loop, iterator); `loop(iterator, n)` runs n
    steps (see bert_tf.training.loops.make_train_loop)."""
    import numpy as np
    import tensorflow as tf

    from bert_tf.training import distribution, optimization, loops
    from bert_tf.model.config import BertConfig
    from bert_tf.model.models import BertPretrainer
    from bert_tf.tasks.pretraining.task import PretrainingTask

    loops.set_mixed_precision("bfloat16" if precision == "bf16" else "off")
    strategy = distribution.create_strategy("one_device")
    batch = random_batch(np, seq, BATCH[seq], MAX_PREDICTIONS[seq], BERT_SIZES[model]["vocab_size"])
    with strategy.scope():
        net = BertPretrainer(BertConfig(**BERT_SIZES[model], max_position_embeddings=512))
        optimizer = optimization.create_optimizer(1e-4, 10000, 100)
        optimizer.build(net.trainable_variables)
    task = PretrainingTask()
    step = loops.make_replica_train_step(net, optimizer, task, jit_compile=jit)
    loop = loops.make_train_loop(strategy, step, task.train_metric_names)
    return loop, loops.input_iterator(
        strategy, lambda ctx: tf.data.Dataset.from_tensors(batch).repeat())


def measure_ours(model, seq, precision, jit, steps, warmup):
    import tensorflow as tf

    loop, iterator = build_ours(model, seq, precision, jit)
    return time_steps(lambda: float(loop(iterator, tf.constant(1))[2]), steps, warmup)


def measure_keras_hub(model, seq, precision, jit, steps, warmup):
    import keras
    import keras_hub
    import numpy as np

    if precision == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    m = BERT_SIZES[model]
    backbone = keras_hub_backbone(m, max_sequence_length=512)
    lm = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    lm.compile(optimizer=keras.optimizers.AdamW(1e-4, weight_decay=0.01, global_clipnorm=1.0),
               loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
               jit_compile=jit)
    b = random_batch(np, seq, BATCH[seq], MAX_PREDICTIONS[seq], m["vocab_size"])
    x = {"token_ids": b["input_ids"], "segment_ids": b["segment_ids"],
         "padding_mask": b["input_mask"].astype(bool), "mask_positions": b["masked_lm_positions"]}
    return time_steps(
        lambda: lm.train_on_batch(x, b["masked_lm_ids"], sample_weight=b["masked_lm_weights"]),
        steps, warmup)


def measure_transformers(model, seq, precision, jit, steps, warmup):
    import contextlib

    import numpy as np
    import torch
    import transformers

    m = BERT_SIZES[model]
    net = transformers.BertForPreTraining(
        transformers_config(m, max_position_embeddings=512)).train()
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4, weight_decay=0.01)
    b = random_batch(np, seq, BATCH[seq], MAX_PREDICTIONS[seq], m["vocab_size"])
    labels = np.full(b["input_ids"].shape, -100, np.int64)
    np.put_along_axis(labels, b["masked_lm_positions"], b["masked_lm_ids"], axis=1)
    inputs = dict(input_ids=torch.tensor(b["input_ids"]).long(),
                  attention_mask=torch.tensor(b["input_mask"]).long(),
                  token_type_ids=torch.tensor(b["segment_ids"]).long(),
                  labels=torch.tensor(labels),
                  next_sentence_label=torch.tensor(b["next_sentence_labels"][:, 0]).long())
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16"
                else contextlib.nullcontext())

    def step():
        optimizer.zero_grad()
        with autocast:
            loss = net(**inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()

    return time_steps(step, steps, warmup)


def measure_model_garden(model, seq, precision, jit, steps, warmup):
    """Runs in the Model Garden venv: imports only tensorflow, tf_keras and official."""
    import numpy as np
    import tensorflow as tf
    import tf_keras
    from official.modeling import tf_utils
    from official.modeling.optimization import legacy_adamw
    from official.nlp.modeling import layers, models, networks

    if precision == "bf16":
        tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
    m = BERT_SIZES[model]
    encoder = networks.BertEncoderV2(
        vocab_size=m["vocab_size"], hidden_size=m["hidden_size"],
        num_layers=m["num_hidden_layers"], num_attention_heads=m["num_attention_heads"],
        inner_dim=m["intermediate_size"], inner_activation=tf_utils.get_activation("gelu"),
        max_sequence_length=512, type_vocab_size=2)
    next_sentence = layers.ClassificationHead(
        inner_dim=m["hidden_size"], num_classes=2, dropout_rate=0.1, name="next_sentence")
    net = models.BertPretrainerV2(
        encoder_network=encoder, classification_heads=[next_sentence],
        mlm_initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02))
    optimizer = legacy_adamw.AdamWeightDecay(
        1e-4, epsilon=1e-6, weight_decay_rate=0.01, gradient_clip_norm=1.0,
        exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"])
    b = {k: tf.constant(v) for k, v in
         random_batch(np, seq, BATCH[seq], MAX_PREDICTIONS[seq], m["vocab_size"]).items()}
    features = {"input_word_ids": b["input_ids"], "input_mask": b["input_mask"],
                "input_type_ids": b["segment_ids"], "masked_lm_positions": b["masked_lm_positions"]}

    @tf.function(jit_compile=jit)
    def train_step():
        with tf.GradientTape() as tape:  # official.nlp.tasks.masked_lm's loss
            outputs = net(features, training=True)
            lm_losses = tf_keras.losses.sparse_categorical_crossentropy(
                b["masked_lm_ids"], tf.cast(outputs["mlm_logits"], tf.float32), from_logits=True)
            weights = b["masked_lm_weights"]
            mlm_loss = tf.math.divide_no_nan(tf.reduce_sum(lm_losses * weights),
                                             tf.reduce_sum(weights))
            nsp_loss = tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
                b["next_sentence_labels"], tf.cast(outputs["next_sentence"], tf.float32),
                from_logits=True))
            loss = mlm_loss + nsp_loss
        grads = tape.gradient(loss, net.trainable_variables)
        optimizer.apply_gradients(zip(grads, net.trainable_variables))
        return loss

    return time_steps(lambda: float(train_step()), steps, warmup)


def measure_input_pipeline(seq, batch=32, records=4096):
    """records/s of bert_tf.data.input_pipeline (shuffled training order) over one TFRecord file."""
    import numpy as np
    import tensorflow as tf

    from bert_tf.data import input_pipeline
    from bert_tf.tasks.pretraining.task import pretraining_feature_spec

    predictions = MAX_PREDICTIONS[seq]
    b = random_batch(np, seq, 1, predictions, 30522)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "records.tfrecord")
        feature = {k: (tf.train.Feature(float_list=tf.train.FloatList(value=v.reshape(-1)))
                       if v.dtype == np.float32 else
                       tf.train.Feature(int64_list=tf.train.Int64List(value=v.reshape(-1))))
                   for k, v in b.items()}
        record = tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
        with tf.io.TFRecordWriter(path) as writer:
            for _ in range(records):
                writer.write(record)
        d = input_pipeline.tfrecord_dataset([path], pretraining_feature_spec(seq, predictions),
                                            batch, shuffle=True)
        n = records // batch
        for _ in d.take(5):
            pass
        start = time.perf_counter()
        for _ in d.take(n):
            pass
        return n * batch / (time.perf_counter() - start)


PEERS = {"ours": measure_ours, "keras_hub": measure_keras_hub,
         "transformers": measure_transformers, "model_garden": measure_model_garden}


def child(args):
    """Runs one measurement; prints one JSON line."""
    spec = json.loads(args.child)
    if spec["peer"] == "peak":
        return harness.answer({"fp32": matmul_peak("float32"), "bf16": matmul_peak("bfloat16")})
    if spec["peer"] == "input_pipeline":
        return harness.answer({"records_per_s": measure_input_pipeline(spec["seq"])})
    times = PEERS[spec["peer"]](spec["model"], spec["seq"], spec["precision"], spec["jit"],
                                args.steps, args.warmup)
    harness.answer({"step_s": statistics.median(times)})


def run_child(spec, args):
    venv = harness.MODEL_GARDEN if spec["peer"] == "model_garden" else None
    return harness.run_child(harness.child_command(__spec__.name, spec, f"--steps={args.steps}",
                                                   f"--warmup={args.warmup}", venv=venv), spec)


def variants(peers, precisions, xla):
    modes = {"off": (False,), "on": (True,), "both": (False, True)}[xla]
    for precision in precisions:
        for peer in peers:
            for jit in ((False,) if peer == "transformers" else modes):
                yield peer, precision, jit


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="small,base")
    parser.add_argument("--seqs", default="128,512")
    parser.add_argument("--precisions", default="fp32,bf16")
    harness.add_peers(parser, list(PEERS))
    harness.add_rounds(parser, 1)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per measurement")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--xla", default="both", choices=["off", "on", "both"],
                        help="jit_compile for the TF peers (XLA is slower on this CPU)")
    parser.add_argument("--peak_gflops", type=float,
                        help="fp32 peak to use for MFU instead of the measured one")
    harness.add_child(parser)
    args = parser.parse_args()
    if args.child:
        return child(args)

    peak = run_child({"peer": "peak"}, args)
    print(f"fp32 matmul peak measured: {peak['fp32'] / 1e9:.0f} GFLOP/s "
          f"(bf16 matmul: {peak['bf16'] / 1e9:.0f} GFLOP/s)", flush=True)
    if args.peak_gflops:
        peak["fp32"] = args.peak_gflops * 1e9
        print(f"MFU below is against --peak_gflops={args.peak_gflops:.0f}")
    peers = harness.peers(parser, args.peers, list(PEERS),
                          venvs={"model_garden": harness.MODEL_GARDEN})
    precisions = args.precisions.split(",")
    for model in args.models.split(","):
        for seq in (int(s) for s in args.seqs.split(",")):
            pipeline = run_child({"peer": "input_pipeline", "seq": seq}, args)
            flops = train_flops(model, seq, BATCH[seq], MAX_PREDICTIONS[seq])
            print(f"\n== {model} seq {seq} batch {BATCH[seq]} ({flops / 1e9:.0f} GFLOP per train "
                  f"step); input pipeline alone: {pipeline['records_per_s']:.0f} records/s",
                  flush=True)

            def measure(variant, round_index):
                peer, precision, jit = variant
                out = run_child({"peer": peer, "model": model, "seq": seq,
                                 "precision": precision, "jit": jit}, args)
                return out and out["step_s"]

            results = harness.interleave(
                args.rounds, list(variants(peers, precisions, args.xla)), measure)
            print_table(results, seq, flops, peak["fp32"])


def print_table(results, seq, flops, peak_fp32):
    """One row per variant (median step over rounds); ratios against the fastest other peer.

    "vs best peer fp32" divides the fastest fp32 step of any peer but ours by the row's step (the
    fp32 goal reads off ours' fp32 rows); "vs best peer bf16" does the same against the fastest
    bf16 step of the peers, on bf16 rows only (the bf16 goal reads off ours' bf16 rows).
    """
    steps = harness.medians(results)
    fastest = {}
    for (peer, precision, _), step in steps.items():
        if peer != "ours":
            fastest[precision] = min(fastest.get(precision, step), step)
    print(f"{'peer':<13}{'prec':<6}{'xla':<5}{'step s':>8}{'seq/s':>8}{'MFU':>7}"
          f"{'vs best peer fp32':>19}{'vs best peer bf16':>19}")
    def order(item):  # fp32 rows first, then bf16
        return item[0][1] != "fp32", item[0]

    for (peer, precision, jit), step in sorted(steps.items(), key=order):
        vs_fp32 = harness.ratio(fastest.get("fp32"), step)
        vs_bf16 = harness.ratio(fastest.get("bf16") if precision == "bf16" else None, step,
                                missing="")
        print(f"{peer:<13}{precision:<6}{'on' if jit else 'off':<5}{step:>8.3f}"
              f"{BATCH[seq] / step:>8.2f}{flops / step / peak_fp32:>7.1%}{vs_fp32:>19}{vs_bf16:>19}",
              flush=True)

if __name__ == "__main__":
    main()
