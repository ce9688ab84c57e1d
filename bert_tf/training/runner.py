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
  output_dir/best and early stopping (`bert_tf.training.best_checkpoint`);
- the checkpoint that eval and predict use: the model just trained (its best checkpoint when
  kept), else the best checkpoint kept in output_dir, else the latest checkpoint in
  output_dir (ours, or one the task continues), else --init_checkpoint, which must then hold
  every variable of the model (a task head missing from it would predict at random); a
  predict-only run may have no output_dir (extract_features): --init_checkpoint then;
- eval: per-example outputs of every eval record, once, gathered across replicas; the task's
  results written to output_dir/eval_results.txt and to TensorBoard (output_dir/eval);
- predict: the task writes its prediction files, from every record's outputs at once, or
  (`Task.streams_predictions`) from each step's outputs as they come;
- export: the caller's `export(task, model, log)`, if given, with the trained (or restored)
  model (the driver knows no export format).
"""
import contextlib
import gc
import os
import sys

import keras
import tensorflow as tf
from absl import logging

from bert_tf.data.input_pipeline import find_bad_record
from bert_tf.errors import InputError, arg, argument_error
from bert_tf.io_utils import remove_path
from bert_tf.model import directory, layers
from bert_tf.model.checkpoints import (BEST_DIR, checkpoint_step, kept_best_checkpoint,
                                       load_checkpoint, naming_damaged_checkpoint,
                                       write_tf1_checkpoint)
from bert_tf.model.cpu_kernels import (cpu_kernels_mode, releasing_custom_gradients,
                                       set_cpu_kernels)
from bert_tf.model.load_report import require_complete
from bert_tf.model.variable_names import original_variable_map
from bert_tf.training import distribution, loops, optimization
from bert_tf.training.best_checkpoint import BestCheckpoint, check_metric
from bert_tf.training.distribution import is_chief
from bert_tf.training.results import format_results, write_results

# --save_original_checkpoint writes output_dir/<this>/model.ckpt-<step> in the original naming.
ORIGINAL_FORMAT_DIR = "original_format"


def naming_damaged_records(task, mode):
    """Turns a DataLossError while reading the records of `mode` into an InputError naming the
    damaged file and offset (found by `input_pipeline.find_bad_record`, on the error path only);
    a DataLossError that no input file explains (a damaged checkpoint) propagates unchanged."""

    @contextlib.contextmanager
    def guard():
        try:
            yield
        except tf.errors.DataLossError as e:
            records = task.config.records.get(mode)
            error = find_bad_record(records.paths if records else [])
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
        raise argument_error("train_batch_size", f"must be positive, got {batch_size}")
    if not 0 <= warmup_proportion <= 1:
        raise argument_error("warmup_proportion", f"must be in [0, 1], got {warmup_proportion}")
    num_train_steps = int(num_examples / batch_size * num_train_epochs)
    if num_train_steps < 1:
        raise argument_error("num_train_epochs", f"{num_train_epochs} epochs of {num_examples} "
                                                 f"{what} at batch size {batch_size} is no "
                                                 f"training step")
    return num_train_steps, int(num_train_steps * warmup_proportion)


def log(message):
    print(message, file=sys.stderr, flush=True)


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


def _incomplete_for_inference():
    """Why eval/predict refuse an init_checkpoint that lacks some of the model (a task head)."""
    return f": train first ({arg('do_train')}) or pass a checkpoint that holds them"


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
        require_complete(report, "init_checkpoint", hint=_incomplete_for_inference())


def restore_for_inference(task, model, optimizer, settings, log=log):
    """Loads the weights eval/predict use (see the module docstring); returns the global step."""
    best = settings.output_dir and kept_best_checkpoint(settings.output_dir)
    if best:
        return restore_best(model, *best, log)
    latest = settings.output_dir and tf.train.latest_checkpoint(settings.output_dir)
    if latest:
        log(f"evaluating {latest}")
        with naming_damaged_checkpoint(latest):
            if not task.restore_foreign(model, optimizer, latest):
                tf.train.Checkpoint(**loops.checkpoint_objects(model, optimizer)).restore(
                    latest).expect_partial()
        return loops.global_step(optimizer)
    if settings.init_checkpoint:
        report = task.initialize(model, settings.init_checkpoint, log)
        require_complete(report, "init_checkpoint", hint=_incomplete_for_inference())
        return checkpoint_step(report)
    if settings.do_predict:
        raise argument_error("init_checkpoint", f"no checkpoint in {arg('output_dir')}="
                                                f"{settings.output_dir} and no "
                                                f"{arg('init_checkpoint')}: nothing to predict "
                                                f"with")
    log(f"no checkpoint in {settings.output_dir}: evaluating the initial model")
    return 0


def restore_best(model, prefix, step, log=log):
    """Loads the best weights a run kept (model only) into `model`; returns their step."""
    log(f"evaluating {prefix} (the best checkpoint)")
    with naming_damaged_checkpoint(prefix):
        tf.train.Checkpoint(model=model).read(prefix).assert_existing_objects_matched()
    return step


def check_best_metric(task, settings):
    """The metric a run that chooses the best checkpoint chooses by (None: it chooses none):
    --best_metric, else the task's main metric; an InputError naming best_metric, before any
    work, for one the task's eval results lack or one other than what output_dir/best
    records."""
    if not (settings.chooses_best and settings.do_train):
        return None
    metric = settings.best_metric or task.main_metric()
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
    directory = os.path.join(loops.worker_checkpoint_dir(settings.output_dir, strategy),
                             BEST_DIR)
    return BestCheckpoint(directory, metric, settings.early_stopping_patience,
                          settings.early_stopping_threshold, keep=settings.keep_best_checkpoint)


def _num_steps(task, mode, batch_size, settings):
    count = task.config.records[mode].count
    if count is None:
        return settings.max_eval_steps
    if count % batch_size:
        raise InputError(f"{mode} holds {count} records, not a multiple of the batch size "
                         f"{batch_size}: the task must pad them (padding examples)")
    return count // batch_size


def _inference_steps(task, settings, mode, log):
    """(batch size, steps) of eval or predict, logged."""
    batch_size = settings.eval_batch_size if mode == "eval" else settings.predict_batch_size
    num_steps = _num_steps(task, mode, batch_size, settings)
    log(f"***** Running {'evaluation' if mode == 'eval' else 'prediction'} *****  "
        f"batch size {batch_size}, {num_steps} steps")
    return batch_size, num_steps


def gather(task, strategy, model, settings, mode, log=log):
    """Every `mode` record's outputs (eval_outputs or predict_outputs), in file order."""
    batch_size, num_steps = _inference_steps(task, settings, mode, log)
    with naming_damaged_records(task, mode):
        return loops.gather_outputs(strategy, model, task, task.dataset_fn(mode, batch_size),
                                    num_steps, mode)


def evaluate(task, strategy, model, settings, step, log=log, extra_results=None, outputs=None):
    """Runs eval on every eval record (or takes its gathered `outputs`); writes
    eval_results.txt (with `extra_results`, the best checkpoint's keys) and summaries; returns
    results."""
    if outputs is None:
        outputs = gather(task, strategy, model, settings, "eval", log)
    results = task.eval_results(outputs, step, settings.eval_batch_size)
    if is_chief(strategy):
        write_results(dict(results, **(extra_results or {})), settings.output_dir)
        for path in task.write_eval_outputs(outputs, settings.output_dir):
            log(f"wrote {path}")
        writer = tf.summary.create_file_writer(os.path.join(settings.output_dir, "eval"))
        with writer.as_default():
            for key, value in results.items():
                if key != "global_step":
                    loops.write_scalar(key, value, step)
        writer.close()
    print("***** Eval results *****\n" + format_results(dict(results, **(extra_results or {}))),
          end="", flush=True)
    return results


def predict(task, strategy, model, settings, log=log, outputs=None):
    """Runs predict on every predict record (or takes its gathered `outputs`); the task writes
    its files; returns their paths."""
    if task.streams_predictions:  # the task writes each step's outputs as they come
        batch_size, num_steps = _inference_steps(task, settings, "predict", log)
        with naming_damaged_records(task, "predict"):
            outputs = loops.iterate_outputs(strategy, model, task,
                                            task.dataset_fn("predict", batch_size), num_steps,
                                            "predict")
            if not is_chief(strategy):
                for _ in outputs:  # the other workers' steps run all the same
                    pass
                return []
            paths = task.write_predictions(outputs, settings.output_dir)
    else:
        if outputs is None:
            outputs = gather(task, strategy, model, settings, "predict", log)
        else:
            log("prediction: the evaluation's outputs (the same records and weights)")
        if not is_chief(strategy):
            return []
        paths = task.write_predictions(outputs, settings.output_dir)
    for path in paths:
        log(f"wrote {path}")
    return paths


def run(task, settings, log=log, export=None):
    """Runs the task's train / eval / predict as the settings say, then `export(task, model,
    log)` if given (the driver knows no export format: the caller saves the model); returns
    the eval results (or None)."""
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
            return _run_model(task, settings, log, export, strategy, strategy_name, best)
    finally:
        keras.mixed_precision.set_global_policy(policy)
        set_cpu_kernels(cpu_kernels)
        logging.set_verbosity(verbosity)


def _run_model(task, settings, log, export, strategy, strategy_name, best):
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

    results = None
    if settings.do_train:
        if is_chief(strategy):
            write_model_directory(task, settings)
        results, evaluated = _train(task, strategy, model, optimizer, settings, log, best)
    if settings.do_eval or settings.do_predict:
        if settings.do_train:
            step = loops.global_step(optimizer)
            if best is not None and best.best_checkpoint and best.selection.best_step != step:
                step = restore_best(model, best.best_checkpoint, best.selection.best_step,
                                    log)
        else:
            if settings.output_dir and tf.train.latest_checkpoint(settings.output_dir):
                # Its checkpoints hold the optimizer (slots, step); none are needed to
                # predict from init_checkpoint.
                with strategy.scope():
                    optimizer.build(model.trainable_variables)
            step = restore_for_inference(task, model, optimizer, settings, log)
        outputs = None  # eval's, when predict takes them
        if settings.do_eval and best is not None and step in evaluated:
            # The model is the one evaluated at `step` during training: its results, now
            # with the best checkpoint's keys.
            results = evaluated[step]
            chosen = dict(results, **best.result_lines())
            if is_chief(strategy):
                write_results(chosen, settings.output_dir)
            print("***** Eval results *****\n" + format_results(chosen), end="",
                  flush=True)
        elif settings.do_eval:
            records = task.config.records
            if (settings.do_predict and task.predicts_eval_outputs
                    and records["eval"] == records["predict"]):
                # Predict would read the same records with the same weights: one pass.
                outputs = gather(task, strategy, model, settings, "eval", log)
            results = evaluate(task, strategy, model, settings, step, log,
                               best.result_lines() if best is not None else None, outputs)
        if settings.do_predict:
            predict(task, strategy, model, settings, log, outputs)
    if export is not None:
        export(task, model, log)
    if best is not None and not is_chief(strategy):
        # This worker's copy of the best checkpoint (the chief's is output_dir/best).
        remove_path(best.directory)
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


def _resumed_step(output_dir):
    """The step of the latest checkpoint in output_dir (model.ckpt-<step>), or None."""
    latest = tf.io.gfile.isdir(output_dir) and tf.train.latest_checkpoint(output_dir)
    suffix = latest.rsplit("-", 1)[-1] if latest else ""
    return int(suffix) if suffix.isdigit() else None


def _train(task, strategy, model, optimizer, settings, log, best=None):
    """Trains; returns (the last train metrics, {step: eval results} of the evaluations during
    training that chose by `best` (a BestCheckpoint), the last one only)."""
    evaluated = {}

    def init_fn():
        if settings.init_checkpoint:
            task.initialize(model, settings.init_checkpoint, log)

    def evaluate_at_checkpoint(step):
        if best is None:
            if step < settings.num_train_steps:  # the final eval runs after training
                evaluate(task, strategy, model, settings, step, log)
            return
        # Choosing: the last checkpoint is evaluated too, to be compared.
        results = evaluate(task, strategy, model, settings, step, log)
        evaluated.clear()
        evaluated[step] = results
        selection = best.selection
        if best.update(step, results, tf.train.Checkpoint(model=model),
                       final=step >= settings.num_train_steps):
            log(f"step {step}: best {selection.metric} so far: {selection.best_value:g}"
                + (f" (kept in {best.directory})" if best.keep else ""))
        else:
            log(f"step {step}: {selection.metric} {float(results[selection.metric]):g}, best "
                f"{selection.best_value:g} at step {selection.best_step}"
                + (f"; {selection.without_improvement} of {selection.patience} evaluations "
                   f"without improvement" if selection.patience else ""))
        if best.stopped_at_step == step:
            log(f"early stopping at step {step}: {selection.patience} evaluations in a row "
                f"without an improvement of {selection.metric} by more than "
                f"{selection.threshold:g}; best {selection.best_value:g} at step "
                f"{selection.best_step}")

    on_checkpoint = (evaluate_at_checkpoint
                     if settings.do_eval and settings.eval_during_training else None)

    def evaluate_restored_checkpoint(step):
        # A run killed after a checkpoint was saved but before its evaluation was recorded:
        # that checkpoint is evaluated now, so it is compared as in a run not killed.
        evaluations = best.selection.evaluations
        if on_checkpoint is not None and not best.selection.stopped and (
                not evaluations or evaluations[-1][0] < step):
            log(f"step {step}: the restored checkpoint has no recorded evaluation: "
                f"evaluating it")
            evaluate_at_checkpoint(step)

    should_stop = None
    if best is not None:
        if best.resume(_resumed_step(settings.output_dir)):
            selection = best.selection
            log(f"{best.record_path}: best {selection.metric} so far "
                f"{selection.best_value:g} at step {selection.best_step}, "
                f"{selection.without_improvement} evaluations without improvement")
        if best.selection.stopped:
            log(f"training stopped early at step {best.stopped_at_step}: nothing to train "
                f"({best.record_path})")
        should_stop = lambda: best.selection.stopped  # noqa: E731

    log(f"***** Running training *****  batch size {settings.train_batch_size}, "
        f"{settings.num_train_steps} steps")
    try:
        with naming_damaged_records(task, "train"):
            metrics = loops.train(strategy, model, optimizer, task,
                                     task.dataset_fn("train", settings.train_batch_size,
                                                     settings.seed),
                                     settings, init_fn=init_fn, log=log,
                                     on_checkpoint=on_checkpoint, should_stop=should_stop,
                                     on_resume=(evaluate_restored_checkpoint
                                                if best is not None else None),
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
    return metrics, evaluated
