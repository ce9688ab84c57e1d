"""The one driver of every run_* command line: `run(task, settings)`.

A command line parses its flags into `RunSettings` and a `bert_tf.tasks.base.Task`; `run` then does
what every task needs, the same way for all of them:
- the tf.distribute strategy (one_device, mirrored, multi_worker_mirrored, tpu with the
  original's TPU flags) and the checks that batch sizes divide over its replicas;
- precision (float32, mixed bfloat16 / float16 with loss scaling) and XLA;
- the model (under the strategy's scope) and the optimizer: the original's AdamWeightDecay or
  LAMB, with the weight-decay exclusions matched against the original variable names;
- training (`bert_tf.training.loops.train`): resumes from the latest checkpoint in output_dir, else
  starts from --init_checkpoint; optional eval after every checkpoint; optionally the trained
  weights also as a TF1 checkpoint in the original's names (output_dir/original_format), which
  the original release and tools built on it load;
- the checkpoint that eval and predict use: the model just trained, else the latest checkpoint in
  output_dir (ours, or one the task continues), else --init_checkpoint, which must then hold
  every variable of the model (a task head missing from it would predict at random);
- eval: per-example outputs of every eval record, once, gathered across replicas; the task's
  results written to output_dir/eval_results.txt and to TensorBoard (output_dir/eval);
- predict: the task writes its prediction files;
- export: a SavedModel with the task's serving signatures.
"""
import dataclasses
import os
import sys

from bert_tf.errors import InputError, flag_error
from bert_tf.io_utils import check_writable_dir

# --save_original_checkpoint writes output_dir/<this>/model.ckpt-<step> in the original naming.
ORIGINAL_FORMAT_DIR = "original_format"


@dataclasses.dataclass
class RunSettings:
    """Everything `run` needs besides the task; the command lines' flags of the same names."""
    output_dir: str
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    init_checkpoint: str = None
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    learning_rate: float = 5e-5
    num_train_steps: int = 0
    num_warmup_steps: int = 0
    optimizer: str = "adamw"
    weight_decay_rate: float = 0.01
    max_eval_steps: int = 100  # eval steps for tasks that do not count their records
    iterations_per_loop: int = 1000
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    log_steps: int = 100
    gradient_accumulation_steps: int = 1
    eval_during_training: bool = False
    save_original_checkpoint: bool = False
    distribution_strategy: str = "one_device"
    use_tpu: bool = False
    tpu_name: str = None
    tpu_zone: str = None
    gcp_project: str = None
    master: str = None
    num_tpu_cores: int = 8
    num_gpus: int = 0
    num_cpu_devices: int = 1
    mixed_precision: str = "off"
    jit_compile: bool = False
    cpu_kernels: str = None  # "auto", "on", "off" (bert_tf.model.layers.set_cpu_kernels); None: as set
    seed: int = None
    export_dir: str = None
    vocab_file: str = None  # with export_dir: the raw-string signatures' vocabulary
    do_lower_case: bool = True

    def validate(self, steps_known=True):
        """InputError naming the flag for values no task can run with, and for output paths
        that cannot be written or would replace what is not ours. `steps_known=False`: before
        the command line has counted its data (num_train_steps not set yet)."""
        check_request(self.do_train, self.do_eval, self.do_predict, self.output_dir)
        positive = ["train_batch_size", "eval_batch_size", "predict_batch_size",
                    "iterations_per_loop", "max_eval_steps", "gradient_accumulation_steps",
                    "keep_checkpoint_max", "learning_rate"]
        if self.do_train and steps_known:
            positive.append("num_train_steps")
        for name in positive:
            if getattr(self, name) <= 0:
                raise flag_error(name, "must be positive")
        if self.num_warmup_steps < 0:
            raise flag_error("num_warmup_steps", "must be >= 0")
        if self.train_batch_size % self.gradient_accumulation_steps:
            raise flag_error("gradient_accumulation_steps",
                             f"must divide --train_batch_size={self.train_batch_size}")
        if self.optimizer not in ("adamw", "lamb"):
            raise flag_error("optimizer", f"must be adamw or lamb, got {self.optimizer!r}")
        if self.mixed_precision not in ("off", "bfloat16", "float16"):
            raise flag_error("mixed_precision", "must be off, bfloat16 or float16")
        check_writable_dir(self.output_dir)
        if self.export_dir:
            from bert_tf.serving.export import check_export_dir
            keep = {"output_dir": self.output_dir}
            if self.init_checkpoint:
                keep["init_checkpoint"] = checkpoint_folder(self.init_checkpoint)
            check_export_dir(self.export_dir, keep)


def checkpoint_folder(path):
    """The folder that holds checkpoint `path` (a directory, or a checkpoint prefix's)."""
    path = os.fspath(path)
    return path if os.path.isdir(path) else (os.path.dirname(path) or ".")


def check_request(do_train, do_eval, do_predict, output_dir):
    """Something to do, and an output dir that can be one; command lines call it before they
    read any data, `RunSettings.validate` again for Python callers."""
    if not (do_train or do_eval or do_predict):
        raise flag_error("do_train", "at least one of --do_train, --do_eval or --do_predict "
                                     "must be set")
    if os.path.isfile(output_dir):
        raise flag_error("output_dir", f"{output_dir} is a file, not a directory")


def naming_damaged_records(task, mode):
    """Turns a DataLossError while reading the records of `mode` into an InputError naming the
    damaged file and offset (found by `input_pipeline.find_bad_record`, on the error path only);
    a DataLossError that no input file explains (a damaged checkpoint) propagates unchanged."""
    import contextlib

    import tensorflow as tf

    @contextlib.contextmanager
    def guard():
        try:
            yield
        except tf.errors.DataLossError as e:
            from bert_tf.data.input_pipeline import find_bad_record
            error = find_bad_record(task.record_paths(mode))
            if error is None:
                raise
            raise error from e

    return guard()


def epoch_steps(num_examples, batch_size, num_train_epochs, warmup_proportion,
                what="examples"):
    """(num_train_steps, num_warmup_steps) as the original: int(examples / batch size *
    epochs), warmup_proportion of them; InputError naming the argument that makes no
    training step or cannot be meant."""
    if batch_size <= 0:
        raise flag_error("train_batch_size", f"must be positive, got {batch_size}")
    if not 0 <= warmup_proportion <= 1:
        raise flag_error("warmup_proportion", f"must be in [0, 1], got {warmup_proportion}")
    num_train_steps = int(num_examples / batch_size * num_train_epochs)
    if num_train_steps < 1:
        raise flag_error("num_train_epochs", f"{num_train_epochs} epochs of {num_examples} "
                                             f"{what} at batch size {batch_size} is no training "
                                             f"step")
    return num_train_steps, int(num_train_steps * warmup_proportion)


def log(message):
    print(message, file=sys.stderr, flush=True)


def build_strategy(settings, log=log):
    """(strategy name, strategy) from the settings; checks batch sizes against its replicas.

    Call before TensorFlow runs any op: Mirrored on logical CPUs must split the CPU first.
    """
    from bert_tf.training import distribution
    name = distribution.strategy_name(settings.distribution_strategy, settings.use_tpu)
    tpu_kwargs = distribution.tpu_resolver_kwargs(settings.tpu_name, settings.tpu_zone,
                                                  settings.gcp_project, settings.master)
    strategy = distribution.create_strategy(name, num_gpus=settings.num_gpus,
                                            num_cpu_devices=settings.num_cpu_devices,
                                            tpu_kwargs=tpu_kwargs)
    replicas = strategy.num_replicas_in_sync
    if name == "tpu" and replicas != settings.num_tpu_cores:
        log(f"note: --num_tpu_cores={settings.num_tpu_cores} but the TPU has {replicas} cores; "
            f"using {replicas}")
    checks = []
    if settings.do_train:
        checks.append(("train_batch_size", settings.train_batch_size,
                       replicas * settings.gradient_accumulation_steps))
    if settings.do_eval:
        checks.append(("eval_batch_size", settings.eval_batch_size, replicas))
    if settings.do_predict:
        checks.append(("predict_batch_size", settings.predict_batch_size, replicas))
    for flag, size, per_step in checks:
        if size % per_step:
            raise flag_error(flag, f"{size} is not divisible by {per_step} (replicas"
                                   + (" x gradient_accumulation_steps)" if per_step != replicas
                                      else ")"))
    return name, strategy


def build_optimizer(model, settings):
    """The original's optimizer (or LAMB) with its schedule; weight-decay exclusions (LayerNorm,
    bias) matched against the model's original variable names."""
    from bert_tf.training import optimization, loops
    from bert_tf.model.checkpoints import original_variable_map

    original_names = {}
    for part in original_variable_map(model):
        original_names.setdefault(id(part.variable), part.name)
    optimizer = optimization.create_optimizer(
        settings.learning_rate, max(settings.num_train_steps, 1), settings.num_warmup_steps,
        settings.optimizer, weight_decay_rate=settings.weight_decay_rate,
        variable_name_fn=lambda v: original_names.get(id(v), v.path))
    return loops.wrap_optimizer(optimizer, settings.mixed_precision)


# Why eval/predict refuse an --init_checkpoint that lacks some of the model (a task head).
_INCOMPLETE_FOR_INFERENCE = ": train first (--do_train) or pass a checkpoint that holds them"


def check_init_checkpoint(build_model, settings):
    """Before any work: the init_checkpoint this run will read loads into `build_model()` (a
    throwaway model: every variable's shape must match the config), and holds the whole model
    when eval/predict use it without training. Nothing to check when the run continues the
    latest checkpoint in output_dir instead (it reads no init_checkpoint then)."""
    import tensorflow as tf

    from bert_tf.model.checkpoints import load_checkpoint, require_complete

    if not settings.init_checkpoint or (tf.io.gfile.isdir(settings.output_dir) and
                                        tf.train.latest_checkpoint(settings.output_dir)):
        return
    report = load_checkpoint(build_model(), settings.init_checkpoint)
    if not settings.do_train:
        require_complete(report, "init_checkpoint", hint=_INCOMPLETE_FOR_INFERENCE)


def restore_for_inference(task, model, optimizer, settings, log=log):
    """Loads the weights eval/predict use (see the module docstring); returns the global step."""
    import tensorflow as tf

    from bert_tf.training import loops
    from bert_tf.model.checkpoints import naming_damaged_checkpoint, require_complete

    latest = tf.train.latest_checkpoint(settings.output_dir)
    if latest:
        log(f"evaluating {latest}")
        with naming_damaged_checkpoint(latest):
            if not task.restore_foreign(model, optimizer, latest):
                tf.train.Checkpoint(model=model, optimizer=optimizer).restore(
                    latest).expect_partial()
        return loops.global_step(optimizer)
    if settings.init_checkpoint:
        report = task.initialize(model, settings.init_checkpoint, log)
        require_complete(report, "init_checkpoint", hint=_INCOMPLETE_FOR_INFERENCE)
        reader = tf.train.load_checkpoint(report.path) if report.format == "tf1" else None
        if reader is not None and reader.has_tensor("global_step"):
            return int(reader.get_tensor("global_step"))
        return 0
    if settings.do_predict:
        raise flag_error("init_checkpoint", f"no checkpoint in --output_dir={settings.output_dir} "
                                            f"and no --init_checkpoint: nothing to predict with")
    log(f"no checkpoint in {settings.output_dir}: evaluating the initial model")
    return 0


def _num_steps(task, mode, batch_size, settings):
    count = task.num_examples(mode)
    if count is None:
        return settings.max_eval_steps
    if count % batch_size:
        raise InputError(f"{mode} holds {count} records, not a multiple of the batch size "
                         f"{batch_size}: the task must pad them (padding examples)")
    return count // batch_size


def evaluate(task, strategy, model, settings, step, log=log):
    """Runs eval on every eval record; writes eval_results.txt and summaries; returns results."""
    import tensorflow as tf

    from bert_tf.training import loops
    from bert_tf.training.distribution import is_chief
    from bert_tf.tasks.base import format_results, write_results

    batch_size = settings.eval_batch_size
    num_steps = _num_steps(task, "eval", batch_size, settings)
    log(f"***** Running evaluation *****  batch size {batch_size}, {num_steps} steps")
    with naming_damaged_records(task, "eval"):
        outputs = loops.gather_outputs(strategy, model, task,
                                          task.dataset_fn("eval", batch_size), num_steps, "eval")
    results = task.eval_results(outputs, step, batch_size)
    if is_chief(strategy):
        write_results(results, settings.output_dir)
        for path in task.write_eval_outputs(outputs, settings.output_dir):
            log(f"wrote {path}")
        writer = tf.summary.create_file_writer(os.path.join(settings.output_dir, "eval"))
        with writer.as_default():
            for key, value in results.items():
                if key != "global_step":
                    loops.write_scalar(key, value, step)
        writer.close()
    print("***** Eval results *****\n" + format_results(results), end="", flush=True)
    return results


def predict(task, strategy, model, settings, log=log):
    """Runs predict on every predict record; the task writes its files; returns their paths."""
    from bert_tf.training import loops
    from bert_tf.training.distribution import is_chief

    batch_size = settings.predict_batch_size
    num_steps = _num_steps(task, "predict", batch_size, settings)
    log(f"***** Running prediction *****  batch size {batch_size}, {num_steps} steps")
    with naming_damaged_records(task, "predict"):
        outputs = loops.gather_outputs(strategy, model, task,
                                          task.dataset_fn("predict", batch_size), num_steps,
                                          "predict")
    if not is_chief(strategy):
        return []
    paths = task.write_predictions(outputs, settings.output_dir)
    for path in paths:
        log(f"wrote {path}")
    return paths


def export(task, model, settings, log=log):
    """Saves the task's SavedModel into settings.export_dir (bert_tf.serving.export): the token-id
    signature, and with settings.vocab_file the raw-string signatures too."""
    from bert_tf.serving import export as export_lib
    return export_lib.save(task, model, settings.export_dir, settings.vocab_file,
                           settings.do_lower_case,
                           task.max_seq_length, log=log)


def run(task, settings, log=log):
    """Runs the task's train / eval / predict / export as the settings say; returns the eval
    results (or None)."""
    import keras
    import tensorflow as tf
    from absl import logging

    from bert_tf.training import loops

    logging.set_verbosity(logging.WARNING)  # TF's INFO chatter would bury the progress lines
    settings.validate()
    # The strategy first: Mirrored on logical CPUs must split the CPU before TF runs any op.
    strategy_name, strategy = build_strategy(settings, log)
    tf.io.gfile.makedirs(settings.output_dir)
    task.check_inputs(settings)
    if settings.seed is not None:
        keras.utils.set_random_seed(settings.seed)
    loops.set_mixed_precision(settings.mixed_precision)
    if settings.cpu_kernels is not None:
        from bert_tf.model import layers
        layers.set_cpu_kernels(settings.cpu_kernels)
    try:
        with strategy.scope():
            model = task.build_model()
            optimizer = build_optimizer(model, settings)
        log(f"*** {task.name}: strategy {strategy_name} with {strategy.num_replicas_in_sync} "
            f"replica(s); mixed_precision={settings.mixed_precision} "
            f"jit_compile={settings.jit_compile} optimizer={settings.optimizer}")

        results = None
        if settings.do_train:
            results = _train(task, strategy, model, optimizer, settings, log)
        if settings.do_eval or settings.do_predict:
            if settings.do_train:
                step = loops.global_step(optimizer)
            else:
                with strategy.scope():
                    optimizer.build(model.trainable_variables)
                step = restore_for_inference(task, model, optimizer, settings, log)
            if settings.do_eval:
                results = evaluate(task, strategy, model, settings, step, log)
            if settings.do_predict:
                predict(task, strategy, model, settings, log)
        if settings.export_dir:
            export(task, model, settings, log)
        return results
    finally:
        loops.set_mixed_precision("off")


def _train(task, strategy, model, optimizer, settings, log):
    from bert_tf.training import loops
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.training.distribution import is_chief

    config = loops.TrainConfig(
        model_dir=settings.output_dir, num_train_steps=settings.num_train_steps,
        global_batch_size=settings.train_batch_size,
        iterations_per_loop=settings.iterations_per_loop,
        save_checkpoints_steps=settings.save_checkpoints_steps,
        keep_checkpoint_max=settings.keep_checkpoint_max, log_steps=settings.log_steps,
        gradient_accumulation_steps=settings.gradient_accumulation_steps,
        jit_compile=settings.jit_compile,
        deterministic_input=settings.seed is not None or task.deterministic_input)

    def init_fn():
        if settings.init_checkpoint:
            task.initialize(model, settings.init_checkpoint, log)

    def evaluate_at_checkpoint(step):
        if step < settings.num_train_steps:  # the final eval runs after training
            evaluate(task, strategy, model, settings, step, log)

    on_checkpoint = (evaluate_at_checkpoint
                     if settings.do_eval and settings.eval_during_training else None)

    log(f"***** Running training *****  batch size {settings.train_batch_size}, "
        f"{settings.num_train_steps} steps")
    try:
        with naming_damaged_records(task, "train"):
            metrics = loops.train(strategy, model, optimizer, task,
                                     task.dataset_fn("train", settings.train_batch_size,
                                                     settings.seed),
                                     config, init_fn=init_fn, log=log,
                                     on_checkpoint=on_checkpoint)
    except loops.NonFiniteLossError as e:
        raise InputError(f"training diverged: {e}") from None
    if settings.save_original_checkpoint and is_chief(strategy):
        step = loops.global_step(optimizer)
        path = write_tf1_checkpoint(
            model, os.path.join(settings.output_dir, ORIGINAL_FORMAT_DIR, f"model.ckpt-{step}"),
            global_step=step)
        log(f"wrote {path} (the original release's variable names)")
    return metrics
