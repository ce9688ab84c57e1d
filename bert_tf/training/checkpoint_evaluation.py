"""Eval after each checkpoint during training and, with a BestCheckpoint
(bert_tf.training.best_checkpoint), the choice of the best checkpoint and early stopping, told
in the run's log: each evaluation against the best so far, the record a resumed run goes on
from, and where training stopped early."""
import tensorflow as tf


class CheckpointEvaluation:
    """The evaluations during one training run of `inference` (bert_tf.training.inference),
    choosing by `best` (None: it chooses none). `evaluated`: {step: eval results} of the last
    evaluation that chose."""

    def __init__(self, inference, best, num_train_steps, log):
        self.inference, self.best = inference, best
        self.num_train_steps, self.log = num_train_steps, log
        self.evaluated = {}

    def on_checkpoint(self, step):
        """Evaluates the checkpoint just saved at `step` (the last one only when choosing: the
        final eval runs after training) and chooses."""
        best, log = self.best, self.log
        if best is None:
            if step < self.num_train_steps:
                self.inference.evaluate(step)
            return
        results = self.inference.evaluate(step)
        self.evaluated.clear()
        self.evaluated[step] = results
        selection = best.selection
        if best.update(step, results, tf.train.Checkpoint(model=self.inference.model),
                       final=step >= self.num_train_steps):
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

    def resume(self, resumed_step):
        """Goes on from the best checkpoint's record when training resumes at `resumed_step`
        (None: it starts afresh)."""
        best = self.best
        if best.resume(resumed_step):
            selection = best.selection
            self.log(f"{best.record_path}: best {selection.metric} so far "
                     f"{selection.best_value:g} at step {selection.best_step}, "
                     f"{selection.without_improvement} evaluations without improvement")
        if best.selection.stopped:
            self.log(f"training stopped early at step {best.stopped_at_step}: nothing to train "
                     f"({best.record_path})")

    def on_resume(self, step):
        """A run killed after a checkpoint was saved but before its evaluation was recorded:
        that checkpoint is evaluated now, so it is compared as in a run not killed."""
        evaluations = self.best.selection.evaluations
        if not self.best.selection.stopped and (not evaluations or evaluations[-1][0] < step):
            self.log(f"step {step}: the restored checkpoint has no recorded evaluation: "
                     f"evaluating it")
            self.on_checkpoint(step)

    def should_stop(self):
        return self.best.selection.stopped
