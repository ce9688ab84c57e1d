"""Domain vocabularies: a released vocabulary extended with the words of a corpus that WordPiece
splits worst (google-research/bert #9, #237, #396).

Two ways to add the words:
  - mode "unused": each word replaces an `[unusedN]` line, lowest id first. Every other line,
    so every other id, stays as it is, and so does the checkpoint: the model has a row for each
    slot already (never trained on, as it never saw the token), which fine-tuning then learns.
    The released vocabularies have 994 such slots (build_vocab writes --num_unused).
  - mode "append": the words are appended as new lines (ids from the vocabulary's line count
    on), and the checkpoint's vocabulary-sized variables get new rows
    (`bert_tf.model.checkpoints.resize_vocabulary`), initialised as the original initialises
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
import os
import re
import sys
import time

from bert_tf import io_utils, tokenization
from bert_tf.errors import InputError, arg, argument_error
from bert_tf.io_utils import atomic_open, open_input
from bert_tf.progress import Progress

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


def extend_vocab(vocab_file, input_files, output_vocab_file, *, mode="unused", num_words=100,
                 min_count=2, do_lower_case=True, init_checkpoint=None, bert_config=None,
                 output_dir=None, seed=12345, log=None):
    """Chooses `num_words` words of the corpus `input_files` (see the module docstring) and
    writes the extended vocabulary to `output_vocab_file`; with mode "append", also the
    resized `init_checkpoint` (`output_dir`/bert_model.ckpt, in the original naming, new rows
    drawn with `seed`), `output_dir`/bert_config.json (`bert_config` with the new
    vocab_size) and the casing (bert_tf.model.directory.RECORD_FILE): with the vocabulary
    there too (the command line's default), a model directory. Everything is checked before
    the corpus is read; on failure nothing is left.

    Returns a dict: the `words` added ({word, id, count, pieces} each, best first), the
    `vocab_size` (lines) written, and figures of the corpus and the checkpoint.
    """
    from bert_tf.text.vocab_learning import TextLines, count_words

    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    start = time.monotonic()
    if mode not in MODES:
        raise argument_error("mode", f"unknown mode {mode!r}: one of {', '.join(MODES)}")
    for name, value in (("num_words", num_words), ("min_count", min_count)):
        if value < 1:
            raise argument_error(name, f"must be a positive integer, got {value}")
    lines = read_vocab_lines(vocab_file)
    checkpoint_path = None
    if mode == "unused":
        for name, value in (("init_checkpoint", init_checkpoint), ("output_dir", output_dir)):
            if value:
                raise argument_error(name, f"only with {arg('mode')}=append: the [unusedN] "
                                           f"slots keep the checkpoint as it is")
        check_free_slots(vocab_file, lines, num_words)
    else:
        for name, value in (("init_checkpoint", init_checkpoint), ("output_dir", output_dir),
                            ("bert_config", bert_config)):
            if not value:
                raise argument_error(name, f"required with {arg('mode')}=append (the "
                                           f"checkpoint gets a row per new word)")
        from bert_tf.model import checkpoints
        tokenization.check_vocab_fits(vocab_file, bert_config.vocab_size)
        io_utils.check_writable_dir(output_dir)
        if io_utils.same_or_inside(init_checkpoint, output_dir) or (
                os.path.isdir(output_dir) and os.listdir(output_dir)):
            raise argument_error("output_dir", f"{output_dir} must be a new or empty folder "
                                               f"(not the checkpoint's): nothing was written")
        weights, left_out = checkpoints.vocabulary_checkpoint_weights(init_checkpoint,
                                                                      bert_config)
        checkpoint_path = os.path.join(output_dir, "bert_model.ckpt")

    import tensorflow as tf  # (after the checks: seconds to import)

    total_kb = sum(tf.io.gfile.stat(p).length for p in input_files) // 1000
    progress = Progress("extend_vocab: count words", total=total_kb or None, unit="kB")
    corpus = TextLines(input_files, progress)
    counts, stats = count_words(corpus, do_lower_case)
    progress.summary(lines=stats["lines"], tokens=stats["tokens"],
                     distinct=stats["distinct_tokens"])
    vocab = tokenization.load_vocab(vocab_file)
    candidates = rank_words(counts, vocab, min_count)
    if not candidates:
        raise InputError(f"{', '.join(input_files)}: no word seen {min_count}+ times "
                         f"({arg('min_count')}) that the vocabulary splits: nothing to add")
    chosen = candidates[:num_words]
    words = [c.word for c in chosen]
    new_lines, ids = extended_lines(lines, words, mode)
    check_single_pieces(new_lines, words, do_lower_case)

    summary = {"mode": mode, "vocab_size": len(new_lines), "words_added": len(words),
               "words_asked": num_words, "candidates": len(candidates),
               "pieces_saved": sum(c.saved_pieces for c in chosen),
               "corpus_tokens": stats["tokens"]}
    if mode == "append":
        new_vocab_size = max(bert_config.vocab_size, len(new_lines))
        old_size = bert_config.vocab_size
        weights = checkpoints.resize_vocabulary(weights, new_vocab_size,
                                                bert_config.initializer_range, seed)
        from bert_tf.model import directory
        with io_utils.removed_on_failure(output_dir):
            checkpoints.write_named_checkpoint(weights, checkpoint_path)
            bert_config.replace(vocab_size=new_vocab_size).to_json_file(
                os.path.join(output_dir, directory.CONFIG_FILE))
            _write_lines(output_vocab_file, new_lines)
            # The casing the words were counted with: the folder is a whole model directory.
            directory.write_record(output_dir, {"do_lower_case": bool(do_lower_case)})
        summary.update(old_vocab_size=old_size, new_vocab_size=new_vocab_size,
                       checkpoint=checkpoint_path, left_out=len(left_out))
        if left_out:
            log(f"[extend_vocab] not carried into {checkpoint_path}: {', '.join(left_out[:5])}"
                + (f" and {len(left_out) - 5} more" if len(left_out) > 5 else ""))
    else:
        _write_lines(output_vocab_file, new_lines)
    summary["seconds"] = round(time.monotonic() - start, 2)
    for c, i in zip(chosen[:20], ids):
        log(f"[extend_vocab] id {i}: {c.word!r} seen {c.count} times, was "
            + ("[UNK]" if c.is_unknown else f"{c.pieces} pieces"))
    if len(chosen) > 20:
        log(f"[extend_vocab] ... and {len(chosen) - 20} more")
    log(f"[extend_vocab] wrote {output_vocab_file}  "
        + "  ".join(f"{k}={v}" for k, v in summary.items()))
    summary["words"] = [{"word": c.word, "id": i, "count": c.count, "pieces": c.pieces}
                        for c, i in zip(chosen, ids)]
    return summary


def _write_lines(path, lines):
    with atomic_open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines))

