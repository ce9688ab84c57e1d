"""Classification records: `InputExample`s packed as the original's run_classifier packs them
(`convert_single_example`, `write_classifier_records`: input_ids, input_mask, segment_ids,
label_ids, is_real_example), long texts in windows with `doc_stride`; the original's padding
examples are the schema's padding record.
"""
import dataclasses
from typing import Optional, Union

from bert_tf.data.records import feature_spec, write_examples
from bert_tf.data.schema import FLOAT32, INT64, Feature, RecordSchema, input_features
from bert_tf.errors import InputError
from bert_tf.tasks.classification.reader import unknown_label
from bert_tf.tasks.preprocessor import MODES, Preprocessor, converted, pad_to_batch
from bert_tf.text import packing
from bert_tf.text.windows import check_doc_stride, check_max_seq_length, doc_spans


@dataclasses.dataclass
class PaddingInputExample:
    """The original's fake example that pads a list of examples to a multiple of the batch size
    (`pad_examples`): converted, it is `record_schema`'s padding record (`is_real_example`
    False), which metrics weight by zero and prediction writers skip. A class rather than
    `None`, so that padding can never be mistaken for a missing example.
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
        """The original's record (`record_schema`); a window also holds its `example_id`."""
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
            raise InputError(f"example {example.guid!r}: {unknown_label(unknown[0], label_map)}")
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
        raise InputError(f"example {example.guid!r}: "
                         f"{unknown_label(example.label, label_map)}") from None


def convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer,
                           regression=False, log=None, multi_label=False):
    """Converts one `InputExample` (or `PaddingInputExample`) into `InputFeatures`.

    The original's function: the texts packed by `bert_tf.text.packing` (a pair is truncated
    longest-first to max_seq_length - 3 tokens, a single text cut to max_seq_length - 2), the
    label mapped to its index in `label_list`. A PaddingInputExample becomes the schema's
    padding record: all zeros, `is_real_example` False.

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
    padding = record_schema(max_seq_length, regression,
                            len(label_list) if multi_label else None,
                            doc_stride is not None).padding_record()
    result = []
    for i, example in enumerate(examples):
        if i not in row_of:
            result.append(InputFeatures(
                **{name: padding[name] for name in packing.INPUT_NAMES},
                label_id=padding["label_ids"], is_real_example=False,
                example_id=padding.get("example_id")))
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
    `doc_stride` pieces apart, as run_squad's over a context (`bert_tf.text.windows.doc_spans`); the
    first window is the truncated packing itself. Each is packed by `packing.pack_lists`, a pair
    with truncate="second": `[CLS] a [SEP] window [SEP]`."""

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
    """Yields `convert_single_example` of each example, in order, a chunk of examples per
    tokenizer call and packing call (`bert_tf.tasks.preprocessor.converted`).

    With `doc_stride` (not the original's), an example whose texts do not fit is not
    truncated but split into windows (`_long_text_windows`: a single text's pieces, or a
    pair's second text), consecutive features that each hold the example's index in
    `examples` (`example_id`; a padding example's -1); an example that fits is one feature,
    the original's, with its example_id.
    """
    check_doc_stride(doc_stride, max_seq_length)
    yield from converted(examples, lambda first, chunk: _convert_chunk(
        first, chunk, label_list, max_seq_length, tokenizer, regression, log, multi_label,
        doc_stride))


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
    float for regression; multi-label: [num_labels] multi-hot) and `is_real_example` [1]
    (`record_schema`). The file is written under a temporary name and renamed when complete,
    so a killed run leaves no partial file to be taken for a finished one. Returns the number
    of records written.
    """
    records = (f.to_record() for f in
               iter_features(examples, label_list, max_seq_length, tokenizer, regression, log,
                             multi_label))
    schema = record_schema(max_seq_length, regression,
                           len(label_list) if multi_label else None)
    return write_examples(output_file, records, schema)


def write_features(input_features, output_file):
    """Writes InputFeatures (e.g. `iter_features`' windows) as `write_classifier_records`
    writes its examples' (atomically). Returns the number of records written."""
    input_features = list(input_features)
    schema = feature_schema(input_features[0]) if input_features else None
    return write_examples(output_file, (f.to_record() for f in input_features), schema)


def record_schema(max_seq_length, regression=False, multi_label_size=None, windowed=False):
    """run_classifier's records: inputs [max_seq_length], `label_ids` [] (float for
    regression; multi-label: multi-hot [multi_label_size]) and `is_real_example` []; windows
    also their `example_id` [] (a padding record's -1)."""
    if multi_label_size is not None:
        label = Feature("label_ids", (multi_label_size,))
    else:
        label = Feature("label_ids", (), FLOAT32 if regression else INT64)
    schema = input_features([max_seq_length]) + [label, Feature("is_real_example")]
    if windowed:
        schema.append(Feature("example_id", padding=-1))
    return RecordSchema(schema)


def feature_schema(feature):
    """The `record_schema` of an InputFeatures' records."""
    label = feature.label_id
    return record_schema(len(feature.input_ids), isinstance(label, float),
                         len(label) if isinstance(label, list) else None,
                         feature.example_id is not None)


def classifier_feature_spec(max_seq_length, regression=False, multi_label_size=None):
    """The tf.io parsing spec of `record_schema`'s records (without windows)."""
    return feature_spec(record_schema(max_seq_length, regression, multi_label_size))


def pad_examples(examples, batch_size):
    """Appends PaddingInputExamples until the count is a multiple of `batch_size`.

    Returns (the padded list, the number of real examples). The input list is not modified.
    """
    return list(pad_to_batch(examples, batch_size, PaddingInputExample())), len(examples)


class ClassificationPreprocessor(Preprocessor):
    """run_classifier's records of {mode: InputExamples}: one per example as the original's,
    or with `doc_stride` one per window of a long text (the training steps then count
    windows); served texts are packed as one example's (`Preprocessor.text_inputs`).

    Args:
      tokenizer, max_seq_length: as Preprocessor's.
      examples: {"train"|"eval"|"predict": InputExamples} (records only).
      label_list: the labels in output order; None for regression. A multi-label task's
        examples carry lists of labels.
      task_name: the processor's name, for the log.
    """

    def __init__(self, tokenizer, max_seq_length, examples=None, label_list=None, task_name="",
                 multi_label=False, doc_stride=None):
        super().__init__(tokenizer, max_seq_length)
        self.examples, self.label_list = examples or {}, label_list
        self.task_name, self.doc_stride = task_name, doc_stride
        self.conversion = dict(regression=label_list is None, multi_label=multi_label)
        self.counted_as = "examples" if doc_stride is None else "windows"

    def _features(self, examples):
        return convert_examples_to_features(examples, self.label_list, self.max_seq_length,
                                            self.tokenizer, doc_stride=self.doc_stride,
                                            **self.conversion)

    def read(self):
        splits = {mode: self.examples[mode] for mode in MODES if mode in self.examples}
        if self.doc_stride is None:
            return splits
        return {mode: self._features(examples) for mode, examples in splits.items()}

    def schema(self, mode):
        return record_schema(self.max_seq_length, self.conversion["regression"],
                             len(self.label_list) if self.conversion["multi_label"] else None,
                             self.doc_stride is not None)

    def records(self, mode, items):
        features = items if self.doc_stride is not None else iter_features(
            items, self.label_list, self.max_seq_length, self.tokenizer, **self.conversion)
        return (feature.to_record() for feature in features)

    def summary(self, mode, num_real, count):
        what = (f"{num_real} examples" if self.doc_stride is None else
                f"{len(self.examples[mode])} examples in {num_real} windows")
        return f"{what} (+{count - num_real} padding)"

    def description(self, task):
        config = task.config
        return ((f"*** task {self.task_name}: " if self.task_name else "*** ")
                + ("regression" if config.regression else
                   f"{len(self.label_list)} labels {self.label_list}"
                   + (f", multi-label (thresholds {list(config.thresholds)})"
                      if config.multi_label else "")))
