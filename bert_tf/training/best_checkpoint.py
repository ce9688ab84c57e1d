"""The best checkpoint and early stopping of a fine-tuning run that evaluates during training.

`Selection` is the rule, pure: after each evaluation, the best value of one eval_results key
so far (`greater_is_better` by its name: losses lower, every other metric higher), and the
evaluations in a row without an improvement of more than `threshold`; training stops after
`patience` of them (0: never). `BestCheckpoint` keeps it in output_dir/best/: the record
(bert_tf.model.checkpoints.BEST_RECORD_FILE, written atomically after every evaluation: the
selection, every evaluation's value) and, with `keep`, the best weights (model.ckpt-<step>,
written before the record names them), so that a resumed run goes on with the best so far
and its patience; `chosen_metric`, the metric a run chooses by. The driver
(`bert_tf.training.runner`) evaluates, predicts and exports from the best weights when kept,
and so does every reader of the output_dir as a checkpoint
(bert_tf.model.checkpoints.resolve_checkpoint).
"""
import json
import math
import os

import numpy as np

from bert_tf import io_utils
from bert_tf.errors import arg, argument_error
from bert_tf.model.checkpoints import BEST_RECORD_FILE
from bert_tf.training.checkpoint_files import (CHECKPOINT_FILE,  # best/model.ckpt-<step>
                                               CHECKPOINT_NAME, remove_own_files)


def greater_is_better(metric):
    """Whether a larger value of the eval_results key `metric` is better: not for losses."""
    return not metric.endswith("loss")


class Selection:
    """The best of a sequence of (step, value) evaluations of one metric, and early stopping.

    `update(step, value)` returns True when the value is better than the best so far (a tie
    keeps the earlier step): that step's checkpoint becomes the best. An evaluation counts
    against `patience` unless it improves on the best by more than `threshold` (as transformers'
    EarlyStoppingCallback); `stopped` is True once `patience` (> 0) of them came in a row.
    """

    def __init__(self, metric, patience=0, threshold=0.0):
        self.metric = metric
        self.greater_is_better = greater_is_better(metric)
        self.patience = patience
        self.threshold = threshold
        self.best_step = None
        self.best_value = None
        self.without_improvement = 0
        self.evaluations = []  # [step, value] of every evaluation, in order

    def _gain(self, value):
        return value - self.best_value if self.greater_is_better else self.best_value - value

    def update(self, step, value):
        value = float(value)
        self.evaluations.append([int(step), value])
        if self.best_value is None or (math.isnan(self.best_value) and not math.isnan(value)):
            # The first value; or the first that is a number (a correlation of constant
            # predictions is NaN), which any later number may beat: an improvement.
            self.best_step, self.best_value = int(step), value
            self.without_improvement = 0
            return True
        gain = self._gain(value)
        self.without_improvement = 0 if gain > self.threshold else self.without_improvement + 1
        if gain > 0:
            self.best_step, self.best_value = int(step), value
            return True
        return False

    @property
    def stopped(self):
        return self.patience > 0 and self.without_improvement >= self.patience

    def state(self):
        """What the record keeps (json)."""
        return {"metric": self.metric, "greater_is_better": self.greater_is_better,
                "best_step": self.best_step, "best_value": self.best_value,
                "evaluations_without_improvement": self.without_improvement,
                "evaluations": self.evaluations}

    def restore(self, state):
        """Goes on from a record's `state()`: the evaluations up to now and the count."""
        self.best_step, self.best_value = state["best_step"], state["best_value"]
        self.without_improvement = state["evaluations_without_improvement"]
        self.evaluations = [list(e) for e in state["evaluations"]]


def chosen_metric(settings, default):
    """The metric a run chooses its best checkpoint by: settings.best_metric, else `default`
    (the task's main metric; in run_glue, the GLUE task's); None when the run chooses none
    (neither keep_best_checkpoint nor early stopping)."""
    return (settings.best_metric or default) if settings.chooses_best else None


def check_metric(metric, known):
    """`metric` must be a key of the task's eval results `known` (None: not known before the
    first evaluation): an InputError naming best_metric otherwise."""
    if known is not None and metric not in known:
        raise argument_error("best_metric", f"{metric!r} is not in the task's eval results; "
                                            f"it has {', '.join(sorted(known))}")


class BestCheckpoint:
    """The Selection of a run kept in `directory` (output_dir/best), and the best weights there
    when `keep`. `checkpoint_fn()`: a tf.train.Checkpoint of what the best weights are (the
    model)."""

    def __init__(self, directory, metric, patience=0, threshold=0.0, keep=False):
        self.directory = directory
        self.selection = Selection(metric, patience, threshold)
        self.keep = keep
        self.stopped_at_step = None  # the step at which this run stopped training early

    @property
    def record_path(self):
        return os.path.join(self.directory, BEST_RECORD_FILE)

    def read_record(self):
        """The record in `directory`, or None."""
        if not os.path.isfile(self.record_path):
            return None
        with open(self.record_path, encoding="utf-8") as f:
            return json.load(f)

    def check_record(self):
        """Before any work: a record left by a run of another metric is an InputError naming
        best_metric (its best would be compared with values of another measure)."""
        record = self.read_record()
        recorded = record and record["selection"]["metric"]
        if recorded and recorded != self.selection.metric:
            raise argument_error("best_metric", f"{self.record_path} chooses by {recorded!r}, "
                                                f"not {self.selection.metric!r}: resume with "
                                                f"{arg('best_metric')}={recorded} or use a new "
                                                f"{arg('output_dir')}")

    def resume(self, resumed_step):
        """Goes on from the record when the run resumes from its checkpoint at `resumed_step`
        (None: the run starts afresh, and a record there is an earlier run's, replaced at the
        first evaluation). Evaluations after `resumed_step` (of checkpoints the run will
        make again) are dropped. Returns whether a record was taken."""
        record = self.read_record()
        if record is None or resumed_step is None:
            return False
        state = record["selection"]
        evaluations = [e for e in state["evaluations"] if e[0] <= resumed_step]
        if len(evaluations) != len(state["evaluations"]):  # replay what is left, in order
            self.selection.evaluations = []
            for step, value in evaluations:
                self.selection.update(step, value)
        else:
            self.selection.restore(state)
        if self.keep and self.selection.best_step is not None and not os.path.exists(
                self.checkpoint_prefix(self.selection.best_step) + ".index"):
            self.selection = Selection(self.selection.metric, self.selection.patience,
                                       self.selection.threshold)
            return False
        stopped = record.get("stopped_at_step")
        self.stopped_at_step = stopped if stopped is not None and stopped <= resumed_step else None
        return True

    def checkpoint_prefix(self, step):
        return os.path.join(self.directory, f"{CHECKPOINT_NAME}-{step}")

    @property
    def best_checkpoint(self):
        """The prefix of the kept best weights, or None."""
        if not self.keep or self.selection.best_step is None:
            return None
        return self.checkpoint_prefix(self.selection.best_step)

    def update(self, step, results, checkpoint, final=False, write=True):
        """After the evaluation of the checkpoint at `step` (`final`: the last of training):
        updates the selection with the metric of `results`; with `keep`, writes the weights
        (`checkpoint`, a tf.train.Checkpoint) when they are the best so far; then the record.
        Returns whether they were. `write` False: the selection only."""
        metric = self.selection.metric
        if metric not in results:
            check_metric(metric, [k for k in results if k != "global_step"])
        improved = self.selection.update(step, results[metric])
        if self.selection.stopped and not final:
            self.stopped_at_step = int(step)
        if write:
            os.makedirs(self.directory, exist_ok=True)
            if improved and self.keep:
                # The weights first, under the new step's name; the record then names them (its
                # atomic replacement is the switch); the earlier best's files go last.
                checkpoint.write(self.checkpoint_prefix(step))
            self._write_record()
            if improved:
                self._remove_other_checkpoints()
        return improved

    def _write_record(self):
        record = {"selection": self.selection.state(), "stopped_at_step": self.stopped_at_step,
                  "checkpoint": (os.path.basename(self.best_checkpoint)
                                 if self.best_checkpoint else None)}
        with io_utils.atomic_open(self.record_path) as f:
            json.dump(record, f, indent=1)
            f.write("\n")

    def _remove_other_checkpoints(self):
        """Our best weights of other steps (an earlier best, one a killed run wrote)."""
        for name in os.listdir(self.directory):
            match = CHECKPOINT_FILE.match(name)
            if match and (self.best_checkpoint is None
                          or int(match.group(1)) != self.selection.best_step):
                os.remove(os.path.join(self.directory, name))

    def discard(self):
        """Removes what this BestCheckpoint wrote (a non-chief worker's throwaway copy): its
        checkpoints and record, then its directory if that leaves it empty."""
        if os.path.isdir(self.directory):
            remove_own_files(self.directory, lambda name: name == BEST_RECORD_FILE
                             or CHECKPOINT_FILE.match(name))

    def result_lines(self):
        """What eval_results.txt adds: best_step, best_<metric>, and early_stopping_step when
        training stopped early."""
        # float32, as the task's own values are written (the record keeps float64 of them).
        results = {"best_step": self.selection.best_step,
                   f"best_{self.selection.metric}": np.float32(self.selection.best_value)}
        if self.stopped_at_step is not None:
            results["early_stopping_step"] = self.stopped_at_step
        return results
