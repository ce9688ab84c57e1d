"""The sweep's driver, `run_sweep`: every GLUE task of data_dir read and checked, its records
prepared once, the grid's runs (each a `bert_tf.training.runner.run`, skipped when an earlier
sweep finished it), the chosen run's test predictions, the submission and the report."""
import contextlib
import dataclasses
import logging
import os
import time

from bert_tf import io_utils
from bert_tf.progress import Progress, format_duration
from bert_tf.progress import log as default_log
from bert_tf.tasks.classification import reader
from bert_tf.tasks.classification.task import (ClassificationConfig, ClassificationTask,
                                               default_task_metric)
from bert_tf.tasks.steps import epoch_steps
from bert_tf.text.fast_tokenization import FastTokenizer
from bert_tf.training import runner
from bert_tf.training.best_checkpoint import check_metric, chosen_metric
from bert_tf.training.glue_sweep.grid import GridPoint, check_steps
from bert_tf.training.glue_sweep.records import (RUN_RESULT_FILE, SWEEP_FILE, TaskRecords,
                                                 check_sweep_settings, json_number, read_json,
                                                 write_json)
from bert_tf.training.glue_sweep.report import (METRIC_NAMES, choose, split_time,
                                                write_tables)
from bert_tf.training.glue_sweep.submission import SubmissionTask, write_submission_folder
from bert_tf.training.glue_sweep.tasks import find_tasks


class Clock:
    """A run's `on_phase` that notes when its last evaluation starts: the run's wall time then
    splits into training (to there) and evaluation (from there)."""

    def __init__(self):
        self.start = time.monotonic()
        self.eval_start = None

    def __call__(self, phase):
        if phase == "eval":
            self.eval_start = time.monotonic()

    def split(self):
        end = time.monotonic()
        eval_start = self.eval_start or end
        return eval_start - self.start, end - eval_start


def run_sweep(data_dir, output_dir, files, max_seq_length, grid, base_settings, tasks=None,
              task_options=None, warmup_proportion=0.1, check_model=None, log=None):
    """Runs the grid on every GLUE task of data_dir (or `tasks`), chooses, predicts, writes the
    submission and the tables; returns {task name: {"runs": [...], "chosen": run}}.

    Args:
      files: the ModelFiles (bert_tf.api.resolve_model_files) of the pretrained model.
      grid: GridPoints (`grid.make_grid`).
      base_settings: RunSettings every run starts from (init_checkpoint, eval and predict batch
        sizes, strategy, precision, seed, ...); each run sets its output_dir, learning rate,
        batch size, steps and seed (`seed + restart` when a seed is given).
      task_options: ClassificationConfig fields of every run's task (bucket_by_length,
        shuffle_buffer_size, ...); recorded with the settings.
      check_model: called once with a function building the model (the command line checks
        init_checkpoint with it), before any record is written.
    """
    sweep = _Sweep(os.fspath(output_dir), files, max_seq_length, grid, base_settings,
                   dict(task_options or {}), warmup_proportion, log or default_log)
    with quiet_retracing_warnings():
        return sweep.run(data_dir, tasks, check_model)


class _NoRetracingWarning(logging.Filter):
    def filter(self, record):
        return "triggered tf.function retracing" not in record.getMessage()


@contextlib.contextmanager
def quiet_retracing_warnings():
    """Every run builds its own model and step functions; TensorFlow counts them as one
    function traced again and again and warns at each run: noise here."""
    logger, quiet = logging.getLogger("tensorflow"), _NoRetracingWarning()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


@dataclasses.dataclass
class _Prepared:
    """A task ready to run: its task over its records, what its steps count, the tasks that
    predict its test sets ({submission: task}) and the seconds its records took."""
    task: ClassificationTask
    num_train: int
    predict_tasks: dict
    seconds: float


@dataclasses.dataclass
class _Sweep:
    output_dir: str
    files: object
    max_seq_length: int
    grid: list
    base_settings: object
    task_options: dict
    warmup_proportion: float
    log: object

    def run(self, data_dir, tasks, check_model):
        found = find_tasks(data_dir, tasks)
        io_utils.check_writable_dir(self.output_dir)
        shared_settings = check_sweep_settings(self.output_dir, dict(
            dataclasses.asdict(self.base_settings), **self.task_options,
            warmup_proportion=self.warmup_proportion))
        tokenizer = FastTokenizer(self.files.vocab_file, do_lower_case=self.files.do_lower_case)
        sweep_start = time.monotonic()
        prepared = self.prepare(found, tokenizer, check_model)
        # Recorded once the model and every task's records passed their checks (nothing of a
        # refused sweep is left), before its first run.
        write_json(os.path.join(self.output_dir, SWEEP_FILE), shared_settings)
        summary = self.run_grids(found, prepared)
        write_submission_folder(self.output_dir, summary)
        wall = time.monotonic() - sweep_start
        timing = split_time(summary, wall)
        write_tables(self.output_dir, summary, self.grid, timing)
        self.log(f"[run_glue] done in {format_duration(wall)}: " + ", ".join(
            f"{key} {format_duration(value)}" for key, value in timing.items()))
        return summary

    def classifier(self, data, records=None):
        """The task of `data`'s runs, over `records`."""
        labels = reader.get_processor(data.task.processor).get_labels()
        return ClassificationTask(ClassificationConfig(
            bert_config=self.files.config, max_seq_length=self.max_seq_length, labels=labels,
            task_metric=default_task_metric(data.task.processor, labels),
            records=records or {}, **self.task_options))

    def best_metric(self, data):
        """What a run that keeps its best checkpoint (or stops early) chooses it by: the
        metric the sweep chooses runs by (STS-B: Spearman's, where run_classifier's default
        is Pearson's), unless best_metric names another."""
        return chosen_metric(self.base_settings, data.task.metric)

    def prepare(self, found, tokenizer, check_model):
        """{task name: _Prepared}. Every task's files read and checked before any record is
        written (bad input: nothing written); a task prepared by an earlier sweep is not read
        again."""
        records = TaskRecords(self.output_dir, self.files, tokenizer, self.max_seq_length, dict(
            eval_batch_size=self.base_settings.eval_batch_size,
            predict_batch_size=self.base_settings.predict_batch_size, log=self.log,
            **self.task_options))
        examples = records.read(found)
        for name, splits in examples.items():
            if "train" in splits:
                check_steps(name, len(splits["train"]), self.grid)
        for data in found:
            if self.best_metric(data):
                check_metric(self.best_metric(data), self.classifier(data).eval_metric_names())
        prepared = {}
        for data in found:
            name = data.task.name
            task_records, num_train, seconds = records.prepare(
                data, examples.get(name), records.folder(data), check_model)
            check_model = None  # one check of the model
            task = self.classifier(data, task_records)
            predict_tasks = {data.task.test_sets[0].submission: task}
            for test_set in data.task.test_sets[1:]:
                if test_set.submission in data.indices:
                    test_records, _, more = records.prepare(
                        data, examples.get(test_set.submission), records.folder(data, test_set))
                    predict_tasks[test_set.submission] = self.classifier(data, test_records)
                    seconds += more
            prepared[name] = _Prepared(task, num_train, predict_tasks, seconds)
        return prepared

    def run_dir(self, name, point):
        return os.path.join(self.output_dir, name, "runs", point.name)

    def run_grids(self, found, prepared):
        """Every task's runs, its chosen run and its test predictions; the summary."""
        # The whole sweep's ETA counts training examples (examples x epochs) still to run.
        total = sum(prepared[d.task.name].num_train * p.epochs for d in found for p in self.grid)
        done = sum(prepared[d.task.name].num_train * p.epochs for d in found for p in self.grid
                   if os.path.exists(os.path.join(self.run_dir(d.task.name, p),
                                                  RUN_RESULT_FILE)))
        progress = Progress("run_glue", total=int(total), unit="train examples",
                            start=int(done))
        count, number = len(found) * len(self.grid), 0
        summary = {}
        for data in found:
            name = data.task.name
            runs = []
            for point in self.grid:
                number += 1
                runs.append(self.run_point(data, prepared[name], point, f"{number}/{count}",
                                           progress))
            chosen = choose(runs, data.task)
            self.log(f"[run_glue] {name}: chosen {chosen['name']} "
                     f"({METRIC_NAMES[data.task.metric]} "
                     f"{chosen['results'].get(data.task.metric)})")
            chosen_dir = self.run_dir(name, GridPoint(**chosen["point"]))
            summary[name] = {"task": data.task, "runs": runs, "chosen": chosen,
                             "chosen_dir": chosen_dir,
                             "prepare_seconds": prepared[name].seconds,
                             "predict_seconds": self.predict_test_sets(
                                 data, prepared[name].predict_tasks, chosen_dir)}
        return summary

    def run_point(self, data, prepared, point, number, progress):
        """The run of `point` (as an earlier sweep finished it, or run now): its record."""
        name = data.task.name
        folder = self.run_dir(name, point)
        result_path = os.path.join(folder, RUN_RESULT_FILE)
        if os.path.exists(result_path):
            run = read_json(result_path)
            self.log(f"[run_glue] {name} {point.name}: run {number} finished earlier "
                     f"({data.task.metric} = {run['results'].get(data.task.metric)})")
            return run
        self.log(f"[run_glue] {name} {point.name}: run {number} ({point.setting})")
        steps, warmup = epoch_steps(prepared.num_train, point.batch_size, point.epochs,
                                    self.warmup_proportion)
        base = self.base_settings
        settings = dataclasses.replace(
            base, output_dir=folder, do_train=True, do_eval=True, do_predict=False,
            learning_rate=point.learning_rate, train_batch_size=point.batch_size,
            num_train_steps=steps, num_warmup_steps=warmup,
            seed=None if base.seed is None else base.seed + point.restart,
            best_metric=self.best_metric(data))
        clock = Clock()
        results = runner.run(prepared.task, settings, log=self.log, on_phase=clock)
        train_seconds, eval_seconds = clock.split()
        run = {"task": name, "point": dataclasses.asdict(point), "name": point.name,
               "results": {key: json_number(value) for key, value in results.items()},
               "train_seconds": train_seconds, "eval_seconds": eval_seconds,
               "num_train_steps": steps}
        write_json(result_path, run)
        progress.update(int(prepared.num_train * point.epochs), force=True, task=name,
                        run=number)
        return run

    def predict_test_sets(self, data, predict_tasks, chosen_dir):
        """The chosen run's submission files (those not written yet), predicted from its kept
        best checkpoint if it kept one; returns the seconds it took."""
        seconds = 0.0
        for submission, predict_task in predict_tasks.items():
            path = os.path.join(chosen_dir, "submission", submission)
            if os.path.exists(path):
                continue
            started = time.monotonic()
            task_for_file = SubmissionTask(predict_task.config, path, data.indices[submission])
            settings = dataclasses.replace(
                self.base_settings, output_dir=chosen_dir, do_train=False, do_eval=False,
                do_predict=True, eval_during_training=False, keep_best_checkpoint=False,
                best_metric=None, early_stopping_patience=0, early_stopping_threshold=0.0)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            runner.run(task_for_file, settings, log=self.log)
            seconds += time.monotonic() - started
        return seconds
