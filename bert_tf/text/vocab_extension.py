"""Domain vocabularies: a released vocabulary extended with the words of a corpus that WordPiece
splits worst (google-research/bert #9, #237, #396).

Two ways to add the words:
  - mode "unused": each word replaces an `[unusedN]` line, lowest id first. Every other line,
    so every other id, stays as it is, and so does the checkpoint: the model has a row for each
    slot already (never trained on, as it never saw the token), which fine-tuning then learns.
    The released vocabularies have 994 such slots (build_vocab writes --num_unused).
  - mode "append": the words are appended as new lines (ids from the vocabulary's line count
    on), and the checkpoint's vocabulary-sized variables get new rows
    (`bert_tf.model.extended_vocab.resize_vocabulary`), initialised as the original initialises
    them, with `vocab_size` of the config written beside it.

Which words: the corpus is counted in BasicTokenizer tokens (`vocab_learning.count_words`: the
original's cleaning, lower-casing and accent stripping for uncased models, punctuation and CJK
split), which are what WordPiece sees, so an added token is a whole word to `FullTokenizer`:
one piece. Each token that occurs at least `min_count` times and that the vocabulary splits
into two or more pieces is scored by the pieces it would save over the corpus,
`count * (pieces - 1)`: the sequence length the word costs now (a word split in 4 pieces 100
times makes 300 extra tokens), which is also what fills the max_seq_length budget and dilutes
the word's meaning over sub-word pieces. A token that WordPiece makes `[UNK]` (a character
the vocabulary lacks) saves no length but is lost; it counts as if split in two (`count`).
The best `num_words` are taken, ties broken by frequency, then by the word. (Frequency alone
would favour frequent words split once, such as plural forms; pieces alone, rare long
strings.)

`[unusedN]` and `preserve_unused_tokens` (the PyPI wheel's flag, `FullTokenizer(...,
preserve_unused_tokens=True)`): a literal `[unusedN]` in text is kept whole only while the
vocabulary has that token; once a slot holds a word, `[unused5]` in text is split like any text
(`[`, `unused`, `##5`, `]`), as the original (google-research/bert, without the flag) splits
every `[unusedN]`. Slots in use as markers should be kept out of the replacement: they are
taken lowest id first, so markers belong in the last slots.
"""
import dataclasses
import re

from bert_tf import tokenization
from bert_tf.errors import arg, argument_error
from bert_tf.io_utils import open_input

MODES = ("unused", "append")
UNUSED_TOKEN = re.compile(r"^\[unused\d+\]$")  # as the wheel's preserve_unused_tokens matches


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A corpus token the vocabulary splits: its count and pieces (`is_unknown`: one [UNK])."""
    word: str
    count: int
    pieces: int
    is_unknown: bool = False

    @property
    def saved_pieces(self):
        """The selection score: pieces saved over the corpus if the word were one piece (an
        [UNK] word counts as two pieces)."""
        return self.count * (1 if self.is_unknown else self.pieces - 1)


def rank_words(counts, vocab, min_count=2):
    """The tokens of `counts` ({basic token: count}) that `vocab` splits into 2+ pieces or
    [UNK], seen at least `min_count` times, best first (see the module docstring)."""
    wordpiece = tokenization.WordpieceTokenizer(vocab)
    candidates = []
    for word, count in counts.items():
        if count < min_count:
            continue
        pieces = wordpiece.tokenize_word(word)
        unknown = pieces == [wordpiece.unk_token]
        if len(pieces) >= 2 or unknown:
            candidates.append(Candidate(word, count, len(pieces), unknown))
    candidates.sort(key=lambda c: (-c.saved_pieces, -c.count, c.word))
    return candidates


def read_vocab_lines(vocab_file):
    """The lines of a vocabulary file as `load_vocab` reads them (split on "\\n" only, the
    text after the last newline not a line), each without its newline; checked as
    `load_vocab` checks them (InputError naming the file, and line)."""
    tokenization.load_vocab(vocab_file)
    with open_input(vocab_file, "vocabulary file") as f:
        lines = f.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line.decode("utf-8") for line in lines]


def unused_slots(lines):
    """The line numbers (ids) of the `[unusedN]` entries, lowest first."""
    return [i for i, line in enumerate(lines) if UNUSED_TOKEN.match(line.strip())]


def check_free_slots(vocab_file, lines, num_words):
    """InputError naming num_words when the vocabulary has fewer [unusedN] slots than asked."""
    free = len(unused_slots(lines))
    if num_words > free:
        have = f"only {free} free [unusedN] slots" if free else "no free [unusedN] slot"
        raise argument_error("num_words", f"{vocab_file} has {have} for the {num_words} words "
                                          f"asked: ask for at most {free}, or use "
                                          f"{arg('mode')}=append (new rows in the checkpoint)")


def extended_lines(lines, words, mode):
    """The vocabulary lines with `words` in the first [unusedN] slots ("unused") or after the
    last line ("append"), and the id of each word."""
    lines = list(lines)
    if mode == "unused":
        ids = unused_slots(lines)[:len(words)]
        for i, word in zip(ids, words):
            lines[i] = word
    else:
        ids = list(range(len(lines), len(lines) + len(words)))
        lines.extend(words)
    return lines, ids


def check_single_pieces(lines, words, do_lower_case):
    """Each new word is one piece for a FullTokenizer of the new vocabulary (true by
    construction for basic tokens; a failure here is a bug, not bad input)."""
    vocab = {line.strip(): i for i, line in enumerate(lines)}
    basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    wordpiece = tokenization.WordpieceTokenizer(vocab)
    for word in words:
        pieces = [p for token in basic.tokenize(word) for p in wordpiece.tokenize_word(token)]
        if pieces != [word]:
            raise AssertionError(f"new word {word!r} tokenizes to {pieces}")
