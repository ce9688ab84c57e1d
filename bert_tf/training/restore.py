"""Which weights eval and predict use, and loading them: the model just trained (its best
checkpoint when kept), else the best checkpoint kept in output_dir, else the latest checkpoint
in output_dir (ours, or one the task continues), else --init_checkpoint, which must then hold
every variable of the model (a task head missing from it would predict at random); a
predict-only run may have no output_dir (extract_features): --init_checkpoint then."""
import tensorflow as tf

from bert_tf.errors import arg, argument_error
from bert_tf.model.checkpoints import (checkpoint_step, kept_best_checkpoint,
                                       naming_damaged_checkpoint)
from bert_tf.model.load_report import require_complete
from bert_tf.progress import log as default_log
from bert_tf.training import loops


def incomplete_for_inference():
    """Why eval/predict refuse an init_checkpoint that lacks some of the model (a task head)."""
    return f": train first ({arg('do_train')}) or pass a checkpoint that holds them"


def restore_for_inference(task, model, optimizer, settings, log=default_log):
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
        require_complete(report, "init_checkpoint", hint=incomplete_for_inference())
        return checkpoint_step(report)
    if settings.do_predict:
        raise argument_error("init_checkpoint", f"no checkpoint in {arg('output_dir')}="
                                                f"{settings.output_dir} and no "
                                                f"{arg('init_checkpoint')}: nothing to predict "
                                                f"with")
    log(f"no checkpoint in {settings.output_dir}: evaluating the initial model")
    return 0


def restore_best(model, prefix, step, log=default_log):
    """Loads the best weights a run kept (model only) into `model`; returns their step."""
    log(f"evaluating {prefix} (the best checkpoint)")
    with naming_damaged_checkpoint(prefix):
        tf.train.Checkpoint(model=model).read(prefix).assert_existing_objects_matched()
    return step


def resumed_step(output_dir):
    """The step of the latest checkpoint in output_dir (model.ckpt-<step>), or None."""
    latest = tf.io.gfile.isdir(output_dir) and tf.train.latest_checkpoint(output_dir)
    suffix = latest.rsplit("-", 1)[-1] if latest else ""
    return int(suffix) if suffix.isdigit() else None
