"""bert_tf.text.graph_tokenization.GraphTokenizer against the reference release.

Oracle: the reference (bert-tensorflow 1.0.4) FullTokenizer ids on every distinct text of
../shared/data (uncased and cased), on adversarial text and every code point (reference tokens:
session fixtures of tests/conftest.py, computed once for all tokenizer tests), and the reference run_classifier's
convert_single_example for `bert_inputs` (GLUE MRPC pairs, long and truncating lengths). The
documented residual differences (final sigma, canonical order of non-Mn combining marks) are
checked to be exactly what the module docstring says. WordPiece's own edge cases (words of 200
and 201 characters, words that become [UNK] after some pieces, words of many pieces, vocabularies
TensorFlow's file reader cannot take) are checked against the reference too.

The SavedModel tests save a `bert_inputs` signature whose vocabulary file is deleted before
loading, and load it in fresh processes in which `import tensorflow_text` fails (a
sitecustomize on PYTHONPATH blocks it): through `tf.saved_model.load`, checking every op of the
saved graph against that process's op registry, and through `saved_model_cli run`.
"""
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import unicodedata

import numpy as np

import pytest
import tensorflow as tf

import corpora
from conftest import env_without_tensorflow_text
from bert_tf.text.graph_tokenization import GraphTokenizer

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


# Words on which WordPiece itself is tested (pieces from the uncased vocabulary; the reference
# decides): the 200-character limit, [UNK] after some pieces, many pieces.
_WORDPIECE_TEXTS = [
    "a" * 200, "a" * 201, "b" * 199 + "é", "x" * 300 + " ok " + "y" * 201,
    "unaffable", "Unaffable UNAFFABLE", "hello\u2603", "unaffable\u2603 ok", "ab\u2603cd",
    "\u2603hello", "xq" * 100, "qz" * 60 + "\u2603", "\u00e9" * 150, "zxcvbnmlkjhgfdsa" * 12,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "ab12cd34ef56gh78ij90 " * 5, "\u4e2d\u6587 \u0915\u094d\u0937", "",
]


def _many_piece_words(vocab_file, count=40, seed=12):
    """Words glued from random vocabulary pieces (a first piece then "##" pieces, up to 200
    characters): many pieces each, and ambiguous splits for the greedy longest match."""
    tokens = [t for t in pathlib.Path(vocab_file).read_text(encoding="utf-8").split("\n")
              if t and t.isalpha() and t.isascii()]
    suffixes = [t[2:] for t in pathlib.Path(vocab_file).read_text(encoding="utf-8").split("\n")
                if t.startswith("##") and t[2:].isalpha() and t[2:].isascii()]
    rng = np.random.default_rng(seed)
    words = []
    for _ in range(count):
        word = tokens[rng.integers(len(tokens))]
        while len(word) < rng.integers(20, 200):
            word += suffixes[rng.integers(len(suffixes))]
        words.append(word[:200])
    return words


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_wordpiece_edge_cases_match_reference(ref, vocab_for_case, graph_for_case, do_lower_case):
    vocab_file = str(vocab_for_case[do_lower_case])
    reference = ref.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    many = _many_piece_words(vocab_file)
    texts = _WORDPIECE_TEXTS + many + [" ".join(many[:10])]
    graph = graph_for_case[do_lower_case]
    expected = [reference.convert_tokens_to_ids(reference.tokenize(t)) for t in texts]
    assert _graph_ids(graph, texts) == expected
    # One text at a time too (each batch's loop runs as long as its most-split word).
    assert [_graph_ids(graph, [t])[0] for t in texts[:20]] == expected[:20]
    assert _graph_ids(graph, []) == [] and _graph_ids(graph, ["", " "]) == [[], []]
    # The cases are really there: over-long words, [UNK] after pieces, words of many pieces.
    unk = reference.vocab["[UNK]"]
    assert expected[0] != [unk] and expected[1] == [unk]
    assert reference.tokenize("unaffable") == ["una", "##ffa", "##ble"]
    assert reference.tokenize("unaffable\u2603") == ["[UNK]"]
    assert max(map(len, expected)) >= 50


def test_vocabularies_tensorflow_cannot_read_use_load_vocab_ids(tmp_path):
    """Stripped lines, an empty line, a duplicate (the last id wins), no "##" entry at all: the
    table is built from load_vocab's pairs, with load_vocab's ids."""
    from bert_tf import tokenization
    path = tmp_path / "odd_vocab.txt"
    path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n  un \n\naff\nun\nable\r\nu\nn\n",
                    encoding="utf-8")
    with pytest.warns(tokenization.DuplicateTokenWarning):
        full = tokenization.FullTokenizer(str(path), do_lower_case=True)
    with pytest.warns(tokenization.DuplicateTokenWarning):
        graph = GraphTokenizer(str(path), do_lower_case=True)
    texts = ["un", "unaff", "uun", "able un n", "unable", "x", ""]
    assert _graph_ids(graph, texts) == [full.convert_tokens_to_ids(full.tokenize(t)) for t in texts]
    assert _graph_ids(graph, ["un"]) == [[7]]


_SAVED_TEXTS = ["Hello, World! Café [MASK] unaffable", "中文 naïve", "",
                "unaffable\u2603 " + "a" * 201 + " " + "xq" * 100, "a" * 200]
_SAVED_LENGTH = 64


@pytest.fixture(scope="module")
def saved_tokenizer(vocab_for_case, tmp_path_factory):
    """(SavedModel directory, environment of a process without tensorflow_text, expected
    bert_inputs of _SAVED_TEXTS, the vocabulary's deleted path). The SavedModel's
    serving_default signature maps `text` [B] to bert_inputs at _SAVED_LENGTH."""
    root = tmp_path_factory.mktemp("saved_tokenizer")
    vocab_copy = root / "vocab_copy_deleted_before_loading.txt"
    vocab_copy.write_bytes(pathlib.Path(vocab_for_case[True]).read_bytes())
    tokenizer = GraphTokenizer(str(vocab_copy), do_lower_case=True)

    class Export(tf.Module):
        def __init__(self):
            super().__init__()
            self.tokenizer = tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            return self.tokenizer.bert_inputs(text, max_seq_length=_SAVED_LENGTH)

    export = Export()
    path = root / "model"
    tf.saved_model.save(export, str(path), signatures={"serving_default": export.serve})
    expected = {k: v.numpy().tolist() for k, v in export.serve(tf.constant(_SAVED_TEXTS)).items()}
    vocab_copy.unlink()
    env = env_without_tensorflow_text(root / "block_tensorflow_text")
    return path, env, expected, vocab_copy


@pytest.mark.slow
def test_saved_model_runs_without_tensorflow_text(saved_tokenizer):
    """The vocabulary is an asset (not an absolute path); in a fresh process that cannot import
    tensorflow_text every op of the saved graph is registered, and the signature gives the
    in-process ids."""
    path, env, expected, vocab_copy = saved_tokenizer
    assert os.listdir(path / "assets") == [vocab_copy.name]
    assert not vocab_copy.exists() and str(vocab_copy.parent).encode() not in \
        (path / "saved_model.pb").read_bytes()
    script = textwrap.dedent("""
        import json, sys
        try:
            import tensorflow_text
        except ImportError:
            pass
        else:
            sys.exit("tensorflow_text was importable")
        import tensorflow as tf
        from tensorflow.core.protobuf import saved_model_pb2
        from tensorflow.python.framework import op_def_registry
        path, texts = sys.argv[1], json.loads(sys.argv[2])
        saved = saved_model_pb2.SavedModel()
        with open(path + "/saved_model.pb", "rb") as f:
            saved.ParseFromString(f.read())
        ops, functions = set(), set()
        for graph in saved.meta_graphs:
            ops.update(node.op for node in graph.graph_def.node)
            for function in graph.graph_def.library.function:
                functions.add(function.signature.name)
                ops.update(node.op for node in function.node_def)
        ops -= functions  # calls of the library's own functions
        loaded = tf.saved_model.load(path)
        outputs = loaded.signatures["serving_default"](text=tf.constant(texts))
        print(json.dumps({
            "ops": sorted(ops),
            "unregistered": sorted(op for op in ops if op_def_registry.get(op) is None),
            "tensorflow_text": sorted(m for m in sys.modules if "tensorflow_text" in m),
            "outputs": {k: v.numpy().tolist() for k, v in outputs.items()}}))
        """)
    out = subprocess.run([sys.executable, "-c", script, str(path), json.dumps(_SAVED_TEXTS)],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["unregistered"] == [] and result["tensorflow_text"] == []
    assert {"Substr", "LookupTableFindV2", "InitializeTableFromTextFileV2", "UnicodeDecode"} <= \
        set(result["ops"])
    assert not [op for op in result["ops"] if "Wordpiece" in op or "WordPiece" in op]
    assert result["outputs"] == expected


@pytest.mark.slow
def test_saved_model_cli_run(saved_tokenizer, tmp_path):
    """`saved_model_cli run` (TensorFlow's own tool, TF1 session loader) on the signature, in a
    process that cannot import tensorflow_text: the in-process ids."""
    path, env, expected, _ = saved_tokenizer
    cli = pathlib.Path(sys.executable).parent / "saved_model_cli"
    command = [str(cli)] if cli.exists() else [sys.executable, "-m",
                                                "tensorflow.python.tools.saved_model_cli"]
    out = subprocess.run(
        command + ["run", "--dir", str(path), "--tag_set", "serve", "--signature_def",
                   "serving_default", "--input_exprs", f"text={_SAVED_TEXTS!r}",
                   "--outdir", str(tmp_path)],
        capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    for key, value in expected.items():
        assert np.load(tmp_path / f"{key}.npy").tolist() == value


def test_tf_data(graph_for_case):
    graph = graph_for_case[True]  # the uncased vocabulary
    texts = _SAVED_TEXTS
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(2).map(graph.tokenize)
    assert [row for batch in dataset for row in batch.to_list()] == graph.tokenize(tf.constant(texts)).to_list()
