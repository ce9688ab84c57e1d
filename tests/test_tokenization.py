"""bert_tf.tokenization against the reference release (bert-tensorflow 1.0.4): same tokens, always.

Oracle: the reference `FullTokenizer` / `BasicTokenizer` / `WordpieceTokenizer` and predicates,
run on
  * every text field of ../shared/data (tests/corpora.py: GLUE, SQuAD v1.1+v2.0 contexts and
    questions, CoNLL-2003 sentences, WikiText-2 valid+test, sample_text), each *distinct* text
    once (167k texts, 15.9 MB; comparing duplicates again would only repeat identical calls);
    the reference's tokens are computed per distinct word (see `corpora.reference_words`),
    uncased with the released uncased vocabulary and cased with a mixed-case vocabulary derived
    from it (so cased words really go through WordPiece instead of mostly becoming [UNK]);
  * generated adversarial text (accents, combining marks, CJK, emoji, zero-width and exotic
    spaces, controls, U+0000/U+FFFD, literal special tokens, words around 200 characters, mixed
    scripts, seeded random Unicode, random glued vocabulary pieces);
  * every Unicode code point, for the character classes.
"""
import collections
import unicodedata

import pytest

import corpora
from bert_tf import tokenization
from bert_tf.errors import InputError


# Fixtures (tests/conftest.py; texts and helpers in tests/corpora.py), shared with the other
# tokenizer tests so that each reference output is computed once per session: `ref` (the
# reference's tokenization module), `vocab_for_case` ({True: uncased, False: a mixed-case
# vocabulary derived from it}), `corpus_texts`, `adversarial_texts`, `reference_words`, and the
# reference's tokens `reference_corpus_tokens` / `reference_adversarial_tokens` by case.


# ------------------------------------------------------------------------------------------
# Whole-pipeline parity
# ------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_full_tokenizer_matches_reference_on_all_shared_text(
        ref, vocab_for_case, corpus_texts, reference_corpus_tokens, do_lower_case):
    """The reference's tokens come from its per-word work (corpora.reference_words explains the
    shortcut), which is checked here against the reference run on whole texts."""
    texts = list(corpus_texts)
    vocab_file = str(vocab_for_case[do_lower_case])
    theirs = ref.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    expected = reference_corpus_tokens[do_lower_case]

    ours = tokenization.FullTokenizer(vocab_file, do_lower_case=do_lower_case)
    actual = [ours.tokenize(t) for t in texts]  # whole texts, one by one
    corpora.assert_same_tokens(texts, expected, actual, lambda t: f"corpus {corpus_texts[t]}")

    # The oracle's shortcut agrees with the reference run on whole texts.
    for i in range(0, len(texts), 8):
        assert theirs.tokenize(texts[i]) == expected[i], texts[i]
    # Every corpus was really there and really tokenized.
    assert set(corpus_texts.values()) == set(corpora.CORPORA)
    assert len(texts) > 160_000 and sum(map(len, actual)) > 3_000_000


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_full_tokenizer_matches_reference_on_adversarial_text(
        vocab_for_case, adversarial_texts, reference_adversarial_tokens, do_lower_case):
    vocab_file = vocab_for_case[do_lower_case]
    expected = reference_adversarial_tokens[do_lower_case]
    ours = tokenization.FullTokenizer(str(vocab_file), do_lower_case=do_lower_case)
    actual = [ours.tokenize(t) for t in adversarial_texts]
    corpora.assert_same_tokens(adversarial_texts, expected, actual, lambda t: "adversarial")
    # The same again from a warm cache, and through a tiny cache that is emptied constantly.
    assert [ours.tokenize(t) for t in adversarial_texts] == expected
    tiny = tokenization.FullTokenizer(str(vocab_file), do_lower_case=do_lower_case, cache_size=3)
    assert [tiny.tokenize(t) for t in adversarial_texts] == expected
    # The cases the issue names are really in there (and some produce [UNK] / long-word [UNK]).
    flat = [tok for tokens in expected for tok in tokens]
    assert "[UNK]" in flat and "[" in flat and "mask" in {t.lower() for t in flat}


def test_bytes_input_with_undecodable_bytes_matches_reference(ref, uncased_vocab):
    """Bytes are decoded as UTF-8 with errors ignored, as in the reference: bad bytes vanish."""
    samples = [b"caf\xc3\xa9 ok", b"bad \xff\xfe bytes", b"trunc\xe4\xb8", b"\xc3(x", b"\x80abc\x80",
               "中文".encode("utf-8")[:-1] + b" end", b"", b"\xed\xa0\x80 surrogate"]
    theirs = ref.FullTokenizer(str(uncased_vocab), do_lower_case=True)
    ours = tokenization.FullTokenizer(str(uncased_vocab), do_lower_case=True)
    for sample in samples:
        assert ours.tokenize(sample) == theirs.tokenize(sample), sample
    assert ours.tokenize(b"bad \xff\xfe bytes") == ["bad", "bytes"]
    for function in ("convert_to_unicode", "printable_text"):
        for sample in samples + ["text", "\ufffd"]:
            assert getattr(tokenization, function)(sample) == getattr(ref, function)(sample)
        with pytest.raises(ValueError):
            getattr(tokenization, function)(123)


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_basic_and_wordpiece_tokenizers_match_reference(ref, uncased_vocab, adversarial_texts,
                                                        do_lower_case):
    vocab = tokenization.load_vocab(str(uncased_vocab))
    ours_basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    theirs_basic = ref.BasicTokenizer(do_lower_case=do_lower_case)
    ours_wp = tokenization.WordpieceTokenizer(vocab=vocab)
    theirs_wp = ref.WordpieceTokenizer(vocab=vocab)
    for text in adversarial_texts:
        basic = theirs_basic.tokenize(text)
        assert ours_basic.tokenize(text) == basic, text
        joined = " ".join(basic)
        assert ours_wp.tokenize(joined) == theirs_wp.tokenize(joined), joined
    # Other max_input_chars_per_word / unk_token settings.
    for limit in (1, 5, 17):
        ours_wp = tokenization.WordpieceTokenizer(vocab, unk_token="<?>", max_input_chars_per_word=limit)
        theirs_wp = ref.WordpieceTokenizer(vocab, unk_token="<?>", max_input_chars_per_word=limit)
        for text in adversarial_texts[:300]:
            assert ours_wp.tokenize(text) == theirs_wp.tokenize(text), (limit, text)


def test_every_code_point_character_classes_match_reference(ref):
    """The predicates and the per-character cleaning, on all 1,114,112 code points."""
    all_chars = [chr(cp) for cp in range(0x110000)]
    for name in ("_is_whitespace", "_is_control", "_is_punctuation"):
        ours, theirs = getattr(tokenization, name), getattr(ref, name)
        differing = [c for c in all_chars if ours(c) != theirs(c)]
        assert not differing, (name, [hex(ord(c)) for c in differing[:10]])
    theirs_basic = ref.BasicTokenizer(do_lower_case=True)
    text = "".join(all_chars)
    expected = theirs_basic._tokenize_chinese_chars(theirs_basic._clean_text(text))
    assert tokenization._clean_and_space_cjk(text) == expected
    for ascii_text in ("".join(all_chars[:128]), "a\tb\nc\r d", "plain printable text"):
        assert tokenization._clean_and_space_cjk(ascii_text) == \
            theirs_basic._tokenize_chinese_chars(theirs_basic._clean_text(ascii_text))
    ours_basic = tokenization.BasicTokenizer(do_lower_case=True)
    assert ours_basic._tokenize_chinese_chars(ours_basic._clean_text(text)) == expected
    assert [ours_basic._is_chinese_char(cp) for cp in range(0x110000)] == \
        [theirs_basic._is_chinese_char(cp) for cp in range(0x110000)]


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_every_code_point_as_a_word_matches_reference(ref, do_lower_case):
    """Each code point alone, and between letters, through lower-casing/accents/punctuation."""
    # Unassigned (Cn) and private-use (Co) code points all behave alike (the character-class
    # test above covers each of them); every assigned one is here.
    words = [c for c in map(chr, range(0x110000)) if unicodedata.category(c) not in ("Cn", "Co")]
    text = " ".join(words) + " " + " ".join("a" + c + "b" for c in words[::7])
    expected = ref.BasicTokenizer(do_lower_case=do_lower_case).tokenize(text)
    assert tokenization.BasicTokenizer(do_lower_case=do_lower_case).tokenize(text) == expected


def test_preserve_unused_tokens_matches_reference_flag(ref, refbert, uncased_vocab, adversarial_texts):
    """The wheel's --preserve_unused_tokens (an absl flag there, an argument here)."""
    from absl import flags
    texts = adversarial_texts[:200] + ["[unused0] [unused1]x [UNUSED2] a[unused3] [unused99]."]
    saved = flags.FLAGS.preserve_unused_tokens
    flags.FLAGS.preserve_unused_tokens = True
    try:
        theirs = ref.FullTokenizer(str(uncased_vocab), True)
        expected = [theirs.tokenize(t) for t in texts]
    finally:
        flags.FLAGS.preserve_unused_tokens = saved
    ours = tokenization.FullTokenizer(str(uncased_vocab), True, preserve_unused_tokens=True)
    assert [ours.tokenize(t) for t in texts] == expected
    assert ours.tokenize("[unused0] [unused99] [UNUSED1].") == [
        "[unused0]", "[unused99]", "[", "unused", "##1", "]", "."]


# ------------------------------------------------------------------------------------------
# Vocabulary, ids, API
# ------------------------------------------------------------------------------------------


def test_load_vocab_and_ids_match_reference(ref, uncased_vocab, tmp_path):
    ours = tokenization.load_vocab(str(uncased_vocab))
    theirs = ref.load_vocab(str(uncased_vocab))
    assert isinstance(ours, collections.OrderedDict)
    assert list(ours.items()) == list(theirs.items()) and len(ours) == 30522
    # Line-format details: CRLF, surrounding spaces, tabs, no final newline, a blank line.
    odd = tmp_path / "odd.txt"
    odd.write_bytes(b"[PAD]\r\n  [UNK] \n\tfoo\t\n\nbar\xc2\xa0\n\xe4\xb8\xad\nlast")
    assert list(tokenization.load_vocab(str(odd)).items()) == list(ref.load_vocab(str(odd)).items())

    tokenizer = tokenization.FullTokenizer(str(uncased_vocab))
    reference = ref.FullTokenizer(str(uncased_vocab))
    tokens = tokenizer.tokenize("The quick brown fox jumped over the lazy dog's [MASK].")
    ids = tokenizer.convert_tokens_to_ids(tokens)
    assert ids == reference.convert_tokens_to_ids(tokens)
    assert tokenizer.convert_ids_to_tokens(ids) == tokens
    assert tokenization.convert_tokens_to_ids(tokenizer.vocab, tokens) == ids
    assert tokenization.convert_ids_to_tokens(tokenizer.inv_vocab, ids) == tokens
    assert tokenizer.inv_vocab == reference.inv_vocab
    with pytest.raises(KeyError):  # as the reference: unknown tokens are not silently mapped
        tokenizer.convert_tokens_to_ids(["not-a-vocab-token"])
    for text in ["", "  a b\t c\n", "\u00a0x\u3000y"]:
        assert tokenization.whitespace_tokenize(text) == ref.whitespace_tokenize(text)


def test_duplicate_vocab_entries_keep_last_index_and_warn(ref, tmp_path):
    path = tmp_path / "dup.txt"
    lines = ["[PAD]", "[UNK]", "the", "cat", "the", "sat", "cat "]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.warns(tokenization.DuplicateTokenWarning) as record:
        vocab = tokenization.load_vocab(str(path))
    messages = [str(w.message) for w in record]
    assert len(messages) == 2
    assert f"{path}:5" in messages[0] and "'the'" in messages[0] and "line 3" in messages[0]
    assert f"{path}:7" in messages[1] and "'cat'" in messages[1] and "line 4" in messages[1]
    # ids are line numbers (the rows of an embedding table): the last line of a token wins, as in
    # google-research/bert; order of keys is first appearance, as in every version.
    last_line = {token.strip(): i for i, token in enumerate(lines)}
    assert dict(vocab) == last_line
    assert list(vocab) == list(ref.load_vocab(str(path)))  # same keys, same order as the wheel
    with pytest.warns(tokenization.DuplicateTokenWarning):
        tokenizer = tokenization.FullTokenizer(str(path))
    assert tokenizer.convert_tokens_to_ids(tokenizer.tokenize("The cat sat")) == [4, 6, 5]


def test_bad_vocab_files_raise_input_error_naming_the_file(tmp_path):
    missing = tmp_path / "no_such_vocab.txt"
    with pytest.raises(InputError, match="no_such_vocab.txt.*not found"):
        tokenization.FullTokenizer(str(missing))
    with pytest.raises(InputError, match="is a directory"):
        tokenization.load_vocab(str(tmp_path))
    for content in (b"", b"\n\n  \n"):
        empty = tmp_path / "empty.txt"
        empty.write_bytes(content)
        with pytest.raises(InputError, match="empty.txt.*empty"):
            tokenization.load_vocab(str(empty))
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"[PAD]\n[UNK]\ncaf\xe9\n")
    with pytest.raises(InputError, match=r"latin1.txt:3: not valid UTF-8"):
        tokenization.load_vocab(str(bad))


def test_validate_case_matches_checkpoint_matches_reference(ref):
    names = ["uncased_L-12_H-768_A-12", "cased_L-12_H-768_A-12", "multi_cased_L-12_H-768_A-12",
             "chinese_L-12_H-768_A-12", "my_model"]
    for name in names:
        for do_lower_case in (True, False):
            for checkpoint in (f"/models/{name}/bert_model.ckpt", f"gs://b/{name}/bert_model.ckpt-5",
                               "", None, f"/models/{name}/model.ckpt"):
                outcomes = []
                for module in (tokenization, ref):
                    try:
                        module.validate_case_matches_checkpoint(do_lower_case, checkpoint)
                        outcomes.append(None)
                    except ValueError as e:
                        outcomes.append(str(e))
                assert outcomes[0] == outcomes[1], (name, do_lower_case, checkpoint)
    with pytest.raises(ValueError, match="do_lower_case=False"):
        tokenization.validate_case_matches_checkpoint(False, "/m/uncased_L-12_H-768_A-12/bert_model.ckpt")


def test_wordpiece_docstring_example_and_long_words(uncased_vocab):
    wordpiece = tokenization.WordpieceTokenizer(vocab={"un", "##aff", "##able", "[UNK]"})
    assert wordpiece.tokenize("unaffable") == ["un", "##aff", "##able"]
    assert wordpiece.tokenize("unaffablex affable") == ["[UNK]", "[UNK]"]
    tokenizer = tokenization.FullTokenizer(str(uncased_vocab))
    assert tokenizer.tokenize("a" * 201) == ["[UNK]"]
    assert tokenizer.tokenize("a" * 200) != ["[UNK]"]
    # Accent stripping leaves "É"*200 + a combining acute with 200 characters: within the limit.
    assert unicodedata.category("\u0301") == "Mn"
    assert "".join(tokenizer.tokenize("É" * 200 + "\u0301")).replace("##", "") == "e" * 200
