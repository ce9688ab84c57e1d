"""A multiple-choice task's files read into `ChoiceExample`s: SWAG's CSVs (github.com/rowanz/swagaf
data/: context sent1, each ending sent2 + " " + endingK, as Hugging Face's run_swag) or a user's
TSV/CSV described by options (`ChoiceProcessor`); a bad row is an error naming its file and line.
"""
import dataclasses

from bert_tf.data.tsv import (column_index, parse_column, parse_delimiter, read_rows,
                              with_header_hint)
from bert_tf.errors import InputError, arg, argument_error, file_error
from bert_tf.io_utils import split_comma_list
from bert_tf.tasks.split_files import SplitFiles, reader_by_name
from bert_tf.tokenization import convert_to_unicode


@dataclasses.dataclass
class ChoiceExample:
    """One question.

    Args:
      guid: unique id ("train-12": the split and the row's index, the header counting as 0).
      context: the text every ending follows (the first part of each packed pair).
      endings: the N candidate endings (each the second part of a pair; SWAG's: sent2 + " " +
        endingK).
      label: the right ending's index (0 to N-1); 0 as a placeholder in test sets.
    """
    guid: str
    context: str
    endings: list
    label: int = 0


class ChoiceProcessor(SplitFiles):
    """A multiple-choice task's train, dev and test files in a data directory.

    Args (errors name them; the command line's flags have the same names):
      context_column: column of the context: a 0-based index or, with skip_header, a header
        name.
      ending_columns: the N columns of the endings (a list, or a comma-separated string), in
        the order the label counts them.
      label_column: column of the right ending's 0-based index (not read in test files).
      ending_prefix_column: optional column whose text starts every ending (SWAG's sent2):
        the ending is `prefix + " " + ending`.
      skip_header: the first line of each file is a header (needed for columns by name; each
        file's own header is read).
      delimiter: "\\t" (TSV, read as the original reads TSV) or "," (CSV with "..." quoting).
      train_file, dev_file, test_file: file names in the data directory (None: the default).
    """
    name = "tsv"
    reads_user_files = True

    def __init__(self, context_column=None, ending_columns=None, label_column=None,
                 ending_prefix_column=None, skip_header=False, delimiter="\t",
                 train_file=None, dev_file=None, test_file=None):
        self.delimiter = parse_delimiter(delimiter)
        self.context_column = parse_column(context_column, "context_column")
        if self.context_column is None:
            raise argument_error("context_column", "is required for a multiple-choice task "
                                                   "read from TSV/CSV files")
        if isinstance(ending_columns, str):
            ending_columns = split_comma_list(ending_columns)
        self.ending_columns = [parse_column(c, "ending_columns") for c in ending_columns or ()]
        if len(self.ending_columns) < 2 or None in self.ending_columns:
            raise argument_error("ending_columns", f"needs the columns of 2 or more endings, "
                                                   f"got {ending_columns!r}")
        self.label_column = parse_column(label_column, "label_column")
        self.ending_prefix_column = parse_column(ending_prefix_column, "ending_prefix_column")
        self.skip_header = bool(skip_header)
        for argument, column in self._columns(label=True):
            if isinstance(column, str) and not self.skip_header:
                raise argument_error(argument, f"{column!r} is a column name, which needs a "
                                               f"header line ({arg('skip_header')})")
        self.set_file_names(train_file, dev_file, test_file)

    @property
    def num_choices(self):
        return len(self.ending_columns)

    def _columns(self, label):
        """(argument, column) of every column read (the label's only if `label`)."""
        columns = [("context_column", self.context_column)]
        columns += [("ending_columns", c) for c in self.ending_columns]
        if self.ending_prefix_column is not None:
            columns.append(("ending_prefix_column", self.ending_prefix_column))
        if label and self.label_column is not None:
            columns.append(("label_column", self.label_column))
        return columns

    def read_split(self, data_dir, split):
        path = self.path(data_dir, split)
        rows = read_rows(path, self.delimiter, what=f"{split} file")
        labeled = split != "test"
        if labeled and self.label_column is None:
            raise argument_error("label_column", f"is required to read the {split} file")
        if not rows or (self.skip_header and len(rows) == 1):
            raise file_error(path, "has no questions")
        first_line, first = rows[0]
        width = len(first)
        index = self._indexes(path, first_line, first, labeled)
        examples = []
        for i, (line_number, row) in enumerate(rows):
            if self.skip_header and i == 0:
                continue
            if not row:
                raise file_error(path, f"is an empty line; a question is {width} fields",
                                 line_number)
            if len(row) != width:
                raise file_error(path, f"has {len(row)} field(s) where line {first_line} has "
                                       f"{width}: every question has the same columns, its "
                                       f"context and {self.num_choices} endings",
                                 line_number)
            try:
                examples.append(self._example(path, line_number, f"{split}-{i}", row, index,
                                              labeled))
            except InputError as e:
                if i > 0 or self.skip_header:
                    raise
                raise with_header_hint(e, line_number) from None
        return examples

    def _indexes(self, path, line_number, first_row, labeled):
        """{argument: the column index, or a list of them for ending_columns} in this file:
        names looked up in its header, and every column there in its first line."""
        header = [convert_to_unicode(field).strip() for field in first_row]
        index = {}
        for argument, column in self._columns(label=labeled):
            column = column_index(path, header, column, argument, line_number, len(first_row))
            if argument == "ending_columns":
                index.setdefault(argument, []).append(column)
            else:
                index[argument] = column
        return index

    def _example(self, path, line_number, guid, row, index, labeled):
        def text(column, what):
            value = convert_to_unicode(row[column])
            if not value.strip():
                raise file_error(path, f"{what} (column {column}) is empty: every question "
                                       f"needs its context and {self.num_choices} endings",
                                 line_number)
            return value

        context = text(index["context_column"], "the context")
        endings = [text(column, f"ending {k}")
                   for k, column in enumerate(index["ending_columns"])]
        if "ending_prefix_column" in index:
            prefix = convert_to_unicode(row[index["ending_prefix_column"]])
            endings = [f"{prefix} {ending}" for ending in endings]
        label = 0
        if labeled:
            value = convert_to_unicode(row[index["label_column"]]).strip()
            if not (value.isdigit() and int(value) < self.num_choices):
                raise file_error(path, f"label {value!r} is not the index of an ending: 0 to "
                                       f"{self.num_choices - 1}", line_number)
            label = int(value)
        return ChoiceExample(guid=guid, context=context, endings=endings, label=label)


class SwagProcessor(ChoiceProcessor):
    """SWAG's files (rowanz/swagaf data/: train.csv, val.csv, test.csv) and columns; the
    paper's recipe: docs/fine_tuning.md."""
    name = "swag"
    reads_user_files = False

    def __init__(self):
        super().__init__(context_column="sent1", ending_prefix_column="sent2",
                         ending_columns=[f"ending{k}" for k in range(4)], label_column="label",
                         skip_header=True, delimiter=",", train_file="train.csv",
                         dev_file="val.csv", test_file="test.csv")


def get_processor(task_name, **options):
    """The processor of `task_name`: "swag" (SWAG's files), or "tsv" (files described by
    `options`, ChoiceProcessor's arguments; `reader_by_name`)."""
    return reader_by_name({"swag": SwagProcessor, "tsv": ChoiceProcessor}, task_name, options,
                          ChoiceProcessor, what="multiple-choice task")
