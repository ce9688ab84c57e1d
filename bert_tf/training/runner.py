"""The one driver of every run_* command line: `run(task, settings)`.

A command line parses its flags into `RunSettings` and a `bert_tf.tasks.base.Task`; `run` then does
what every task needs, the same way for all of them:
- the tf.distribute strategy (one_device, mirrored, multi_worker_mirrored, tpu with the
  original's TPU flags) and the checks that batch sizes divide over its replicas;
- precision (float32, mixed bfloat16 / float16 with loss scaling), XLA, and the recomputation
  of each transformer layer in the backward pass (`recompute_layers`);
- the model (under the strategy's scope) and the optimizer: the original's AdamWeightDecay or
  LAMB, with the weight-decay exclusions matched against the original variable names;
- training (`bert_tf.training.loops.train`): resumes from the latest checkpoint in output_dir, else
  starts from --init_checkpoint; output_dir made a model directory first (its config, a copy of
  the vocabulary, the casing, the task's labels and options: `bert_tf.model.directory`), so
  that predict and export need only it; optional eval after every checkpoint; optionally the
  trained weights also as a TF1 checkpoint in the original's names (output_dir/original_format),
  which the original release and tools built on it load;
- with eval during training, optionally the best checkpoint by a dev metric kept in
  output_dir/best and early stopping (`bert_tf.training.best_checkpoint`,
  `bert_tf.training.checkpoint_evaluation`);
- the checkpoint that eval and predict use (`bert_tf.training.restore`);
- eval and predict (`bert_tf.training.inference`);
- export: the caller's `export(task, model, log)`, if given, with the trained (or restored)
  model (the driver knows no export format).
`run`'s `on_phase(name)`, if given, is told as training ("train"), each evaluation ("eval") and
prediction ("predict") starts: run_glue splits a run's time by it.
"""
import contextlib
import gc
import os

import keras
import tensorflow as tf
from absl import logging

from bert_tf.errors import InputError, arg, argument_error
from bert_tf.model import directory, layers
from bert_tf.model.checkpoints import BEST_DIR, load_checkpoint, write_tf1_checkpoint
from bert_tf.model.cpu_kernels import (cpu_kernels_mode, releasing_custom_gradients,
                                       set_cpu_kernels)
from bert_tf.model.load_report import require_complete
from bert_tf.model.variable_names import original_variable_map
from bert_tf.progress import log
from bert_tf.tasks.results import print_results, write_results
from bert_tf.training import distribution, loops, optimization, restore
from bert_tf.training.best_checkpoint import BestCheckpoint, check_metric, chosen_metric
from bert_tf.training.checkpoint_evaluation import CheckpointEvaluation
from bert_tf.training.checkpoint_files import worker_checkpoint_dir
from bert_tf.training.distribution import is_chief
from bert_tf.training.inference import Inference, naming_damaged_records

# --save_original_checkpoint writes output_dir/<this>/model.ckpt-<step> in the original naming.
ORIGINAL_FORMAT_DIR = "original_format"


def build_strategy(settings, log=log):
    """(strategy name, strategy) from the settings; checks batch sizes against its replicas.

    Call before TensorFlow runs any op: Mirrored on logical CPUs must split the CPU first.
    """
    name = distribution.strategy_name(settings.distribution_strategy, settings.use_tpu)
    tpu_kwargs = distribution.tpu_resolver_kwargs(settings.tpu_name, settings.tpu_zone,
                                                  settings.gcp_project, settings.master)
    strategy = distribution.create_strategy(name, num_gpus=settings.num_gpus,
                                            num_cpu_devices=settings.num_cpu_devices,
                                            tpu_kwargs=tpu_kwargs)
    replicas = strategy.num_replicas_in_sync
    if name == "tpu" and replicas != settings.num_tpu_cores:
        log(f"note: {arg('num_tpu_cores')}={settings.num_tpu_cores} but the TPU has {replicas} "
            f"cores; using {replicas}")
    checks = []
    if settings.do_train:
        checks.append(("train_batch_size", settings.train_batch_size,
                       replicas * settings.gradient_accumulation_steps))
    if settings.do_eval:
        checks.append(("eval_batch_size", settings.eval_batch_size, replicas))
    if settings.do_predict:
        checks.append(("predict_batch_size", settings.predict_batch_size, replicas))
    for argument, size, per_step in checks:
        if size % per_step:
            raise argument_error(argument, f"{size} is not divisible by {per_step} (replicas"
                                       + (" x gradient_accumulation_steps)"
                                          if per_step != replicas else ")"))
    return name, strategy


def build_optimizer(model, settings):
    """The original's optimizer (or LAMB) with its schedule; weight-decay exclusions (LayerNorm,
    bias) matched against the model's original variable names."""
    original_names = {}
    for part in original_variable_map(model):
        original_names.setdefault(id(part.variable), part.name)
    optimizer = optimization.create_optimizer(
        settings.learning_rate, max(settings.num_train_steps, 1), settings.num_warmup_steps,
        settings.optimizer, weight_decay_rate=settings.weight_decay_rate,
        variable_name_fn=lambda v: original_names.get(id(v), v.path))
    return loops.wrap_optimizer(optimizer, settings.mixed_precision, settings.initial_loss_scale,
                                settings.loss_scale_growth_steps)


def check_init_checkpoint(build_model, settings):
    """Before any work: the init_checkpoint this run will read loads into `build_model()` (a
    throwaway model: every variable's shape must match the config), and holds the whole model
    when eval/predict use it without training. Nothing to check when the run continues the
    latest checkpoint in output_dir instead (it reads no init_checkpoint then)."""
    if not settings.init_checkpoint or (settings.output_dir and
                                        tf.io.gfile.isdir(settings.output_dir) and
                                        tf.train.latest_checkpoint(settings.output_dir)):
        return
    report = load_checkpoint(build_model(), settings.init_checkpoint)
    # The throwaway model's layers hold reference cycles: free its weights now, not at the
    # collector's next turn, which may come after the run's own model has doubled the peak.
    gc.collect()
    if not settings.do_train:
        require_complete(report, "init_checkpoint", hint=restore.incomplete_for_inference())


def check_best_metric(task, settings):
    """The metric a run that chooses the best checkpoint chooses by (None: it chooses none):
    --best_metric, else the task's main metric; an InputError naming best_metric, before any
    work, for one the task's eval results lack or one other than what output_dir/best
    records."""
    if not (settings.chooses_best and settings.do_train):
        return None
    metric = chosen_metric(settings, task.main_metric())
    if metric is None:
        raise argument_error("best_metric", f"the {task.name} task has no main metric: name "
                                            f"one of its eval results")
    check_metric(metric, task.eval_metric_names())
    BestCheckpoint(os.path.join(settings.output_dir, BEST_DIR), metric).check_record()
    return metric


def best_checkpoint(task, settings, strategy):
    """The run's BestCheckpoint (None: it chooses none), checked (`check_best_metric`); a
    multi-worker run's other workers keep theirs in their own directories."""
    metric = check_best_metric(task, settings)
    if metric is None:
        return None
    directory = os.path.join(worker_checkpoint_dir(settings.output_dir, strategy),
                             BEST_DIR)
    return BestCheckpoint(directory, metric, settings.early_stopping_patience,
                          settings.early_stopping_threshold, keep=settings.keep_best_checkpoint)


def run(task, settings, log=log, export=None, on_phase=None):
    """Runs the task's train / eval / predict as the settings say, then `export(task, model,
    log)` if given (the driver knows no export format: the caller saves the model); returns
    the eval results (or None). `on_phase(name)`: told as training ("train"), each evaluation
    ("eval") and prediction ("predict") starts."""
    settings.validate()
    # The strategy first: Mirrored on logical CPUs must split the CPU before TF runs any op.
    strategy_name, strategy = build_strategy(settings, log)
    task.check_inputs(settings)
    best = best_checkpoint(task, settings, strategy)
    if settings.output_dir:  # once the checks passed: bad input leaves no folder behind
        tf.io.gfile.makedirs(settings.output_dir)
    # Process-wide state the run sets, given back as it was when it ends (a Python caller's
    # later models and logs are not changed by a run); the random seed cannot be given back.
    verbosity, policy = logging.get_verbosity(), keras.mixed_precision.global_policy()
    cpu_kernels = cpu_kernels_mode()
    logging.set_verbosity(logging.WARNING)  # TF's INFO chatter would bury the progress lines
    if settings.seed is not None:
        keras.utils.set_random_seed(settings.seed)
    loops.set_mixed_precision(settings.mixed_precision)
    if settings.cpu_kernels is not None:
        set_cpu_kernels(settings.cpu_kernels)
    try:
        with releasing_custom_gradients():
            return _run_model(task, settings, log, export, strategy, strategy_name, best,
                              on_phase)
    finally:
        keras.mixed_precision.set_global_policy(policy)
        set_cpu_kernels(cpu_kernels)
        logging.set_verbosity(verbosity)


def _run_model(task, settings, log, export, strategy, strategy_name, best, on_phase):
    """`run`'s work once the process-wide state is set: the model, train, eval, predict,
    export."""
    with strategy.scope():
        model = task.build_model()
        optimizer = build_optimizer(model, settings)
    if settings.recompute_layers and not layers.set_recompute(model):
        log(f"note: {arg('recompute_layers')}: the {task.name} model has no transformer "
            f"layer to recompute")
    # The optimizer only when it trains: eval, predict and extract_features use none.
    log(f"*** {task.name}: strategy {strategy_name} with {strategy.num_replicas_in_sync} "
        f"replica(s); mixed_precision={settings.mixed_precision} "
        f"jit_compile={settings.jit_compile}"
        + (f" optimizer={settings.optimizer}" if settings.do_train else "")
        + (" recompute_layers=True" if settings.recompute_layers else ""))

    inference = Inference(task, strategy, model, settings, log, on_phase)
    results = None
    if settings.do_train:
        if is_chief(strategy):
            write_model_directory(task, settings)
        results, evaluated = _train(inference, optimizer, best)
    if settings.do_eval or settings.do_predict:
        if settings.do_train:
            step = loops.global_step(optimizer)
            if best is not None and best.best_checkpoint and best.selection.best_step != step:
                step = restore.restore_best(model, best.best_checkpoint,
                                            best.selection.best_step, log)
        else:
            if settings.output_dir and tf.train.latest_checkpoint(settings.output_dir):
                # Its checkpoints hold the optimizer (slots, step); none are needed to
                # predict from init_checkpoint.
                with strategy.scope():
                    optimizer.build(model.trainable_variables)
            step = restore.restore_for_inference(task, model, optimizer, settings, log)
        outputs = None  # eval's, when predict takes them
        if settings.do_eval and best is not None and step in evaluated:
            # The model is the one evaluated at `step` during training: its results, now
            # with the best checkpoint's keys.
            results = evaluated[step]
            chosen = dict(results, **best.result_lines())
            if is_chief(strategy):
                write_results(chosen, settings.output_dir)
            print_results(chosen)
        elif settings.do_eval:
            records = task.config.records
            if (settings.do_predict and task.predicts_eval_outputs
                    and records["eval"] == records["predict"]):
                # Predict would read the same records with the same weights: one pass.
                outputs = inference.gather("eval")
            results = inference.evaluate(step, best.result_lines() if best is not None else None,
                                         outputs)
        if settings.do_predict:
            inference.predict(outputs)
    if export is not None:
        export(task, model, log)
    if best is not None and not is_chief(strategy):
        # This worker's copy of the best checkpoint (the chief's is output_dir/best).
        best.discard()
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(best.directory))
    return results


def write_model_directory(task, settings):
    """Before the first checkpoint: output_dir gets the model's config, a copy of the run's
    vocabulary (when known) and the record of its casing and task (bert_tf.model.directory),
    so that the folder the run leaves is a whole model. A user's other config or vocabulary
    there is an InputError naming output_dir."""
    vocab_file = settings.vocab_file
    directory.write(settings.output_dir, task.config.bert_config, vocab_file,
                    directory.task_record(task, settings.do_lower_case, vocab_file))


def _train(inference, optimizer, best=None):
    """Trains; returns (the last train metrics, {step: eval results} of the evaluations during
    training that chose by `best` (a BestCheckpoint), the last one only)."""
    task, strategy, model, settings, log = (inference.task, inference.strategy, inference.model,
                                            inference.settings, inference.log)
    evaluation = CheckpointEvaluation(inference, best, settings.num_train_steps, log)
    evaluates = settings.do_eval and settings.eval_during_training
    if best is not None:
        evaluation.resume(restore.resumed_step(settings.output_dir))

    def init_fn():
        if settings.init_checkpoint:
            task.initialize(model, settings.init_checkpoint, log)

    if inference.on_phase is not None:
        inference.on_phase("train")
    log(f"***** Running training *****  batch size {settings.train_batch_size}, "
        f"{settings.num_train_steps} steps")
    try:
        with naming_damaged_records(task, "train"):
            metrics = loops.train(strategy, model, optimizer, task,
                                  task.dataset_fn("train", settings.train_batch_size,
                                                  settings.seed),
                                  settings, init_fn=init_fn, log=log,
                                  on_checkpoint=evaluation.on_checkpoint if evaluates else None,
                                  should_stop=evaluation.should_stop if best is not None else None,
                                  on_resume=(evaluation.on_resume
                                             if best is not None and evaluates else None),
                                  deterministic_input=(settings.seed is not None
                                                       or task.config.deterministic_input))
    except loops.NonFiniteLossError as e:
        raise InputError(f"training diverged: {e}") from None
    if settings.save_original_checkpoint and is_chief(strategy):
        step = loops.global_step(optimizer)
        path = write_tf1_checkpoint(
            model, os.path.join(settings.output_dir, ORIGINAL_FORMAT_DIR, f"model.ckpt-{step}"),
            global_step=step)
        log(f"wrote {path} (the original release's variable names)")
    return metrics, evaluation.evaluated
