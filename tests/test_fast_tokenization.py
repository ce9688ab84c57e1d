"""bert_tf.fast_tokenization.FastTokenizer against the reference release: same tokens, always.

Oracle: the reference (bert-tensorflow 1.0.4) FullTokenizer / BasicTokenizer, on
  * every distinct text of ../shared/data (tests/corpora.py), uncased and cased, each text once
    (the reference runs once per distinct whitespace word, the oracle shortcut of
    tests/test_tokenization.py, which checks it against whole texts);
  * the adversarial texts of tests/test_tokenization.py plus the cases where the libraries differ
    from the original, each named below, through each of the tokenizer's routes (ASCII text to
    the library, other text to the library after a one-to-one character map, the exact word
    route) and in mixed batches;
  * every Unicode code point as a word and between letters.
Offsets: on every SQuAD context, each piece's span is in order, and the span alone basic-tokenizes
(reference BasicTokenizer) to the piece without its "##"; an [UNK] span is one basic token.
"""
import random
import unicodedata

import pytest

import corpora
import test_tokenization as shared
from bert_tf import tokenization
from bert_tf.errors import InputError
from bert_tf.fast_tokenization import Encoding, FastTokenizer

# The shared session fixtures of tests/test_tokenization.py (reference outputs, vocabularies).
ref = shared.ref
cased_vocab = shared.cased_vocab
vocab_for_case = shared.vocab_for_case
corpus_texts = shared.corpus_texts
adversarial_texts = shared.adversarial_texts
_CORPUS_TOKENS = {}
_REFERENCE_WORDS = []
_CODE_POINT_TOKENS = {}


@pytest.fixture(scope="session")
def reference_words(ref, corpus_texts):
    """Each corpus text's whitespace words after the reference's cleaning and CJK spacing (as
    the fixture of the same name in tests/test_tokenization.py; computed once for both of this
    file and tests/test_graph_tokenization.py)."""
    if not _REFERENCE_WORDS:
        basic = ref.BasicTokenizer(do_lower_case=True)  # cleaning does not depend on the case
        _REFERENCE_WORDS.append([
            ref.whitespace_tokenize(basic._tokenize_chinese_chars(basic._clean_text(text)))
            for text in corpus_texts])
    return _REFERENCE_WORDS[0]


def code_point_texts():
    """Every code point as a word, and every fifth between letters, 4096 code points a text
    (surrogates: not text; private-use planes: a sample, they are all alike)."""
    code_points = [cp for cp in range(0x110000) if not (
        0xE000 <= cp <= 0xF8FF or 0xF0000 <= cp or 0xD800 <= cp <= 0xDFFF)]
    code_points += list(range(0xE000, 0xF900, 97)) + list(range(0xF0000, 0x110000, 997))
    texts = []
    for i in range(0, len(code_points), 4096):
        chars = [chr(cp) for cp in code_points[i:i + 4096]]
        texts.append(" ".join(chars))
        texts.append(" ".join("a" + c + "b" for c in chars[::5]))
    return texts


def reference_code_point_tokens(ref, vocab_file, do_lower_case):
    """The reference's tokens of `code_point_texts()` (computed once per session and case)."""
    if do_lower_case not in _CODE_POINT_TOKENS:
        reference = ref.FullTokenizer(str(vocab_file), do_lower_case=do_lower_case)
        _CODE_POINT_TOKENS[do_lower_case] = [reference.tokenize(t) for t in code_point_texts()]
    return _CODE_POINT_TOKENS[do_lower_case]


def reference_corpus_tokens(ref, vocab_file, do_lower_case, reference_words):
    """The reference's tokens of every corpus text, by the oracle shortcut of
    tests/test_tokenization.py (checked there against whole texts): the reference's tokens of a
    text are the concatenation of the reference's tokens of its whitespace words, so each
    distinct word goes through the reference once. Computed once per session and case."""
    if do_lower_case not in _CORPUS_TOKENS:
        reference = ref.FullTokenizer(str(vocab_file), do_lower_case=do_lower_case)
        word_tokens = {word: reference.tokenize(word)
                       for word in {w for words in reference_words for w in words}}
        _CORPUS_TOKENS[do_lower_case] = [[t for w in words for t in word_tokens[w]]
                                         for words in reference_words]
    return _CORPUS_TOKENS[do_lower_case]

# Inputs on which a library differs from the original (found by comparing Hugging Face
# tokenizers' BertNormalizer + BertPreTokenizer and tensorflow-text with the reference on every
# code point and on the shared data), each of which FastTokenizer must get right.
LIBRARY_DIFFERENCES = {
    "literal special tokens": "[MASK] [CLS] x[SEP]y [UNK] [PAD] [unused0] [mask] ##ing",
    "non-breaking and other spaces": "a\u00a0b c\u202fd e\u3000f g\u2007h i\u2028j k\u2029l",
    "combining marks": "e\u0301 a\u0308\u0304b \u0301x o\u0328\u0301 \u0345\u0301",
    "non-Mn combining marks (canonical order)": "a\U0001d165\U0001d16e\u0301 \u0903\u093c x\u0bcd",
    "controls and format characters": "a\x00b c\x7fd e\u200bf g\u00adh i\ufeffj k\x1cl m\x85n \x0bx\x0c",
    "U+FFFD and U+0000": "\ufffd \x00 re\ufffdplace \x00\ufffd",
    "CJK ranges": "中\u3400\u4dbf\U00020000\U0002a6df\U0002a700\U0002b740\U0002b820\U0002ceaf"
                  "\uf900\ufaff\U0002f800 \U0002ceb0\U00030000\u3007 aä中b",
    "punctuation classes": "$5 ^x `y ~z |w \u00a1\u00bf \u2e5d\u2e55 \u061d \u0c77 \u166d \u2010\u2015"
                           " \u30fb \uff01 \U00010ead",
    "new or unassigned code points": "\u0890x \u0898y \u1c89z \ua7cbw \U00010d50 \U0003134b",
    "private use": "a\ue000b \U000f0000 \U0010fffd x\ue000",
    "200-character words": " ".join(["a" * 200, "b" * 201, "é" * 200, "é" * 201, "É" * 200 + "\u0301",
                                       "ü" * 150, "中" * 250, "x" * 199 + "." + "y" * 5]),
    "lower-casing: İ ẞ Σ ǅ": "İstanbul İ ẞ STRAßE ΟΔΟΣ ΣΑΣ Σ aΣ. ΑΣ'Α ǅ ǈ Ǳ \u0130\u0307",
    "title-case and special lower-case": "ǅungla ǈ ǋ ᾈ ᾼ ῼ K Å Ω",
    "emoji and modifiers": "I ❤ NY 👍🏽 👨\u200d👩\u200d👧 🇺🇸 ☺\ufe0f 1\ufe0f\u20e3",
    "Hangul and other decompositions": "한국어 ĳ ǆ ﬁ ℌ ｆｕｌｌ Ａ ① ½ ¹ ſ",
}


def _tokenize_all(tokenizer, texts):
    """Tokens of each text by tokenize_batch, and by encode_batch (both must agree)."""
    tokens = tokenizer.tokenize_batch(texts)
    encodings = tokenizer.encode_batch(texts)
    assert [e.tokens for e in encodings] == tokens
    return tokens, encodings


@pytest.fixture(scope="session")
def fast_for_case(vocab_for_case):
    return {case: FastTokenizer(str(vocab_for_case[case]), do_lower_case=case)
            for case in (True, False)}


@pytest.mark.slow
@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_matches_reference_on_all_shared_text(ref, vocab_for_case, corpus_texts, reference_words,
                                              fast_for_case, do_lower_case):
    texts = list(corpus_texts)
    expected = reference_corpus_tokens(ref, vocab_for_case[do_lower_case], do_lower_case,
                                       reference_words)
    tokenizer = fast_for_case[do_lower_case]
    tokens, encodings = _tokenize_all(tokenizer, texts)
    shared.assert_same_tokens(texts, expected, tokens, lambda t: f"corpus {corpus_texts[t]}")
    for text, encoding in zip(texts[:20000], encodings):
        assert encoding.ids == tokenizer.convert_tokens_to_ids(encoding.tokens), text
    assert set(corpus_texts.values()) == set(corpora.CORPORA)
    # Every route was used: ASCII and other text to the library, the rest word by word.
    routes = tokenizer._route(texts)
    assert all(len(indices) > 30 for indices in routes.values()), {k: len(v) for k, v in routes.items()}


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_matches_reference_on_adversarial_text(ref, vocab_for_case, adversarial_texts,
                                               do_lower_case):
    vocab_file = str(vocab_for_case[do_lower_case])
    texts = list(adversarial_texts) + list(LIBRARY_DIFFERENCES.values())
    reference = ref.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    expected = shared.reference_outputs(ref, vocab_file, do_lower_case, adversarial_texts,
                                        "adversarial")  # shared with test_tokenization.py
    expected = expected + [reference.tokenize(t) for t in LIBRARY_DIFFERENCES.values()]
    # A fresh tokenizer on the whole batch; again from its warm caches; through a cache so
    # small it is emptied on every batch; one text at a time.
    tokenizer = FastTokenizer(vocab_file, do_lower_case=do_lower_case)
    tokens, _ = _tokenize_all(tokenizer, texts)
    shared.assert_same_tokens(texts, expected, tokens, lambda t: "adversarial")
    assert tokenizer.tokenize_batch(texts) == expected
    small = FastTokenizer(vocab_file, do_lower_case=do_lower_case, cache_size=5)
    batches = [texts[i:i + 50] for i in range(0, len(texts), 50)]
    assert [tokens for batch in batches for tokens in small.tokenize_batch(batch)] == expected
    assert [e.tokens for batch in batches for e in small.encode_batch(batch)] == expected
    assert [tokenizer.tokenize(t) for t in texts[:100]] == expected[:100]


@pytest.mark.parametrize("case", sorted(LIBRARY_DIFFERENCES))
@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_each_library_difference_is_handled(ref, uncased_vocab, fast_for_case, case, do_lower_case):
    """Each case alone, word by word, inside ASCII text and inside text with plain accents (so
    that it meets every route), gives the reference's tokens."""
    text = LIBRARY_DIFFERENCES[case]
    variants = [text, "The " + text + " end.", "Café " + text + " naïve."] + text.split(" ")
    reference = ref.FullTokenizer(str(uncased_vocab), do_lower_case=do_lower_case)
    tokenizer = FastTokenizer(str(uncased_vocab), do_lower_case=do_lower_case)
    expected = [reference.tokenize(t) for t in variants]
    assert tokenizer.tokenize_batch(variants) == expected
    assert [tokenizer.encode(t).tokens for t in variants] == expected


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_every_code_point_matches_reference(ref, uncased_vocab, do_lower_case):
    """Every code point, as a word and between letters (see code_point_texts)."""
    texts = code_point_texts()
    expected = reference_code_point_tokens(ref, uncased_vocab, do_lower_case)
    tokenizer = FastTokenizer(str(uncased_vocab), do_lower_case=do_lower_case)
    assert tokenizer.tokenize_batch(texts) == expected


def _check_offsets(text, encoding, reference_basic):
    """Spans in order, inside the text; each span basic-tokenizes to its piece without "##"
    (an [UNK] span to a single basic token)."""
    previous_end = 0
    checks = []
    for token, (start, end) in zip(encoding.tokens, encoding.offsets):
        assert previous_end <= start < end <= len(text), (text, token, start, end)
        previous_end = end
        checks.append((token, text[start:end]))
    for token, span in set(checks):
        basic = reference_basic.tokenize(span)
        if token == "[UNK]":
            assert len(basic) == 1, (span, basic)
        else:
            assert basic == [token[2:] if token.startswith("##") else token], (text, span, token)


@pytest.mark.slow
@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_offsets_on_squad_contexts(ref, shared_data, vocab_for_case, fast_for_case, do_lower_case):
    contexts = list(dict.fromkeys(corpora.squad_contexts(shared_data)))
    tokenizer = fast_for_case[do_lower_case]
    basic = ref.BasicTokenizer(do_lower_case=do_lower_case)
    encodings = tokenizer.encode_batch(contexts)
    spans = {}
    for text, encoding in zip(contexts, encodings):
        assert len(encoding.tokens) == len(encoding.ids) == len(encoding.offsets)
        previous_end = 0
        for token, (start, end) in zip(encoding.tokens, encoding.offsets):
            assert previous_end <= start < end <= len(text), (text, token, start, end)
            previous_end = end
            spans.setdefault((token, text[start:end]), text)
    for (token, span), text in spans.items():
        pieces = basic.tokenize(span)
        if token == "[UNK]":
            assert len(pieces) == 1, (text, span, pieces)
        else:
            assert pieces == [token[2:] if token.startswith("##") else token], (text, span, token)
    # Offsets do not depend on the route: the exact word route gives the same encodings.
    assert tokenizer._words_route(contexts, with_offsets=True) == encodings


def test_offsets_of_normalized_characters(ref, uncased_vocab, adversarial_texts):
    """Lower-casing, accents, deleted characters and CJK: spans cover the original characters."""
    tokenizer = FastTokenizer(str(uncased_vocab), do_lower_case=True)
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
    for text, expected in cases.items():
        encoding = tokenizer.encode(text)
        assert isinstance(encoding, Encoding)
        assert list(zip(encoding.tokens, encoding.offsets)) == expected, text
        assert encoding.tokens == ref.FullTokenizer(str(uncased_vocab), True).tokenize(text)
    # Final sigma: "ΟΔΟΣ" lower-cases to "οδος" (ς at the end), pieces tile the word.
    encoding = tokenizer.encode("ΟΔΟΣ.")
    assert "".join(encoding.tokens).replace("##", "") == "οδος."
    assert encoding.offsets[0][0] == 0 and encoding.offsets[-2][1] == 4 and encoding.offsets[-1] == (4, 5)
    # The same property as on SQuAD, on adversarial text without characters that normalize to
    # several characters (pieces inside one, e.g. of a Hangul syllable's jamo, share its span)
    # and without "Σ".
    basic = ref.BasicTokenizer(do_lower_case=True)
    for text in adversarial_texts:
        if "\u03a3" not in text and all(  # Σ's form depends on its neighbours
                len("".join(tokenization.BasicTokenizer(True).tokenize(c))) <= 1
                for c in set(text)):
            _check_offsets(text, tokenizer.encode(text), basic)


def test_routes_agree_and_batches_mix_routes(uncased_vocab, adversarial_texts):
    """A batch mixing ASCII, mapped and word-route texts equals each text alone, and the word
    route alone gives identical encodings (tokens, ids and offsets)."""
    tokenizer = FastTokenizer(str(uncased_vocab), do_lower_case=True)
    rng = random.Random(7)
    texts = list(adversarial_texts) + ["plain ascii", "naïve café", "ΟΔΟΣ \x00", ""]
    rng.shuffle(texts)
    batch = tokenizer.encode_batch(texts)
    assert batch == [tokenizer.encode(t) for t in texts]
    assert tokenizer._words_route(texts, with_offsets=True) == batch
    routes = tokenizer._route(texts)
    assert all(routes.values())


def test_api_vocab_ids_and_bytes(ref, uncased_vocab):
    tokenizer = FastTokenizer(str(uncased_vocab))
    reference = ref.FullTokenizer(str(uncased_vocab))
    assert tokenizer.vocab == reference.vocab and tokenizer.inv_vocab == reference.inv_vocab
    text = "The quick brown fox jumped over the lazy dog's [MASK]."
    encoding = tokenizer.encode(text)
    assert encoding.ids == reference.convert_tokens_to_ids(reference.tokenize(text))
    assert tokenizer.convert_ids_to_tokens(encoding.ids) == encoding.tokens
    assert tokenizer.convert_tokens_to_ids(encoding.tokens) == encoding.ids
    assert tokenizer.tokenize_batch([]) == [] and tokenizer.encode_batch([]) == []
    assert tokenizer.tokenize("") == [] and tokenizer.encode(" \t") == Encoding([], [], [])
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
        fast = FastTokenizer(str(path))
    for text in ["The cats sat, the cat.", "dogs cats", "the\u00e9"]:
        assert fast.tokenize(text) == full.tokenize(text)
        assert fast.encode(text).ids == full.convert_tokens_to_ids(full.tokenize(text))


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
    fast = FastTokenizer(str(uncased_vocab))
    full = tokenization.FullTokenizer(str(uncased_vocab))
    for text in ["[MASK]", "a\ue000b", "ΟΔΟΣ", "a\u2e5db"]:
        hf_tokens = hf.encode(text, add_special_tokens=False).tokens
        assert hf_tokens != full.tokenize(text), text
        assert fast.tokenize(text) == full.tokenize(text), text
    assert unicodedata.category("\ue000") == "Co"
