"""The eval and predict passes of a run: every record's outputs gathered once
(bert_tf.training.gathering); eval's results written to output_dir/eval_results.txt and to
TensorBoard (output_dir/eval); predict's files written by the task, from every record's outputs
at once or (`Task.streams_predictions`) from each step's outputs as they come."""
import contextlib
import dataclasses
import os
import typing

import tensorflow as tf

from bert_tf.data.input_pipeline import find_bad_record
from bert_tf.errors import InputError
from bert_tf.progress import log as default_log
from bert_tf.tasks.results import print_results, write_results
from bert_tf.training import gathering, loops
from bert_tf.training.distribution import is_chief


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


def _num_steps(task, mode, batch_size, settings):
    count = task.config.records[mode].count
    if count is None:
        return settings.max_eval_steps
    if count % batch_size:
        raise InputError(f"{mode} holds {count} records, not a multiple of the batch size "
                         f"{batch_size}: the task must pad them (padding examples)")
    return count // batch_size


@dataclasses.dataclass
class Inference:
    """Eval and predict of one run's `model`. `on_phase(name)`, if given, is told as each pass
    starts ("eval", "predict"), before its first step."""
    task: typing.Any
    strategy: typing.Any
    model: typing.Any
    settings: typing.Any
    log: typing.Callable = default_log
    on_phase: typing.Optional[typing.Callable] = None

    def _steps(self, mode):
        """(batch size, steps) of eval or predict, logged."""
        settings = self.settings
        batch_size = settings.eval_batch_size if mode == "eval" else settings.predict_batch_size
        num_steps = _num_steps(self.task, mode, batch_size, settings)
        if self.on_phase is not None:
            self.on_phase(mode)
        self.log(f"***** Running {'evaluation' if mode == 'eval' else 'prediction'} *****  "
                 f"batch size {batch_size}, {num_steps} steps")
        return batch_size, num_steps

    def gather(self, mode):
        """Every `mode` record's outputs (eval_outputs or predict_outputs), in file order."""
        batch_size, num_steps = self._steps(mode)
        with naming_damaged_records(self.task, mode):
            return gathering.gather_outputs(self.strategy, self.model, self.task,
                                            self.task.dataset_fn(mode, batch_size), num_steps,
                                            mode)

    def evaluate(self, step, extra_results=None, outputs=None):
        """Runs eval on every eval record (or takes its gathered `outputs`); writes
        eval_results.txt (with `extra_results`, the best checkpoint's keys) and summaries;
        returns results."""
        task, settings = self.task, self.settings
        if outputs is None:
            outputs = self.gather("eval")
        results = task.eval_results(outputs, step, settings.eval_batch_size)
        if is_chief(self.strategy):
            write_results(dict(results, **(extra_results or {})), settings.output_dir)
            for path in task.write_eval_outputs(outputs, settings.output_dir):
                self.log(f"wrote {path}")
            writer = tf.summary.create_file_writer(os.path.join(settings.output_dir, "eval"))
            with writer.as_default():
                for key, value in results.items():
                    if key != "global_step":
                        loops.write_scalar(key, value, step)
            writer.close()
        print_results(dict(results, **(extra_results or {})))
        return results

    def predict(self, outputs=None):
        """Runs predict on every predict record (or takes its gathered `outputs`); the task
        writes its files; returns their paths."""
        task, strategy, settings = self.task, self.strategy, self.settings
        if task.streams_predictions:  # the task writes each step's outputs as they come
            batch_size, num_steps = self._steps("predict")
            with naming_damaged_records(task, "predict"):
                outputs = gathering.iterate_outputs(strategy, self.model, task,
                                                    task.dataset_fn("predict", batch_size),
                                                    num_steps, "predict")
                if not is_chief(strategy):
                    for _ in outputs:  # the other workers' steps run all the same
                        pass
                    return []
                paths = task.write_predictions(outputs, settings.output_dir)
        else:
            if outputs is None:
                outputs = self.gather("predict")
            else:
                self.log("prediction: the evaluation's outputs (the same records and weights)")
            if not is_chief(strategy):
                return []
            paths = task.write_predictions(outputs, settings.output_dir)
        for path in paths:
            self.log(f"wrote {path}")
        return paths
