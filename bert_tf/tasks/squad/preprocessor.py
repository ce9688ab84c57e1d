"""SQuAD records: the original run_squad's windows of the examples `reader` reads
(`convert_examples_to_features`: questions cut to max_query_length, contexts in doc_stride
windows, `_improve_answer_span`, the max-context rule, unique ids from 1000000000), their
records (`record_schema`) and `SquadPreprocessor`.
"""
import dataclasses
import itertools
from typing import Optional

from bert_tf.data.records import feature_spec, write_examples
from bert_tf.data.schema import Feature, RecordSchema, input_features
from bert_tf.errors import InputError, argument_error
from bert_tf.tasks.preprocessor import Preprocessor, converted
from bert_tf.tasks.squad.reader import (TRAINING_SHUFFLE_SEED, SkippedAnswer, SquadExample,
                                       load_squad_json, read_squad_examples,
                                       shuffle_training_examples, split_context)
from bert_tf.text import packing
from bert_tf.text.windows import DocSpan, check_doc_stride, doc_spans, max_context_spans

FIRST_UNIQUE_ID = 1000000000
PADDING_UNIQUE_ID = 0  # the padding record's (`record_schema`)


# ---------------------------------------------------------------------------------------------
# Features
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class InputFeatures:
    """One window of one example (the original's InputFeatures).

    `tokens` are unpadded; `token_to_orig_map` maps each context position of `tokens` to its
    word in `example.doc_tokens`, `token_is_max_context` to whether this window is the one
    where that token has the most context. Training fields are None for prediction.
    """
    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: list
    token_to_orig_map: dict
    token_is_max_context: dict
    input_ids: list
    input_mask: list
    segment_ids: list
    start_position: Optional[int] = None
    end_position: Optional[int] = None
    is_impossible: Optional[bool] = None


def _check_is_max_context(doc_spans_, cur_span_index, position):
    """The original's check: is `cur_span_index` the window with the most context for the
    token at `position` (`bert_tf.text.windows.max_context_spans`)?"""
    return max_context_spans(doc_spans_).get(position) == cur_span_index


def _improve_answer_span(doc_tokens, input_start, input_end, tokenizer, orig_answer_text):
    """The original's narrowing of a word-level answer span to the tokens that spell the
    answer (e.g. "1895" inside "(1895-1943)."), if some sub-span does."""
    tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))
    for new_start in range(input_start, input_end + 1):
        for new_end in range(input_end, new_start - 1, -1):
            text_span = " ".join(doc_tokens[new_start:(new_end + 1)])
            if text_span == tok_answer_text:
                return (new_start, new_end)
    return (input_start, input_end)


def check_window_flags(max_seq_length, doc_stride, max_query_length):
    """InputError naming the argument when the windows cannot work (the original's
    validate_flags_or_throw for max_seq_length; it loops forever on doc_stride < 1)."""
    check_query_length(max_seq_length, max_query_length)
    check_doc_stride(doc_stride)


def check_query_length(max_seq_length, max_query_length):
    """The question's pieces leave room in a window for [CLS], two [SEP] and a context piece."""
    if max_query_length < 0:
        raise argument_error("max_query_length", f"must be >= 0, got {max_query_length}")
    if max_seq_length <= max_query_length + 3:
        raise argument_error("max_seq_length", f"the max_seq_length ({max_seq_length}) must be "
                             f"greater than max_query_length ({max_query_length}) + 3")


class _ContextTokens:
    """WordPiece tokens of a paragraph's words, kept for the next question on it. The words
    go to the tokenizer in one `tokenize_batch` call when it has one (FastTokenizer: every
    call pays TensorFlow's dispatch, which a call per word would pay for every word of every
    context); the pieces are the same as a `tokenize` call per word (the original's loop)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self._doc_tokens = None
        self._result = None

    def __call__(self, doc_tokens):
        if doc_tokens is not self._doc_tokens:
            tok_to_orig_index = []
            orig_to_tok_index = []
            all_doc_tokens = []
            batch = getattr(self.tokenizer, "tokenize_batch", None)
            pieces = (batch(list(doc_tokens)) if batch is not None
                      else [self.tokenizer.tokenize(token) for token in doc_tokens])
            for (i, sub_tokens) in enumerate(pieces):
                orig_to_tok_index.append(len(all_doc_tokens))
                tok_to_orig_index.extend([i] * len(sub_tokens))
                all_doc_tokens.extend(sub_tokens)
            self._doc_tokens = doc_tokens
            self._result = (tok_to_orig_index, orig_to_tok_index, all_doc_tokens)
        return self._result


# Questions whose windows are packed per call: fewer than the other tasks' chunk, because a
# question makes several windows, each holding two maps over its context positions
# (`token_to_orig_map`, `token_is_max_context`) that the chunk keeps until it is packed, and
# a context is tokenized once per paragraph (`_ContextTokens`), not per chunk, so a larger
# chunk would only save packing calls.
_QUESTIONS_PER_CHUNK = 256


def iter_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length,
                  is_training, log=None, first_unique_id=FIRST_UNIQUE_ID):
    """Yields the `InputFeatures` of each example in order (the original's
    convert_examples_to_features). `log` (a callable taking a line) gets the original's
    description of the first 20 examples' features."""
    check_window_flags(max_seq_length, doc_stride, max_query_length)
    cls_id, sep_id = packing.special_ids(tokenizer)
    context_tokens = _ContextTokens(tokenizer)
    unique_ids = itertools.count(first_unique_id)

    def convert(first, chunk):
        windows = []
        for example_index, example in enumerate(chunk, first):
            windows.extend(_example_windows(example_index, example, tokenizer, context_tokens,
                                            max_seq_length, doc_stride, max_query_length,
                                            is_training))
        # `[CLS] question [SEP] window [SEP]`: a window fits beside its question, nothing is cut.
        packed = packing.pack_lists([w.query_ids for w in windows],
                                    [w.context_ids for w in windows],
                                    max_seq_length=max_seq_length, cls_id=cls_id,
                                    sep_id=sep_id, truncate="second")
        for row, window in enumerate(windows):
            inputs = {name: packed[name][row].tolist() for name in packing.INPUT_NAMES}
            feature = InputFeatures(
                unique_id=next(unique_ids), example_index=window.example_index,
                doc_span_index=window.doc_span_index,
                tokens=packing.packed_tokens(tokenizer, inputs["input_ids"],
                                             inputs["input_mask"]),
                token_to_orig_map=window.token_to_orig_map,
                token_is_max_context=window.token_is_max_context, **inputs,
                start_position=window.start_position, end_position=window.end_position,
                is_impossible=window.is_impossible)
            if log is not None and window.example_index < 20:
                _describe(log, feature, is_training)
            yield feature

    yield from converted(examples, convert, _QUESTIONS_PER_CHUNK)


@dataclasses.dataclass
class _Window:
    """One window before packing: the question's and the window's piece ids, and the
    InputFeatures fields that do not depend on the packing."""
    example_index: int
    doc_span_index: int
    query_ids: list
    context_ids: list
    token_to_orig_map: dict
    token_is_max_context: dict
    start_position: Optional[int]
    end_position: Optional[int]
    is_impossible: Optional[bool]


def _example_windows(example_index, example, tokenizer, context_tokens, max_seq_length,
                     doc_stride, max_query_length, is_training):
    """The windows of one example, as the original's loop over its doc spans."""
    query_tokens = tokenizer.tokenize(example.question_text)
    if len(query_tokens) > max_query_length:
        query_tokens = query_tokens[0:max_query_length]

    tok_to_orig_index, orig_to_tok_index, all_doc_tokens = context_tokens(example.doc_tokens)

    tok_start_position = None
    tok_end_position = None
    if is_training and example.is_impossible:
        tok_start_position = -1
        tok_end_position = -1
    if is_training and not example.is_impossible:
        tok_start_position = orig_to_tok_index[example.start_position]
        if example.end_position < len(example.doc_tokens) - 1:
            tok_end_position = orig_to_tok_index[example.end_position + 1] - 1
        else:
            tok_end_position = len(all_doc_tokens) - 1
        (tok_start_position, tok_end_position) = _improve_answer_span(
            all_doc_tokens, tok_start_position, tok_end_position, tokenizer,
            example.orig_answer_text)

    # The -3 accounts for [CLS], [SEP] and [SEP].
    max_tokens_for_doc = max_seq_length - len(query_tokens) - 3
    spans = doc_spans(len(all_doc_tokens), max_tokens_for_doc, doc_stride)
    max_context = max_context_spans(spans)
    doc_offset = len(query_tokens) + 2  # where the window starts: after [CLS] question [SEP]
    query_ids = tokenizer.convert_tokens_to_ids(query_tokens)

    windows = []
    for (doc_span_index, doc_span) in enumerate(spans):
        span_end = doc_span.start + doc_span.length
        token_to_orig_map = {}
        token_is_max_context = {}
        for i in range(doc_span.length):
            split_token_index = doc_span.start + i
            token_to_orig_map[doc_offset + i] = tok_to_orig_index[split_token_index]
            token_is_max_context[doc_offset + i] = (
                max_context[split_token_index] == doc_span_index)

        start_position = None
        end_position = None
        if is_training and not example.is_impossible:
            # A window without the whole answer has nothing to predict: 0, 0 ([CLS]).
            doc_start = doc_span.start
            doc_end = span_end - 1
            if tok_start_position >= doc_start and tok_end_position <= doc_end:
                start_position = tok_start_position - doc_start + doc_offset
                end_position = tok_end_position - doc_start + doc_offset
            else:
                start_position = 0
                end_position = 0
        if is_training and example.is_impossible:
            start_position = 0
            end_position = 0
        windows.append(_Window(
            example_index, doc_span_index, query_ids,
            tokenizer.convert_tokens_to_ids(all_doc_tokens[doc_span.start:span_end]),
            token_to_orig_map, token_is_max_context, start_position, end_position,
            example.is_impossible))
    return windows


def _describe(log, feature, is_training):
    log("*** Example ***")
    log(f"unique_id: {feature.unique_id}")
    log(f"example_index: {feature.example_index}")
    log(f"doc_span_index: {feature.doc_span_index}")
    log("tokens: " + " ".join(feature.tokens))
    log("token_to_orig_map: " + " ".join(
        f"{x}:{y}" for x, y in feature.token_to_orig_map.items()))
    log("token_is_max_context: " + " ".join(
        f"{x}:{y}" for x, y in feature.token_is_max_context.items()))
    log("input_ids: " + " ".join(map(str, feature.input_ids)))
    log("input_mask: " + " ".join(map(str, feature.input_mask)))
    log("segment_ids: " + " ".join(map(str, feature.segment_ids)))
    if is_training and feature.is_impossible:
        log("impossible example")
    if is_training and not feature.is_impossible:
        answer = " ".join(feature.tokens[feature.start_position:(feature.end_position + 1)])
        log(f"start_position: {feature.start_position}")
        log(f"end_position: {feature.end_position}")
        log(f"answer: {answer}")


def convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride,
                                 max_query_length, is_training, output_fn=None, log=None):
    """The original's convert_examples_to_features: calls `output_fn(feature)` for each
    feature (as the original); without `output_fn`, returns the list of features."""
    features = iter_features(examples, tokenizer, max_seq_length, doc_stride, max_query_length,
                             is_training, log=log)
    if output_fn is None:
        return list(features)
    for feature in features:
        output_fn(feature)
    return None


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------


def record_schema(max_seq_length, is_training):
    """run_squad's records: `unique_ids` [], inputs [max_seq_length], and for training
    `start_positions` [], `end_positions` [], `is_impossible` [] (the original's FeatureWriter;
    its reader leaves `is_impossible` out, its records have it). The padding record, a predict
    window that is not one, has unique id PADDING_UNIQUE_ID."""
    features = ([Feature("unique_ids", padding=PADDING_UNIQUE_ID)]
                + input_features([max_seq_length]))
    if is_training:
        features += [Feature(name) for name in
                     ("start_positions", "end_positions", "is_impossible")]
    return RecordSchema(features)


def squad_feature_spec(max_seq_length, is_training):
    """The tf.io parsing spec of `record_schema`'s records."""
    return feature_spec(record_schema(max_seq_length, is_training))


def feature_record(feature, is_training):
    """The original FeatureWriter's record of one InputFeatures (`record_schema`)."""
    record = {
        "unique_ids": feature.unique_id,
        "input_ids": feature.input_ids,
        "input_mask": feature.input_mask,
        "segment_ids": feature.segment_ids,
    }
    if is_training:
        record["start_positions"] = feature.start_position
        record["end_positions"] = feature.end_position
        record["is_impossible"] = 1 if feature.is_impossible else 0
    return record


def write_squad_records(path, features, is_training):
    """Writes features (an iterable of InputFeatures) as the original's TFRecords at `path`,
    atomically. Returns the number written."""
    features = iter(features)
    first = next(features, None)
    if first is None:
        return write_examples(path, [])
    return write_examples(
        path, (feature_record(feature, is_training)
               for feature in itertools.chain([first], features)),
        record_schema(len(first.input_ids), is_training))


def require_windows(path, examples, features, argument="predict_file"):
    """Raises InputError naming `path` (the file of `argument`) when none of its questions has a
    window: nothing can be predicted (a question without one, among others with windows, is
    predicted "empty" as the original)."""
    if examples and not features:
        raise argument_error(argument, f"{path}: none of its {len(examples)} question(s) has "
                                       f"a window to predict from: every context is empty (or "
                                       f"holds no token)")


def has_answers(dataset):
    """True if the SQuAD file's questions carry answers (a dev set), so it can be scored."""
    for entry in dataset:
        for paragraph in entry.get("paragraphs", ()):
            for qa in paragraph.get("qas", ()):
                if qa.get("answers") or "is_impossible" in qa:
                    return True
    return False


def read_examples(path, is_training, version_2_with_negative=False, verbose_logging=False,
                  log=print):
    """(the file's parsed "data" list, its SquadExamples); the training answers skipped (their
    text is not at their offset) counted and reported; none left is an error naming the file's
    argument (train_file or predict_file)."""
    dataset = load_squad_json(path)
    skipped = []
    examples = read_squad_examples(path, is_training, version_2_with_negative, skipped=skipped,
                                   log=log if verbose_logging else None, data=dataset)
    if skipped:
        log(f"  skipped {len(skipped)} training question(s) of {path} whose answer text "
            f"is not at its offset (first: id {skipped[0].qas_id}: "
            f"{skipped[0].answer_text!r} vs {skipped[0].found_text!r})")
    if not examples:
        raise argument_error("train_file" if is_training else "predict_file",
                             f"{path} holds no usable question")
    return dataset["data"], examples


class SquadPreprocessor(Preprocessor):
    """run_squad's records: the training questions' windows (shuffled as the original; the
    training steps count questions) in train.tf_record, the predict file's windows in
    eval.tf_record, which eval also reads when `evaluate` (the file must then have answers to
    score). After `read`, `predict_data` is (the predict file's "data" list, its SquadExamples,
    their windows) for post-processing. A served question and context are packed as a first
    window (`question_context_inputs`)."""
    counted_as = "questions"
    record_files = {"train": "train.tf_record", "predict": "eval.tf_record"}

    def __init__(self, tokenizer, max_seq_length, train_file=None, predict_file=None,
                 doc_stride=128, max_query_length=64, version_2_with_negative=False,
                 verbose_logging=False, log=print, evaluate=False):
        check_window_flags(max_seq_length, doc_stride, max_query_length)
        super().__init__(tokenizer, max_seq_length)
        self.max_query_length = max_query_length
        self.windows = dict(tokenizer=tokenizer, max_seq_length=max_seq_length,
                            doc_stride=doc_stride, max_query_length=max_query_length)
        self.files = {"train": train_file, "predict": predict_file}
        self.reading = dict(version_2_with_negative=version_2_with_negative,
                            verbose_logging=verbose_logging, log=log)
        self.evaluate = evaluate
        self.predict_data = None

    def read(self):
        splits = {}
        if self.files["train"]:
            _, splits["train"] = read_examples(self.files["train"], True, **self.reading)
            shuffle_training_examples(splits["train"])
        if self.files["predict"]:
            dataset, examples = read_examples(self.files["predict"], False, **self.reading)
            if self.evaluate and not has_answers(dataset):
                raise argument_error("predict_file", f"{self.files['predict']}: no question "
                                                     f"has an answer to evaluate against "
                                                     f"(eval scores a dev file)")
            features = convert_examples_to_features(examples, is_training=False,
                                                    **self.windows)
            require_windows(self.files["predict"], examples, features)
            self.predict_data = (dataset, examples, features)
            splits["predict"] = features
        return splits

    def schema(self, mode):
        return record_schema(self.max_seq_length, mode == "train")

    def records(self, mode, items):
        if mode == "train":  # the windows of a few questions at a time
            items = iter_features(items, is_training=True, **self.windows)
        return (feature_record(feature, mode == "train") for feature in items)

    def summary(self, mode, num_real, count):
        if mode == "train":
            return f"{num_real} questions, {count} windows"
        return (f"{len(self.predict_data[1])} questions, {num_real} windows "
                f"(+{count - num_real} padding)")

    def question_context_inputs(self, question, context):
        """[B] questions and contexts in the graph, packed as run_squad's first window of each
        (`[CLS] question [SEP] context [SEP]`, the question cut to max_query_length pieces, the
        context to what is left), cut to the batch's longest. Returns (the packed inputs:
        int32 [B, T]; each question's pieces: int64 [B])."""
        tokenizer = self.tokenizer
        query = tokenizer.tokenize(question)[:, :self.max_query_length]
        inputs = tokenizer.pack(query, tokenizer.tokenize(context), self.max_seq_length,
                                truncate="second", pad_to_longest=True)
        return inputs, query.row_lengths()


__all__ = [
    "FIRST_UNIQUE_ID", "TRAINING_SHUFFLE_SEED", "SquadExample", "SkippedAnswer", "InputError",
    "InputFeatures", "DocSpan", "split_context", "load_squad_json", "read_squad_examples",
    "shuffle_training_examples", "doc_spans", "read_examples", "require_windows",
    "SquadPreprocessor", "check_window_flags", "iter_features",
    "convert_examples_to_features", "record_schema", "feature_record", "write_squad_records",
]
