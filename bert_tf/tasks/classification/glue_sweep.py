"""The BERT paper's GLUE protocol (section 4.1): per task, a grid of fine-tuning runs (learning
rates x batch sizes x epochs x restarts) on records prepared once, the best run on dev by the
task's metric, its test predictions in the GLUE leaderboard's submission format, and the dev
scores in the layout of the paper's Table 1. run/run_glue.py is its command line; the numbers
and how they are averaged: docs/fine_tuning.md (run_glue).

Layout of output_dir: <task>/records (the task's records, `prepared.json` once they are
complete), <task>/runs/<grid point> (each run's output_dir; `run_result.json` once it is
finished, written atomically: a sweep started again skips it), sweep.json (the run settings
every run shares: a sweep started again must have the same), submission/ and submission.zip
(one file per task, `index<TAB>prediction`), results.md and results.tsv.
"""
import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import os
import shutil
import time
import typing
import zipfile

from bert_tf import io_utils
from bert_tf.data.tsv import read_rows
from bert_tf.errors import InputError, arg, argument_error, file_error
from bert_tf.progress import Progress, format_duration
from bert_tf.tasks.base import Records
from bert_tf.tasks.classification import glue
from bert_tf.tasks.classification.reader import FileLayout
from bert_tf.tasks.classification.task import (TASK_METRICS, ClassificationConfig,
                                               ClassificationTask, prepare_task)
from bert_tf.tasks.preprocessor import read_splits
from bert_tf.text.fast_tokenization import FastTokenizer
from bert_tf.training import runner
from bert_tf.training.best_checkpoint import check_metric


@dataclasses.dataclass(frozen=True)
class TestSet:
    """A test file predicted for the leaderboard: its folder in data_dir (None: the task's),
    file name, and the submission file it becomes."""
    submission: str
    file_name: str = "test.tsv"
    folder: typing.Optional[str] = None


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """A GLUE task of the sweep.

    Attributes:
      name: its folder in the GLUE layout (glue_data/<name>) and its name in the table.
      processor: its `glue.get_processor` name.
      metric: the eval_results key the run is chosen by, and that the paper's Table 1 reports.
      glue_metrics: the keys whose mean is the task's GLUE score (the leaderboard's).
      test_sets: what is predicted with the chosen run.
    """
    name: str
    processor: str
    metric: str
    glue_metrics: tuple
    test_sets: tuple

    @property
    def column(self):
        """Its column in the table: MNLI's dev score is the matched set's."""
        return "MNLI-m" if self.name == "MNLI" else self.name

    @property
    def in_paper_average(self):
        """The paper's Table 1 "Average" leaves WNLI out."""
        return self.name != "WNLI"


def _task(name, metric="eval_accuracy", glue_metrics=None, test_sets=None):
    return GlueTask(name, name.lower(), metric, glue_metrics or (metric,),
                    test_sets or (TestSet(f"{name}.tsv"),))


# In the order of the paper's Table 1 (WNLI, which it leaves out, last).
GLUE_TASKS = (
    _task("MNLI", test_sets=(TestSet("MNLI-m.tsv", "test_matched.tsv"),
                             TestSet("MNLI-mm.tsv", "test_mismatched.tsv"),
                             # The diagnostic set, predicted by the MNLI model.
                             TestSet("AX.tsv", "diagnostic.tsv", "diagnostic"))),
    _task("QQP", "eval_f1", ("eval_f1", "eval_accuracy")),
    _task("QNLI"),
    _task("SST-2"),
    _task("CoLA", "eval_matthews_corrcoef"),
    _task("STS-B", "eval_spearman", ("eval_pearson", "eval_spearman")),
    _task("MRPC", "eval_f1", ("eval_f1", "eval_accuracy")),
    _task("RTE"),
    _task("WNLI"),
)
METRIC_NAMES = {"eval_accuracy": "acc", "eval_f1": "F1", "eval_matthews_corrcoef": "MCC",
                "eval_pearson": "Pearson", "eval_spearman": "Spearman"}
# The test file's column that the submission's rows are keyed by.
INDEX_COLUMNS = {"QQP": "id"}
SUBMISSION_HEADER = "index\tprediction\n"

# The paper's section 4.1 protocol.
PAPER_LEARNING_RATES = (5e-5, 4e-5, 3e-5, 2e-5)
PAPER_BATCH_SIZES = (32,)
PAPER_EPOCHS = (3.0,)

PREPARED_FILE = "prepared.json"
SWEEP_FILE = "sweep.json"
RUN_RESULT_FILE = "run_result.json"


@dataclasses.dataclass(frozen=True)
class GridPoint:
    learning_rate: float
    batch_size: int
    epochs: float
    restart: int = 0

    @property
    def name(self):
        """Its run folder's name."""
        return (f"lr{self.learning_rate:g}_bs{self.batch_size}_ep{self.epochs:g}"
                f"_r{self.restart}")

    @property
    def setting(self):
        return (f"lr {self.learning_rate:g}, batch {self.batch_size}, {self.epochs:g} epochs"
                + (f", restart {self.restart}" if self.restart else ""))


def make_grid(learning_rates=PAPER_LEARNING_RATES, batch_sizes=PAPER_BATCH_SIZES,
              epochs=PAPER_EPOCHS, restarts=1):
    """Every (learning rate, batch size, epochs, restart) in that nesting order; InputError
    naming the argument of a value out of range or given twice (or two values that the run
    folders' names, 6 significant digits, would not tell apart)."""
    checks = (("learning_rates", learning_rates, float, lambda v: 0 < v < 1, "in (0, 1)"),
              ("batch_sizes", batch_sizes, int, lambda v: v >= 1, "positive integers"),
              ("epochs", epochs, float, lambda v: 0 < v <= 1000, "in (0, 1000]"))
    values = {}
    for name, given, kind, in_range, what in checks:
        if not given:
            raise argument_error(name, "needs at least one value")
        parsed = []
        for value in given:
            try:
                number = kind(value)
            except (TypeError, ValueError):
                raise argument_error(name, f"must be {what}, got {value!r}") from None
            if kind is int and number != float(value):
                raise argument_error(name, f"must be {what}, got {value!r}")
            if not (math.isfinite(number) and in_range(number)):
                raise argument_error(name, f"must be {what}, got {value!r}")
            # Its runs' folder names (GridPoint.name) must tell it from the others.
            shown = f"{number:g}" if kind is float else str(number)
            if any(shown == (f"{other:g}" if kind is float else str(other)) for other in parsed):
                raise argument_error(name, f"gives {value!r} twice (as {shown} in its runs' "
                                           f"folder names)")
            parsed.append(number)
        values[name] = parsed
    if isinstance(restarts, bool) or not isinstance(restarts, int) or not 1 <= restarts <= 100:
        raise argument_error("restarts", f"must be an integer in [1, 100], got {restarts!r}")
    return [GridPoint(lr, bs, ep, r) for lr in values["learning_rates"]
            for bs in values["batch_sizes"] for ep in values["epochs"] for r in range(restarts)]


# ---- The data.
@dataclasses.dataclass
class TaskData:
    """A GLUE task found in data_dir: its folder and the test files' indices
    ({submission: [index strings]})."""
    task: GlueTask
    folder: str
    indices: dict


def _test_path(data_dir, task_folder, test_set):
    folder = os.path.join(data_dir, test_set.folder) if test_set.folder else task_folder
    return os.path.join(folder, test_set.file_name)


def read_indices(path, column_name):
    """The values of the index column (`column_name`, found in the header) of each row of a
    test file; InputError naming the file when the header lacks it."""
    rows = read_rows(path, "\t", what="test file")
    if not rows or column_name not in rows[0][1]:
        raise file_error(path, f"has no {column_name!r} column in its header line (the "
                               f"submission's rows are keyed by it)", 1)
    column = rows[0][1].index(column_name)
    indices = []
    for line_number, row in rows[1:]:
        if len(row) <= column:
            raise file_error(path, f"has no {column_name!r} field", line_number)
        indices.append(row[column])
    return indices


def find_tasks(data_dir, names=None):
    """The GLUE tasks in data_dir (its <task>/train.tsv, dev and test files), in Table 1's
    order, each test file's index column read; `names` (None: every task found) must all be
    there. InputError naming data_dir when none is, or the file that is missing."""
    if not os.path.isdir(data_dir):
        raise argument_error("data_dir", f"{data_dir} is not a directory")
    wanted = None
    if names:
        known = {task.name.lower(): task for task in GLUE_TASKS}
        wanted = set()
        for name in names:
            if name.strip().lower() not in known:
                raise argument_error("tasks", f"unknown GLUE task {name!r}; the tasks are "
                                              f"{', '.join(t.name for t in GLUE_TASKS)}")
            wanted.add(known[name.strip().lower()].name)
    found = []
    for task in GLUE_TASKS:
        folder = os.path.join(data_dir, task.name)
        processor = glue.get_processor(task.processor)
        needed = [layout.file_name for layout in processor.layouts.values()]
        if wanted is None:
            if not os.path.isfile(os.path.join(folder, processor.layouts["train"].file_name)):
                continue
        elif task.name not in wanted:
            continue
        for file_name in needed:
            if not os.path.isfile(os.path.join(folder, file_name)):
                raise argument_error("data_dir", f"{os.path.join(folder, file_name)} not "
                                                 f"found: {task.name} needs "
                                                 f"{', '.join(needed)}")
        indices = {}
        for test_set in task.test_sets:
            path = _test_path(data_dir, folder, test_set)
            if test_set.folder and not os.path.isfile(path):
                continue  # the diagnostic set is optional
            indices[test_set.submission] = read_indices(
                path, INDEX_COLUMNS.get(task.name, "index"))
        found.append(TaskData(task, folder, indices))
    if not found:
        raise argument_error("data_dir", f"{data_dir} holds no GLUE task: none of "
                                         f"{', '.join(t.name + '/train.tsv' for t in GLUE_TASKS)}")
    return found


def _test_set_processor(task_data, test_set):
    """The processor that reads `test_set` as the task's test split, and its folder."""
    processor = glue.get_processor(task_data.task.processor)
    layout = processor.layouts["test"]
    if test_set.file_name != layout.file_name:
        processor.layouts = dict(processor.layouts,
                                 test=dataclasses.replace(layout, file_name=test_set.file_name))
    folder = task_data.folder
    if test_set.folder:  # AX: index, sentence1, sentence2
        processor.layouts = dict(processor.layouts, test=FileLayout(
            test_set.file_name, "test", True, 1, 2, guid=0))
        folder = os.path.join(os.path.dirname(task_data.folder), test_set.folder)
    return processor, folder


# ---- The runs.
def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_fingerprint(source_folder):
    """Each .tsv file of `source_folder`: [its size, its SHA-256]."""
    return {name: [os.path.getsize(os.path.join(source_folder, name)),
                   _sha256(os.path.join(source_folder, name))]
            for name in sorted(os.listdir(source_folder)) if name.endswith(".tsv")}


def check_prepared_inputs(records_folder, inputs):
    """An InputError naming the records' PREPARED_FILE when an earlier sweep prepared them from
    other inputs (`inputs`: its data's `data_fingerprint`, the vocabulary's SHA-256, the casing
    and max_seq_length): the runs would train on stale records."""
    marker = os.path.join(records_folder, PREPARED_FILE)
    recorded = _read_json(marker).get("inputs")
    if recorded != inputs:
        changed = sorted(key for key in inputs if (recorded or {}).get(key) != inputs[key])
        raise file_error(marker, f"an earlier sweep prepared these records from other inputs "
                                 f"({', '.join(changed)} differ): give a new "
                                 f"{arg('output_dir')}, or remove {records_folder} to prepare "
                                 f"them again")


def check_sweep_settings(output_dir, settings):
    """An InputError naming output_dir/SWEEP_FILE when an earlier sweep there recorded other
    run settings than `settings` (the ones every run shares: init_checkpoint, seed, optimizer,
    ...): its finished runs would be reused beside runs of other settings. Returns `settings`
    as recorded (JSON)."""
    settings = json.loads(json.dumps(settings, sort_keys=True, default=str))
    path = os.path.join(output_dir, SWEEP_FILE)
    if os.path.exists(path):
        recorded = _read_json(path)
        changed = sorted(key for key in set(recorded) | set(settings)
                         if recorded.get(key) != settings.get(key))
        if changed:
            raise file_error(path, f"an earlier sweep in this output_dir ran with other "
                                   f"settings ({', '.join(changed)} differ): give a new "
                                   f"{arg('output_dir')}, or the same settings to continue it")
    return settings


def _write_json(path, value):
    with io_utils.atomic_open(path) as f:
        json.dump(value, f, indent=1, sort_keys=True)
        f.write("\n")


def _read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _number(value):
    """A result value as a JSON number (NaN: None)."""
    value = float(value)
    return value if math.isfinite(value) else None


class Clock:
    """A runner log that also notes when the final evaluation starts: a run's wall time then
    splits into training (to there) and evaluation (from there)."""

    def __init__(self, log):
        self._log = log
        self.start = time.monotonic()
        self.eval_start = None

    def __call__(self, message):
        if message.startswith("***** Running evaluation"):
            self.eval_start = time.monotonic()
        self._log(message)

    def split(self):
        end = time.monotonic()
        eval_start = self.eval_start or end
        return eval_start - self.start, end - eval_start


class SubmissionTask(ClassificationTask):
    """Predicts a test set into `path`: `index<TAB>prediction` rows, the test file's indices,
    the label's name (STS-B: the score)."""

    def __init__(self, config, path, indices):
        super().__init__(config)
        self.path, self.indices = path, indices

    def write_predictions(self, outputs, output_dir):
        outputs = self.per_example(outputs)
        values = outputs["probabilities"][outputs["is_real_example"] > 0]
        if len(values) != len(self.indices):
            raise InputError(f"{len(values)} predictions for the {len(self.indices)} rows of "
                             f"the test file of {self.path}")
        if self.config.regression:
            labels = [f"{float(row[0]):.3f}" for row in values]
        else:
            labels = [self.config.labels[int(row.argmax())] for row in values]
        write_submission(self.path, self.indices, labels)
        return [self.path]


def write_submission(path, indices, labels):
    with io_utils.atomic_open(path) as f:
        f.write(SUBMISSION_HEADER)
        for index, label in zip(indices, labels):
            f.write(f"{index}\t{label}\n")


def task_score(results, task):
    """The task's GLUE score: the mean of its GLUE metrics (None if one is not a number)."""
    values = [results.get(key) for key in task.glue_metrics]
    return None if any(v is None for v in values) else sum(values) / len(values)


def choose(runs, task):
    """The run with the best dev score by the task's metric (the first in grid order of
    equal ones; runs whose score is not a number come last), or None."""
    best = None
    for run in runs:
        score = run["results"].get(task.metric)
        if score is not None and (best is None or score > best["results"][task.metric]):
            best = run
    return best or (runs[0] if runs else None)


def check_steps(task_name, num_train, grid):
    """Every grid point makes training steps of the task's `num_train` examples: otherwise an
    InputError naming the grid's argument."""
    for point in grid:
        if int(num_train / point.batch_size * point.epochs) < 1:
            raise argument_error("epochs", f"{point.epochs:g} epochs of the {num_train} {task_name} "
                                           f"training examples at batch size {point.batch_size} "
                                           f"is no training step")


def run_sweep(data_dir, output_dir, files, max_seq_length, grid, base_settings, tasks=None,
              task_options=None, warmup_proportion=0.1, check_model=None, log=None):
    """Runs the grid on every GLUE task of data_dir (or `tasks`), chooses, predicts, writes the
    submission and the tables; returns {task name: {"runs": [...], "chosen": run}}.

    Args:
      files: the ModelFiles (bert_tf.api.resolve_model_files) of the pretrained model.
      grid: GridPoints (`make_grid`).
      base_settings: RunSettings every run starts from (init_checkpoint, eval and predict batch
        sizes, strategy, precision, seed, ...); each run sets its output_dir, learning rate,
        batch size, steps and seed (`seed + restart` when a seed is given).
      task_options: ClassificationConfig fields of every run's task (bucket_by_length,
        shuffle_buffer_size, ...); recorded with the settings.
      check_model: called once with a function building the model (the command line checks
        init_checkpoint with it), before any record is written.
    """

    log = log or runner.log
    output_dir = os.fspath(output_dir)
    with quiet_retracing_warnings():
        return _run_sweep(data_dir, output_dir, files, max_seq_length, grid, base_settings,
                          tasks, dict(task_options or {}), warmup_proportion, check_model,
                          log)


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


def _run_sweep(data_dir, output_dir, files, max_seq_length, grid, base_settings, tasks,
               task_options, warmup_proportion, check_model, log):
    found = find_tasks(data_dir, tasks)
    io_utils.check_writable_dir(output_dir)
    shared_settings = check_sweep_settings(output_dir, dict(
        dataclasses.asdict(base_settings), **task_options, warmup_proportion=warmup_proportion))
    tokenizer = FastTokenizer(files.vocab_file, do_lower_case=files.do_lower_case)
    sweep_start = time.monotonic()

    # Every task's files read and checked before any record is written (bad input: nothing
    # written); a task prepared by an earlier sweep is not read again.
    def records_dir(data, test_set=None):
        folder = os.path.join(output_dir, data.task.name, "records")
        return folder if test_set is None else os.path.join(
            folder, os.path.splitext(test_set.submission)[0])

    def is_prepared(folder):
        return os.path.exists(os.path.join(folder, PREPARED_FILE))

    # What each records folder is made from; a folder's data (MNLI's serves three test sets)
    # and the vocabulary are read once.
    model_inputs = {"vocab_file": _sha256(files.vocab_file),
                    "do_lower_case": bool(files.do_lower_case), "max_seq_length": max_seq_length}
    folder_data = {}

    def fingerprint(source_folder):
        if source_folder not in folder_data:
            folder_data[source_folder] = data_fingerprint(source_folder)
        return dict(model_inputs, data=folder_data[source_folder])

    examples, inputs = {}, {}
    for data in found:
        inputs[records_dir(data)] = fingerprint(data.folder)
        if not is_prepared(records_dir(data)):
            examples[data.task.name] = read_splits(glue.get_processor(data.task.processor),
                                                   data.folder, ("train", "eval", "predict"))
        for test_set in data.task.test_sets[1:]:
            if test_set.submission in data.indices:
                processor, folder = _test_set_processor(data, test_set)
                inputs[records_dir(data, test_set)] = fingerprint(folder)
                if not is_prepared(records_dir(data, test_set)):
                    examples[test_set.submission] = read_splits(processor, folder, ("predict",))
    for folder, fingerprint in inputs.items():
        if is_prepared(folder):
            check_prepared_inputs(folder, fingerprint)
    for name, splits in examples.items():
        if "train" in splits:
            check_steps(name, len(splits["train"]), grid)

    def classifier(data, records=None):
        labels = glue.get_processor(data.task.processor).get_labels()
        return ClassificationTask(ClassificationConfig(
            bert_config=files.config, max_seq_length=max_seq_length, labels=labels,
            task_metric=TASK_METRICS.get(data.task.processor,
                                         "correlation" if labels is None else None),
            records=records or {}, **task_options))

    # Runs that keep their best checkpoint (or stop early) choose it by the metric the sweep
    # chooses runs by (STS-B: Spearman's, where run_classifier's default is Pearson's), unless
    # best_metric names another.
    def best_metric(data):
        return (base_settings.best_metric or data.task.metric) if base_settings.chooses_best \
            else None

    for data in found:
        if best_metric(data):
            check_metric(best_metric(data), classifier(data).eval_metric_names())
    options = dict(eval_batch_size=base_settings.eval_batch_size,
                   predict_batch_size=base_settings.predict_batch_size,
                   log=log, **task_options)

    def prepared_task(data, splits, folder, check=None):
        """The task over the records of `splits` in `folder`, written now unless an earlier
        sweep did (its PREPARED_FILE); (task, num_train, seconds spent preparing)."""
        marker = os.path.join(folder, PREPARED_FILE)
        labels = glue.get_processor(data.task.processor).get_labels()
        started = time.monotonic()
        if is_prepared(folder):
            record = _read_json(marker)
        else:
            prepared = prepare_task(files.config, splits, labels, tokenizer, max_seq_length,
                                    folder, task_name=data.task.processor, check_model=check,
                                    # Each run counts its own steps (`check_steps` checked
                                    # them); prepare's count of one epoch at batch 1 is unused.
                                    train_batch_size=1, num_train_epochs=1.0, **options)
            record = {"num_train": prepared.num_train, "seconds": time.monotonic() - started,
                      "inputs": inputs[folder],
                      "records": {mode: [os.path.basename(r.paths[0]), r.count]
                                  for mode, r in prepared.task.config.records.items()}}
            _write_json(marker, record)
        records = {mode: Records((os.path.join(folder, file_name),), count)
                   for mode, (file_name, count) in record["records"].items()}
        return classifier(data, records), record["num_train"], record["seconds"]

    prepared = {}
    for data in found:
        name = data.task.name
        task, num_train, seconds = prepared_task(data, examples.get(name), records_dir(data),
                                                 check_model)
        check_model = None  # one check of the model
        predict_tasks = {data.task.test_sets[0].submission: task}
        for test_set in data.task.test_sets[1:]:
            if test_set.submission in data.indices:
                predict_tasks[test_set.submission], _, more = prepared_task(
                    data, examples.get(test_set.submission), records_dir(data, test_set))
                seconds += more
        prepared[name] = (task, num_train, predict_tasks, seconds)

    # Recorded once the model and every task's records passed their checks (nothing of a
    # refused sweep is left), before its first run.
    _write_json(os.path.join(output_dir, SWEEP_FILE), shared_settings)

    # The whole sweep's ETA counts training examples (examples x epochs) still to run.
    def run_dir(name, point):
        return os.path.join(output_dir, name, "runs", point.name)

    total = sum(prepared[d.task.name][1] * p.epochs for d in found for p in grid)
    done = sum(prepared[d.task.name][1] * p.epochs for d in found for p in grid
               if os.path.exists(os.path.join(run_dir(d.task.name, p), RUN_RESULT_FILE)))
    progress = Progress("run_glue", total=int(total), unit="train examples", start=int(done))
    count, number = len(found) * len(grid), 0
    summary = {}
    for data in found:
        name = data.task.name
        task, num_train, predict_tasks, seconds = prepared[name]
        runs = []
        for point in grid:
            number += 1
            folder = run_dir(name, point)
            result_path = os.path.join(folder, RUN_RESULT_FILE)
            if os.path.exists(result_path):
                runs.append(_read_json(result_path))
                log(f"[run_glue] {name} {point.name}: run {number}/{count} finished earlier "
                    f"({data.task.metric} = "
                    f"{runs[-1]['results'].get(data.task.metric)})")
                continue
            log(f"[run_glue] {name} {point.name}: run {number}/{count} ({point.setting})")
            steps, warmup = runner.epoch_steps(num_train, point.batch_size, point.epochs,
                                               warmup_proportion)
            seed = None if base_settings.seed is None else base_settings.seed + point.restart
            settings = dataclasses.replace(
                base_settings, output_dir=folder, do_train=True, do_eval=True, do_predict=False,
                learning_rate=point.learning_rate, train_batch_size=point.batch_size,
                num_train_steps=steps, num_warmup_steps=warmup, seed=seed,
                best_metric=best_metric(data))
            clock = Clock(log)
            results = runner.run(task, settings, log=clock)
            train_seconds, eval_seconds = clock.split()
            run = {"task": name, "point": dataclasses.asdict(point), "name": point.name,
                   "results": {key: _number(value) for key, value in results.items()},
                   "train_seconds": train_seconds, "eval_seconds": eval_seconds,
                   "num_train_steps": steps}
            _write_json(result_path, run)
            runs.append(run)
            progress.update(int(num_train * point.epochs), force=True,
                            task=name, run=f"{number}/{count}")
        chosen = choose(runs, data.task)
        log(f"[run_glue] {name}: chosen {chosen['name']} ({METRIC_NAMES[data.task.metric]} "
            f"{chosen['results'].get(data.task.metric)})")
        predict_seconds = 0.0
        chosen_dir = run_dir(name, GridPoint(**chosen["point"]))
        for submission, predict_task in predict_tasks.items():
            path = os.path.join(chosen_dir, "submission", submission)
            if not os.path.exists(path):
                started = time.monotonic()
                task_for_file = SubmissionTask(predict_task.config, path,
                                               data.indices[submission])
                # Predicts from the run's kept best checkpoint, if it kept one.
                settings = dataclasses.replace(
                    base_settings, output_dir=chosen_dir, do_train=False, do_eval=False,
                    do_predict=True, eval_during_training=False, keep_best_checkpoint=False,
                    best_metric=None, early_stopping_patience=0, early_stopping_threshold=0.0)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                runner.run(task_for_file, settings, log=log)
                predict_seconds += time.monotonic() - started
        summary[name] = {"task": data.task, "runs": runs, "chosen": chosen,
                         "chosen_dir": chosen_dir, "prepare_seconds": seconds,
                         "predict_seconds": predict_seconds}

    write_submission_folder(output_dir, summary)
    wall = time.monotonic() - sweep_start
    timing = split_time(summary, wall)
    write_tables(output_dir, summary, grid, timing)
    log(f"[run_glue] done in {format_duration(wall)}: " + ", ".join(
        f"{key} {format_duration(value)}" for key, value in timing.items()))
    return summary


def split_time(summary, wall):
    """How the sweep's time splits: preparing the records, training and evaluating each run
    (as recorded when they were done, by this sweep or an earlier one), predicting the test
    sets (this sweep), and this sweep's wall time."""
    preparation = sum(s["prepare_seconds"] for s in summary.values())
    training = sum(r["train_seconds"] for s in summary.values() for r in s["runs"])
    evaluation = sum(r["eval_seconds"] for s in summary.values() for r in s["runs"])
    prediction = sum(s["predict_seconds"] for s in summary.values())
    return {"preparation": preparation, "training": training, "evaluation": evaluation,
            "test prediction": prediction, "this sweep's wall time": wall}


def write_submission_folder(output_dir, summary):
    """output_dir/submission/<file> of every test set, from the chosen runs, and
    submission.zip of them (what gluebenchmark.com takes)."""
    folder = os.path.join(output_dir, "submission")
    os.makedirs(folder, exist_ok=True)
    names = []
    for entry in summary.values():
        for test_set in entry["task"].test_sets:
            source = os.path.join(entry["chosen_dir"], "submission", test_set.submission)
            if os.path.exists(source):
                with io_utils.atomic_output(os.path.join(folder, test_set.submission)) as tmp:
                    shutil.copyfile(source, tmp)
                names.append(test_set.submission)
    with io_utils.atomic_output(os.path.join(output_dir, "submission.zip")) as tmp:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
            for name in names:
                archive.write(os.path.join(folder, name), name)


# ---- The table.
def _percent(value):
    return "" if value is None else f"{100 * value:.1f}"


def averages(summary):
    """(the paper's Table 1 average, the GLUE score) of the chosen runs' dev scores, each over
    the tasks there are (None: no task)."""
    paper = [e["chosen"]["results"].get(e["task"].metric) for e in summary.values()
             if e["task"].in_paper_average]
    glue_scores = [task_score(e["chosen"]["results"], e["task"]) for e in summary.values()]
    mean = lambda values: (None if not values or None in values
                           else sum(values) / len(values))
    return mean(paper), mean(glue_scores)


AVERAGES_NOTE = (
    "Average: the paper's Table 1 average (WNLI left out; each task's metric: MCC for CoLA, "
    "Spearman for STS-B, F1 for MRPC and QQP, accuracy for the others; MNLI matched). GLUE "
    "score: the GLUE benchmark's, the mean over every task (WNLI included) of each task's "
    "score, which for MRPC and QQP is the mean of F1 and accuracy and for STS-B of Pearson and "
    "Spearman (the benchmark also averages MNLI matched and mismatched; here dev matched). "
    "Both over the tasks of this sweep, on dev, x100.")


def table_rows(summary, grid, timing):
    """The table: a header, a row per grid point (each task's dev score by its metric), the
    chosen runs' row with the averages, and the chosen settings."""
    entries = list(summary.values())
    header = ["setting"] + [f"{e['task'].column} ({METRIC_NAMES[e['task'].metric]})"
                            for e in entries] + ["Average (paper)", "GLUE score"]
    rows = []
    for point in grid:
        cells = [point.setting]
        for e in entries:
            run = next((r for r in e["runs"] if r["name"] == point.name), None)
            cells.append(_percent(run and run["results"].get(e["task"].metric)))
        rows.append(cells + ["", ""])
    paper, glue_score = averages(summary)
    rows.append(["chosen on dev"] + [_percent(e["chosen"]["results"].get(e["task"].metric))
                                     for e in entries] + [_percent(paper), _percent(glue_score)])
    rows.append(["chosen setting"] + [GridPoint(**e["chosen"]["point"]).setting
                                      for e in entries] + ["", ""])
    return header, rows


def write_tables(output_dir, summary, grid, timing):
    header, rows = table_rows(summary, grid, timing)
    with io_utils.atomic_open(os.path.join(output_dir, "results.tsv")) as f:
        for cells in [header] + rows:
            f.write("\t".join(cells) + "\n")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    lines += ["", AVERAGES_NOTE, "",
              "Wall time: " + ", ".join(f"{key} {format_duration(value)}"
                                        for key, value in timing.items())
              + " (each task's records prepared once and shared by its runs)."]
    with io_utils.atomic_open(os.path.join(output_dir, "results.md")) as f:
        f.write("\n".join(lines) + "\n")
