"""bert_tf.text.packing: the one packing of records and SavedModels, against the original.

Oracle: the reference release's run_classifier.convert_single_example (its `_truncate_seq_pair`
and layout), driven by a tokenizer whose pieces are given, so that every edge of the rule is
reached: single texts and pairs at every length from 3, pairs truncated to an empty second
part (no second [SEP] then, as the original's `if tokens_b:`), empty second texts; and the
same pairs through `pack` in one mixed batch, through `pack_lists`, and through
GraphTokenizer.bert_inputs on real text with an empty second text (serve_text_pair).
"""
import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.text import packing

CLS_ID, SEP_ID = 1, 2


class _GivenPieces:
    """A tokenizer for the reference's convert_single_example: a text is its pieces
    ("t17 t5" -> ["t17", "t5"]); ids are the numbers."""

    @staticmethod
    def tokenize(text):
        return text.split()

    @staticmethod
    def convert_tokens_to_ids(tokens):
        return [{"[CLS]": CLS_ID, "[SEP]": SEP_ID}.get(t) or int(t[1:]) for t in tokens]


@pytest.fixture(scope="module")
def cases():
    rng = random.Random(0)
    found = []
    for _ in range(600):
        max_seq_length = rng.randint(3, 24)
        a = [rng.randint(5, 99) for _ in range(rng.randint(0, 30))]
        roll = rng.random()
        b = None if roll < 0.25 else [] if roll < 0.35 else [rng.randint(5, 99)
                                                               for _ in range(rng.randint(1, 30))]
        found.append((max_seq_length, a, b))
    return found


def _reference(rc, max_seq_length, a, b):
    text_b = None if b is None else " ".join(f"t{i}" for i in b)
    example = rc.InputExample("x", " ".join(f"t{i}" for i in a), text_b, "0")
    feature = rc.convert_single_example(10, example, ["0"], max_seq_length, _GivenPieces())
    return feature.input_ids, feature.input_mask, feature.segment_ids


def test_pack_is_the_originals_convert_single_example(refbert, cases):
    rc = refbert.import_reference("run_classifier")
    empty_second = truncated_to_single = 0
    for max_seq_length, a, b in cases:
        expected = _reference(rc, max_seq_length, a, b)
        got = packing.pack_lists([a], None if b is None else [b],
                                 max_seq_length=max_seq_length, cls_id=CLS_ID, sep_id=SEP_ID)
        assert tuple(got[name][0].tolist() for name in packing.INPUT_NAMES) == expected, (
            max_seq_length, a, b)
        empty_second += b == []
        truncated_to_single += bool(b) and expected[2][-1] == 0 and SEP_ID not in expected[0][
            expected[0].index(SEP_ID) + 1:]
    assert empty_second > 20 and truncated_to_single > 5  # both single-text paths were taken


def test_one_mixed_batch_in_the_graph_equals_row_by_row(refbert, cases):
    """Rows of different lengths, with and without second parts, packed together by the graph
    function (as a SavedModel's batch) give each row's own packing."""
    rc = refbert.import_reference("run_classifier")
    for max_seq_length in (5, 16):
        rows = [(a, b) for _, a, b in cases]
        ragged = [tf.ragged.constant([list(p or []) for p in part], tf.int32,
                                     row_splits_dtype=tf.int64) for part in zip(*rows)]
        spec = tf.RaggedTensorSpec([None, None], tf.int32, 1, tf.int64)
        packed = tf.function(lambda a, b: packing.pack(
            a, b, max_seq_length=max_seq_length, cls_id=CLS_ID, sep_id=SEP_ID),
            input_signature=[spec, spec])
        graph = packed.get_concrete_function().structured_outputs
        assert graph["input_ids"].shape.as_list() == [None, max_seq_length]  # static length
        got = packed(*ragged)
        for k, (a, b) in enumerate(rows):
            assert tuple(got[name][k].numpy().tolist() for name in packing.INPUT_NAMES) == \
                _reference(rc, max_seq_length, a, b or None)


def test_truncating_the_second_part_only(cases):
    """run_squad's layout: the first part kept whole (cut to the budget), the second cut."""
    for max_seq_length, a, b in cases:
        if not b:
            continue
        got = packing.pack_lists([a], [b], max_seq_length=max_seq_length, cls_id=CLS_ID,
                                 sep_id=SEP_ID, truncate="second")
        kept_a = a[:max_seq_length - 3]
        kept_b = b[:max_seq_length - 3 - len(kept_a)]
        tokens = [CLS_ID] + kept_a + [SEP_ID] + (kept_b + [SEP_ID] if kept_b else [])
        ids = got["input_ids"][0].tolist()
        assert ids == tokens + [0] * (max_seq_length - len(tokens))
        assert got["segment_ids"][0].tolist() == (
            [0] * (len(kept_a) + 2) + [1] * (len(tokens) - len(kept_a) - 2)
            + [0] * (max_seq_length - len(tokens)))


def test_graph_tokenizer_packs_an_empty_second_text_as_the_original(refbert, uncased_vocab):
    """serve_text_pair with an empty text_b (or one the tokenizer drops) is `[CLS] a [SEP]`,
    as the original's convert_single_example, not `[CLS] a [SEP] [SEP]`."""
    from bert_tf.text.graph_tokenization import GraphTokenizer

    rc = refbert.import_reference("run_classifier")
    tokenizer = refbert.import_reference("tokenization").FullTokenizer(str(uncased_vocab), True)
    graph = GraphTokenizer(str(uncased_vocab), do_lower_case=True)
    pairs = [("The cat sat on the mat.", ""), ("A longer text about nothing much.", "\x00"),
             ("Short.", "It was tired, very tired."), ("", "")]
    for max_seq_length in (4, 8, 32):
        got = graph.bert_inputs(tf.constant([a for a, _ in pairs]),
                                tf.constant([b for _, b in pairs]), max_seq_length=max_seq_length)
        for k, (a, b) in enumerate(pairs):
            feature = rc.convert_single_example(0, rc.InputExample("x", a, b, "0"), ["0"],
                                                max_seq_length, tokenizer)
            assert got["input_ids"][k].numpy().tolist() == feature.input_ids
            assert got["input_mask"][k].numpy().tolist() == feature.input_mask
            assert got["segment_ids"][k].numpy().tolist() == feature.segment_ids


def test_pack_lists_checks_its_arguments():
    with pytest.raises(ValueError, match="2 first parts but 1 second"):
        packing.pack_lists([[5], [6]], [[7]], max_seq_length=8, cls_id=1, sep_id=2)
    with pytest.raises(ValueError, match="truncate"):
        packing.pack_lists([[5]], max_seq_length=8, cls_id=1, sep_id=2, truncate="both")
    empty = packing.pack_lists([], max_seq_length=8, cls_id=1, sep_id=2)
    assert all(value.shape == (0, 8) and value.dtype == np.int32 for value in empty.values())


def test_padding_to_the_longest_is_a_prefix_of_the_full_padding(cases):
    """pad_to_longest (the string signatures' batches): the width is the batch's longest packed
    row, and every row is the max_seq_length packing cut there (only padding is dropped)."""
    rows = [(a, b) for max_seq_length, a, b in cases if max_seq_length == 24] + [([5], None)]
    ragged = [tf.ragged.constant([list(p or []) for p in part], tf.int32,
                                 row_splits_dtype=tf.int64) for part in zip(*rows)]
    full = packing.pack(*ragged, max_seq_length=24, cls_id=CLS_ID, sep_id=SEP_ID)
    cut = packing.pack(*ragged, max_seq_length=24, cls_id=CLS_ID, sep_id=SEP_ID,
                       pad_to_longest=True)
    width = int(full["input_mask"].numpy().sum(axis=1).max())
    assert cut["input_ids"].shape[1] == width
    for name in packing.INPUT_NAMES:
        np.testing.assert_array_equal(cut[name].numpy(), full[name].numpy()[:, :width])
    short = packing.pack(tf.ragged.constant([[5], [6, 7]], tf.int32, row_splits_dtype=tf.int64),
                         max_seq_length=24, cls_id=CLS_ID, sep_id=SEP_ID, pad_to_longest=True)
    assert short["input_ids"].numpy().tolist() == [[1, 5, 2, 0], [1, 6, 7, 2]]
