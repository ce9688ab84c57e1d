"""bert_tf.tasks.squad.reader and .preprocessor against the original run_squad on the real SQuAD
dev files.

Oracle: the reference release's run_squad (bert-tensorflow 1.0.4 in ../shared/reference):
`read_squad_examples`, `convert_examples_to_features` with its own FullTokenizer and
`FeatureWriter` records, on slices of ../shared/data/SQuAD/dev-v1.1.json and dev-v2.0.json
(the uncased vocabulary; max_seq_length 384 / doc_stride 128 / max_query_length 64 as the
original's defaults, on the first and the longest paragraph of every 5th/6th article; and
64 / 16 / 24 for many windows per question). Training mode runs on
files made from the same slices with one answer per question (the dev files have several),
plus answers moved off their text, which both skip.

The whole dev sets (10,833 and 12,232 features) were compared once the same way by
bench/finetuning/squad_postprocess.py (equal; the reference took 42 s and 60 s, ours 4 s and 7 s).
"""
import copy
import json
import random

import pytest

from bert_tf.tasks.squad import preprocessor as features_lib
from bert_tf.tasks.squad import preprocessor as sd
from bert_tf.errors import InputError
from bert_tf.tokenization import FullTokenizer
from conftest import decoded_records

EXAMPLE_FIELDS = ("qas_id", "question_text", "doc_tokens", "orig_answer_text",
                  "start_position", "end_position", "is_impossible")
FEATURE_FIELDS = ("unique_id", "example_index", "doc_span_index", "tokens",
                  "token_to_orig_map", "token_is_max_context", "input_ids", "input_mask",
                  "segment_ids", "start_position", "end_position", "is_impossible")
WINDOWS = {"default": (384, 128, 64), "small": (64, 16, 24)}


# ------------------------------------------------------------------------------------------
# Fixtures and helpers
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def squad_dir(shared_data):
    return shared_data / "SQuAD"


@pytest.fixture(scope="module")
def tokenizers(refbert, uncased_vocab):
    """(the reference's FullTokenizer, ours) on the uncased vocabulary."""
    return (refbert.tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True),
            FullTokenizer(str(uncased_vocab), do_lower_case=True))


def dev_slice(squad_dir, version, article_step, paragraphs, longest=True):
    """The dev file's "data" cut to the first `paragraphs` paragraphs of every
    `article_step`-th article, and its longest paragraph (several 384-token windows)."""
    data = json.loads((squad_dir / f"dev-v{version}.json").read_text(encoding="utf-8"))
    articles = []
    for article in data["data"][::article_step]:
        longest = max(article["paragraphs"], key=lambda p: len(p["context"]))
        kept = article["paragraphs"][:paragraphs]
        kept += [longest] if longest and all(p is not longest for p in kept) else []
        articles.append(dict(article, paragraphs=kept))
    return {"version": data.get("version"), "data": articles}


def training_version(data, mismatches=3):
    """A training file from a dev slice: one answer per question (a random one of the dev
    answers); the first `mismatches` answerable questions get an answer_start moved off their
    text (both readers must skip them)."""
    data = copy.deepcopy(data)
    rng = random.Random(7)
    moved = []
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                if qa["answers"]:
                    qa["answers"] = [rng.choice(qa["answers"])]
                    if len(moved) < mismatches and len(qa["answers"][0]["text"]) > 3:
                        answer = dict(qa["answers"][0])
                        answer["answer_start"] = (answer["answer_start"] + 97) % len(
                            paragraph["context"])
                        qa["answers"] = [answer]
                        moved.append(qa["id"])
    return data, moved


def write_json(path, data):
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def example_tuple(example):
    return tuple(getattr(example, name) for name in EXAMPLE_FIELDS)


def assert_features_equal(ref_features, ours):
    assert len(ours) == len(ref_features)
    for a, b in zip(ref_features, ours):
        for name in FEATURE_FIELDS:
            assert getattr(b, name) == getattr(a, name), (name, a.unique_id)
        # Same key order too (the n-best code iterates none, but logs do).
        assert list(b.token_to_orig_map) == list(a.token_to_orig_map)


def reference_features(rs, examples, tokenizer, window, is_training):
    collected = []
    max_seq_length, doc_stride, max_query_length = window
    rs.convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride,
                                    max_query_length, is_training, collected.append)
    return collected


def reference_records(rs, path, features, is_training):
    writer = rs.FeatureWriter(str(path), is_training=is_training)
    for feature in features:
        writer.process_feature(feature)
    writer.close()
    return decoded_records(path)


# ------------------------------------------------------------------------------------------
# Parity with the reference
# ------------------------------------------------------------------------------------------


# (version, window, article step, paragraphs per article): a few hundred features each.
PREDICT_CASES = [("1.1", "default", 6, 1), ("2.0", "default", 5, 1),
                 ("1.1", "small", 12, 1), ("2.0", "small", 12, 1)]


@pytest.mark.parametrize("version,window,step,paragraphs", PREDICT_CASES,
                         ids=[f"v{v}-{w}" for v, w, _, _ in PREDICT_CASES])
def test_prediction_examples_features_and_records_equal_reference(
        rs, ref_flags, tokenizers, squad_dir, tmp_path, version, window, step, paragraphs):
    v2 = version == "2.0"
    ref_flags(version_2_with_negative=v2)
    path = write_json(tmp_path / "dev.json",
                      dev_slice(squad_dir, version, step, paragraphs, window == "default"))
    ref_examples = rs.read_squad_examples(path, is_training=False)
    ours = sd.read_squad_examples(path, is_training=False, version_2_with_negative=v2)
    assert [example_tuple(e) for e in ours] == [example_tuple(e) for e in ref_examples]
    assert len(ours) > 40

    ref_features = reference_features(rs, ref_examples, tokenizers[0], WINDOWS[window], False)
    our_features = sd.convert_examples_to_features(ours, tokenizers[1], *WINDOWS[window], False)
    assert_features_equal(ref_features, our_features)
    assert our_features[0].unique_id == 1000000000
    windows_per_question = len(our_features) / len(ours)
    assert windows_per_question > (3 if window == "small" else 1.02)

    if window == "default":  # records: the same features, the same decoded records
        count = sd.write_squad_records(tmp_path / "ours.tf_record", our_features, False)
        assert count == len(our_features)
        assert decoded_records(tmp_path / "ours.tf_record") == reference_records(
            rs, tmp_path / "ref.tf_record", ref_features, False)


TRAIN_CASES = [("1.1", "default", 6, 1), ("2.0", "default", 5, 1), ("2.0", "small", 12, 1)]


@pytest.mark.parametrize("version,window,step,paragraphs", TRAIN_CASES,
                         ids=[f"v{v}-{w}" for v, w, _, _ in TRAIN_CASES])
def test_training_examples_features_and_records_equal_reference(
        rs, ref_flags, tokenizers, squad_dir, tmp_path, version, window, step, paragraphs):
    v2 = version == "2.0"
    ref_flags(version_2_with_negative=v2)
    data, moved = training_version(
        dev_slice(squad_dir, version, step, paragraphs, window == "default"))
    path = write_json(tmp_path / "train.json", data)
    ref_examples = rs.read_squad_examples(path, is_training=True)
    skipped, warnings = [], []
    ours = sd.read_squad_examples(path, is_training=True, version_2_with_negative=v2,
                                  skipped=skipped, log=warnings.append)
    assert [example_tuple(e) for e in ours] == [example_tuple(e) for e in ref_examples]
    # The moved answers are the ones skipped (by both: the lists are equal), and counted.
    assert [s.qas_id for s in skipped] == moved and len(warnings) == len(moved)
    assert all(s.answer_text and s.answer_text not in s.found_text for s in skipped)
    if v2:
        assert any(e.is_impossible for e in ours) and not all(e.is_impossible for e in ours)

    # The original's main shuffles training examples with random.Random(12345).
    random.Random(12345).shuffle(ref_examples)
    sd.shuffle_training_examples(ours)
    assert [e.qas_id for e in ours] == [e.qas_id for e in ref_examples]

    ref_features = reference_features(rs, ref_examples, tokenizers[0], WINDOWS[window], True)
    our_features = sd.convert_examples_to_features(ours, tokenizers[1], *WINDOWS[window], True)
    assert_features_equal(ref_features, our_features)
    # Some answers are narrowed by _improve_answer_span, some windows miss the answer (0, 0).
    answered = [f for f in our_features if not f.is_impossible and f.start_position > 0]
    assert answered and any(f.start_position == 0 for f in our_features)

    sd.write_squad_records(tmp_path / "ours.tf_record", our_features, True)
    ours_decoded = decoded_records(tmp_path / "ours.tf_record")
    assert ours_decoded == reference_records(rs, tmp_path / "ref.tf_record", ref_features, True)
    assert set(ours_decoded[0]) == {"unique_ids", "input_ids", "input_mask", "segment_ids",
                                    "start_positions", "end_positions", "is_impossible"}


def test_records_parse_with_the_feature_spec(tokenizers, tmp_path):
    import tensorflow as tf

    data = {"data": [{"paragraphs": [{"context": "Ada Lovelace wrote the first program.",
                                      "qas": [{"id": "q1", "question": "Who wrote it?",
                                               "answers": [{"text": "Ada Lovelace",
                                                            "answer_start": 0}]}]}]}]}
    path = write_json(tmp_path / "train.json", data)
    examples = sd.read_squad_examples(path, is_training=True)
    features = sd.convert_examples_to_features(examples, tokenizers[1], 32, 8, 16, True)
    for is_training in (True, False):
        record = tmp_path / f"r{is_training}.tf_record"
        sd.write_squad_records(record, features, is_training)
        spec = features_lib.squad_feature_spec(32, is_training)
        raw = next(iter(tf.data.TFRecordDataset(str(record))))
        parsed = tf.io.parse_single_example(raw, spec)
        assert int(parsed["unique_ids"]) == 1000000000
        assert parsed["input_ids"].shape == [32]
        if is_training:
            tokens = features[0].tokens[int(parsed["start_positions"]):
                                        int(parsed["end_positions"]) + 1]
            assert tokens == ["ada", "love", "##lace"] and int(parsed["is_impossible"]) == 0
        else:
            assert "start_positions" not in parsed


# ------------------------------------------------------------------------------------------
# Bad input
# ------------------------------------------------------------------------------------------


def small_file():
    return {"version": "1.1", "data": [{"title": "t", "paragraphs": [{
        "context": "The cat sat on the mat. It was a sunny day.",
        "qas": [{"id": "q1", "question": "Where did the cat sit?",
                 "answers": [{"text": "on the mat", "answer_start": 8}]},
                {"id": "q2", "question": "What kind of day?",
                 "answers": [{"text": "sunny", "answer_start": 33}]}]}]}]}


def test_malformed_json_names_the_file_and_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"data": [\n  {"paragraphs": [}\n]}', encoding="utf-8")
    with pytest.raises(InputError, match=rf"{path}:2: malformed JSON"):
        sd.read_squad_examples(str(path), is_training=False)
    path.write_text('{"version": "1.1"}', encoding="utf-8")
    with pytest.raises(InputError, match=r'bad.json: not a SQuAD file: expected .* "data"'):
        sd.read_squad_examples(str(path), is_training=False)
    with pytest.raises(InputError, match=r"missing.json: SQuAD file not found"):
        sd.read_squad_examples(str(tmp_path / "missing.json"), is_training=False)


@pytest.mark.parametrize("remove,is_training,message", [
    ("question", False, r"question 'q2': missing field 'question'"),
    ("answers", True, r"question 'q2': missing field 'answers'"),
    ("text", True, r"question 'q2': missing field 'text'"),
    ("id", False, r"question 1 of paragraph 0 of article 0: missing field 'id'"),
    ("context", False, r"paragraph 0 of article 0: missing field 'context'"),
])
def test_missing_field_names_the_file_and_question(tmp_path, remove, is_training, message):
    data = small_file()
    paragraph = data["data"][0]["paragraphs"][0]
    qa = paragraph["qas"][1]
    {"question": qa, "answers": qa, "id": qa, "context": paragraph,
     "text": qa["answers"][0]}[remove].pop(remove)
    path = write_json(tmp_path / "f.json", data)
    with pytest.raises(InputError, match=rf"f.json: {message}"):
        sd.read_squad_examples(path, is_training=is_training)
    if remove in ("answers", "text"):  # prediction does not read answers
        assert len(sd.read_squad_examples(path, is_training=False)) == 2


def test_wrong_types_and_answer_counts_are_errors(tmp_path):
    data = small_file()
    data["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = "8"
    path = write_json(tmp_path / "f.json", data)
    with pytest.raises(InputError, match=r"question 'q1': field 'answer_start' should be int"):
        sd.read_squad_examples(path, is_training=True)
    data = small_file()
    qa = data["data"][0]["paragraphs"][0]["qas"][1]
    qa["answers"].append(dict(qa["answers"][0]))
    path = write_json(tmp_path / "f.json", data)
    with pytest.raises(InputError, match=r"question 'q2': for training, each question should "
                                         r"have exactly 1 answer, this one has 2"):
        sd.read_squad_examples(path, is_training=True)
    data = small_file()
    path = write_json(tmp_path / "f.json", data)
    with pytest.raises(InputError, match=r"question 'q1': missing field 'is_impossible'"):
        sd.read_squad_examples(path, is_training=True, version_2_with_negative=True)


def test_mismatching_answers_are_skipped_and_counted(rs, ref_flags, tmp_path):
    ref_flags(version_2_with_negative=False)
    data = small_file()
    qas = data["data"][0]["paragraphs"][0]["qas"]
    qas[0]["answers"][0]["answer_start"] = 20   # "mat. It was" does not hold "on the mat"
    qas[1]["answers"][0]["answer_start"] = 500  # outside the context
    path = write_json(tmp_path / "f.json", data)
    skipped, warnings = [], []
    examples = sd.read_squad_examples(path, is_training=True, skipped=skipped,
                                      log=warnings.append)
    assert examples == []
    assert [(s.qas_id, s.answer_text, s.found_text) for s in skipped] == [
        ("q1", "on the mat", "mat. It was"), ("q2", "sunny", "")]
    assert warnings[0] == "Could not find answer: 'mat. It was' vs. 'on the mat'"
    assert "offset 500 is outside the context" in warnings[1]
    # The reference skips the first the same way (and fails on the second with IndexError).
    qas.pop(1)
    assert rs.read_squad_examples(write_json(tmp_path / "g.json", data), True) == []


def test_overlong_question_is_truncated_as_the_original(rs, ref_flags, tokenizers, tmp_path):
    ref_flags(version_2_with_negative=False)
    data = small_file()
    long_question = " ".join(["where exactly did the small grey cat sit"] * 12)
    data["data"][0]["paragraphs"][0]["qas"][0]["question"] = long_question
    path = write_json(tmp_path / "f.json", data)
    ours = sd.convert_examples_to_features(
        sd.read_squad_examples(path, False), tokenizers[1], 96, 16, 64, False)
    ref = reference_features(rs, rs.read_squad_examples(path, False), tokenizers[0],
                             (96, 16, 64), False)
    assert_features_equal(ref, ours)
    question = tokenizers[1].tokenize(long_question)
    assert len(question) > 64
    assert ours[0].tokens[1:66] == question[:64] + ["[SEP]"]


def test_window_flags_that_cannot_work_are_errors(tokenizers):
    example = sd.SquadExample("q", "a question", ["some", "words"])
    with pytest.raises(InputError, match=r"^max_seq_length: .* must be greater than "
                                         r"max_query_length \(64\) \+ 3"):
        sd.convert_examples_to_features([example], tokenizers[1], 67, 16, 64, False)
    with pytest.raises(InputError, match=r"^doc_stride: must be >= 1"):
        sd.convert_examples_to_features([example], tokenizers[1], 128, 0, 64, False)


def test_windows_and_max_context_follow_the_original(rs):
    """doc_spans and the max-context rule against the original's loop and
    `_check_is_max_context`, on many lengths and strides."""
    DocSpan = sd.DocSpan
    for num_tokens in (1, 5, 17, 40, 97):
        for max_tokens, stride in ((4, 1), (8, 3), (8, 8), (10, 20), (30, 7)):
            spans = sd.doc_spans(num_tokens, max_tokens, stride)
            expected, start = [], 0
            while start < num_tokens:
                length = min(num_tokens - start, max_tokens)
                expected.append(DocSpan(start, length))
                if start + length == num_tokens:
                    break
                start += min(length, stride)
            assert spans == expected
            for index, span in enumerate(spans):
                for position in range(span.start, span.start + span.length):
                    assert sd._check_is_max_context(spans, index, position) == \
                        rs._check_is_max_context(spans, index, position)
