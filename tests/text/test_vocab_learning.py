"""data_tools.build_vocab / bert_tf.text.vocab_learning: a vocabulary learned on WikiText-2 valid.

The learned vocabulary is judged by the project's FullTokenizer (itself checked against the
reference release in test_tokenization.py) on held-out text, WikiText-2 test.
"""
import subprocess
import sys
import unicodedata
import warnings

import pytest

from bert_tf import tokenization
from bert_tf.text import vocab_learning
from bert_tf.errors import InputError
from conftest import PROJECT_ROOT

VOCAB_SIZE = 8000
NUM_UNUSED = 10
# Measured: 33 [UNK] in 315,587 word pieces (0.0105%) on WikiText-2 test; the threshold leaves
# room for trainer changes but fails on any real breakage (e.g. missing ## forms: ~0.5%).
MAX_UNK_RATE = 0.0005


def run_cli(*args):
    return subprocess.Popen([sys.executable, "-m", "data_tools.build_vocab", *args],
                            cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


@pytest.fixture(scope="module")
def wikitext(shared_data):
    return shared_data / "wikitext-2"


@pytest.fixture(scope="module")
def learned(wikitext, tmp_path_factory):
    """The command line run on WikiText-2 valid, uncased: (vocab path, stderr)."""
    out = tmp_path_factory.mktemp("build_vocab") / "sub" / "vocab.txt"
    proc = run_cli(f"--input_file={wikitext}/valid.txt", f"--output_file={out}",
                   f"--vocab_size={VOCAB_SIZE}", f"--num_unused={NUM_UNUSED}", "--do_lower_case")
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    return out, stderr


def test_vocab_learned_on_wikitext_valid_tokenizes_wikitext_test_with_few_unk(learned, wikitext):
    path, _ = learned
    tokenizer = tokenization.FullTokenizer(str(path), do_lower_case=True)
    test_text = (wikitext / "test.txt").read_text(encoding="utf-8").splitlines()
    pieces = [p for line in test_text for p in tokenizer.tokenize(line)]
    unk = pieces.count("[UNK]")
    rate = unk / len(pieces)
    print(f"WikiText-2 test: {unk} [UNK] in {len(pieces)} word pieces ({100 * rate:.4f}%)")
    assert len(pieces) > 250_000
    assert rate < MAX_UNK_RATE
    # On the text it was learned from, every word is covered (all characters are in the alphabet).
    valid_text = (wikitext / "valid.txt").read_text(encoding="utf-8").splitlines()
    assert all("[UNK]" not in tokenizer.tokenize(line) for line in valid_text)


def test_vocab_layout(learned):
    path, stderr = learned
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""
    tokens = lines[:-1]
    assert len(tokens) == VOCAB_SIZE and len(set(tokens)) == VOCAB_SIZE
    assert tokens[:NUM_UNUSED + 5] == (["[PAD]"] + [f"[unused{i}]" for i in range(NUM_UNUSED)]
                                       + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    pieces = tokens[NUM_UNUSED + 5:]
    assert all(p and p == p.strip() and not any(c.isspace() for c in p) for p in pieces)
    # Pieces follow BasicTokenizer's splitting: lower case, no accents, punctuation alone.
    for piece in pieces:
        body = piece[2:] if piece.startswith("##") and len(piece) > 2 else piece
        assert body == body.lower(), piece
        assert not any(unicodedata.category(c) == "Mn" for c in body), piece
        if len(body) > 1:
            assert not any(tokenization._is_punctuation(c) for c in body), piece
    # Every letter-like character can start and continue a word.
    chars = {p for p in pieces if len(p) == 1}
    assert {"a", "z", "0", "9", "."} <= chars
    assert all(f"##{c}" in pieces for c in chars if c.isalnum())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. a DuplicateTokenWarning would fail here
        tokenization.load_vocab(str(path))
    # Progress and summary lines, and no temporary file left behind.
    assert "[build_vocab: count words] done:" in stderr and f"wrote {VOCAB_SIZE} tokens" in stderr
    assert [p.name for p in path.parent.iterdir()] == ["vocab.txt"]


def test_cased_vocab_and_determinism(wikitext):
    lines = (wikitext / "valid.txt").read_text(encoding="utf-8").splitlines()
    counts, stats = vocab_learning.count_words(lines, do_lower_case=False)
    # The counting shortcut gives exactly BasicTokenizer.tokenize's tokens.
    basic = tokenization.BasicTokenizer(do_lower_case=False)
    assert stats["tokens"] == sum(len(basic.tokenize(line)) for line in lines)
    first = vocab_learning.learn_vocab(counts, 3000, num_unused=99)
    assert first == vocab_learning.learn_vocab(counts, 3000, num_unused=99)
    assert len(first) == 3000
    # num_unused=99 puts the special tokens at the released vocabularies' ids.
    assert [first.index(t) for t in ("[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [100, 101, 102, 103]
    assert any(t[0].isupper() for t in first[104:] if t[0].isalpha())
    assert vocab_learning.unk_rate(first, counts) == 0.0


def test_library_errors(tmp_path):
    counts = {"hello": 5, "world": 3, "a": 1}
    with pytest.raises(InputError, match=r"^vocab_size: 15 leaves no room .*\(num_unused=10\)"):
        vocab_learning.learn_vocab(counts, 15, num_unused=10)
    with pytest.raises(InputError, match="^vocab_size: 20 is too small.*raise vocab_size or "
                                         "lower limit_alphabet$"):
        vocab_learning.learn_vocab(counts, 20, num_unused=10)
    with pytest.raises(InputError, match="no words"):
        vocab_learning.learn_vocab({}, 100)
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\t\n")
    with pytest.raises(InputError, match="blank.txt: no words"):
        vocab_learning.build_vocab([str(blank)], str(tmp_path / "v.txt"), 100, log=lambda m: None)
    assert not (tmp_path / "v.txt").exists()
    # Bytes that are not UTF-8 are an error naming the file and line, as in
    # create_pretraining_data; nothing is written.
    mixed = tmp_path / "mixed.txt"
    mixed.write_bytes(b"fine line\ncaf\xe9 latin-1 line\n")
    with pytest.raises(InputError, match=r"mixed.txt:2: not valid UTF-8 \(invalid "
                                         r"continuation byte: byte 0xe9 at byte 4 of the line\)"):
        vocab_learning.build_vocab([str(mixed)], str(tmp_path / "v.txt"), 100,
                                   log=lambda m: None)
    assert not (tmp_path / "v.txt").exists()


def test_a_vocabulary_smaller_than_asked_is_a_warning_with_its_cause(tmp_path):
    """A one-line corpus cannot give 8,000 pieces: the warning line says how many it gave and
    why, and the file holds exactly that many."""
    corpus = tmp_path / "one_line.txt"
    corpus.write_text("the cat sat on the mat and the dog sat on the log\n")
    lines = []
    summary = vocab_learning.build_vocab([str(corpus)], str(tmp_path / "v.txt"), 8000,
                                         log=lines.append)
    written = (tmp_path / "v.txt").read_text().splitlines()
    assert summary["vocab_size"] == len(written) < 8000
    warnings = [line for line in lines if line.startswith("warning: ")]
    assert warnings == [f"warning: the vocabulary has {len(written)} entries, not the 8000 "
                        f"asked for: the corpus (1 line) holds 8 distinct words, and WordPiece "
                        f"merges no pair of pieces seen fewer than 2 times (min_frequency); "
                        f"more text gives more entries"], lines


def test_cli_errors_exit_2_with_a_message_naming_the_flag(tmp_path):
    out = tmp_path / "vocab.txt"
    cases = {
        "glob matches nothing": ([f"--input_file={tmp_path}/missing-*.txt", f"--output_file={out}"],
                                 "error: --input_file: no file matches"),
        "vocab_size too small": ([f"--input_file={PROJECT_ROOT}/README.md", f"--output_file={out}",
                                  "--vocab_size=12"], "error: --vocab_size: 12 leaves no room"),
        "no output_file": ([f"--input_file={PROJECT_ROOT}/README.md"],
                           "error: --output_file: is required"),
    }
    procs = {name: run_cli(*args) for name, (args, _) in cases.items()}  # concurrently
    for name, proc in procs.items():
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 2, (name, stderr)
        assert cases[name][1] in stderr, (name, stderr)
        assert "Traceback" not in stderr, name
    assert not out.exists()
