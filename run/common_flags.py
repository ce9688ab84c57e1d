"""The flags every training command line shares, defined once, and their RunSettings.

The original's flags (names, defaults and help as google-research/bert's run_pretraining.py,
run_classifier.py and run_squad.py) plus ours: strategy, precision, XLA, optimizer, checkpoints.
A command line calls `define_run_flags(...)` with its own defaults for the few that differ
(batch sizes, learning rate), defines its task's flags, and passes `run_settings()` with its task
to `bert_tf.training.runner.run`.

Every command line imports this module before its flags are parsed, so it imports at the top
only absl and what `bert_tf.cli` has loaded already; the library is imported by the functions
that use it, after the flags are parsed (--help and flag errors without TensorFlow's start-up).
"""
import dataclasses
import os
import sys

from absl import flags

from bert_tf.errors import flag_error

FLAGS = flags.FLAGS


def define_run_flags(train_batch_size=32, eval_batch_size=8, predict_batch_size=None,
                     learning_rate=5e-5, fine_tuning=False):
    """Defines the shared flags. `fine_tuning`: also the flags of the original's fine-tuning
    command lines (run_classifier, run_squad): --do_predict, --vocab_file, --do_lower_case,
    --num_train_epochs, --warmup_proportion, and our --bucket_by_length and best checkpoint
    and early stopping flags."""
    define_model_file_flags(vocabulary=fine_tuning)
    flags.DEFINE_string("output_dir", None,
                        "The output directory where the model checkpoints will be written.")
    flags.DEFINE_bool("do_train", False, "Whether to run training.")
    flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
    if fine_tuning:
        flags.DEFINE_bool("do_predict", False, "Whether to run the model in inference mode on "
                                               "the test set.")
        flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
        flags.DEFINE_float("warmup_proportion", 0.1,
                           "Proportion of training to perform linear learning rate warmup for. "
                           "E.g., 0.1 = 10% of training.")
        flags.DEFINE_bool("keep_best_checkpoint", False,
                          "With --eval_during_training: keep the checkpoint of the best dev "
                          "value of --best_metric in output_dir/best beside the latest ones; "
                          "the final eval, predict and --export_dir use it, and "
                          "eval_results.txt names its step (best_step).")
        flags.DEFINE_string("best_metric", None,
                            "The eval_results.txt key that chooses the best checkpoint and "
                            "early stopping (default: the task's main metric: accuracy, "
                            "MRPC/QQP F1, CoLA MCC, STS-B Pearson, NER entity F1). Keys ending "
                            "in 'loss' are lower-is-better, all others higher.")
        flags.DEFINE_integer("early_stopping_patience", 0,
                             "With --eval_during_training: stop training after this many "
                             "evaluations in a row without improvement of --best_metric "
                             "(0: never).")
        flags.DEFINE_float("early_stopping_threshold", 0.0,
                           "--early_stopping_patience: an evaluation improves only if it beats "
                           "the best so far by more than this.")
        flags.DEFINE_bool("bucket_by_length", False,
                          "Do not pad every batch to max_seq_length: training batches group "
                          "examples of similar length and every batch is cut to its longest "
                          "example. Same results up to float rounding, faster; not on TPU (one "
                          "static shape there).")
    flags.DEFINE_integer("train_batch_size", train_batch_size, "Total batch size for training.")
    flags.DEFINE_integer("shuffle_buffer_size", 100,
                         "Records in the training shuffle buffer. The original's 100 keeps "
                         "each record near its place in the files; the number of training "
                         "records or more mixes the whole set.")
    flags.DEFINE_integer("eval_batch_size", eval_batch_size, "Total batch size for eval.")
    if predict_batch_size is not None:
        flags.DEFINE_integer("predict_batch_size", predict_batch_size,
                             "Total batch size for predict.")
    flags.DEFINE_float("learning_rate", learning_rate, "The initial learning rate for Adam.")
    flags.DEFINE_integer("save_checkpoints_steps", 1000,
                         "How often to save the model checkpoint.")
    flags.DEFINE_integer("iterations_per_loop", 1000,
                         "How many steps to make in each call of the compiled training loop "
                         "(the original: in each estimator call).")
    flags.DEFINE_bool("use_tpu", False, "Whether to use TPU or GPU/CPU (implies "
                      "--distribution_strategy=tpu).")
    flags.DEFINE_string("tpu_name", None,
                        "The Cloud TPU to use for training. This should be either the name used "
                        "when creating the Cloud TPU, or a grpc://ip.address.of.tpu:8470 url.")
    flags.DEFINE_string("tpu_zone", None,
                        "[Optional] GCE zone where the Cloud TPU is located in.")
    flags.DEFINE_string("gcp_project", None,
                        "[Optional] Project name for the Cloud TPU-enabled project.")
    flags.DEFINE_string("master", None, "[Optional] TensorFlow master URL.")
    flags.DEFINE_integer("num_tpu_cores", 8,
                         "Only used if `use_tpu` is True. Total number of TPU cores to use "
                         "(checked against the TPU found).")

    # ---- Ours.
    flags.DEFINE_enum("distribution_strategy", "one_device",
                      ["one_device", "mirrored", "multi_worker_mirrored", "tpu"],
                      "tf.distribute strategy. mirrored: all --num_gpus GPUs of this machine (or "
                      "--num_cpu_devices logical CPUs); multi_worker_mirrored: several machines, "
                      "each run with its TF_CONFIG; tpu: see the TPU flags.")
    flags.DEFINE_integer("num_gpus", 0,
                         "GPUs to use (one_device: GPU 0 if > 0; mirrored: this many).")
    flags.DEFINE_integer("num_cpu_devices", 1,
                         "mirrored without GPUs: split the CPU into this many logical devices "
                         "(for testing data parallelism on one machine).")
    flags.DEFINE_enum("mixed_precision", "off", ["off", "bfloat16", "float16"],
                      "Compute in bfloat16 or float16 with float32 weights. float16 (GPUs "
                      "without bfloat16, e.g. a T4; not on TPU) uses dynamic loss scaling: a "
                      "step whose gradients are not finite is skipped, not counted in "
                      "num_train_steps, and halves the scale (docs/run_pretraining.md).")
    flags.DEFINE_float("initial_loss_scale", 2.0 ** 15,
                       "--mixed_precision=float16: the loss scale to start from (>= 1).")
    flags.DEFINE_integer("loss_scale_growth_steps", 2000,
                         "--mixed_precision=float16: double the loss scale after this many "
                         "finite steps in a row.")
    flags.DEFINE_bool("recompute_layers", False,
                      "Recompute each transformer layer's activations in the backward pass "
                      "instead of keeping them (gradient checkpointing): much less memory for "
                      "long sequences, about a third more compute per step; same gradients.")
    flags.DEFINE_bool("jit_compile", False, "Compile the forward/backward pass with XLA.")
    flags.DEFINE_enum("cpu_kernels", None, ["auto", "on", "off"],
                      "The CPU-tuned kernels of bert_tf/model/cpu_kernels.py (fused GELU, "
                      "LayerNorm and dropout gradients; same results either way). auto: on unless a GPU is "
                      "visible or the strategy is tpu. Default: $BERT_TF_CPU_KERNELS, else auto.")
    flags.DEFINE_enum("optimizer", "adamw", ["adamw", "adam", "lamb"],
                      "adamw: the original's AdamWeightDecay (no bias correction); adam: Adam "
                      "with bias correction and decoupled weight decay (AdamW as in PyTorch); "
                      "lamb: LAMB for large batches. All three: the same weight-decay "
                      "exclusions (LayerNorm, bias) and global-norm clipping 1.0.")
    flags.DEFINE_float("weight_decay_rate", 0.01,
                       "Decoupled weight decay (not applied to LayerNorm and bias variables).")
    flags.DEFINE_integer("gradient_accumulation_steps", 1,
                         "Split each train batch into this many micro-batches and accumulate "
                         "their gradients (same update, less memory).")
    flags.DEFINE_integer("keep_checkpoint_max", 5, "Keep this many most recent checkpoints.")
    flags.DEFINE_integer("log_steps", 100,
                         "Write TensorBoard summaries and a progress line every this many steps.")
    flags.DEFINE_integer("seed", None, "Seed for weight initialisation and input shuffling "
                         "(default: different every run, as the original).")
    flags.DEFINE_bool("eval_during_training", False,
                      "With --do_train and --do_eval: also evaluate after every checkpoint "
                      "(TensorBoard: output_dir/eval).")
    flags.DEFINE_bool("save_original_checkpoint", False,
                      "After training, also write the weights as a TF1 checkpoint in the original "
                      "release's variable names to output_dir/original_format/model.ckpt-<step>.")
    flags.DEFINE_string("export_dir", None,
                        "Also save the model as a SavedModel here: serving_default on token ids, "
                        "and serve_text / serve_text_pair on raw strings (see docs/export.md). "
                        "A new or empty folder, or an earlier bert_tf export (replaced); never "
                        "the output or checkpoint folder.")


def define_model_file_flags(init_checkpoint_help=None, vocabulary=True):
    """--init_checkpoint, --bert_config_file and (`vocabulary`) --vocab_file and
    --do_lower_case: the model a command line reads, every one's defaults taken from a model
    directory (`bert_tf.api.resolve_model_files`)."""
    flags.DEFINE_string("init_checkpoint", None, init_checkpoint_help or (
        "Initial checkpoint (usually from a pre-trained BERT model): an original TF1 "
        "checkpoint, one of ours, or a model directory: a Hugging Face directory, a checkpoint "
        "with bert_config.json and vocab.txt beside it (Google's released models), a training "
        "run's output_dir."))
    flags.DEFINE_string("bert_config_file", None,
                        "The config json file corresponding to the pre-trained BERT model. "
                        "This specifies the model architecture (default for a model directory "
                        "as --init_checkpoint: its bert_config.json or config.json).")
    if vocabulary:
        flags.DEFINE_string("vocab_file", None,
                            "The vocabulary file that the BERT model was trained on (default for "
                            "a model directory as --init_checkpoint: its vocab.txt).")
        flags.DEFINE_bool("do_lower_case", True,
                          "Whether to lower case the input text. Should be True for uncased "
                          "models and False for cased models (default for a model directory "
                          "that records it: its casing).")


def define_split_file_flags(train=None, dev=None, test=None, scope="", task_defaults=""):
    """--train_file, --dev_file, --test_file: the splits' file names in --data_dir. A default
    of None leaves the name to the task's reader, whose defaults `task_defaults` says (with
    "{split}" for train, dev and test). `scope`: the help's prefix (what they are for)."""
    for split, default, what in (("train", train, "Training"), ("dev", dev, "Dev (eval)"),
                                 ("test", test, "Test (predict)")):
        flags.DEFINE_string(f"{split}_file", default,
                            f"{scope}{what} file name in --data_dir" + (
                                "" if default else
                                f" (default: {task_defaults.format(split=split)})") + ".")


def define_delimiter_flag():
    """--delimiter of a task read from the user's TSV or CSV files (bert_tf.data.tsv)."""
    flags.DEFINE_enum("delimiter", None, ["tab", "comma"],
                      "tsv: tab-separated (read as the original reads TSV: quotes are plain "
                      "characters) or comma-separated (CSV quoting). Default: tab.")


def define_pooling_flags(pooling_help):
    """--pooling and --normalize_embeddings: one embedding per text (bert_tf.model.pooling)."""
    flags.DEFINE_enum("pooling", None, ["cls", "mean", "max"], pooling_help)
    flags.DEFINE_bool("normalize_embeddings", False,
                      "With --pooling: divide each embedding by its L2 norm. Default for a "
                      "sentence-transformers directory: whether its modules.json has a "
                      "Normalize module.")


def check_pooling_flags():
    """--normalize_embeddings without --pooling is an error (no TensorFlow: before any work)."""
    if FLAGS.pooling is None and FLAGS["normalize_embeddings"].present:
        raise flag_error("normalize_embeddings", "only with --pooling")


def embedding_options():
    """(normalize, max_seq_length) of the pooling flags: those given, else what a
    sentence-transformers directory as --init_checkpoint declares (`embedding_options`);
    without --pooling, (False, --max_seq_length). `check_pooling_flags` comes first."""
    if FLAGS.pooling is None:
        return False, FLAGS.max_seq_length
    from bert_tf.model.pooling import embedding_options as declared
    return declared(FLAGS.init_checkpoint,
                    FLAGS.normalize_embeddings if FLAGS["normalize_embeddings"].present else None,
                    FLAGS.max_seq_length if FLAGS["max_seq_length"].present else None)


def check_required(*names):
    for name in names:
        if not getattr(FLAGS, name):
            raise flag_error(name, "is required")


def check_max_seq_length(bert_config, value=None):
    """--max_seq_length (or `value`, the length a command line took for it) must fit [CLS] + a
    token + [SEP] and the model's positions (bert_tf.text.windows.check_max_seq_length)."""
    from bert_tf.text.windows import check_max_seq_length as check
    check(FLAGS.max_seq_length if value is None else value, bert_config.max_position_embeddings)


def fine_tuning_model_files(task):
    """The ModelFiles (bert_tf.api) of a fine-tuning command line of `task` (a registry
    name), after the checks they all make before reading any data
    (bert_tf.training.fine_tuning.check_model_files), with --max_seq_length defaulting to what
    the model directory records of a run of `task`."""
    from bert_tf.api import resolve_model_files
    from bert_tf.training import fine_tuning

    files = resolve_model_files(FLAGS.init_checkpoint, FLAGS.bert_config_file, FLAGS.vocab_file,
                                FLAGS.do_lower_case, FLAGS["do_lower_case"].present,
                                output_dir=FLAGS.output_dir)
    flags_from_model(files, task, {"max_seq_length": "max_seq_length"})
    fine_tuning.check_model_files(files, run_settings(), FLAGS.max_seq_length)
    return files


def read_splits(processor):
    """The examples of the splits the --do_ flags ask for, from --data_dir's files
    (bert_tf.tasks.preprocessor.read_splits: each read and checked before any record)."""
    from bert_tf.tasks.preprocessor import read_splits as read
    modes = [mode for mode in ("train", "eval", "predict") if FLAGS[f"do_{mode}"].value]
    return read(processor, FLAGS.data_dir, modes)


def _trains():
    """Whether this command line trains: then it may give a model directory's model other
    labels (intermediate-task fine-tuning, MNLI then RTE), which its new record holds."""
    return "do_train" in FLAGS and FLAGS.do_train


def flags_from_model(files, task, options, agree=()):
    """Flags that default to what the model directory of `files` records of a run of `task`
    (bert_tf.model.directory): `options` maps each flag to its recorded key. A flag not given
    takes the recorded value; a given flag of `agree` (what gives the outputs their meaning:
    the labels) must equal it in a run that does not train: otherwise an error naming the
    flag."""
    from bert_tf.model import directory

    record = files.task_record(task)
    taken = []
    for flag, key in options.items():
        if key not in record:
            continue
        if not FLAGS[flag].present:
            setattr(FLAGS, flag, record[key])
            taken.append(f"--{flag}={directory.format_value(record[key])}")
        elif (flag in agree and not _trains()
              and directory.differs(FLAGS[flag].value, record[key])):
            raise directory.disagreement(flag, FLAGS[flag].value, files.folder, key, record[key])
    if taken:  # said, so that an error about them (a label of new data) is understood
        print(f"*** from {os.path.join(files.folder, directory.RECORD_FILE)}: {' '.join(taken)}",
              file=sys.stderr, flush=True)


def check_recorded(files, task, key, value, flag):
    """In a run that does not train, `value` (what the command line took for `key` from
    `flag`: a named task's labels) must be what the model directory records of a run of
    `task`: otherwise an error naming `flag`."""
    from bert_tf.model import directory

    record = files.task_record(task)
    if not _trains() and key in record and directory.differs(value, record[key]):
        raise directory.disagreement(flag, value, files.folder, key, record[key],
                                     given_by_argument=False)


def check_settings():
    """The run's settings before the library is imported (RunSettings.validate, TensorFlow-free:
    values, something to do, an output_dir that can be one): such errors come without
    TensorFlow's start-up. `start_strategy` checks them again, with the export folder."""
    run_settings().validate(steps_known=False)


def start_strategy():
    """Checks the run's settings and builds the strategy before any work
    (bert_tf.training.fine_tuning.start)."""
    from bert_tf.cli import quiet_float16_fallback_notice
    from bert_tf.training import fine_tuning
    settings = run_settings()
    fine_tuning.start(settings, FLAGS.export_dir)
    if settings.mixed_precision == "float16":
        quiet_float16_fallback_notice()


def check_init_checkpoint(build_model):
    """Before the command line writes records: --init_checkpoint fits the model that
    `build_model()` builds (bert_tf.training.runner.check_init_checkpoint)."""
    from bert_tf.training import runner
    runner.check_init_checkpoint(build_model, run_settings())


def preparation_options():
    """The arguments of a task's `prepare_task` (bert_tf.tasks.*) that come from the shared
    flags (bert_tf.training.fine_tuning.preparation_options)."""
    from bert_tf.training import fine_tuning
    return fine_tuning.preparation_options(run_settings(), FLAGS.num_train_epochs,
                                           FLAGS.warmup_proportion,
                                           shuffle_buffer_size=FLAGS.shuffle_buffer_size)


def run_prepared(prepared, files):
    """Runs a task's PreparedTask with the settings of the flags and the vocabulary and casing
    of `files` (bert_tf.training.fine_tuning.run); with --export_dir, then saves its
    SavedModel there."""
    from bert_tf.training import fine_tuning
    return fine_tuning.run(prepared, run_settings(vocab_file=files.vocab_file,
                                                  do_lower_case=files.do_lower_case),
                           FLAGS.export_dir)


# RunSettings fields that a command line sets itself (from its data, or from its own flags)
# rather than from a shared flag of the same name.
SET_BY_THE_COMMAND_LINE = ("num_train_steps", "num_warmup_steps", "vocab_file", "do_lower_case")
# Fields whose flag only some command lines define (elsewhere the field keeps its default).
FLAGS_OF_SOME_COMMAND_LINES = ("do_predict", "predict_batch_size", "max_eval_steps",
                               "keep_best_checkpoint", "best_metric", "early_stopping_patience",
                               "early_stopping_threshold", "dropout_from_step")


def run_settings(num_train_steps=0, num_warmup_steps=0, **overrides):
    """RunSettings from the flags: each field from the flag of its name. A field without its
    flag (a renamed flag or field) is an error here, not a silent default."""
    from bert_tf.training.settings import RunSettings

    values = dict(num_train_steps=num_train_steps, num_warmup_steps=num_warmup_steps)
    for field in dataclasses.fields(RunSettings):
        name = field.name
        if name in overrides or name in SET_BY_THE_COMMAND_LINE:
            continue
        if name in FLAGS:
            values[name] = FLAGS[name].value
        elif name not in FLAGS_OF_SOME_COMMAND_LINES:
            raise KeyError(f"RunSettings.{name} has no --{name} flag: define it in "
                           f"define_run_flags or list it in run/common_flags.py")
    values.update(overrides)
    return RunSettings(**values)
