"""The GLUE tasks of the sweep, in the order of the paper's Table 1: their folders in data_dir,
their test sets and the submission files they become; each task's metrics are its processor's
(bert_tf.tasks.classification.glue)."""
import dataclasses
import os
import typing

from bert_tf.data.tsv import read_rows
from bert_tf.errors import argument_error, file_error
from bert_tf.tasks.classification import glue, reader
from bert_tf.tasks.classification.reader import FileLayout


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
      processor: its `reader.get_processor` name.
      test_sets: what is predicted with the chosen run.
      index_column: the test files' column that the submission's rows are keyed by.
    """
    processor: str
    test_sets: tuple
    index_column: str = "index"

    @property
    def name(self):
        """Its folder in the GLUE layout (glue_data/<name>) and its name in the table."""
        return reader.PROCESSORS[self.processor].name

    @property
    def glue_metrics(self):
        """The keys whose mean is the task's GLUE score (the leaderboard's)."""
        return glue.GLUE_METRICS[reader.PROCESSORS[self.processor].task_metric]

    @property
    def metric(self):
        """The eval_results key the run is chosen by, and that the paper's Table 1 reports."""
        return self.glue_metrics[0]

    @property
    def column(self):
        """Its column in the table: MNLI's dev score is the matched set's."""
        return "MNLI-m" if self.name == "MNLI" else self.name

    @property
    def in_paper_average(self):
        """The paper's Table 1 "Average" leaves WNLI out."""
        return self.name != "WNLI"


def _task(name, test_sets=None, index_column="index"):
    return GlueTask(name.lower(), test_sets or (TestSet(f"{name}.tsv"),), index_column)


# In the order of the paper's Table 1 (WNLI, which it leaves out, last).
GLUE_TASKS = (
    _task("MNLI", test_sets=(TestSet("MNLI-m.tsv", "test_matched.tsv"),
                             TestSet("MNLI-mm.tsv", "test_mismatched.tsv"),
                             # The diagnostic set, predicted by the MNLI model.
                             TestSet("AX.tsv", "diagnostic.tsv", "diagnostic"))),
    _task("QQP", index_column="id"),
    _task("QNLI"),
    _task("SST-2"),
    _task("CoLA"),
    _task("STS-B"),
    _task("MRPC"),
    _task("RTE"),
    _task("WNLI"),
)


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
        processor = reader.get_processor(task.processor)
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
                path, task.index_column)
        found.append(TaskData(task, folder, indices))
    if not found:
        raise argument_error("data_dir", f"{data_dir} holds no GLUE task: none of "
                                         f"{', '.join(t.name + '/train.tsv' for t in GLUE_TASKS)}")
    return found


def test_set_processor(task_data, test_set):
    """The processor that reads `test_set` as the task's test split, and its folder."""
    processor = reader.get_processor(task_data.task.processor)
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


