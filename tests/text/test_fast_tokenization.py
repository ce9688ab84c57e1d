"""bert_tf.text.fast_tokenization.FastTokenizer against the reference release: same tokens, always.

Oracle: the reference (bert-tensorflow 1.0.4) FullTokenizer / BasicTokenizer, on
  * every distinct text of ../shared/data (tests/corpora.py), uncased and cased, each text once
    (the reference runs once per distinct whitespace word, the oracle shortcut of
    tests/test_tokenization.py, which checks it against whole texts);
  * the adversarial texts (corpora.adversarial_texts) plus the cases where the libraries differ
    from the original (corpora.LIBRARY_DIFFERENCES), each a named test, through each of the
    tokenizer's routes (ASCII text to the library, other text to the library after a one-to-one
    character map, the exact word route), in mixed batches, and word by word in Python alone
    (a tokenizer's first LIBRARY_AFTER_CHARS characters, and without tensorflow-text);
  * every Unicode code point as a word and between letters (both ways).
Offsets: on every SQuAD context, each piece's span is in order, and the span alone basic-tokenizes
(reference BasicTokenizer) to the piece without its "##"; an [UNK] span is one basic token.

The reference outputs and texts are session fixtures of tests/conftest.py (built from
tests/corpora.py), computed once for all tokenizer tests; the tokenizer's own outputs on the
shared corpora are computed once per case (`fast_corpus_results`) and checked by two tests.
"""
import random
import unicodedata

import numpy
import pytest

import corpora
from bert_tf import tokenization
from bert_tf.errors import InputError
from bert_tf.text.encoding import Encoding
from bert_tf.text.fast_tokenization import FastTokenizer

LIBRARY_DIFFERENCES = corpora.LIBRARY_DIFFERENCES


def library_tokenizer(vocab_file, **options):
    """A FastTokenizer on the library's routes from its first call. (By default small inputs
    go word by word through Python alone: test_python_alone_until_library_after_chars.)"""
    return FastTokenizer(str(vocab_file), library_after_chars=0, **options)


def _spans(encoding):
    """[(token, (start, end))] of an Encoding."""
    return [(token, tuple(offset)) for token, offset in zip(encoding.tokens, encoding.offsets.tolist())]


def _tokenize_all(tokenizer, texts):
    """Tokens of each text by tokenize_batch, and by encode_batch (both must agree)."""
    tokens = tokenizer.tokenize_batch(texts)
    encodings = tokenizer.encode_batch(texts)
    assert [e.tokens for e in encodings] == tokens
    return tokens, encodings


@pytest.fixture(scope="session")
def fast_for_case(vocab_for_case):
    return corpora.ByCase(lambda case: library_tokenizer(vocab_for_case[case], do_lower_case=case))


@pytest.fixture(scope="session")
def fast_corpus_results(fast_for_case, corpus_texts):
    """{do_lower_case: (tokenize_batch tokens, encode_batch encodings) of every corpus text}."""
    return corpora.ByCase(lambda case: _tokenize_all(fast_for_case[case], list(corpus_texts)))


@pytest.mark.slow
@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_matches_reference_on_all_shared_text(corpus_texts, reference_corpus_tokens,
                                              fast_for_case, fast_corpus_results, do_lower_case):
    texts = list(corpus_texts)
    expected = reference_corpus_tokens[do_lower_case]
    tokenizer = fast_for_case[do_lower_case]
    tokens, encodings = fast_corpus_results[do_lower_case]
    corpora.assert_same_tokens(texts, expected, tokens, lambda t: f"corpus {corpus_texts[t]}")
    flat_ids = numpy.concatenate([encoding.ids for encoding in encodings])
    assert flat_ids.dtype == numpy.int32
    assert flat_ids.tolist() == tokenizer.convert_tokens_to_ids([t for ts in tokens for t in ts])
    assert set(corpus_texts.values()) == set(corpora.CORPORA)
    # Every route was used: ASCII and other text to the library, the rest word by word.
    routes = tokenizer._route(texts)
    assert all(len(indices) > 30 for indices in routes.values()), {k: len(v) for k, v in routes.items()}


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_matches_reference_on_adversarial_text(vocab_for_case, adversarial_texts, ref,
                                               reference_adversarial_tokens, do_lower_case):
    vocab_file = str(vocab_for_case[do_lower_case])
    texts = list(adversarial_texts) + list(LIBRARY_DIFFERENCES.values())
    reference = ref.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    expected = reference_adversarial_tokens[do_lower_case] + [
        reference.tokenize(t) for t in LIBRARY_DIFFERENCES.values()]
    # A fresh tokenizer on the whole batch; again from its warm caches; through a cache so
    # small it is emptied on every batch; one text at a time.
    tokenizer = library_tokenizer(vocab_file, do_lower_case=do_lower_case)
    tokens, _ = _tokenize_all(tokenizer, texts)
    corpora.assert_same_tokens(texts, expected, tokens, lambda t: "adversarial")
    assert tokenizer.tokenize_batch(texts) == expected
    small = library_tokenizer(vocab_file, do_lower_case=do_lower_case, cache_size=5)
    batches = [texts[i:i + 50] for i in range(0, len(texts), 50)]
    assert [tokens for batch in batches for tokens in small.tokenize_batch(batch)] == expected
    assert [e.tokens for batch in batches for e in small.encode_batch(batch)] == expected
    assert [tokenizer.tokenize(t) for t in texts[:100]] == expected[:100]


@pytest.fixture(scope="module")
def reference_for_case(ref, uncased_vocab):
    return corpora.ByCase(lambda case: ref.FullTokenizer(str(uncased_vocab), do_lower_case=case))


@pytest.mark.parametrize("case", sorted(LIBRARY_DIFFERENCES))
@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_each_library_difference_is_handled(uncased_vocab, reference_for_case, case, do_lower_case):
    """Each case alone, word by word, inside ASCII text and inside text with plain accents (so
    that it meets every route), gives the reference's tokens (a fresh tokenizer each time)."""
    text = LIBRARY_DIFFERENCES[case]
    variants = [text, "The " + text + " end.", "Café " + text + " naïve."] + text.split(" ")
    reference = reference_for_case[do_lower_case]
    tokenizer = library_tokenizer(uncased_vocab, do_lower_case=do_lower_case)
    expected = [reference.tokenize(t) for t in variants]
    assert tokenizer.tokenize_batch(variants) == expected
    assert [tokenizer.encode(t).tokens for t in variants] == expected


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_every_code_point_matches_reference(vocab_for_case, reference_code_point_tokens,
                                            do_lower_case):
    """Every code point, as a word and between letters (corpora.code_point_texts), through a
    fresh tokenizer (each character checked, in one batch, for the library routes)."""
    texts = corpora.code_point_texts()
    tokenizer = library_tokenizer(vocab_for_case[do_lower_case], do_lower_case=do_lower_case)
    assert tokenizer.tokenize_batch(texts) == reference_code_point_tokens[do_lower_case]


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_python_alone_until_library_after_chars(vocab_for_case, adversarial_texts, ref,
                                                reference_adversarial_tokens,
                                                reference_code_point_tokens, do_lower_case):
    """By default a tokenizer takes its first LIBRARY_AFTER_CHARS characters word by word in
    Python, through the original's WordPiece, without tensorflow-text: the reference's tokens,
    and the library's encodings (ids, offsets). Past its `library_after_chars` it uses the
    library, with the same output."""
    vocab_file = vocab_for_case[do_lower_case]
    reference = ref.FullTokenizer(str(vocab_file), do_lower_case=do_lower_case)
    texts = list(adversarial_texts) + list(LIBRARY_DIFFERENCES.values())
    expected = reference_adversarial_tokens[do_lower_case] + [
        reference.tokenize(t) for t in LIBRARY_DIFFERENCES.values()]
    python_alone = FastTokenizer(str(vocab_file), do_lower_case=do_lower_case)
    tokens, encodings = _tokenize_all(python_alone, texts)
    corpora.assert_same_tokens(texts, expected, tokens, lambda t: "adversarial, Python alone")
    code_points = corpora.code_point_texts()
    assert python_alone.tokenize_batch(code_points) == reference_code_point_tokens[do_lower_case]
    assert python_alone._library_route._libraries == {}  # no library model was built
    library = library_tokenizer(vocab_file, do_lower_case=do_lower_case)
    assert library.encode_batch(texts) == encodings
    assert library._library_route._libraries

    # Crossing the limit part way: batches of 50 texts, the library from the ~5,000th character.
    switching = FastTokenizer(str(vocab_file), do_lower_case=do_lower_case,
                              library_after_chars=5000)
    batches = [texts[i:i + 50] for i in range(0, len(texts), 50)]
    built = []
    got = []
    for batch in batches:
        got.extend(switching.tokenize_batch(batch))
        built.append(bool(switching._library_route._libraries))
    assert got == expected
    assert not built[0] and built[-1]


def test_without_tensorflow_text_python_alone_with_a_warning(uncased_vocab, adversarial_texts,
                                                             reference_adversarial_tokens,
                                                             tmp_path):
    """In a process where tensorflow_text cannot be imported (the tpu extra), a tokenizer past
    its `library_after_chars` stays in Python: the reference's tokens and offsets, and one
    warning naming the install command (it used to raise ImportError there)."""
    import json
    import subprocess
    import sys
    import textwrap

    from conftest import env_without_tensorflow_text
    texts = list(adversarial_texts)[:300]
    script = textwrap.dedent("""
        import json, sys, warnings
        from bert_tf.text.fast_tokenization import FastTokenizer
        texts = json.loads(sys.stdin.read())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tokenizer = FastTokenizer(sys.argv[1], library_after_chars=0)
            tokens = [tokenizer.tokenize_batch(texts[i:i + 100]) for i in range(0, 300, 100)]
            offsets = [e.offsets.tolist() for e in tokenizer.encode_batch(texts)]
        print(json.dumps({"blocked": "tensorflow_text" not in sys.modules,
                          "warnings": [str(w.message) for w in caught],
                          "tokens": [t for batch in tokens for t in batch],
                          "offsets": offsets}))
        """)
    out = subprocess.run([sys.executable, "-c", script, str(uncased_vocab)],
                         input=json.dumps(texts), capture_output=True, text=True,
                         env=env_without_tensorflow_text(tmp_path / "blocker"))
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["blocked"]
    assert result["tokens"] == reference_adversarial_tokens[True][:300]
    library = library_tokenizer(uncased_vocab)
    assert result["offsets"] == [e.offsets.tolist() for e in library.encode_batch(texts)]
    assert len(result["warnings"]) == 1, result["warnings"]
    assert "tensorflow-text is not installed" in result["warnings"][0]
    assert "pip install 'tensorflow-text==" in result["warnings"][0]
    assert "--no-deps" in result["warnings"][0]  # beside tensorflow-tpu


def _check_offsets(texts, encodings, reference_basic):
    """Spans in order, inside the text; each distinct (piece, span) basic-tokenizes to the
    piece without "##" (an [UNK] span to a single basic token)."""
    spans = {}
    for text, encoding in zip(texts, encodings):
        offsets = encoding.offsets
        assert offsets.dtype == numpy.int32 and offsets.shape == (len(encoding.tokens), 2), text
        assert encoding.ids.dtype == numpy.int32 and encoding.ids.shape == (len(encoding.tokens),)
        if not len(offsets):
            continue
        starts, ends = offsets[:, 0], offsets[:, 1]
        # in order, non-empty, inside the text
        assert (starts[1:] >= ends[:-1]).all() and (starts < ends).all(), text
        assert starts[0] >= 0 and ends[-1] <= len(text), text
        for token, (start, end) in zip(encoding.tokens, offsets.tolist()):
            spans.setdefault((token, text[start:end]), text)
    for (token, span), text in spans.items():
        pieces = reference_basic.tokenize(span)
        if token == "[UNK]":
            assert len(pieces) == 1, (text, span, pieces)
        else:
            assert pieces == [token[2:] if token.startswith("##") else token], (text, span, token)


@pytest.mark.slow
@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_python_alone_matches_reference_on_all_shared_text(
        corpus_texts, reference_corpus_tokens, vocab_for_case, do_lower_case):
    """Every distinct text of ../shared/data through the default tokenizer with no library."""
    texts = list(corpus_texts)
    tokenizer = FastTokenizer(str(vocab_for_case[do_lower_case]), do_lower_case=do_lower_case,
                              library_after_chars=sum(map(len, texts)) + 1)
    tokens = [t for i in range(0, len(texts), 1000)
              for t in tokenizer.tokenize_batch(texts[i:i + 1000])]
    corpora.assert_same_tokens(texts, reference_corpus_tokens[do_lower_case], tokens,
                               lambda t: f"corpus {corpus_texts[t]}, Python alone")
    assert tokenizer._library_route._libraries == {}


@pytest.mark.slow
@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_offsets_on_squad_contexts(ref, shared_data, corpus_texts, fast_for_case,
                                   fast_corpus_results, do_lower_case):
    """On every SQuAD context (their encodings from the all-corpus run)."""
    position = {text: i for i, text in enumerate(corpus_texts)}
    contexts = list(dict.fromkeys(corpora.squad_contexts(shared_data)))
    _, all_encodings = fast_corpus_results[do_lower_case]
    encodings = [all_encodings[position[text]] for text in contexts]
    _check_offsets(contexts, encodings, ref.BasicTokenizer(do_lower_case=do_lower_case))
    # Offsets do not depend on the route: the exact word route gives the same encodings.
    assert fast_for_case[do_lower_case]._words_route(contexts, with_offsets=True) == encodings


def test_offsets_of_normalized_characters(ref, uncased_vocab, adversarial_texts):
    """Lower-casing, accents, deleted characters and CJK: spans cover the original characters."""
    tokenizer = library_tokenizer(uncased_vocab, do_lower_case=True)
    cases = {
        "Café": [("cafe", (0, 4))],
        "e\u0301tat": [("etat", (0, 5))],  # the combining accent stays inside the span
        "İstanbul": [("istanbul", (0, 8))],  # "İ".lower() is two characters
        "a\x00b\u200bc": [("abc", (0, 5))],  # deleted characters inside a word
        "x中y": [("x", (0, 1)), ("中", (1, 2)), ("y", (2, 3))],
        "  \ufffd\u00a0hello,\tWORLD ": [("hello", (4, 9)), (",", (9, 10)), ("world", (11, 16))],
        "unaffable": [("una", (0, 3)), ("##ffa", (3, 6)), ("##ble", (6, 9))],
        "한": [("ᄒ", (0, 1)), ("##ᅡ", (0, 1)), ("##ᆫ", (0, 1))],  # NFD: three jamo
        "a" * 201: [("[UNK]", (0, 201))],
    }
    reference = ref.FullTokenizer(str(uncased_vocab), True)
    for text, expected in cases.items():
        encoding = tokenizer.encode(text)
        assert isinstance(encoding, Encoding)
        assert _spans(encoding) == expected, text
        assert encoding.tokens == reference.tokenize(text)
        start, end = encoding.offsets[0]  # rows unpack to (start, end)
        assert (int(start), int(end)) == expected[0][1]
    # Final sigma: "ΟΔΟΣ" lower-cases to "οδος" (ς at the end), pieces tile the word.
    encoding = tokenizer.encode("ΟΔΟΣ.")
    assert "".join(encoding.tokens).replace("##", "") == "οδος."
    offsets = encoding.offsets.tolist()
    assert offsets[0][0] == 0 and offsets[-2][1] == 4 and offsets[-1] == [4, 5]
    # The same property as on SQuAD, on adversarial text without characters that normalize to
    # several characters (pieces inside one, e.g. of a Hangul syllable's jamo, share its span)
    # and without "Σ" (its form depends on its neighbours).
    ours_basic = tokenization.BasicTokenizer(True)
    widths = {c: len("".join(ours_basic.tokenize(c))) for c in set("".join(adversarial_texts))}
    texts = [t for t in adversarial_texts
             if "\u03a3" not in t and all(widths[c] <= 1 for c in t)]
    assert len(texts) > 0.8 * len(adversarial_texts)
    _check_offsets(texts, tokenizer.encode_batch(texts), ref.BasicTokenizer(do_lower_case=True))


def test_routes_agree_and_batches_mix_routes(uncased_vocab, adversarial_texts):
    """A batch mixing ASCII, mapped and word-route texts equals each text alone, and the word
    route alone gives identical encodings (tokens, ids and offsets)."""
    tokenizer = library_tokenizer(uncased_vocab, do_lower_case=True)
    rng = random.Random(7)
    texts = list(adversarial_texts) + ["plain ascii", "naïve café", "ΟΔΟΣ \x00", ""]
    rng.shuffle(texts)
    batch = tokenizer.encode_batch(texts)
    assert batch == [tokenizer.encode(t) for t in texts]
    assert tokenizer._words_route(texts, with_offsets=True) == batch
    routes = tokenizer._route(texts)
    assert all(routes.values())


def test_api_vocab_ids_and_bytes(ref, uncased_vocab):
    tokenizer = library_tokenizer(uncased_vocab)
    reference = ref.FullTokenizer(str(uncased_vocab))
    assert tokenizer.vocab == reference.vocab and tokenizer.inv_vocab == reference.inv_vocab
    text = "The quick brown fox jumped over the lazy dog's [MASK]."
    encoding = tokenizer.encode(text)
    assert encoding.ids.tolist() == reference.convert_tokens_to_ids(reference.tokenize(text))
    assert tokenizer.convert_ids_to_tokens(encoding.ids) == encoding.tokens
    assert tokenizer.convert_tokens_to_ids(encoding.tokens) == encoding.ids.tolist()
    assert tokenizer.tokenize_batch([]) == [] and tokenizer.encode_batch([]) == []
    assert tokenizer.tokenize("") == []
    empty = tokenizer.encode(" \t")
    assert empty.tokens == [] and empty.ids.shape == (0,) and empty.offsets.shape == (0, 2)
    assert empty == Encoding([], numpy.zeros([0], numpy.int32), numpy.zeros([0, 2], numpy.int32))
    tokens, ids, offsets = encoding  # an Encoding unpacks
    assert tokens is encoding.tokens and ids is encoding.ids and offsets is encoding.offsets
    for sample in [b"caf\xc3\xa9 ok", b"bad \xff\xfe bytes", "中文".encode("utf-8")[:-1] + b" end"]:
        assert tokenizer.tokenize(sample) == reference.tokenize(sample)
    with pytest.raises(KeyError):
        tokenizer.convert_tokens_to_ids(["not-a-vocab-token"])


def test_vocab_with_duplicates_gives_full_tokenizer_ids(tmp_path):
    """Ids are bert_tf.tokenization's (a duplicate keeps its last line), even with id gaps."""
    path = tmp_path / "dup.txt"
    path.write_text("\n".join(["[PAD]", "[UNK]", "the", "cat", "the", "sat", "##s", ","]) + "\n",
                    encoding="utf-8")
    with pytest.warns(tokenization.DuplicateTokenWarning):
        full = tokenization.FullTokenizer(str(path))
    with pytest.warns(tokenization.DuplicateTokenWarning):
        fast = [FastTokenizer(str(path)), library_tokenizer(path)]
    for text in ["The cats sat, the cat.", "dogs cats", "the\u00e9"]:
        for tokenizer in fast:
            assert tokenizer.tokenize(text) == full.tokenize(text)
            assert (tokenizer.encode(text).ids.tolist()
                    == full.convert_tokens_to_ids(full.tokenize(text)))


def test_bad_vocab_files_raise_input_error(tmp_path):
    with pytest.raises(InputError, match="not found"):
        FastTokenizer(str(tmp_path / "missing.txt"))
    no_unk = tmp_path / "no_unk.txt"
    no_unk.write_text("[PAD]\nthe\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"no_unk.txt: .*no \[UNK\]"):
        FastTokenizer(str(no_unk))


def test_hugging_face_library_really_differs(uncased_vocab):
    """Why the normalization is not left to Hugging Face tokenizers (pinned 0.23.3): its
    BertWordPieceTokenizer differs from the original on these inputs (FastTokenizer does not)."""
    from tokenizers import BertWordPieceTokenizer
    hf = BertWordPieceTokenizer(str(uncased_vocab), lowercase=True)
    fast = library_tokenizer(uncased_vocab)
    full = tokenization.FullTokenizer(str(uncased_vocab))
    for text in ["[MASK]", "a\ue000b", "ΟΔΟΣ", "a\u2e5db"]:
        hf_tokens = hf.encode(text, add_special_tokens=False).tokens
        assert hf_tokens != full.tokenize(text), text
        assert fast.tokenize(text) == full.tokenize(text), text
    assert unicodedata.category("\ue000") == "Co"
