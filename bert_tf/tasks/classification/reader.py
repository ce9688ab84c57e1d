"""A classification task's files read into `InputExample`s: fixed layouts (`FileLayout`, the
GLUE tasks' in `glue`) or a user's TSV/CSV described by options (`TsvProcessor`); a bad row is
an error naming its file and line.
"""
import dataclasses
import itertools
import math
import os
from typing import Optional, Union

from bert_tf.data.tsv import (column_index, delimiter_name, parse_column, parse_delimiter,
                              read_rows, with_header_hint)
from bert_tf.errors import InputError, arg, argument_error, file_error
from bert_tf.io_utils import is_url, split_comma_list
from bert_tf.tasks.split_files import SplitFiles, reader_by_name, task_key
from bert_tf.tokenization import convert_to_unicode


@dataclasses.dataclass
class InputExample:
    """A single training/test example for simple sequence classification.

    Args:
      guid: unique id of the example ("train-12", "dev_matched-3", ...).
      text_a: the untokenized text of the first sequence (the only one for single-text tasks).
      text_b: the untokenized text of the second sequence of a pair task, else None.
      label: the label (a string from the task's label list), a float score for regression
        tasks, a tuple of labels (none, one or more) for multi-label tasks; for test examples a
        placeholder (the first label, 0.0, or no label).
    """
    guid: str
    text_a: str
    text_b: Optional[str] = None
    label: Union[str, float, None] = None


@dataclasses.dataclass(frozen=True)
class FileLayout:
    """Where one file (one split of a task) keeps the fields of its examples.

    Columns are 0-based; `label` -1 means the last column (MNLI's gold label). The guid is
    "<set_type>-<id>", the id being the `guid` column's value or, when that is None, the
    row's index in the file counting the header (the original's `enumerate(lines)`).
    """
    file_name: str
    set_type: str
    has_header: bool
    text_a: int
    text_b: Optional[int] = None
    label: Optional[int] = None  # None: no labels (a test set; the first label stands in)
    guid: Optional[int] = None
    label_aliases: tuple = ()  # (file's label, the label it means) pairs
    strip_labels: bool = False  # " pos" is "pos" (user files; GLUE labels are used as is)
    delimiter: str = "\t"
    label_separator: Optional[str] = None  # multi-label: the labels of a row joined by this
    # A user's file read without a header: the argument that would skip one (skip_header),
    # which an error about line 1's label suggests (a header's label column is no label).
    header_argument: Optional[str] = None

    @property
    def columns_needed(self):
        used = [c for c in (self.text_a, self.text_b, self.label, self.guid) if c is not None]
        return max(c + 1 if c >= 0 else -c for c in used)


# What else joins several labels in one field. A multi-label file whose labels are inferred
# (no label list) and hold one of these (other than the separator given) most likely joins
# them with it: "pos;short" read with "," would make a label of it. "/" and "+" are left out:
# single labels such as "Sci/Tech" (AG News) or "C++" hold them.
LIKELY_LABEL_SEPARATORS = (",", ";", "|")


def _check_no_other_separator(path, line_number, value, label_separator):
    """InputError naming the line when a label of multi-label field `value` (split by
    `label_separator`) holds a character of LIKELY_LABEL_SEPARATORS that the separator does
    not contain."""
    for label, other in itertools.product(value.split(label_separator), LIKELY_LABEL_SEPARATORS):
        if other in label and other not in label_separator:
            label = label.strip()
            raise file_error(path, f"label {label!r} holds {other!r}, which "
                                   f"{arg('label_separator')}={label_separator!r} does not "
                                   f"split: if {other!r} joins several labels, pass "
                                   f"{arg('label_separator')}='{other}'; if it belongs to the "
                                   f"label, give the labels ({arg('label_list')}, taken as "
                                   f"listed)", line_number)


def _parse_label(path, line_number, value, labels, regression, label_separator=None):
    """A row's label, checked: a finite float for regression, else a member of `labels`
    (None: not checked, when the labels are being inferred); with `label_separator` (multi-label)
    a tuple of such labels, in the row's order, each once (pieces stripped of spaces, empty
    pieces ignored: "a, b," is ("a", "b"), "" none)."""
    if label_separator is not None:
        parsed = []
        for piece in value.split(label_separator):
            piece = piece.strip()
            if piece and piece not in parsed:
                parsed.append(_parse_label(path, line_number, piece, labels, False))
        return tuple(parsed)
    if regression:
        try:
            score = float(value)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise file_error(path, f"regression label {value!r} is not a finite number",
                             line_number)
        return score
    if labels is not None and value not in labels:
        raise file_error(path, unknown_label(value, labels), line_number)
    return value


def unknown_label(label, labels):
    """What the readers and the converter say of a label that is not one of `labels`."""
    return f"label {label!r} is not one of the labels {list(labels)}"


def examples_from_rows(path, rows, layout, labels, regression=False, keep_row=None):
    """InputExamples of the rows of `path` (from `read_rows`) laid out as `layout`.

    Args:
      labels: the task's label list; each row's label must be one of them (None: not checked).
        A file without labels gets the first label (0.0 for regression) as a placeholder.
      regression: labels are float scores.
      keep_row: optional predicate on a row's fields; rows it rejects are skipped (XNLI keeps
        one language).
    Raises InputError naming the file and line of a row with too few fields or a bad label.
    """
    needed = layout.columns_needed
    expected = f"expected {needed} or more {delimiter_name(layout.delimiter)} fields"
    if layout.label is not None:
        placeholder = None
    elif layout.label_separator is not None:
        placeholder = ()  # multi-label: no label
    else:
        placeholder = 0.0 if regression else (labels[0] if labels else None)
    aliases = dict(layout.label_aliases)
    examples = []
    for i, (line_number, row) in enumerate(rows):
        if layout.has_header and i == 0:
            continue
        if not row:
            raise file_error(path, f"is an empty line; {expected}", line_number)
        if keep_row is not None and not keep_row(row):
            continue
        if len(row) < needed:
            raise file_error(path, f"has {len(row)} field(s); {expected}", line_number)
        row_id = i if layout.guid is None else convert_to_unicode(row[layout.guid])
        text_b = None if layout.text_b is None else convert_to_unicode(row[layout.text_b])
        if layout.label is None:
            label = placeholder
        else:
            label = convert_to_unicode(row[layout.label])
            if layout.strip_labels:
                label = label.strip()
            if layout.label_separator is not None and labels is None:  # labels inferred
                _check_no_other_separator(path, line_number, label, layout.label_separator)
            try:
                label = _parse_label(path, line_number, aliases.get(label, label), labels,
                                     regression, layout.label_separator)
            except InputError as e:
                if i > 0 or layout.header_argument is None:
                    raise
                raise with_header_hint(e, line_number, layout.header_argument) from None
        examples.append(InputExample(guid=f"{layout.set_type}-{row_id}",
                                     text_a=convert_to_unicode(row[layout.text_a]),
                                     text_b=text_b, label=label))
    return examples


class DataProcessor(SplitFiles):
    """Base class of the readers of sequence classification data sets.

    `get_{train,dev,test}_examples(data_dir)` return lists of InputExamples;
    `get_labels(data_dir=None)` the label list (None for regression tasks, whose
    `is_regression` is True; a processor whose labels come from its training file reads them
    from data_dir). A multi-label task's (`is_multi_label`) examples carry tuples of labels.
    `reads_user_files`: the files and their fields are the user's, described by options (the
    column options); the other processors' files are fixed.
    """
    is_regression = False
    is_multi_label = False
    reads_user_files = False
    task_metric = None  # the GLUE tasks' (glue.GlueProcessor)

    def get_labels(self, data_dir=None):
        """Gets the list of labels for this data set."""
        raise NotImplementedError()


# Every classification task by name (case-insensitive, the original's names), each processor
# registered where it is defined (`register`): `get_processor`.
PROCESSORS = {}


def register(name):
    """Class decorator: the DataProcessor of task `name`."""
    def add(cls):
        PROCESSORS[name] = cls
        return cls

    return add


def processor_class(task_name):
    """The DataProcessor class of task `task_name` (None: no such task)."""
    return PROCESSORS.get(task_key(task_name))


def reads_user_files(task_name):
    """Whether task `task_name` reads the user's files, described by options."""
    cls = processor_class(task_name)
    return bool(cls and cls.reads_user_files)


def get_processor(task_name, **options):
    """The processor of task `task_name` (case-insensitive, the original's names); `options`
    are TsvProcessor's arguments, for the user's files (`reader_by_name`)."""
    return reader_by_name(PROCESSORS, task_name, options, TsvProcessor)


class FileLayoutProcessor(DataProcessor):
    """A task whose splits are files of `data_dir` with fixed columns (`FileLayout`s).

    Subclasses set `name` (for messages), `labels` (None for regression) and `layouts`:
    {"train"|"dev"|"test": FileLayout}.
    """
    name = "task"
    labels = None
    layouts = {}

    def get_labels(self, data_dir=None):
        return None if self.labels is None else list(self.labels)

    def _keep_row(self, split):
        """(predicate on the rows of the split's file, what it keeps) or (None, "")."""
        return None, ""

    def read_split(self, data_dir, split):
        layout = self.layouts[split]
        path = os.path.join(os.fspath(data_dir), layout.file_name)
        rows = read_rows(path, layout.delimiter, what=f"{self.name} {split} file")
        keep_row, kept = self._keep_row(split)
        examples = examples_from_rows(path, rows, layout, self.get_labels(), self.is_regression,
                                      keep_row)
        if not examples:
            raise file_error(path, f"has no examples{kept}")
        return examples


# A file's line 1 is judged by its other lines only when there are this many of them at least.
HEADER_CHECK_MIN_LINES = 10


def first_line_looks_like_header(label_sets):
    """Whether line 1 of a file read without a header is one: `label_sets` are the labels of
    each line in order (a set each; multi-label: any number). It is, when line 1 has labels
    and none is on any other line while the other lines repeat theirs (each label on two lines
    on average, over HEADER_CHECK_MIN_LINES lines or more): a header's "label" is such a
    one-off, a real class seldom is."""
    first, others = label_sets[0], [label for labels in label_sets[1:] for label in labels]
    return (len(label_sets) - 1 >= HEADER_CHECK_MIN_LINES and bool(first)
            and not first & set(others) and 2 * len(set(others)) <= len(others))


@register("tsv")
class TsvProcessor(DataProcessor):
    """A classification (or regression) task on the user's own TSV or CSV files.

    Args (errors name them; a command line's flags have the same names):
      text_a_column: column of the first text: a 0-based index, or a header name.
      text_b_column: column of the second text of pair tasks (None: single text).
      label_column: column of the label (index or header name). Test files are not read for
        labels (a test example carries the first label as a placeholder), so they may lack it.
      label_list: the labels (a list, or a comma-separated string), in the order of the model's
        outputs. None or empty: the sorted distinct labels of the training file, which then has
        to exist (give the list for predict-only runs).
      skip_header: the first line of each file is a header (needed for columns by name; a name
        is looked up in each file's own header, so the test file may order columns
        differently). Without it, labels inferred from a training file whose line 1 looks like
        a header (`first_line_looks_like_header`) are an InputError naming line 1.
      delimiter: "\\t" (read as the original reads TSV: quotes are ordinary characters) or ","
        (CSV, with "..." quoting; a quoted field may span lines).
      regression: labels are float scores (there is no label list).
      train_file, dev_file, test_file: file names in the data directory (None: the default).
      multi_label: the label column holds the row's labels (none, one or more) joined by
        `label_separator` ("pos,long"); examples carry tuples of labels; a test example
        carries no label.
      label_separator: what joins a multi-label row's labels (default ","). Labels inferred
        from the training file must not hold another of LIKELY_LABEL_SEPARATORS.
    Labels are stripped of surrounding spaces. Guids are "<train|dev|test>-<row index>", the
    header counting as row 0 (as the original's GLUE processors count).
    """
    name = "tsv"
    reads_user_files = True

    def __init__(self, text_a_column=None, text_b_column=None, label_column=None,
                 label_list=None, skip_header=False, delimiter="\t", regression=False,
                 train_file=None, dev_file=None, test_file=None,
                 multi_label=False, label_separator=","):
        self.delimiter = parse_delimiter(delimiter)
        self.columns = {"text_a_column": parse_column(text_a_column, "text_a_column"),
                        "text_b_column": parse_column(text_b_column, "text_b_column"),
                        "label_column": parse_column(label_column, "label_column")}
        if self.columns["text_a_column"] is None:
            raise argument_error("text_a_column",
                                 "is required for a task read from TSV/CSV files")
        self.has_header = bool(skip_header)
        for argument, column in self.columns.items():
            if isinstance(column, str) and not self.has_header:
                raise argument_error(argument, f"{column!r} is a column name, which needs a "
                                               f"header line ({arg('skip_header')})")
        self.is_regression = bool(regression)
        if isinstance(label_list, str):
            label_list = split_comma_list(label_list)
        label_list = [str(label).strip() for label in label_list or ()]
        if label_list and self.is_regression:
            raise argument_error("label_list", "makes no sense for a regression task")
        duplicates = sorted({label for label in label_list if label_list.count(label) > 1})
        if duplicates:
            raise argument_error("label_list", f"lists {duplicates} more than once")
        self.is_multi_label = bool(multi_label)
        self.label_separator = label_separator if self.is_multi_label else None
        if self.is_multi_label:
            if self.is_regression:
                raise argument_error("multi_label", f"cannot be a regression task "
                                                    f"({arg('regression')})")
            if not label_separator or not label_separator.strip():
                raise argument_error("label_separator",
                                     f"must be a visible character or string, got "
                                     f"{label_separator!r}")
            joined = [label for label in label_list if label_separator in label]
            if joined:
                raise argument_error("label_list", f"label {joined[0]!r} holds the "
                                                   f"{arg('label_separator')} "
                                                   f"{label_separator!r}")
        self._labels = label_list or None  # inferred from the training file when None
        self.set_file_names(train_file, dev_file, test_file)

    def get_train_examples(self, data_dir):
        examples = self.read_split(data_dir, "train")
        if self._labels is None and not self.is_regression:
            if not self.has_header:
                self._check_first_line_is_data(data_dir, examples)
            if self.is_multi_label:
                self._labels = sorted({label for example in examples for label in example.label})
                if not self._labels:
                    raise file_error(self.path(data_dir, "train"),
                                     f"has no label in any row to infer the labels from; give "
                                     f"them ({arg('label_list')})")
            else:
                self._labels = sorted({example.label for example in examples})
        return examples

    def _check_first_line_is_data(self, data_dir, examples):
        """Labels inferred from a training file read without a header: an InputError naming
        line 1 when it looks like a header (`first_line_looks_like_header`), whose label column
        would become a class."""
        if not first_line_looks_like_header([self._label_set(e) for e in examples]):
            return
        label = examples[0].label
        shown = self.label_separator.join(label) if self.is_multi_label else label
        raise file_error(self.path(data_dir, "train"),
                         f"label {shown!r} is on no other line of the file: line 1 "
                         f"looks like a header; pass {arg('skip_header')} (or, if it is "
                               f"a real label, give the labels: {arg('label_list')})", 1)

    def _label_set(self, example):
        return set(example.label) if self.is_multi_label else {example.label}

    def get_labels(self, data_dir=None):
        """The label list: as given, else inferred from the training file (read now from
        `data_dir`, or by an earlier `get_train_examples`). None for regression."""
        if self.is_regression:
            return None
        if self._labels is None:
            train_path = self.path(data_dir or "", "train")
            if data_dir is None or not (is_url(train_path) or os.path.exists(train_path)):
                where = "" if data_dir is None else f" ({train_path} not found)"
                raise argument_error("label_list", f"is needed when there is no training file "
                                                   f"to infer the labels from{where}; give the "
                                                   f"labels in the order of the model's "
                                                   f"outputs, e.g. {arg('label_list')}=neg,pos")
            self.get_train_examples(data_dir)
        return list(self._labels)

    def _layout(self, path, split, rows):
        """The file's FileLayout: column names looked up in its header."""
        header = [field.strip() for field in rows[0][1]] if self.has_header and rows else []

        def index(argument):
            return column_index(path, header, self.columns[argument], argument)

        label = None
        if split != "test":
            if self.columns["label_column"] is None:
                raise argument_error("label_column", f"is required to read the {split} file")
            label = index("label_column")
        text_b = None if self.columns["text_b_column"] is None else index("text_b_column")
        return FileLayout(self.file_names[split], split, self.has_header,
                          index("text_a_column"), text_b, label, strip_labels=True,
                          delimiter=self.delimiter, label_separator=self.label_separator,
                          header_argument=None if self.has_header else "skip_header")

    def read_rows(self, path, split):
        """The file's rows: (line number, fields), its header first with skip_header."""
        return read_rows(path, self.delimiter, what=f"{split} file")

    def read_split(self, data_dir, split):
        path = self.path(data_dir, split)
        rows = self.read_rows(path, split)
        # The training file defines the labels unless they are given; dev and test need them
        # (read after the file itself, so that a wrong data_dir is reported as such).
        labels = self._labels if split == "train" else self.get_labels(data_dir)
        examples = examples_from_rows(path, rows, self._layout(path, split, rows), labels,
                                      self.is_regression)
        if not examples:
            raise file_error(path, "has no examples")
        return examples
