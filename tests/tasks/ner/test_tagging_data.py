"""bert_tf.tasks.ner (`reader`, `preprocessor`) on the CoNLL-2003 files in ../shared/data.

Oracles: the README's sentence counts and an independent count of the word lines; gold tags
mapped through the features and back (`words_predictions`) must reproduce every tag of every
sentence, with windows forced by a short max_seq_length; the first-piece rule and the windows
checked against an independent per-word re-tokenization and a transcription of run_squad's
`_check_is_max_context`; the records read back with `tagging_feature_spec`.
"""
import collections
import re

import numpy as np
import pytest

from bert_tf.tasks import metrics
from bert_tf.tasks import ner
from bert_tf.errors import InputError
from bert_tf.tasks.ner.preprocessor import tagging_feature_spec

CLS, SEP = "[CLS]", "[SEP]"
from bert_tf.tokenization import FullTokenizer

CONLL_SENTENCES = {"train.txt": 14041, "valid.txt": 3250, "test.txt": 3453}  # the README's
CONLL_LABELS = ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER"]

# (max_seq_length, doc_stride): 8 cuts the longest words (11 pieces), 16 makes windows in most
# sentences, 128 in only the longest; strides of 1 piece and of all but one piece of a window.
WINDOW_SETTINGS = [(8, None), (16, None), (16, 1), (16, 13), (128, None)]


@pytest.fixture(scope="module")
def valid_path(shared_data):
    return shared_data / "conll2003" / "valid.txt"


@pytest.fixture(scope="module")
def sentences(valid_path):
    return ner.read_conll(valid_path)


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    return FullTokenizer(str(uncased_vocab), do_lower_case=True)


@pytest.fixture(scope="module")
def retokenized(uncased_vocab, sentences):
    """Per sentence, (pieces, first piece of each word): tokenized again, by a fresh tokenizer,
    word by word, with [UNK] for a word without pieces (none in CoNLL-2003)."""
    fresh = FullTokenizer(str(uncased_vocab), do_lower_case=True)
    result = []
    for words, _ in sentences:
        pieces, starts = [], []
        for word in words:
            starts.append(len(pieces))
            pieces.extend(fresh.tokenize(word) or ["[UNK]"])
        result.append((pieces, starts))
    return result


_features_cache = {}


@pytest.fixture(scope="module", params=WINDOW_SETTINGS, ids=lambda s: "seq%d-stride%s" % s)
def converted(request, sentences, tokenizer):
    """(max_seq_length, doc_stride, features) of the validation set."""
    max_seq_length, doc_stride = request.param
    if request.param not in _features_cache:
        _features_cache[request.param] = ner.convert_sentences_to_features(
            sentences, CONLL_LABELS, max_seq_length, tokenizer, doc_stride)
    return max_seq_length, doc_stride, _features_cache[request.param]


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CONLL_SENTENCES))
def test_sentence_and_word_counts(shared_data, name):
    path = shared_data / "conll2003" / name
    sentences = ner.read_conll(path)
    assert len(sentences) == CONLL_SENTENCES[name]
    word_lines = [line.split() for line in path.read_text(encoding="utf-8").splitlines()
                  if line.strip() and not line.startswith("-DOCSTART-")]
    assert sum(len(words) for words, _ in sentences) == len(word_lines)
    assert [w for words, _ in sentences for w in words] == [c[0] for c in word_lines]
    assert [t for _, tags in sentences for t in tags] == [c[-1] for c in word_lines]
    assert all(len(words) == len(tags) > 0 for words, tags in sentences)


def test_label_list(sentences):
    assert ner.label_list_from(sentences) == CONLL_LABELS
    assert ner.label_list_from([(["a", "b"], ["B-X", None])]) == ["B-X"]


def test_sentence_boundaries_and_line_endings(tmp_path):
    path = tmp_path / "small.txt"
    path.write_bytes(b"-DOCSTART- -X- O\n\n\nEU NNP B-ORG\r\nrejects VBZ O\r\n\r\n"
                     b"-DOCSTART- -X- O\nLondon B-LOC\n\n\n")
    assert ner.read_conll(path) == [(["EU", "rejects"], ["B-ORG", "O"]),
                                             (["London"], ["B-LOC"])]


@pytest.mark.parametrize("content, line, message", [
    (b"EU B-ORG\nrejects O\nGerman\xff B-MISC\n", 3, "not valid UTF-8"),
    (b"EU B-ORG\nrejects\n", 2, "'rejects' has no tag"),
    (b"\n-DOCSTART- -X- O\n\n", None, "no sentences"),
])
def test_bad_files_name_file_and_line(tmp_path, content, line, message):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    where = f"{path}:{line}: " if line else f"{path}: "
    with pytest.raises(InputError, match=re.escape(where) + ".*" + message):
        ner.read_conll(path)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match=re.escape(str(tmp_path / "absent.txt")) + ".* not found"):
        ner.read_conll(tmp_path / "absent.txt")


def test_predict_file_without_tags(tmp_path, tokenizer):
    """require_tags=False: a word-only line has tag None; it is still scored (label id 0)."""
    path = tmp_path / "predict.txt"
    path.write_text("EU\nrejects\nGerman B-MISC\n", encoding="utf-8")
    sentences = ner.read_conll(path, require_tags=False)
    assert sentences == [(["EU", "rejects", "German"], [None, None, "B-MISC"])]
    (feature,) = ner.convert_sentences_to_features(sentences, CONLL_LABELS, 8,
                                                   tokenizer)
    assert feature.label_mask == [0, 1, 1, 1, 0, 0, 0, 0]
    assert feature.label_ids == [0, 0, 0, CONLL_LABELS.index("B-MISC"), 0, 0, 0, 0]


# ---------------------------------------------------------------------------------------------
# Conversion
# ---------------------------------------------------------------------------------------------


def test_round_trip_reproduces_every_gold_tag(converted, sentences):
    """Gold label ids, as if predicted, map back to exactly the gold tags of every word."""
    max_seq_length, _, features = converted
    padding = ner.record_schema(max_seq_length).padding_record()["label_ids"]
    per_word = ner.words_predictions(features, [f.label_ids for f in features] + [padding] * 3)
    assert [[CONLL_LABELS[i] for i in ids] for ids in per_word] == [t for _, t in sentences]


def test_each_word_scored_exactly_once(converted, sentences):
    max_seq_length, _, features = converted
    scored = collections.Counter((f.sentence_index, w) for f in features for w in f.word_indices)
    assert set(scored.values()) == {1}
    assert set(scored) == {(s, w) for s, (words, _) in enumerate(sentences)
                           for w in range(len(words))}
    for feature in features:
        assert sum(feature.label_mask) == len(feature.word_indices)
        assert len(feature.input_ids) == max_seq_length
    windows_per_sentence = collections.Counter(f.sentence_index for f in features)
    assert [f.sentence_index for f in features] == sorted(f.sentence_index for f in features)
    # Each setting exercises windows: most sentences at 16 pieces, the 3 longest at 128.
    assert max(windows_per_sentence.values()) >= (4 if max_seq_length < 128 else 2)


def _check_is_max_context(doc_spans, cur_span_index, position):
    """run_squad.py's function, verbatim but for the spans as (start, length) pairs."""
    best_score = None
    best_span_index = None
    for (span_index, (start, length)) in enumerate(doc_spans):
        end = start + length - 1
        if position < start:
            continue
        if position > end:
            continue
        num_left_context = position - start
        num_right_context = end - position
        score = min(num_left_context, num_right_context) + 0.01 * length
        if best_score is None or score > best_score:
            best_score = score
            best_span_index = span_index
    return cur_span_index == best_span_index


def _window_spans(window_pieces, pieces, word_starts):
    """Each window's (start, length) in the sentence's pieces, found by matching its pieces.

    A window's pieces can occur at several word starts (")" twice in a sentence), so this is a
    search for the placement that fits what any windowing must: starts at word starts,
    increasing, no word left out between two windows, the last word's first piece covered.
    """
    def next_uncovered(covered_end):
        return next((s for s in word_starts if s >= covered_end), len(pieces))

    def place(index, previous_start, covered_end):
        if index == len(window_pieces):
            return [] if covered_end > word_starts[-1] else None
        window = window_pieces[index]
        for start in word_starts:
            if previous_start < start <= next_uncovered(covered_end) and \
                    pieces[start:start + len(window)] == window:
                rest = place(index + 1, start, max(covered_end, start + len(window)))
                if rest is not None:
                    return [(start, len(window))] + rest
        return None

    spans = place(0, -1, 0)
    assert spans is not None, "the windows do not tile the sentence"
    return spans


def test_first_pieces_and_windows_match_an_independent_tokenization(
        converted, sentences, retokenized, tokenizer):
    max_seq_length, _, features = converted
    by_sentence = collections.defaultdict(list)
    for feature in features:
        by_sentence[feature.sentence_index].append(feature)
    for sentence_index, (words, tags) in enumerate(sentences):
        pieces, word_starts = retokenized[sentence_index]
        word_ends = word_starts[1:] + [len(pieces)]
        windows = []
        for feature in by_sentence[sentence_index]:
            length = sum(feature.input_mask)
            tokens = tokenizer.convert_ids_to_tokens(feature.input_ids[:length])
            assert tokens[0] == CLS and tokens[-1] == SEP and length <= max_seq_length
            assert feature.input_ids[length:] == [0] * (max_seq_length - length)
            assert feature.input_mask == [1] * length + [0] * (max_seq_length - length)
            assert feature.segment_ids == [0] * max_seq_length
            windows.append(tokens[1:-1])
        spans = _window_spans(windows, pieces, word_starts)
        for window_index, ((start, length), feature) in enumerate(
                zip(spans, by_sentence[sentence_index])):
            # Whole words only, unless the window is one word too long to fit.
            cut_single_word = (start + length < len(pieces)
                               and start + length not in word_starts
                               and word_ends[word_starts.index(start)] - start > length)
            assert start + length in word_ends or cut_single_word
            # Labelled positions: the first piece of each scored word, with its gold tag, and
            # the words scored here are those for which this window has the most context.
            in_window = [w for w, s in enumerate(word_starts) if start <= s < start + length]
            expected_words = [w for w in in_window
                              if _check_is_max_context(spans, window_index, word_starts[w])]
            assert feature.word_indices == expected_words
            positions = [1 + word_starts[w] - start for w in expected_words]
            assert [i for i, m in enumerate(feature.label_mask) if m] == positions
            for position, word in zip(positions, expected_words):
                assert feature.label_ids[position] == CONLL_LABELS.index(tags[word])
            assert all(feature.label_ids[i] == 0 for i in range(max_seq_length)
                       if not feature.label_mask[i])


def test_word_without_pieces_becomes_unk(tokenizer):
    """A word the tokenizer drops (a zero-width space) still gets a piece, hence a prediction."""
    assert tokenizer.tokenize("\u200b") == []
    (feature,) = ner.convert_sentences_to_features(
        [(["Rome", "\u200b", "wins"], ["B-LOC", "O", "O"])], CONLL_LABELS, 8, tokenizer)
    tokens = tokenizer.convert_ids_to_tokens(feature.input_ids[:5])
    assert tokens == [CLS, "rome", "[UNK]", "wins", SEP]
    assert feature.word_indices == [0, 1, 2]


def test_conversion_errors(tokenizer):
    with pytest.raises(InputError, match="sentence 1, word 2 .*'B-ANIMAL' is not in the label"):
        ner.convert_sentences_to_features(
            [(["a", "cat"], ["O", "B-ANIMAL"])], CONLL_LABELS, 8, tokenizer)
    with pytest.raises(InputError, match="^max_seq_length: must be at least 3"):
        ner.convert_sentences_to_features([(["a"], ["O"])], CONLL_LABELS, 2, tokenizer)
    for stride in (0, 6, 7):  # a window of 8 - 2 pieces: the stride must be in [1, 6)
        with pytest.raises(InputError, match="^doc_stride: must be at least 1 and less than "
                                             "the window, max_seq_length - 2 = 6 pieces"):
            ner.convert_sentences_to_features([(["a"], ["O"])], CONLL_LABELS, 8,
                                              tokenizer, doc_stride=stride)


def test_unknown_tag_names_file_and_line(tmp_path, tokenizer):
    path = tmp_path / "tags.txt"
    path.write_bytes(b"-DOCSTART- -X- O\n\nEU NNP B-ORG\r\nrejects VBZ O\r\n\n\n"
                     b"-DOCSTART- -X- O\nThe O\nblack O\ncat B-ANIMAL\n\nLondon B-LOC\n")
    sentences = ner.read_conll(path)
    assert sentences.first_lines == [3, 8, 12]
    with pytest.raises(InputError) as raised:
        ner.convert_sentences_to_features(sentences, CONLL_LABELS, 8, tokenizer)
    assert str(raised.value) == (f"{path}:10: sentence 2, word 3 ('cat'): tag 'B-ANIMAL' is not "
                                 f"in the label list {CONLL_LABELS}")
    # Sentences that are not read_conll's (a list): the sentence and word only.
    with pytest.raises(InputError, match=r"^sentence 2, word 3 \('cat'\): tag 'B-ANIMAL'"):
        ner.convert_sentences_to_features(list(sentences), CONLL_LABELS, 8, tokenizer)


def test_unknown_tag_line_in_the_real_file(valid_path, sentences, tokenizer):
    """Oracle: the first line of the file itself whose last column is the left-out tag."""
    labels = [label for label in CONLL_LABELS if label != "I-MISC"]
    with pytest.raises(InputError) as raised:
        ner.convert_sentences_to_features(sentences, labels, 128, tokenizer)
    lines = valid_path.read_text("utf-8").split("\n")
    line = next(n for n, text in enumerate(lines, start=1)
                if text.split() and text.split()[-1] == "I-MISC")
    word = lines[line - 1].split()[0]
    assert str(raised.value).startswith(f"{valid_path}:{line}: sentence ")
    assert f"({word!r}): tag 'I-MISC' is not in the label list" in str(raised.value)


def test_words_predictions_rejects_mismatched_predictions(converted):
    _, _, features = converted
    predictions = [f.label_ids for f in features]
    with pytest.raises(ValueError, match="features but"):
        ner.words_predictions(features, predictions[:-1])
    with pytest.raises(ValueError, match="scored twice"):
        ner.words_predictions(features + features[:1], predictions + predictions[:1])
    last_sentence = [i for i, f in enumerate(features) if f.sentence_index == 0]
    without = [f for i, f in enumerate(features) if i != last_sentence[-1]]
    with pytest.raises(ValueError, match="sentence 0: word .* has no prediction|no features"):
        ner.words_predictions(without, [f.label_ids for f in without])


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def test_records_read_back_with_the_tagging_spec(tmp_path, sentences, tokenizer):
    import tensorflow as tf

    max_seq_length = 32
    features = ner.convert_sentences_to_features(sentences[:300], CONLL_LABELS,
                                                 max_seq_length, tokenizer)
    path = tmp_path / "eval.tf_record"
    expected_records = [feature.record() for feature in features]
    expected_records.append(ner.record_schema(max_seq_length).padding_record())
    assert ner.write_tagging_records(features, path, batch_size=len(expected_records)) == len(
        expected_records)
    spec = tagging_feature_spec(max_seq_length)
    records = [tf.io.parse_single_example(r, spec)
               for r in tf.data.TFRecordDataset(str(path))]
    assert len(records) == len(expected_records)
    for record, expected in zip(records, expected_records):
        assert set(record) == set(expected)
        for name, value in expected.items():
            np.testing.assert_array_equal(record[name].numpy(), value, err_msg=name)
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_conll_predictions_file(tmp_path, sentences, converted):
    """The round trip written as conlleval reads it: `word gold predicted`, blank line after
    each sentence; entity scores of the file's columns are perfect."""
    _, _, features = converted
    per_word = ner.words_predictions(features, [f.label_ids for f in features])
    predicted_tags = [[CONLL_LABELS[i] for i in ids] for ids in per_word]
    path = tmp_path / "predictions.txt"
    ner.write_conll_predictions(path, sentences, predicted_tags)
    blocks = path.read_text(encoding="utf-8").split("\n\n")
    assert blocks[-1] == "" and len(blocks) == len(sentences) + 1
    for block, (words, tags) in zip(blocks, sentences):
        assert [line.split(" ") for line in block.split("\n")] == [
            [w, t, t] for w, t in zip(words, tags)]
    read_back = ner.read_conll(path)
    gold = [[line.split()[1] for line in block.split("\n")] for block in blocks[:-1]]
    assert metrics.conll_entity_scores(gold, [t for _, t in read_back])["f1"] == 1.0
    assert list(tmp_path.iterdir()) == [path]


def test_conll_predictions_without_gold(tmp_path):
    path = tmp_path / "predictions.txt"
    ner.write_conll_predictions(path, [(["EU", "rejects"], [None, None])],
                                         [["B-ORG", "O"]])
    assert path.read_text(encoding="utf-8") == "EU B-ORG\nrejects O\n\n"
    with pytest.raises(ValueError, match="sentence 0: 2 words but 1 predicted"):
        ner.write_conll_predictions(path, [(["EU", "rejects"], ["O", "O"])], [["O"]])


# ---------------------------------------------------------------------------------------------
# Windows give the one-window tags
# ---------------------------------------------------------------------------------------------


def local_model_tags(input_ids, num_labels):
    """A deterministic tagger whose tag at a position depends on the pieces at that position
    and its two neighbours only (zeros beyond the row): a stand-in for a model's dependence on
    context, exact where a window gives a word's first piece the same neighbours as the whole
    sentence."""
    ids = np.asarray(input_ids, np.int64)
    left = np.pad(ids, ((0, 0), (1, 0)))[:, :-1]
    right = np.pad(ids, ((0, 0), (0, 1)))[:, 1:]
    return (left * 31 + ids * 17 + right * 7) % num_labels


def predicted_tags(task, output_dir):
    """TaggingTask's eval_predictions.txt for the local model's predictions on its eval
    records (padding included): the predicted tag of every word, per sentence."""
    features = task.features["eval"]
    predictions = local_model_tags([f.input_ids for f in features], len(CONLL_LABELS))
    (path,) = task.write_eval_outputs({"prediction": predictions}, str(output_dir))
    blocks = open(path, encoding="utf-8").read().split("\n\n")[:-1]
    return [[line.split(" ")[2] for line in block.split("\n")] for block in blocks]


@pytest.mark.parametrize("max_seq_length, doc_stride", [(16, None), (16, 3), (24, 8)])
def test_windows_give_the_one_window_tags_where_they_give_the_context(
        valid_path, tmp_path, uncased_vocab, max_seq_length, doc_stride):
    """run_ner's path (ner_task.prepare_task, TaggingTask.write_eval_outputs) on the first 286
    sentences of valid.txt (300 blocks, -DOCSTART- ones included), at 512 (every sentence in
    one window) and at a length that windows most of them. Oracle: the one-window tags.
    Where the window that scores a word gives its first piece the same neighbours as the
    whole sentence does (not the window's [CLS] or [SEP] in place of a piece), the tags must
    be equal; with these strides that is every word (and every word of a sentence that fits
    in one window)."""
    from bert_tf.tasks.ner import task as ner_task
    from bert_tf.text.fast_tokenization import FastTokenizer

    lines = valid_path.read_text(encoding="utf-8").split("\n")
    blocks = "\n".join(lines).split("\n\n")
    (tmp_path / "valid.txt").write_text("\n\n".join(blocks[:301]) + "\n", encoding="utf-8")
    tokenizer = FastTokenizer(str(uncased_vocab), do_lower_case=True)

    def prepared(length, stride, name):
        return ner_task.prepare_task(None, tokenizer, length, tmp_path / name,
                                     data_dir=tmp_path, dev_file="valid.txt",
                                     label_list=CONLL_LABELS, doc_stride=stride,
                                     eval_batch_size=8, log=lambda line: None).task

    whole_task = prepared(512, None, "whole")
    assert all(f.num_words == len(f.word_indices) for f in whole_task.features["eval"]
               if f.is_real_example)  # one window per sentence
    whole = predicted_tags(whole_task, tmp_path / "whole")
    task = prepared(max_seq_length, doc_stride, "windows")
    windowed = predicted_tags(task, tmp_path / "windows")
    assert len(windowed) == len(whole) == 286

    # Where each word is scored: its window's pieces and its first piece's position there.
    features = [f for f in task.features["eval"] if f.is_real_example]
    windows_of = collections.Counter(f.sentence_index for f in features)
    enough, compared, fitting = 0, 0, 0
    for feature in features:
        length = sum(feature.input_mask)
        positions = [i for i, m in enumerate(feature.label_mask) if m]
        sentence = whole_task.features["eval"][feature.sentence_index]
        whole_length = sum(sentence.input_mask)
        whole_positions = [i for i, m in enumerate(sentence.label_mask) if m]
        for word, position in zip(feature.word_indices, positions):
            compared += 1
            at = whole_positions[word]
            same_context = all(
                feature.input_ids[position + d] == sentence.input_ids[at + d]
                for d in (-1, 1) if 0 <= at + d < whole_length and 0 <= position + d < length)
            if windows_of[feature.sentence_index] == 1:
                fitting += 1
                assert same_context
            if same_context:
                enough += 1
                assert windowed[feature.sentence_index][word] == \
                    whole[feature.sentence_index][word], (feature.sentence_index, word)
    assert compared == sum(len(tags) for tags in whole)
    # The max-context rule scores every word where it has its neighbours (scoring each word
    # in the first window that holds it leaves some at a window's edge: this fails then).
    assert enough == compared and fitting > 1000
    assert max(windows_of.values()) >= 4
