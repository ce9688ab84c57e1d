"""NER records of CoNLL sentences (`reader`): each word WordPiece-tokenized alone with its first
piece carrying its tag (a word without pieces is one [UNK]), long sentences in windows at word
boundaries with each word scored once (`bert_tf.text.windows`), and predictions mapped back to words
(`words_predictions`).
"""
import dataclasses

import tensorflow as tf

from bert_tf.data.records import feature_spec, write_examples
from bert_tf.data.schema import Feature, RecordSchema, input_features
from bert_tf.errors import InputError, arg, argument_error
from bert_tf.tasks.ner.reader import ConllSentences, label_list_from, read_sentences
from bert_tf.tasks.preprocessor import Preprocessor, converted, write_records
from bert_tf.text import packing
from bert_tf.text.windows import (check_doc_stride, check_max_seq_length, scoring_windows,
                                  word_windows)

UNKNOWN_PIECE = "[UNK]"


# ---------------------------------------------------------------------------------------------
# Features
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class TaggingFeature:
    """One window of one sentence: the record's features, and where its labels come from.

    input_ids, input_mask, segment_ids, label_ids, label_mask: [max_seq_length] each, label_ids
    the tag's index in the label list where label_mask is 1 and 0 elsewhere (also 0 on words
    without a gold tag, which are still scored for prediction); is_real_example 1 (the records
    that pad eval and predict are the schema's padding record). Not written to the records:
    sentence_index, word_indices (the word of each position where label_mask is 1, in order)
    and num_words (of the sentence, so the inverse mapping can check it covered every word).
    """
    input_ids: list
    input_mask: list
    segment_ids: list
    label_ids: list
    label_mask: list
    is_real_example: int = 1
    sentence_index: int = -1
    word_indices: list = dataclasses.field(default_factory=list)
    num_words: int = 0

    def record(self):
        """{name: values} of the feature's record (`record_schema`)."""
        return {"input_ids": self.input_ids, "input_mask": self.input_mask,
                "segment_ids": self.segment_ids, "label_ids": self.label_ids,
                "label_mask": self.label_mask, "is_real_example": int(self.is_real_example)}


def word_pieces(tokenizer, words):
    """Each word's WordPiece tokens; a word with none becomes [UNK] (see the module doc)."""
    return [pieces or [UNKNOWN_PIECE] for pieces in packing.tokenize_all(tokenizer, words)]


def _label_ids(sentence_index, words, tags, label_map, where=None):
    """Each word's tag index (0 for a word without a gold tag). `where(sentence_index,
    word_index)`, if given, is the "file:line" of a word, which an unknown tag's error names."""
    ids = []
    for word_index, (word, tag) in enumerate(zip(words, tags)):
        if tag is not None and tag not in label_map:
            location = where(sentence_index, word_index) if where is not None else None
            message = (f"sentence {sentence_index + 1}, word {word_index + 1} ({word!r}): tag "
                       f"{tag!r} is not in the label list {list(label_map)}")
            raise InputError(f"{location}: {message}" if location else message)
        ids.append(0 if tag is None else label_map[tag])
    return ids


@dataclasses.dataclass
class _WindowLabels:
    """One window before packing: its piece ids, and the words it scores with their labels
    (each at its first piece's position among the window's pieces)."""
    piece_ids: list
    sentence_index: int
    num_words: int
    scored_words: list
    positions: list
    label_ids: list


def _sentence_windows(sentence_index, words, tags, label_map, max_seq_length, tokenizer,
                      doc_stride, where=None):
    """The windows of one sentence (see the module doc for the rules). `where`: as
    `_label_ids`'."""
    pieces_per_word = word_pieces(tokenizer, words)
    word_starts, pieces = [], []
    for pieces_of_word in pieces_per_word:
        word_starts.append(len(pieces))
        pieces.extend(pieces_of_word)
    piece_ids = tokenizer.convert_tokens_to_ids(pieces)
    word_label_ids = _label_ids(sentence_index, words, tags, label_map, where)
    windows = word_windows(word_starts, len(pieces), max_seq_length - 2, doc_stride)
    scored_in = scoring_windows(windows, word_starts)
    result = []
    for index, window in enumerate(windows):
        scored_words = [word for word in range(window.first_word, window.end_word)
                        if scored_in[word] == index]
        result.append(_WindowLabels(
            piece_ids[window.piece_start:window.piece_end], sentence_index, len(words),
            scored_words, [word_starts[word] - window.piece_start for word in scored_words],
            [word_label_ids[word] for word in scored_words]))
    return result


def _packed_features(windows, max_seq_length, cls_id, sep_id):
    """The TaggingFeatures of windows: `[CLS] pieces [SEP]` packed by `bert_tf.text.packing`
    (a window fits: nothing is cut), each scored word's label at its first piece (one
    position after [CLS])."""
    def convert(first, chunk):
        packed = packing.pack_lists([w.piece_ids for w in chunk], max_seq_length=max_seq_length,
                                    cls_id=cls_id, sep_id=sep_id)
        for row, window in enumerate(chunk):
            label_ids, label_mask = [0] * max_seq_length, [0] * max_seq_length
            for position, label_id in zip(window.positions, window.label_ids):
                label_ids[1 + position], label_mask[1 + position] = label_id, 1
            yield TaggingFeature(
                *(packed[name][row].tolist() for name in packing.INPUT_NAMES), label_ids,
                label_mask, sentence_index=window.sentence_index,
                word_indices=window.scored_words, num_words=window.num_words)

    return list(converted(windows, convert))


def convert_sentences_to_features(sentences, label_list, max_seq_length, tokenizer,
                                  doc_stride=None):
    """The TaggingFeatures of (words, tags) sentences, in order (a sentence's windows in order).

    doc_stride: pieces between the starts of a long sentence's windows (run_squad's flag);
    default half a window. Every word of every sentence is scored in exactly one feature.
    A tag not in `label_list` is an InputError naming the word (and its file:line when the
    sentences are read_conll's).
    """
    check_max_seq_length(max_seq_length)
    check_doc_stride(doc_stride, max_seq_length)  # a given stride: windows must overlap
    if doc_stride is None:
        doc_stride = max(1, (max_seq_length - 2) // 2)
    label_map = {label: index for index, label in enumerate(label_list)}
    where = sentences.where if isinstance(sentences, ConllSentences) else None
    windows = []
    for sentence_index, (words, tags) in enumerate(sentences):
        windows.extend(_sentence_windows(sentence_index, words, tags, label_map,
                                         max_seq_length, tokenizer, doc_stride, where))
    return _packed_features(windows, max_seq_length, *packing.special_ids(tokenizer))


def write_tagging_records(features, output_file, batch_size=None):
    """Writes the features' records (tagging_feature_spec) to a TFRecord file, atomically,
    followed with `batch_size` by the schema's padding record until their count is a multiple
    of it (as `NerPreprocessor.write`). Returns the number of records written."""
    features = list(features)
    if not features:
        return write_examples(output_file, [])
    return write_records(output_file, (feature.record() for feature in features),
                         record_schema(len(features[0].input_ids)), batch_size)


def record_schema(max_seq_length):
    """Token classification records: inputs, `label_ids` [T], `label_mask` [T] (1 where a
    word's first piece carries its label), `is_real_example` []."""
    return RecordSchema(input_features([max_seq_length])
                        + [Feature("label_ids", (max_seq_length,)),
                           Feature("label_mask", (max_seq_length,)), Feature("is_real_example")])


def tagging_feature_spec(max_seq_length):
    """The tf.io parsing spec of `record_schema`'s records."""
    return feature_spec(record_schema(max_seq_length))


# ---------------------------------------------------------------------------------------------
# Predictions back to words
# ---------------------------------------------------------------------------------------------


def words_predictions(features, predicted_label_ids_per_feature):
    """Per sentence, the predicted tag index of each word: the inverse of the conversion.

    predicted_label_ids_per_feature: one [max_seq_length] sequence of label ids per feature,
    in the features' order, then any of the padding records after them (not read). Raises
    ValueError if there are fewer predictions than features, or a word is scored twice or
    never, which would mean the features and the predictions do not belong together.
    """
    features = list(features)
    predictions = list(predicted_label_ids_per_feature)
    if len(predictions) < len(features):
        raise ValueError(f"{len(features)} features but {len(predictions)} predictions")
    per_sentence = {}
    for feature, predicted in zip(features, predictions):
        positions = [i for i, mask in enumerate(feature.label_mask) if mask]
        words = per_sentence.setdefault(feature.sentence_index, [None] * feature.num_words)
        for position, word in zip(positions, feature.word_indices):
            if words[word] is not None:
                raise ValueError(f"sentence {feature.sentence_index}: word {word} is scored "
                                 f"twice")
            words[word] = int(predicted[position])
    num_sentences = max(per_sentence, default=-1) + 1
    result = []
    for sentence_index in range(num_sentences):
        words = per_sentence.get(sentence_index)
        if words is None or None in words:
            raise ValueError(f"sentence {sentence_index}: "
                             + ("no features" if words is None else
                                f"word {words.index(None)} has no prediction"))
        result.append(words)
    return result


class NerPreprocessor(Preprocessor):
    """run_ner's records of CoNLL files: each sentence's windows (`convert_sentences_to_features`;
    the training steps count windows). Served texts are tokenized word by word as the records
    (`word_inputs`).

    Args:
      tokenizer, max_seq_length: as Preprocessor's.
      data_dir, files: {"train"|"eval"|"predict": file name in data_dir, or None: not run}
        (records only).
      label_list: the tags in output order (default: the training file's, "O" first; required
        without a training file).
    After `read`: `labels`, and {mode: ...} `sentences` and `features` (one per record before
    the padding: the task maps each record's predictions back).
    """
    counted_as = "windows"

    def __init__(self, tokenizer, max_seq_length, data_dir=None, files=None, label_list=None,
                 doc_stride=None):
        super().__init__(tokenizer, max_seq_length)
        files = files or {}
        if files and not label_list and not files.get("train"):
            raise argument_error("label_list", f"is required without {arg('train_file')} (the "
                                               f"tags in output order, as the model was "
                                               f"trained)")
        self.doc_stride, self.data_dir, self.label_list = doc_stride, data_dir, label_list
        self.files = {mode: name for mode, name in files.items() if name}
        self.labels, self.sentences, self.features = None, {}, {}

    def read(self):
        self.sentences = {mode: read_sentences(self.data_dir, name,
                                               require_tags=mode != "predict")
                          for mode, name in self.files.items()}
        self.labels = list(self.label_list or label_list_from(self.sentences["train"]))
        self.features = {mode: convert_sentences_to_features(  # every split checked
            sentences, self.labels, self.max_seq_length, self.tokenizer, self.doc_stride)
            for mode, sentences in self.sentences.items()}
        return dict(self.features)

    def schema(self, mode):
        return record_schema(self.max_seq_length)

    def records(self, mode, items):
        return (feature.record() for feature in items)

    def summary(self, mode, num_real, count):
        return (f"{len(self.sentences[mode])} sentences, {num_real} windows "
                f"(+{count - num_real} padding)")

    def description(self, task):
        return f"*** {len(self.labels)} labels: {', '.join(self.labels)}"

    def word_inputs(self, text):
        """[B] texts in the graph, tokenized as the records' sentences (each whitespace word
        alone, a word without pieces one [UNK]) and packed as one window, cut to the batch's
        longest. Returns (the packed inputs: int32 [B, T]; `words`: [B, (words)] strings;
        `first_piece`: [W] int64, each word's first piece's position in its packed row, or
        the row's last position for a word beyond the window; `in_window`: [W] bool, whether
        its first piece is in the window, max_seq_length - 2 pieces)."""
        tokenizer = self.tokenizer
        words, pieces = tokenizer.word_pieces(text)
        per_word = pieces.values  # [W, (pieces)]
        lengths = per_word.row_lengths()
        unk = tf.fill([per_word.nrows(), 1], tokenizer.unk_id)
        per_word = tf.ragged.boolean_mask(  # a word without pieces is one [UNK]
            tf.concat([per_word, unk], axis=1),
            tf.ragged.range(lengths + 1) < tf.expand_dims(tf.maximum(lengths, 1), 1))
        ids = pieces.with_values(per_word).merge_dims(1, 2)  # [B, (pieces)]
        start = (tf.cumsum(per_word.row_lengths(), exclusive=True)
                 - tf.gather(ids.row_splits, words.value_rowids()))  # in its text
        inputs = tokenizer.pack(ids, max_seq_length=self.max_seq_length, pad_to_longest=True)
        # After [CLS]; a word beyond the window reads any position: the last one.
        first_piece = tf.minimum(start + 1, tf.cast(tf.shape(inputs["input_ids"])[1] - 1,
                                                    start.dtype))
        return inputs, words, first_piece, start < self.max_seq_length - 2
