"""Learning a WordPiece vocabulary in BERT's layout from a text corpus.

The corpus is split into words exactly as `tokenization.BasicTokenizer` splits text (cleaning,
CJK spacing, lower-casing and accent stripping when `do_lower_case`, punctuation split), so the
learned pieces are the ones `FullTokenizer` will look for. The words and their counts then go to
Hugging Face `tokenizers`' WordPiece trainer (BPE-style merges with the "##" continuation prefix,
in Rust) with whitespace as the only pre-tokenization.

The file it writes has BERT's layout:
    [PAD], [unused0] ... [unused{num_unused-1}], [UNK], [CLS], [SEP], [MASK],
    the alphabet (single characters, and "##" + character for each one that can continue a word),
    then the learned pieces, most useful first.
With num_unused=99 the special tokens get the ids they have in the released BERT vocabularies
([UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103).
"""
import collections
import time

import tensorflow as tf
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from bert_tf import progress, tokenization
from bert_tf.errors import InputError, arg, argument_error
from bert_tf.io_utils import atomic_open, decode_utf8
from bert_tf.progress import Progress

SPECIAL_TOKENS_AFTER_UNUSED = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")
CONTINUATION = "##"


def special_tokens(num_unused):
    """[PAD], the [unused*] placeholders, then [UNK], [CLS], [SEP], [MASK] (BERT's order)."""
    return (["[PAD]"] + [f"[unused{i}]" for i in range(num_unused)]
            + list(SPECIAL_TOKENS_AFTER_UNUSED))


def count_words(lines, do_lower_case=True, max_chars_per_word=200):
    """Counts BasicTokenizer tokens over `lines` (str); returns (Counter, stats dict).

    Whitespace words are counted first and each distinct one is basic-tokenized once: the same
    tokens as `BasicTokenizer.tokenize` on every line (its steps after whitespace splitting only
    depend on the word), at a fraction of the cost. Tokens longer than `max_chars_per_word`
    are left out: WordPiece turns them into [UNK] whatever the vocabulary.
    """
    basic = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    whitespace_words = collections.Counter()
    num_lines = 0
    for line in lines:
        whitespace_words.update(basic.whitespace_words(line))
        num_lines += 1
    counts = collections.Counter()
    too_long = 0
    for word, count in whitespace_words.items():
        for token in basic.tokenize_word(word):
            if len(token) > max_chars_per_word:
                too_long += count
            else:
                counts[token] += count
    stats = {"lines": num_lines, "whitespace_words": sum(whitespace_words.values()),
             "tokens": sum(counts.values()), "distinct_tokens": len(counts),
             "tokens_too_long": too_long}
    return counts, stats


def _can_continue_a_word(char):
    """Whether `char` can follow another character inside a basic token (needs a ## form).

    Punctuation and CJK ideographs are always tokens of their own after BasicTokenizer.
    """
    return not (tokenization._is_punctuation(char) or tokenization._is_chinese_char(ord(char)))


def check_vocab_size(vocab_size, num_unused):
    """Raises InputError naming vocab_size if it cannot hold more than the special tokens."""
    num_special = len(special_tokens(num_unused))
    if vocab_size <= num_special:
        raise argument_error("vocab_size", f"{vocab_size} leaves no room for word pieces after "
                             f"the {num_special} special tokens "
                             f"({arg('num_unused')}={num_unused})")


# The trainer sees each alphabet character as two symbols, one for "starts a word" and one for
# "continues a word", encoded as code points of the supplementary private-use planes 15-16.
_CODE_BASE = 0xF0000
MAX_ALPHABET = (0x10FFFD - _CODE_BASE) // 2


def learn_vocab(word_counts, vocab_size, num_unused=10, min_frequency=2, limit_alphabet=1000):
    """Learns a WordPiece vocabulary of at most `vocab_size` entries from basic-token counts.

    Returns the list of tokens in id order (BERT's layout, see the module docstring). The size is
    exactly `vocab_size` unless the corpus has fewer useful pieces. The same counts always give
    the same vocabulary.

    The alphabet is the `limit_alphabet` most frequent characters (words with other characters
    are left out). Each gets its plain form and, unless it is punctuation or CJK (always a token
    of its own), its "##" form, so a word of known characters never becomes [UNK].

    Determinism: `tokenizers`' own "##" handling numbers continuation symbols in hash-map order,
    which breaks ties between equally frequent merges differently from run to run
    (huggingface/tokenizers#1794). Here both forms of every character are ordinary symbols of a
    sorted initial alphabet instead (start and continuation forms encoded as private-use code
    points), so ties are broken the same way every time; the pieces are decoded afterwards.

    Raises InputError if `word_counts` is empty or `vocab_size` cannot hold the special tokens
    and the alphabet.
    """
    check_vocab_size(vocab_size, num_unused)
    if not 1 <= limit_alphabet <= MAX_ALPHABET:
        raise argument_error("limit_alphabet",
                             f"must be in [1, {MAX_ALPHABET}], got {limit_alphabet}")
    specials = special_tokens(num_unused)
    if not word_counts:
        raise InputError("the input has no words to learn a vocabulary from")

    char_counts = collections.Counter()
    for word, count in word_counts.items():
        for char in word:
            char_counts[char] += count
    alphabet = sorted(sorted(char_counts, key=lambda c: (-char_counts[c], c))[:limit_alphabet])
    continuable = [c for c in alphabet if _can_continue_a_word(c)]
    needed = len(specials) + len(alphabet) + len(continuable)
    if needed > vocab_size:
        raise argument_error("vocab_size", f"{vocab_size} is too small: the special tokens and "
                             f"the alphabet ({len(alphabet)} characters and their ## forms) need "
                             f"{needed} entries; raise {arg('vocab_size')} or lower "
                             f"{arg('limit_alphabet')}")

    start_code = {c: chr(_CODE_BASE + 2 * i) for i, c in enumerate(alphabet)}
    continue_code = {c: chr(_CODE_BASE + 2 * i + 1) for i, c in enumerate(alphabet)}
    decode = {code: c for c, code in start_code.items()}
    decode.update({code: c for c, code in continue_code.items()})

    def encoded_words():
        # The trainer counts words itself: each word comes repeated, in chunks, `count` times.
        for word, count in word_counts.items():
            if any(c not in start_code for c in word):
                continue  # a character outside the alphabet
            encoded = start_code[word[0]] + "".join(continue_code[c] for c in word[1:])
            while count > 0:
                n = min(count, 4096)
                yield " ".join([encoded] * n)
                count -= n

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # the words are pre-split already
    initial = [start_code[c] for c in alphabet] + [continue_code[c] for c in continuable]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
        special_tokens=specials, initial_alphabet=initial, limit_alphabet=len(initial))
    tokenizer.train_from_iterator(encoded_words(), trainer=trainer)
    learned = [token for token, _ in sorted(tokenizer.get_vocab().items(), key=lambda x: x[1])]
    if learned[:len(specials)] != specials:
        raise RuntimeError(f"unexpected special tokens from the trainer: {learned[:len(specials)]}")

    initial_set = set(initial)
    merged = []
    for token in learned[len(specials):]:
        if token in initial_set:
            continue
        first = token[0]
        prefix = CONTINUATION if ord(first) % 2 else ""  # odd code: a continuation form
        merged.append(prefix + "".join(decode[c] for c in token))
    # The latest merges are the least frequent pieces; dropping them keeps every piece's parts.
    merged = merged[:vocab_size - needed]
    return specials + alphabet + [CONTINUATION + c for c in continuable] + merged


def unk_rate(vocab_tokens, word_counts):
    """Share of word pieces that are [UNK] when tokenizing `word_counts` with the vocabulary."""
    vocab = {token: i for i, token in enumerate(vocab_tokens)}
    wordpiece = tokenization.WordpieceTokenizer(vocab=vocab)
    total = unknown = 0
    for word, count in word_counts.items():
        pieces = wordpiece.tokenize_word(word)
        total += len(pieces) * count
        unknown += pieces.count(wordpiece.unk_token) * count
    return unknown / total if total else 0.0


class TextLines:
    """The lines (str) of text files, for one pass; reports progress in kB read. A byte that
    is not UTF-8 is an InputError naming the file and line, as in every data tool
    (`io_utils.decode_utf8`)."""

    def __init__(self, paths, progress=None):
        self.paths = paths
        self.progress = progress

    def __iter__(self):
        pending_bytes = 0
        for path in self.paths:
            with tf.io.gfile.GFile(path, "rb") as f:
                for number, raw in enumerate(f, 1):
                    line = decode_utf8(raw, path, number)
                    pending_bytes += len(raw)
                    if self.progress is not None and pending_bytes >= 1_000_000:
                        self.progress.update(pending_bytes // 1000)
                        pending_bytes %= 1000
                    yield line
        if self.progress is not None:
            self.progress.update(pending_bytes // 1000)


def count_corpus_words(input_files, do_lower_case, command):
    """`count_words` over the lines of `input_files`, with a progress line in kB read
    ("<command>: count words") and its summary: (counts, stats)."""
    total_kb = sum(tf.io.gfile.stat(p).length for p in input_files) // 1000
    progress = Progress(f"{command}: count words", total=total_kb or None, unit="kB")
    counts, stats = count_words(TextLines(input_files, progress), do_lower_case)
    progress.summary(lines=stats["lines"], tokens=stats["tokens"],
                     distinct=stats["distinct_tokens"])
    return counts, stats


def build_vocab(input_files, output_file, vocab_size, do_lower_case=True, num_unused=10,
                min_frequency=2, limit_alphabet=1000, log=None):
    """Counts words in `input_files`, learns the vocabulary, writes it atomically to `output_file`.

    Returns a dict of figures (sizes, counts, [UNK] rate on the input, seconds). Status lines go
    to `log` (default: stderr, like the progress lines).
    """
    log = log or progress.log
    check_vocab_size(vocab_size, num_unused)  # before reading a possibly large corpus
    start = time.monotonic()
    counts, stats = count_corpus_words(input_files, do_lower_case, "build_vocab")
    if not counts:
        raise InputError(f"{', '.join(input_files)}: no words to learn a vocabulary from")

    learn_start = time.monotonic()
    log(f"[build_vocab] learning {vocab_size} entries from {stats['distinct_tokens']} distinct "
        f"tokens ...")
    tokens = learn_vocab(counts, vocab_size, num_unused=num_unused, min_frequency=min_frequency,
                         limit_alphabet=limit_alphabet)
    learn_seconds = time.monotonic() - learn_start
    if len(tokens) < vocab_size:
        log(f"warning: the vocabulary has {len(tokens)} entries, not the {vocab_size} asked "
            f"for: the corpus ({stats['lines']} line{'' if stats['lines'] == 1 else 's'}) "
            f"holds {stats['distinct_tokens']} distinct words, and WordPiece merges no pair "
            f"of pieces seen fewer than {min_frequency} times ({arg('min_frequency')}); more "
            f"text gives more entries")
    with atomic_open(output_file, "w") as f:
        f.write("".join(token + "\n" for token in tokens))
    summary = dict(stats, vocab_size=len(tokens), requested_vocab_size=vocab_size,
                   unk_rate_on_input=unk_rate(tokens, counts),
                   learn_seconds=round(learn_seconds, 2),
                   seconds=round(time.monotonic() - start, 2))
    log(f"[build_vocab] wrote {len(tokens)} tokens to {output_file}  "
        + "  ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in summary.items()))
    return summary
