"""bert_tf.graph_tokenization.GraphTokenizer against the reference release.

Oracle: the reference (bert-tensorflow 1.0.4) FullTokenizer ids on every distinct text of
../shared/data (uncased and cased), on adversarial text and every code point (reference tokens:
session fixtures of tests/conftest.py, computed once for all tokenizer tests), and the reference run_classifier's
convert_single_example for `bert_inputs` (GLUE MRPC pairs, long and truncating lengths). The
documented residual differences (final sigma, canonical order of non-Mn combining marks) are
checked to be exactly what the module docstring says.
"""
import json
import subprocess
import sys
import unicodedata

import pytest
import tensorflow as tf

import corpora
from bert_tf.graph_tokenization import GraphTokenizer

# Texts on which the graph tokenizer knowingly differs (see the module docstring).
_SIGMA = "\u03a3"


def _has_non_mn_combining_pair(text):
    """Whether a run of combining characters holds two that are not Mn (canonical reordering
    could swap them; Mn characters are removed anyway)."""
    count = 0
    for char in text:
        if unicodedata.combining(char):
            count += unicodedata.category(char) != "Mn"
            if count >= 2:
                return True
        else:
            count = 0
    return False


@pytest.fixture(scope="module")
def graph_for_case(vocab_for_case):
    return corpora.ByCase(lambda case: GraphTokenizer(str(vocab_for_case[case]), do_lower_case=case))


def _graph_ids(tokenizer, texts, batch_size=4096):
    ids = []
    for i in range(0, len(texts), batch_size):
        ids.extend(tokenizer.tokenize(tf.constant(texts[i:i + batch_size])).to_list())
    return ids


def _expected_ids(reference, expected_tokens):
    return [reference.convert_tokens_to_ids(tokens) for tokens in expected_tokens]


@pytest.mark.slow
@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_matches_reference_on_all_shared_text(ref, vocab_for_case, corpus_texts,
                                              reference_corpus_tokens, graph_for_case,
                                              do_lower_case):
    texts = list(corpus_texts)
    expected = reference_corpus_tokens[do_lower_case]
    reference = ref.FullTokenizer(str(vocab_for_case[do_lower_case]), do_lower_case)
    actual = _graph_ids(graph_for_case[do_lower_case], texts)
    expected_ids = _expected_ids(reference, expected)
    mismatches = [i for i in range(len(texts)) if actual[i] != expected_ids[i]]
    assert not mismatches, (len(mismatches), texts[mismatches[0]][:300],
                            expected[mismatches[0]][:40],
                            reference.convert_ids_to_tokens(actual[mismatches[0]][:40]))
    # The residual differences do not occur in the shared data.
    assert not any(_SIGMA in t or _has_non_mn_combining_pair(t) for t in texts)


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_matches_reference_on_adversarial_text(ref, vocab_for_case, adversarial_texts,
                                               graph_for_case, do_lower_case):
    vocab_file = str(vocab_for_case[do_lower_case])
    texts = [t for t in list(adversarial_texts) + list(corpora.LIBRARY_DIFFERENCES.values())
             if not any("\ud800" <= c <= "\udfff" for c in t)]  # tf.string holds UTF-8 only
    reference = ref.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    actual = _graph_ids(graph_for_case[do_lower_case], texts)
    exact = 0
    for text, ids in zip(texts, actual):
        if do_lower_case and (_SIGMA in text or _has_non_mn_combining_pair(text)):
            continue  # test_residual_differences
        expected = reference.convert_tokens_to_ids(reference.tokenize(text))
        assert ids == expected, (text, reference.tokenize(text), reference.convert_ids_to_tokens(ids))
        exact += 1
    assert exact > 0.99 * len(texts)


def test_residual_differences(ref, uncased_vocab, graph_for_case):
    """Σ is always lower-cased to σ (the original: ς at the end of a word); non-Mn combining
    marks keep their input order (the original: canonical order). Cased: no difference."""
    reference = ref.FullTokenizer(str(uncased_vocab), do_lower_case=True)
    graph = graph_for_case[True]  # the uncased vocabulary
    sigma_texts = ["ΟΔΟΣ", "ΣΑΣ ΟΔΟΣ.", "aΣ Σ Σa", "ΑΣ'Α"]
    ids = _graph_ids(graph, sigma_texts)
    for text, graph_ids in zip(sigma_texts, ids):
        assert graph_ids == reference.convert_tokens_to_ids(reference.tokenize(text.replace(_SIGMA, "σ")))
    assert reference.tokenize("ΟΔΟΣ") != reference.tokenize("ΟΔΟσ")  # the difference is real
    # U+1D16D (combining class 226) before U+1D165 (216), both Mc: NFD swaps them.
    marks = "a\U0001d16d\U0001d165b"
    basic = ref.BasicTokenizer(do_lower_case=True).tokenize(marks)
    assert basic == ["a\U0001d165\U0001d16db"]
    graph_basic = graph.basic_tokens(tf.constant([marks])).to_list()[0]
    assert [t.decode("utf-8") for t in graph_basic] == ["a\U0001d16d\U0001d165b"]
    cased = ref.FullTokenizer(str(uncased_vocab), do_lower_case=False)
    texts = sigma_texts + [marks]
    assert _graph_ids(GraphTokenizer(str(uncased_vocab), do_lower_case=False), texts) == \
        [cased.convert_tokens_to_ids(cased.tokenize(t)) for t in texts]


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_every_code_point_matches_reference(ref, vocab_for_case, reference_code_point_tokens,
                                            graph_for_case, do_lower_case):
    """Every code point, as a word and between letters (corpora.code_point_texts)."""
    reference = ref.FullTokenizer(str(vocab_for_case[do_lower_case]), do_lower_case=do_lower_case)
    expected = _expected_ids(reference, reference_code_point_tokens[do_lower_case])
    actual = _graph_ids(graph_for_case[do_lower_case], corpora.code_point_texts(), batch_size=64)
    assert actual == expected


def test_bytes_with_invalid_utf8_are_dropped_like_the_reference(ref, uncased_vocab, graph_for_case):
    samples = [b"caf\xc3\xa9 ok", b"bad \xff\xfe bytes", b"trunc\xe4\xb8", b"\x80abc\x80",
               "中文".encode("utf-8")[:-1] + b" end", b""]
    reference = ref.FullTokenizer(str(uncased_vocab), do_lower_case=True)
    expected = [reference.convert_tokens_to_ids(reference.tokenize(s)) for s in samples]
    assert _graph_ids(graph_for_case[True], samples) == expected


def test_bert_inputs_match_reference_convert_single_example(refbert, uncased_vocab, shared_data,
                                                            graph_for_case):
    """[CLS]/[SEP], segment ids, mask, padding and pair truncation, against run_classifier."""
    run_classifier = refbert.import_reference("run_classifier")
    reference = refbert.tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
    graph = graph_for_case[True]  # the uncased vocabulary
    rows = [line.rstrip("\n").split("\t") for line in
            open(shared_data / "glue_data" / "MRPC" / "dev.tsv", encoding="utf-8")][1:]
    pairs = [(row[3], row[4]) for row in rows]
    singles = [row[3] for row in rows]
    for max_seq_length in (128, 24, 7):
        inputs = graph.bert_inputs(tf.constant([a for a, _ in pairs]), tf.constant([b for _, b in pairs]),
                                   max_seq_length=max_seq_length)
        single_inputs = graph.bert_inputs(tf.constant(singles), max_seq_length=max_seq_length)
        for k, ((a, b), single) in enumerate(zip(pairs, singles)):
            for example, got in ((run_classifier.InputExample("p", a, b, "0"), inputs),
                                 (run_classifier.InputExample("s", single, None, "0"), single_inputs)):
                feature = run_classifier.convert_single_example(
                    10, example, ["0", "1"], max_seq_length, reference)
                assert got["input_ids"][k].numpy().tolist() == feature.input_ids
                assert got["input_mask"][k].numpy().tolist() == feature.input_mask
                assert got["segment_ids"][k].numpy().tolist() == feature.segment_ids


def test_saved_model_and_tf_data(graph_for_case, tmp_path):
    """Exported in a SavedModel, loaded in a fresh process that imports tensorflow_text (which
    registers the custom WordPiece op), and used in tf.data: same ids."""
    graph = graph_for_case[True]  # the uncased vocabulary
    texts = ["Hello, World! Café [MASK]", "中文 naïve", ""]

    class Export(tf.Module):
        def __init__(self):
            super().__init__()
            self.tokenizer = graph

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def encode(self, texts):
            return self.tokenizer.bert_inputs(texts, max_seq_length=16)

    path = str(tmp_path / "tokenizer")
    tf.saved_model.save(Export(), path)
    expected = graph.bert_inputs(tf.constant(texts), max_seq_length=16)["input_ids"].numpy().tolist()
    script = ("import sys, json, tensorflow as tf, tensorflow_text\n"
              "m = tf.saved_model.load(sys.argv[1])\n"
              "print(json.dumps(m.encode(tf.constant(json.loads(sys.argv[2])))['input_ids'].numpy().tolist()))\n")
    out = subprocess.run([sys.executable, "-c", script, path, json.dumps(texts)],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == expected
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(2).map(graph.tokenize)
    assert [row for batch in dataset for row in batch.to_list()] == graph.tokenize(tf.constant(texts)).to_list()
