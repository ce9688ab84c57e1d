"""Sentence (pair) classification data: the data half of the original's `run_classifier.py`.

What it does, as the original:
- processors read a task's train/dev/test files into `InputExample`s (same file names,
  columns, header skipping, guids, labels; a test example carries the first label as a
  placeholder);
- `convert_single_example` turns one into model inputs (`bert_tf.text.packing`),
  `PaddingInputExample` into an all-zero example that evaluation does not count;
- `write_classifier_records` writes the original's `file_based_convert_examples_to_features`
  records (input_ids, input_mask, segment_ids, label_ids, is_real_example).

What it adds:
- the GLUE tasks the original lacks (SST-2, QNLI, QQP, RTE, STS-B as regression, WNLI, MNLI
  mismatched) in the layout the standard GLUE download script writes, and `TsvProcessor`, a
  task described by options (columns by index or header name, TSV or quoted CSV, labels given
  or inferred from the training file) so a user's data set needs no code;
- multi-label tasks (TsvProcessor's `multi_label`): the label column holds any number of labels
  joined by a separator (",": `pos,long`; an empty field: none), and `label_ids` is multi-hot
  [num_labels] (1 for each of the row's labels);
- texts longer than a record in windows (`doc_stride`), instead of truncated: see
  `iter_features`;
- strict reading: a missing file, a row with too few columns, an unknown label or a
  non-numeric regression score raises an InputError naming the file and 1-based line, where
  the original fails later with an IndexError or KeyError traceback; in a user's file read
  without a header (TsvProcessor), such an error on line 1 suggests skip_header, and so does a
  line 1 that looks like a header when the labels are inferred (`first_line_looks_like_header`);
  inferred multi-label labels holding another likely separator are an error too
  (`LIKELY_LABEL_SEPARATORS`): either would silently add a class;
- `pad_examples`: the original pads eval/predict sets to a multiple of the batch size only on
  TPU; we always do, so fixed-size batches count every real example exactly once;
- a tokenizer with `tokenize_batch` (`bert_tf.text.fast_tokenization.FastTokenizer`) tokenizes a
  chunk of examples per call (`iter_features`); the results are the same as example by
  example.

Files are read as the original reads them through `tf.gfile.Open(path, "r")`: decoded as
UTF-8 strictly (a bad byte is an error naming its line; the original fails too, with a
traceback), split into lines on "\\n" only, every "\\r" dropped (GFile's readline does that),
and parsed by `csv.reader(delimiter="\\t", quotechar=None)` (quotes are ordinary characters in
TSV files: GLUE texts contain unbalanced quotes). A leading byte order mark is dropped (MRPC's
files start with one; the original skips it with the header).
"""
import csv
import dataclasses
import inspect
import io
import itertools
import math
import os
from typing import Optional, Union

from bert_tf.data import records as features
from bert_tf.text import packing
from bert_tf.text.windows import check_doc_stride, check_max_seq_length, doc_spans
from bert_tf.errors import InputError, arg, argument_error, file_error
from bert_tf.io_utils import is_url, open_input, split_comma_list
from bert_tf.tokenization import convert_to_unicode

# Examples tokenized per `tokenize_batch` call: large enough to amortize the call, small enough
# that the chunk's tokens take little memory.
_BATCH_TOKENIZE_CHUNK = 4096


# ---------------------------------------------------------------------------------------------
# Examples and features
# ---------------------------------------------------------------------------------------------


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


@dataclasses.dataclass
class PaddingInputExample:
    """Fake example so the number of eval/predict examples is a multiple of the batch size.

    Fixed-size batches would otherwise drop the last partial batch, and with it part of the
    output. Padding examples become all-zero inputs with `is_real_example` False, which metrics
    weight by zero and prediction writers skip. A class rather than `None`, so that padding can
    never be mistaken for a missing example.
    """


@dataclasses.dataclass
class InputFeatures:
    """One example's model inputs (each list max_seq_length long) and its label.

    `label_id` is the label's index in the label list, the float score for regression, or
    the multi-hot list [num_labels] of a multi-label example.
    """
    input_ids: list
    input_mask: list
    segment_ids: list
    label_id: Union[int, float, list]
    is_real_example: bool = True
    example_id: Optional[int] = None  # windows (doc_stride): the example's index, padding -1

    def to_record(self):
        """The original's record features for `bert_tf.data.features.write_examples`.

        A float `label_id` (regression) is written as a FloatList, as `classifier_feature_spec(
        regression=True)` reads it; anything else as Int64List. A window also holds its
        `example_id` (not the original's: records without windows do not).
        """
        record = {"input_ids": self.input_ids, "input_mask": self.input_mask,
                  "segment_ids": self.segment_ids, "label_ids": self.label_id,
                  "is_real_example": int(self.is_real_example)}
        if self.example_id is not None:
            record["example_id"] = self.example_id
        return record


def _label_id(example, label_map, regression, multi_label=False):
    """The label's index in the label list, the float score of a regression example, or the
    multi-hot list of a multi-label example's labels."""
    if multi_label:
        if isinstance(example.label, str) or not isinstance(example.label, (list, tuple, set)):
            raise InputError(f"example {example.guid!r}: a multi-label example's label is a "
                             f"list of labels, got {example.label!r}")
        unknown = [label for label in example.label if label not in label_map]
        if unknown:
            raise InputError(f"example {example.guid!r}: label {unknown[0]!r} is not one of "
                             f"the labels {list(label_map)}")
        ids = [0] * len(label_map)
        for label in example.label:
            ids[label_map[label]] = 1
        return ids
    if regression:
        try:
            return float(example.label)
        except (TypeError, ValueError):
            raise InputError(f"example {example.guid!r}: regression label {example.label!r} "
                             f"is not a number") from None
    try:
        return label_map[example.label]
    except (KeyError, TypeError):
        raise InputError(f"example {example.guid!r}: label {example.label!r} is not one of the "
                         f"labels {list(label_map)}") from None


def convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer,
                           regression=False, log=None, multi_label=False):
    """Converts one `InputExample` (or `PaddingInputExample`) into `InputFeatures`.

    The original's function: the texts packed by `bert_tf.text.packing` (a pair is truncated
    longest-first to max_seq_length - 3 tokens, a single text cut to max_seq_length - 2), the
    label mapped to its index in `label_list`. A PaddingInputExample becomes all zeros, label
    0, `is_real_example` False.

    Args:
      ex_index: the example's position; the first 5 are described to `log`, as the original
        logs them.
      example: an InputExample or PaddingInputExample.
      label_list: the task's labels (ignored for regression).
      max_seq_length: length of the padded inputs (at least 3).
      tokenizer: a FullTokenizer (or anything with `tokenize`, `convert_tokens_to_ids` and
        `convert_ids_to_tokens`).
      regression: the label is a float score (STS-B), written as is.
      log: optional callable taking one line of text (e.g. `logging.info`).
      multi_label: the label is a list of labels, written multi-hot ([num_labels]; a padding
        example's all 0).
    """
    return _convert_chunk(ex_index, [example], label_list, max_seq_length, tokenizer,
                          regression, log, multi_label)[0]


def _convert_chunk(first_index, examples, label_list, max_seq_length, tokenizer, regression,
                   log, multi_label=False, doc_stride=None):
    """`convert_single_example` of consecutive examples, the first at `first_index`: their
    texts tokenized in one call (`packing.text_ids`) and packed in one; with `doc_stride`, the
    windows of each (`_long_text_windows`), each feature holding its example's index."""
    check_max_seq_length(max_seq_length)
    label_map = None if regression else {label: i for i, label in enumerate(label_list)}
    real = [i for i, example in enumerate(examples)
            if not isinstance(example, PaddingInputExample)]
    label_ids = {i: _label_id(examples[i], label_map, regression, multi_label) for i in real}
    ids_a, ids_b = packing.text_ids(tokenizer, [examples[i].text_a for i in real],
                                    [examples[i].text_b for i in real])
    cls_id, sep_id = packing.special_ids(tokenizer)
    packed = packing.pack_lists(ids_a, ids_b, max_seq_length=max_seq_length, cls_id=cls_id,
                                sep_id=sep_id)
    windows = {} if doc_stride is None else _long_text_windows(
        packed, ids_a, ids_b, max_seq_length, doc_stride, cls_id, sep_id)
    row_of = {i: row for row, i in enumerate(real)}
    zeros = [0] * max_seq_length
    result = []
    for i, example in enumerate(examples):
        if i not in row_of:
            result.append(InputFeatures(input_ids=zeros, input_mask=zeros, segment_ids=zeros,
                                        label_id=(0.0 if regression else
                                                  [0] * len(label_list) if multi_label else 0),
                                        is_real_example=False,
                                        example_id=None if doc_stride is None else -1))
            continue
        row = row_of[i]
        inputs = {name: packed[name][row].tolist() for name in packing.INPUT_NAMES}
        if doc_stride is not None:
            result.extend(InputFeatures(**window, label_id=label_ids[i], is_real_example=True,
                                        example_id=first_index + i)
                          for window in windows.get(row, [inputs]))
        if log is not None and first_index + i < 5:
            log("*** Example ***")
            log(f"guid: {example.guid}")
            log("tokens: " + " ".join(packing.packed_tokens(tokenizer, inputs["input_ids"],
                                                            inputs["input_mask"])))
            for name in packing.INPUT_NAMES:
                log(f"{name}: " + " ".join(map(str, inputs[name])))
            log(f"label: {example.label} (id = {label_ids[i]})")
            if doc_stride is not None:
                log(f"windows: {len(windows.get(row, [inputs]))}")
        if doc_stride is None:
            result.append(InputFeatures(**inputs, label_id=label_ids[i], is_real_example=True))
    return result


def _long_text_windows(packed, ids_a, ids_b, max_seq_length, doc_stride, cls_id, sep_id):
    """{row: the model inputs of its windows} of the rows whose packing (`packed`, the
    original's truncation) left pieces out; the others are their packed row alone.

    A single text: windows of max_seq_length - 2 pieces. A pair: the first text keeps what the
    original's truncation keeps of it (read off its packed row: its segment-0 pieces), and the
    second is split into windows of the room left, max_seq_length - 3 - that. Windows start
    `doc_stride` pieces apart, as run_squad's over a context (`bert_tf.text.windows.doc_spans`); the first window is
    the truncated packing itself. Each is packed by `packing.pack_lists`, a pair with
    truncate="second": `[CLS] a [SEP] window [SEP]`."""

    parts_a, parts_b, owners = [], [], []
    for row, pieces_a in enumerate(ids_a):
        pieces_b = ids_b[row] if ids_b is not None else None
        if pieces_b:  # a pair (a second text without pieces packs as a single text)
            first = (packed["segment_ids"][row] == 0) & (packed["input_mask"][row] == 1)
            kept_a = int(first.sum()) - 2
            room = max_seq_length - 3 - kept_a
            if len(pieces_b) <= room or room < 1:
                continue
            for span in doc_spans(len(pieces_b), room, doc_stride):
                parts_a.append(pieces_a[:kept_a])
                parts_b.append(pieces_b[span.start:span.start + span.length])
                owners.append(row)
        elif len(pieces_a) > max_seq_length - 2:
            for span in doc_spans(len(pieces_a), max_seq_length - 2, doc_stride):
                parts_a.append(pieces_a[span.start:span.start + span.length])
                parts_b.append(None)
                owners.append(row)
    windows = {}
    if not owners:
        return windows
    inputs = packing.pack_lists(parts_a, parts_b, max_seq_length=max_seq_length, cls_id=cls_id,
                                sep_id=sep_id, truncate="second")
    for index, row in enumerate(owners):
        windows.setdefault(row, []).append(
            {name: inputs[name][index].tolist() for name in packing.INPUT_NAMES})
    return windows


def iter_features(examples, label_list, max_seq_length, tokenizer, regression=False, log=None,
                  multi_label=False, doc_stride=None):
    """Yields `convert_single_example` of each example, in order, converting a few thousand
    examples at a time (one tokenizer call for their texts with FastTokenizer's
    `tokenize_batch`, which is where its speed comes from: measured 2.4x FullTokenizer's on
    QNLI's long texts, the same on SST-2's short ones; and one packing call).

    With `doc_stride` (not the original's), an example whose texts do not fit is not
    truncated but split into windows (`_long_text_windows`: a single text's pieces, or a
    pair's second text), consecutive features that each hold the example's index in
    `examples` (`example_id`; a padding example's -1); an example that fits is one feature,
    the original's, with its example_id.
    """
    check_doc_stride(doc_stride, max_seq_length)
    examples = list(examples)
    for start in range(0, len(examples), _BATCH_TOKENIZE_CHUNK):
        yield from _convert_chunk(start, examples[start:start + _BATCH_TOKENIZE_CHUNK],
                                  label_list, max_seq_length, tokenizer, regression, log,
                                  multi_label, doc_stride)


def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                 regression=False, log=None, multi_label=False, doc_stride=None):
    """The original's `convert_examples_to_features`: a list of `InputFeatures` (windows with
    `doc_stride`: see `iter_features`)."""
    return list(iter_features(examples, label_list, max_seq_length, tokenizer, regression, log,
                              multi_label, doc_stride))


def write_classifier_records(examples, label_list, max_seq_length, tokenizer, output_file,
                             regression=False, log=None, multi_label=False):
    """The original's `file_based_convert_examples_to_features`: one tf.train.Example each.

    Features `input_ids`, `input_mask`, `segment_ids` [max_seq_length], `label_ids` [1] (int64,
    float for regression; multi-label: [num_labels] multi-hot) and `is_real_example` [1], as
    `features.classifier_feature_spec` reads them. The file is written under a temporary name
    and renamed when complete, so a killed run leaves no partial file to be taken for a
    finished one. Returns the number of records written.
    """
    records = (f.to_record() for f in
               iter_features(examples, label_list, max_seq_length, tokenizer, regression, log,
                             multi_label))
    return features.write_examples(output_file, records)


def write_features(input_features, output_file):
    """Writes InputFeatures (e.g. `iter_features`' windows) as `write_classifier_records`
    writes its examples' (atomically). Returns the number of records written."""
    return features.write_examples(output_file, (f.to_record() for f in input_features))


def pad_examples(examples, batch_size):
    """Appends PaddingInputExamples until the count is a multiple of `batch_size`.

    Returns (the padded list, the number of real examples). The input list is not modified.
    """
    if batch_size < 1:
        raise InputError(f"the batch size must be positive, got {batch_size}")
    padded = list(examples)
    num_real = len(padded)
    padded.extend(PaddingInputExample() for _ in range(-num_real % batch_size))
    return padded, num_real


# ---------------------------------------------------------------------------------------------
# Reading TSV / CSV files
# ---------------------------------------------------------------------------------------------


def _delimiter_name(delimiter):
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
    with open_input(path, what) as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line_number = data.count(b"\n", 0, e.start) + 1
        raise file_error(path, f"is not valid UTF-8 (byte {data[e.start]:#04x})",
                         line_number) from None
    if text.startswith("\ufeff"):
        text = text[1:]
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
        raise file_error(path, f"cannot be parsed as {_delimiter_name(delimiter)} values: {e}",
                         lines_read + 1) from None
    return rows


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
        raise file_error(path, f"label {value!r} is not one of the labels {list(labels)}",
                         line_number)
    return value


def with_header_hint(error, line_number, argument="skip_header"):
    """InputError `error`, about a user's file's first line `line_number` read as data, with
    the suggestion that the line is a header, which `argument` skips."""
    return InputError(f"{error}; if line {line_number} is a header, pass {arg(argument)}")


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
    expected = f"expected {needed} or more {_delimiter_name(layout.delimiter)} fields"
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


# ---------------------------------------------------------------------------------------------
# Processors
# ---------------------------------------------------------------------------------------------


class DataProcessor:
    """Base class of the readers of sequence classification data sets.

    `get_{train,dev,test}_examples(data_dir)` return lists of InputExamples;
    `get_labels(data_dir=None)` the label list (None for regression tasks, whose
    `is_regression` is True; a processor whose labels come from its training file reads them
    from data_dir). A multi-label task's (`is_multi_label`) examples carry tuples of labels.
    """
    is_regression = False
    is_multi_label = False
    file_names = {}  # {"train"|"dev"|"test": file name}: of a processor of the user's files

    def get_train_examples(self, data_dir):
        """Gets a collection of `InputExample`s for the train set."""
        raise NotImplementedError()

    def get_dev_examples(self, data_dir):
        """Gets a collection of `InputExample`s for the dev set."""
        raise NotImplementedError()

    def get_test_examples(self, data_dir):
        """Gets a collection of `InputExample`s for prediction."""
        raise NotImplementedError()

    def get_labels(self, data_dir=None):
        """Gets the list of labels for this data set."""
        raise NotImplementedError()


class FileLayoutProcessor(DataProcessor):
    """A task whose splits are files of `data_dir` with fixed columns (`FileLayout`s).

    Subclasses set `name` (for messages), `labels` (None for regression) and `layouts`:
    {"train"|"dev"|"test": FileLayout}.
    """
    name = "task"
    labels = None
    layouts = {}

    def get_train_examples(self, data_dir):
        return self._read_split(data_dir, "train")

    def get_dev_examples(self, data_dir):
        return self._read_split(data_dir, "dev")

    def get_test_examples(self, data_dir):
        return self._read_split(data_dir, "test")

    def get_labels(self, data_dir=None):
        return None if self.labels is None else list(self.labels)

    def _keep_row(self, split):
        """(predicate on the rows of the split's file, what it keeps) or (None, "")."""
        return None, ""

    def _read_split(self, data_dir, split):
        layout = self.layouts[split]
        path = os.path.join(os.fspath(data_dir), layout.file_name)
        rows = read_rows(path, layout.delimiter, what=f"{self.name} {split} file")
        keep_row, kept = self._keep_row(split)
        examples = examples_from_rows(path, rows, layout, self.get_labels(), self.is_regression,
                                      keep_row)
        if not examples:
            raise file_error(path, f"has no examples{kept}")
        return examples


def _glue_layouts(text_a, text_b=None, label=None, test_text_a=None, test_text_b=None,
                  guid=None, test_guid=None, has_header=True, test_has_header=True):
    """train.tsv / dev.tsv / test.tsv with the same columns, test ones without labels."""
    labeled = dict(has_header=has_header, text_a=text_a, text_b=text_b, label=label, guid=guid)
    return {
        "train": FileLayout("train.tsv", "train", **labeled),
        "dev": FileLayout("dev.tsv", "dev", **labeled),
        "test": FileLayout("test.tsv", "test", test_has_header,
                           text_a if test_text_a is None else test_text_a,
                           text_b if test_text_b is None else test_text_b, guid=test_guid),
    }


class XnliProcessor(FileLayoutProcessor):
    """XNLI (the original's): MultiNLI train machine-translated into `language`, XNLI dev.

    Train is `multinli/multinli.train.<language>.tsv` (premise, hypo, label; its
    "contradictory" means "contradiction"); dev is `xnli.dev.tsv`, all languages in one file,
    of which the rows of `language` are kept (guids count all rows). The original has no test
    set; `xnli.test.tsv` (same layout as dev) is read like dev, with the placeholder label.
    """
    name = "XNLI"
    labels = ("contradiction", "entailment", "neutral")

    def __init__(self, language="zh"):
        self.language = language
        self.layouts = {
            "train": FileLayout(f"multinli/multinli.train.{language}.tsv", "train", True, 0, 1,
                                2, label_aliases=(("contradictory", "contradiction"),)),
            "dev": FileLayout("xnli.dev.tsv", "dev", True, 6, 7, 1),
            "test": FileLayout("xnli.test.tsv", "test", True, 6, 7),
        }

    def _keep_row(self, split):
        if split == "train":
            return None, ""
        return (lambda row: convert_to_unicode(row[0]) == self.language,
                f" in language {self.language!r}")


class MnliProcessor(FileLayoutProcessor):
    """MultiNLI (GLUE). Dev and test are the matched sets, or with `matched=False` (task
    "mnli-mm") the mismatched ones. The label is the last column (dev's gold label after
    label1..label5); guids use the pairID column."""
    name = "MNLI"
    labels = ("contradiction", "entailment", "neutral")

    def __init__(self, matched=True):
        genre = "matched" if matched else "mismatched"
        self.layouts = {
            "train": FileLayout("train.tsv", "train", True, 8, 9, -1, guid=0),
            "dev": FileLayout(f"dev_{genre}.tsv", f"dev_{genre}", True, 8, 9, -1, guid=0),
            "test": FileLayout(f"test_{genre}.tsv", "test", True, 8, 9, guid=0),
        }


class MnliMismatchedProcessor(MnliProcessor):
    """MultiNLI with the mismatched dev and test sets (dev_mismatched.tsv,
    test_mismatched.tsv)."""

    def __init__(self, matched=False):
        super().__init__(matched=matched)


class MrpcProcessor(FileLayoutProcessor):
    """MRPC (GLUE): Quality, #1 ID, #2 ID, #1 String, #2 String; test has index for Quality."""
    name = "MRPC"
    labels = ("0", "1")
    layouts = _glue_layouts(text_a=3, text_b=4, label=0)


class ColaProcessor(FileLayoutProcessor):
    """CoLA (GLUE): train/dev have no header (source, label, original mark, sentence); test
    has one (index, sentence)."""
    name = "CoLA"
    labels = ("0", "1")
    layouts = _glue_layouts(text_a=3, label=1, test_text_a=1, has_header=False)


class Sst2Processor(FileLayoutProcessor):
    """SST-2 (GLUE): train/dev "sentence, label"; test "index, sentence". Guids count rows."""
    name = "SST-2"
    labels = ("0", "1")
    layouts = _glue_layouts(text_a=0, label=1, test_text_a=1)


class QnliProcessor(FileLayoutProcessor):
    """QNLI (GLUE): index, question, sentence, label; test without label."""
    name = "QNLI"
    labels = ("entailment", "not_entailment")
    layouts = _glue_layouts(text_a=1, text_b=2, label=3, guid=0, test_guid=0)


class QqpProcessor(FileLayoutProcessor):
    """QQP (GLUE): id, qid1, qid2, question1, question2, is_duplicate; test: id, question1,
    question2."""
    name = "QQP"
    labels = ("0", "1")
    layouts = _glue_layouts(text_a=3, text_b=4, label=5, test_text_a=1, test_text_b=2, guid=0,
                            test_guid=0)


class RteProcessor(FileLayoutProcessor):
    """RTE (GLUE): index, sentence1, sentence2, label; test without label."""
    name = "RTE"
    labels = ("entailment", "not_entailment")
    layouts = _glue_layouts(text_a=1, text_b=2, label=3, guid=0, test_guid=0)


class WnliProcessor(FileLayoutProcessor):
    """WNLI (GLUE): index, sentence1, sentence2, label; test without label."""
    name = "WNLI"
    labels = ("0", "1")
    layouts = _glue_layouts(text_a=1, text_b=2, label=3, guid=0, test_guid=0)


class StsbProcessor(FileLayoutProcessor):
    """STS-B (GLUE), a regression task: the label is the similarity score (0 to 5, float).

    Columns: index, genre, filename, year, old_index, source1, source2, sentence1, sentence2,
    score; test without score.
    """
    name = "STS-B"
    labels = None
    is_regression = True
    layouts = _glue_layouts(text_a=7, text_b=8, label=9, guid=0, test_guid=0)


# ---------------------------------------------------------------------------------------------
# A task described by options
# ---------------------------------------------------------------------------------------------

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


_DELIMITERS = {"\t": "\t", "\\t": "\t", "tab": "\t", ",": ",", "comma": ","}


def parse_delimiter(delimiter):
    """The field delimiter named by `delimiter`: a tab (a tab character, a backslash-t, "tab")
    or a comma ("," or "comma"); an InputError naming `delimiter` otherwise."""
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
      train_file, dev_file, test_file: file names in the data directory.
      multi_label: the label column holds the row's labels (none, one or more) joined by
        `label_separator` ("pos,long"); examples carry tuples of labels; a test example
        carries no label.
      label_separator: what joins a multi-label row's labels (default ","). Labels inferred
        from the training file must not hold another of LIKELY_LABEL_SEPARATORS.
    Labels are stripped of surrounding spaces. Guids are "<train|dev|test>-<row index>", the
    header counting as row 0 (as the original's GLUE processors count).
    """
    name = "tsv"

    def __init__(self, text_a_column=None, text_b_column=None, label_column=None,
                 label_list=None, skip_header=False, delimiter="\t", regression=False,
                 train_file="train.tsv", dev_file="dev.tsv", test_file="test.tsv",
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
        self.file_names = {"train": train_file, "dev": dev_file, "test": test_file}

    def get_train_examples(self, data_dir):
        examples = self._read_split(data_dir, "train")
        if self._labels is None and not self.is_regression:
            if not self.has_header:
                self._check_first_line_is_data(data_dir, examples)
            if self.is_multi_label:
                self._labels = sorted({label for example in examples for label in example.label})
                if not self._labels:
                    path = os.path.join(os.fspath(data_dir), self.file_names["train"])
                    raise file_error(path, f"has no label in any row to infer the labels from; "
                                           f"give them ({arg('label_list')})")
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
        path = os.path.join(os.fspath(data_dir), self.file_names["train"])
        raise file_error(path, f"label {shown!r} is on no other line of the file: line 1 "
                               f"looks like a header; pass {arg('skip_header')} (or, if it is "
                               f"a real label, give the labels: {arg('label_list')})", 1)

    def _label_set(self, example):
        return set(example.label) if self.is_multi_label else {example.label}

    def get_dev_examples(self, data_dir):
        return self._read_split(data_dir, "dev")

    def get_test_examples(self, data_dir):
        return self._read_split(data_dir, "test")

    def get_labels(self, data_dir=None):
        """The label list: as given, else inferred from the training file (read now from
        `data_dir`, or by an earlier `get_train_examples`). None for regression."""
        if self.is_regression:
            return None
        if self._labels is None:
            train_path = os.path.join(os.fspath(data_dir or ""), self.file_names["train"])
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
            column = self.columns[argument]
            if isinstance(column, str):
                if column not in header:
                    raise file_error(path, f"has no column named {column!r} ({arg(argument)}); "
                                           f"its header is {header}", 1)
                return header.index(column)
            return column

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

    def _read_split(self, data_dir, split):
        path = os.path.join(os.fspath(data_dir), self.file_names[split])
        rows = read_rows(path, self.delimiter, what=f"{split} file")
        # The training file defines the labels unless they are given; dev and test need them
        # (read after the file itself, so that a wrong data_dir is reported as such).
        labels = self._labels if split == "train" else self.get_labels(data_dir)
        examples = examples_from_rows(path, rows, self._layout(path, split, rows), labels,
                                      self.is_regression)
        if not examples:
            raise file_error(path, "has no examples")
        return examples


# ---------------------------------------------------------------------------------------------
# Tasks by name
# ---------------------------------------------------------------------------------------------

PROCESSORS = {
    "cola": ColaProcessor,
    "mnli": MnliProcessor,
    "mnli-mm": MnliMismatchedProcessor,
    "mrpc": MrpcProcessor,
    "xnli": XnliProcessor,
    "sst-2": Sst2Processor,
    "qnli": QnliProcessor,
    "qqp": QqpProcessor,
    "rte": RteProcessor,
    "sts-b": StsbProcessor,
    "wnli": WnliProcessor,
    "tsv": TsvProcessor,
}


def get_processor(task_name, **tsv_options):
    """The processor of task `task_name` (case-insensitive, the original's names).

    `tsv_options` are TsvProcessor's arguments, for task "tsv". The named tasks have fixed
    files and columns: options left at TsvProcessor's defaults (or None) are ignored, any
    other value is an error naming it (rather than silently unused).
    """
    name = (task_name or "").strip().lower()
    if name not in PROCESSORS:
        raise argument_error("task_name", f"unknown task {task_name!r}; valid names: "
                                          f"{', '.join(PROCESSORS)}")
    if name == "tsv":
        return TsvProcessor(**tsv_options)
    refuse_options(name, TsvProcessor, tsv_options)
    return PROCESSORS[name]()


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
