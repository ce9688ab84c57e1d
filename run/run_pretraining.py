"""Masked-LM / next-sentence pretraining of BERT: the original's run_pretraining on TF2.

    python -m run.run_pretraining --bert_config_file=bert_config.json \
        --input_file='records/*.tfrecord' --output_dir=model --do_train --do_eval \
        [--init_checkpoint=...] [--distribution_strategy=mirrored --num_gpus=8] \
        [--mixed_precision=bfloat16] [--jit_compile]

Same flags, defaults, loss, optimizer, eval metrics and eval_results.txt as the original
(google-research/bert run_pretraining.py), plus tf.distribute strategies, mixed precision, XLA,
LAMB, gradient accumulation, resumable checkpoints and progress/TensorBoard output.

Training resumes from the latest checkpoint in --output_dir when there is one (rerun the same
command after a crash), also from one written by the original's run_pretraining: its weights,
Adam moments and global_step are loaded, so a run moved from the original continues where it
stopped (same learning-rate schedule) and writes our checkpoints from then on (adamw only).

--do_eval evaluates the model just trained, or else the latest checkpoint in --output_dir (ours,
or one written by the original's run_pretraining), or else --init_checkpoint, on the first
max_eval_steps * eval_batch_size records of --input_file in file order, and writes
output_dir/eval_results.txt.
"""
import os
import sys

from absl import flags

from bert_tf.cli import expand_globs, run_main
from bert_tf.errors import InputError, flag_error

FLAGS = flags.FLAGS

# ---- The original's flags (names, defaults and help as google-research/bert).
flags.DEFINE_string("bert_config_file", None,
                    "The config json file corresponding to the pre-trained BERT model. "
                    "This specifies the model architecture.")
flags.DEFINE_string("input_file", None,
                    "Input TF example files (can be a glob or comma separated).")
flags.DEFINE_string("output_dir", None,
                    "The output directory where the model checkpoints will be written.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial checkpoint (usually from a pre-trained BERT model): an original TF1 "
                    "checkpoint, one of ours, or a Hugging Face model directory.")
flags.DEFINE_integer("max_seq_length", 128,
                     "The maximum total input sequence length after WordPiece tokenization. "
                     "Must match data generation.")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence. "
                     "Must match data generation.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_integer("iterations_per_loop", 1000,
                     "How many steps to make in each call of the compiled training loop "
                     "(the original: in each estimator call).")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
flags.DEFINE_bool("use_tpu", False, "Whether to use TPU or GPU/CPU (implies "
                  "--distribution_strategy=tpu).")
flags.DEFINE_string("tpu_name", None,
                    "The Cloud TPU to use for training. This should be either the name used when "
                    "creating the Cloud TPU, or a grpc://ip.address.of.tpu:8470 url.")
flags.DEFINE_string("tpu_zone", None, "[Optional] GCE zone where the Cloud TPU is located in.")
flags.DEFINE_string("gcp_project", None,
                    "[Optional] Project name for the Cloud TPU-enabled project.")
flags.DEFINE_string("master", None, "[Optional] TensorFlow master URL.")
flags.DEFINE_integer("num_tpu_cores", 8,
                     "Only used if `use_tpu` is True. Total number of TPU cores to use "
                     "(checked against the TPU found).")

# ---- New flags.
flags.DEFINE_enum("distribution_strategy", "one_device",
                  ["one_device", "mirrored", "multi_worker_mirrored", "tpu"],
                  "tf.distribute strategy. mirrored: all --num_gpus GPUs of this machine (or "
                  "--num_cpu_devices logical CPUs); multi_worker_mirrored: several machines, each "
                  "run with its TF_CONFIG; tpu: see the TPU flags.")
flags.DEFINE_integer("num_gpus", 0, "GPUs to use (one_device: GPU 0 if > 0; mirrored: this many).")
flags.DEFINE_integer("num_cpu_devices", 1,
                     "mirrored without GPUs: split the CPU into this many logical devices "
                     "(for testing data parallelism on one machine).")
flags.DEFINE_enum("mixed_precision", "off", ["off", "bfloat16", "float16"],
                  "Compute in bfloat16 or float16 with float32 weights; float16 uses dynamic "
                  "loss scaling.")
flags.DEFINE_bool("jit_compile", False, "Compile the forward/backward pass with XLA.")
flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"],
                  "adamw: the original's AdamWeightDecay; lamb: LAMB for large batches "
                  "(same weight-decay exclusions).")
flags.DEFINE_float("weight_decay_rate", 0.01,
                   "Decoupled weight decay (not applied to LayerNorm and bias variables).")
flags.DEFINE_integer("gradient_accumulation_steps", 1,
                     "Split each train batch into this many micro-batches and accumulate their "
                     "gradients (same update, less memory).")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Keep this many most recent checkpoints.")
flags.DEFINE_integer("log_steps", 100,
                     "Write TensorBoard summaries and a progress line every this many steps.")
flags.DEFINE_integer("shuffle_buffer_size", 100, "Records in the training shuffle buffer "
                     "(the original: 100).")
flags.DEFINE_integer("seed", None, "Seed for weight initialisation and input shuffling "
                     "(default: different every run, as the original).")
flags.DEFINE_bool("deterministic_input", False,
                  "Train on the records in file order (repeated) instead of shuffled: the "
                  "same batches under every strategy; for reproducing runs.")


def validate_flags(bert_config):
    if not FLAGS.do_train and not FLAGS.do_eval:
        raise InputError("at least one of --do_train or --do_eval must be set")
    if FLAGS.max_seq_length > bert_config.max_position_embeddings:
        raise flag_error("max_seq_length",
                         f"{FLAGS.max_seq_length} is longer than the model's "
                         f"max_position_embeddings {bert_config.max_position_embeddings}")
    for name in ("train_batch_size", "eval_batch_size", "num_train_steps", "iterations_per_loop",
                 "max_eval_steps", "max_seq_length", "max_predictions_per_seq",
                 "gradient_accumulation_steps", "keep_checkpoint_max"):
        if getattr(FLAGS, name) <= 0:
            raise flag_error(name, "must be positive")
    if FLAGS.num_warmup_steps < 0:
        raise flag_error("num_warmup_steps", "must be >= 0")
    if FLAGS.train_batch_size % FLAGS.gradient_accumulation_steps:
        raise flag_error("gradient_accumulation_steps",
                         f"must divide --train_batch_size={FLAGS.train_batch_size}")


def load_bert_config():
    from bert_tf.config import BertConfig
    if not os.path.exists(FLAGS.bert_config_file):
        raise flag_error("bert_config_file", f"{FLAGS.bert_config_file} does not exist")
    return BertConfig.from_json_file(FLAGS.bert_config_file)


def load_init_checkpoint(model, path, log):
    from bert_tf.checkpoints import load_checkpoint
    report = load_checkpoint(model, path)
    log(f"initialised from {path}: {report}")


def build_strategy():
    from bert_tf import distribution
    name = distribution.strategy_name(FLAGS.distribution_strategy, FLAGS.use_tpu)
    tpu_kwargs = distribution.tpu_resolver_kwargs(FLAGS.tpu_name, FLAGS.tpu_zone,
                                                  FLAGS.gcp_project, FLAGS.master)
    strategy = distribution.create_strategy(name, num_gpus=FLAGS.num_gpus,
                                            num_cpu_devices=FLAGS.num_cpu_devices,
                                            tpu_kwargs=tpu_kwargs)
    replicas = strategy.num_replicas_in_sync
    if name == "tpu" and replicas != FLAGS.num_tpu_cores:
        print(f"note: --num_tpu_cores={FLAGS.num_tpu_cores} but the TPU has {replicas} cores; "
              f"using {replicas}", file=sys.stderr)
    checks = []
    if FLAGS.do_train:
        checks.append(("train_batch_size", FLAGS.train_batch_size,
                       replicas * FLAGS.gradient_accumulation_steps))
    if FLAGS.do_eval:
        checks.append(("eval_batch_size", FLAGS.eval_batch_size, replicas))
    for flag, size, per_step in checks:
        if size % per_step:
            raise flag_error(flag, f"{size} is not divisible by {per_step} (replicas"
                                   + (" x gradient_accumulation_steps)" if per_step != replicas
                                      else ")"))
    return name, strategy


def main(argv):
    del argv
    import keras
    import tensorflow as tf
    from absl import logging

    logging.set_verbosity(logging.WARNING)  # TF's INFO chatter would bury the progress lines

    from bert_tf import input_pipeline, optimization, training
    from bert_tf.checkpoints import is_original_checkpoint, original_variable_map
    from bert_tf.distribution import is_chief
    from bert_tf.io_utils import atomic_open
    from bert_tf.models import BertPretrainer
    from bert_tf.pretraining import PretrainingTask, format_eval_results
    from bert_tf.pretraining_data import pretraining_feature_spec

    for name in ("bert_config_file", "input_file", "output_dir"):
        if not getattr(FLAGS, name):
            raise flag_error(name, "is required")
    bert_config = load_bert_config()
    validate_flags(bert_config)
    input_files = expand_globs(FLAGS.input_file, "input_file")
    tf.io.gfile.makedirs(FLAGS.output_dir)
    latest = tf.train.latest_checkpoint(FLAGS.output_dir)
    original_latest = latest if latest and is_original_checkpoint(latest) else None
    if FLAGS.do_train and original_latest and FLAGS.optimizer != "adamw":
        raise flag_error("optimizer", f"{FLAGS.optimizer}: --output_dir holds a checkpoint of the "
                                      f"original run_pretraining ({original_latest}), which "
                                      f"trains with adamw; continue it with --optimizer=adamw, or "
                                      f"pass it as --init_checkpoint with a new --output_dir")

    def log(message):
        print(message, file=sys.stderr, flush=True)

    log(f"*** {len(input_files)} input files: {', '.join(input_files[:5])}"
        + (" ..." if len(input_files) > 5 else ""))
    # The strategy first: Mirrored on logical CPUs must split the CPU before TF runs any op.
    strategy_kind, strategy = build_strategy()
    input_pipeline.check_first_record(
        input_files[0], pretraining_feature_spec(FLAGS.max_seq_length,
                                                 FLAGS.max_predictions_per_seq),
        hint=f" (do --max_seq_length={FLAGS.max_seq_length} and --max_predictions_per_seq="
             f"{FLAGS.max_predictions_per_seq} match the data?)")
    chief = is_chief(strategy)
    if FLAGS.seed is not None:
        keras.utils.set_random_seed(FLAGS.seed)
    training.set_mixed_precision(FLAGS.mixed_precision)
    task = PretrainingTask()
    with strategy.scope():
        model = BertPretrainer(bert_config)
        # Weight-decay exclusions match the original names (bert/encoder/.../LayerNorm/gamma).
        original_names = {}
        for part in original_variable_map(model):
            original_names.setdefault(id(part.variable), part.name)
        optimizer = training.wrap_optimizer(
            optimization.create_optimizer(
                FLAGS.learning_rate, FLAGS.num_train_steps, FLAGS.num_warmup_steps,
                FLAGS.optimizer, weight_decay_rate=FLAGS.weight_decay_rate,
                variable_name_fn=lambda v: original_names.get(id(v), v.path)),
            FLAGS.mixed_precision)
    log(f"*** strategy {strategy_kind} with {strategy.num_replicas_in_sync} replica(s); "
        f"mixed_precision={FLAGS.mixed_precision} jit_compile={FLAGS.jit_compile} "
        f"optimizer={FLAGS.optimizer}")

    def init_fn():
        if FLAGS.init_checkpoint:
            load_init_checkpoint(model, FLAGS.init_checkpoint, log)

    if FLAGS.do_train:
        config = training.TrainConfig(
            model_dir=FLAGS.output_dir, num_train_steps=FLAGS.num_train_steps,
            global_batch_size=FLAGS.train_batch_size,
            iterations_per_loop=FLAGS.iterations_per_loop,
            save_checkpoints_steps=FLAGS.save_checkpoints_steps,
            keep_checkpoint_max=FLAGS.keep_checkpoint_max, log_steps=FLAGS.log_steps,
            gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
            jit_compile=FLAGS.jit_compile)
        train_data = input_pipeline.pretraining_dataset_fn(
            input_files, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
            FLAGS.train_batch_size, shuffle=not FLAGS.deterministic_input, seed=FLAGS.seed,
            shuffle_buffer_size=FLAGS.shuffle_buffer_size)
        log(f"***** Running training *****  batch size {FLAGS.train_batch_size}, "
            f"{FLAGS.num_train_steps} steps")
        try:
            training.train(strategy, model, optimizer, task, train_data, config, init_fn=init_fn,
                           log=log)
        except training.NonFiniteLossError as e:
            raise InputError(f"training diverged: {e}") from None

    if FLAGS.do_eval:
        if FLAGS.do_train:
            step = training.global_step(optimizer)
        elif original_latest:
            load_init_checkpoint(model, original_latest, log)
            reader = tf.train.load_checkpoint(original_latest)
            step = int(reader.get_tensor("global_step")) if reader.has_tensor("global_step") else 0
        elif latest:
            checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
            checkpoint.restore(latest).expect_partial()
            log(f"evaluating {latest}")
            step = training.global_step(optimizer)
        else:
            log(f"no checkpoint in {FLAGS.output_dir}: evaluating the initial model")
            init_fn()
            step = 0
        eval_data = input_pipeline.pretraining_dataset_fn(
            input_files, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
            FLAGS.eval_batch_size, shuffle=False)
        log(f"***** Running evaluation *****  batch size {FLAGS.eval_batch_size}, "
            f"{FLAGS.max_eval_steps} steps")
        step_sums = training.evaluate(strategy, model, task, eval_data, FLAGS.max_eval_steps)
        results = task.eval_results(step_sums, step)
        text = format_eval_results(results)
        if chief:
            with atomic_open(os.path.join(FLAGS.output_dir, "eval_results.txt")) as f:
                f.write(text)
            writer = tf.summary.create_file_writer(os.path.join(FLAGS.output_dir, "eval"))
            with writer.as_default():
                for key, value in results.items():
                    if key != "global_step":
                        training.write_scalar(key, value, step)
            writer.close()
        print("***** Eval results *****\n" + text, end="")


def console_main():
    run_main(main)


if __name__ == "__main__":
    console_main()
