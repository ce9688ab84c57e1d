"""A task's TSV or CSV files, read as the original reads them, and the options describing them.

`read_rows`: a file's rows with their line numbers; `parse_delimiter`, `parse_column`: the
options naming a file's delimiter and columns; `column_index`: a column in a file;
`with_header_hint`: an error about line 1 of a file read without a header; `refuse_options`: a
named task's fixed files refuse such options.
"""
import csv
import inspect
import io
import os

from bert_tf.errors import InputError, arg, argument_error, file_error
from bert_tf.io_utils import read_text


def delimiter_name(delimiter):
    return "tab-separated" if delimiter == "\t" else "comma-separated"


def read_rows(path, delimiter="\t", what="input file"):
    """The records of a TSV (or CSV) file as a list of (1-based line number, list of fields).

    TSV is read as the original reads it: `csv.reader(delimiter="\\t", quotechar=None)` over
    the lines of `tf.gfile.Open(path, "r")`: split on "\\n" only, every "\\r" dropped (so
    CRLF files read as LF ones). With delimiter "," fields may be quoted ("a, b" and "" for
    a quote; a quoted field may span lines, and the line number is the line a record starts
    on). A blank line is an empty record. Raises InputError naming the file (and line) when
    it is missing, not UTF-8, or not parseable (an unbalanced CSV quote, a field over the csv
    module's size limit).
    """
    path = os.fspath(path)
    text = read_text(path, what).removeprefix("\ufeff")
    # GFile's readline, through which the original reads, drops every carriage return.
    text = text.replace("\r", "")
    # CSV is parsed strictly: an unbalanced quote is an error, not a field running to the end.
    quoting = {"quotechar": None} if delimiter == "\t" else {"quotechar": '"', "strict": True}
    reader = csv.reader(io.StringIO(text, newline="\n"), delimiter=delimiter, **quoting)
    rows = []
    lines_read = 0
    try:
        for row in reader:
            rows.append((lines_read + 1, row))
            lines_read = reader.line_num
    except csv.Error as e:
        raise file_error(path, f"cannot be parsed as {delimiter_name(delimiter)} values: {e}",
                         lines_read + 1) from None
    return rows


_DELIMITERS = {"\t": "\t", "\\t": "\t", "tab": "\t", ",": ",", "comma": ","}


def parse_delimiter(delimiter):
    """The field delimiter named by `delimiter`: a tab (a tab character, a backslash-t, "tab";
    None: the default) or a comma ("," or "comma"); an InputError naming `delimiter`
    otherwise."""
    if delimiter is None:
        return "\t"
    if delimiter not in _DELIMITERS:
        raise argument_error("delimiter", f"must be a tab (\\t) or a comma, got {delimiter!r}")
    return _DELIMITERS[delimiter]


def parse_column(value, argument):
    """A column as an int index or a header name ("3" from a command line is an index); None
    for none. InputError naming `argument` for anything else."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise argument_error(argument, f"must be a column index or name, got {value!r}")
    if isinstance(value, int) and value < 0:
        raise argument_error(argument, f"must be a 0-based column index or name, got {value}")
    return value


def column_index(path, header, column, argument, line_number=1, width=None):
    """The index of `column` (an index, or a name looked up in the file's `header`, its line
    `line_number`) in the rows of `path`; InputError naming the file, the line and `argument`
    for a name the header lacks or (given the line's `width`) an index past its fields."""
    if isinstance(column, str):
        if column not in header:
            raise file_error(path, f"has no column named {column!r} ({arg(argument)}); its "
                                   f"header is {header}", line_number)
        return header.index(column)
    if width is not None and column >= width:
        raise file_error(path, f"has {width} field(s): no column {column} ({arg(argument)})",
                         line_number)
    return column


def with_header_hint(error, line_number, argument="skip_header"):
    """InputError `error`, about a user's file's first line `line_number` read as data, with
    the suggestion that the line is a header, which `argument` skips."""
    return InputError(f"{error}; if line {line_number} is a header, pass {arg(argument)}")


def refuse_options(name, options_class, options):
    """For a named task with fixed files and columns: each of `options` (`options_class`'s
    arguments) left at its default (or None) is ignored, any other value is an InputError
    naming it (rather than silently unused)."""
    defaults = inspect.signature(options_class).parameters
    for option, value in options.items():
        if option not in defaults:
            raise TypeError(f"get_processor() got an unexpected option {option!r}")
        if value is not None and value != defaults[option].default:
            raise argument_error(option, f"is for {arg('task_name')}=tsv; task {name!r} has "
                                         f"fixed files and columns")
