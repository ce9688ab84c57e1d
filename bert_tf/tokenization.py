"""WordPiece tokenization with exactly the output of the original BERT release.

This is a port of google-research/bert `tokenization.py` (and the `bert-tensorflow==1.0.4` wheel,
which adds `preserve_unused_tokens`): the same public API and, on every input, the same tokens.
The pipeline is the original's:

  1. `convert_to_unicode`: bytes are decoded as UTF-8 with errors *ignored* (undecodable bytes
     silently vanish, exactly as in the original; pass `str` if you want to see them).
  2. clean: drop U+0000, U+FFFD and control characters (Unicode Cc/Cf except \\t \\n \\r); map
     whitespace (space, \\t, \\n, \\r, Unicode Zs) to a space.
  3. put spaces around CJK ideographs (so each becomes its own word).
  4. split on whitespace (Python's `str.split()`, which also splits on U+2028/U+2029).
  5. per word: lower-case + NFD + drop Mn (accents) when `do_lower_case`; split out every
     punctuation character (ASCII non-alphanumerics plus Unicode P*).
  6. per word: greedy longest-match-first WordPiece with `##` continuations; a word with more than
     `max_input_chars_per_word` (200) characters, or with no complete match, becomes `[UNK]`.

Speed, without changing any output:
  * steps 2-3 look at one character at a time, so they are a single `str.translate` with a table
    filled lazily, one `unicodedata` decision per distinct character ever seen;
  * steps 5-6 only depend on the whitespace word, so `FullTokenizer` caches word -> word pieces
    (bounded; natural text repeats words, so most words are a dictionary hit);
  * WordPiece never tries a candidate longer than the longest vocabulary entry (such a candidate
    cannot be in the vocabulary, so the greedy choice is unchanged) and slices the word instead of
    re-joining a list of characters.
The tests compare every token sequence with the reference release on all of ../shared/data plus
adversarial text.

Deliberate differences from the original, all on bad input only:
  * a missing vocabulary file, an empty one, or one that is not UTF-8 raises `InputError` naming
    the file (and line), instead of a TensorFlow NotFoundError / UnicodeDecodeError;
  * a duplicated vocabulary entry keeps the *last* line's index, as google-research/bert's
    `load_vocab` does (ids are line numbers, the rows of a checkpoint's embedding table), and
    warns with `DuplicateTokenWarning` naming the token and both lines. (The PyPI wheel instead
    keeps the first and renumbers the following tokens, which shifts every later id off its
    embedding row; on a vocabulary without duplicates all three agree.)
"""
import collections
import itertools
import os
import re
import unicodedata
import warnings

from bert_tf.errors import arg, argument_error, file_error
from bert_tf.io_utils import decode_utf8, open_input

_UNUSED_TOKEN_RE = re.compile(r"^\[unused\d+\]$")
# The longest word WordPiece splits (the original's); a longer one is [UNK].
MAX_INPUT_CHARS_PER_WORD = 200


class DuplicateTokenWarning(UserWarning):
    """A vocabulary file lists the same token on two lines (the later line's index wins)."""


# --------------------------------------------------------------------------------------------
# Text conversion and vocabulary files
# --------------------------------------------------------------------------------------------


def convert_to_unicode(text):
    """Converts `text` to `str`, decoding bytes as UTF-8 and *ignoring* undecodable bytes.

    The original does the same ("ignore"), so invalid bytes are dropped silently rather than
    replaced by U+FFFD (which the tokenizer would drop anyway) or raising.
    """
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    raise ValueError("Unsupported string type: %s" % (type(text)))


def printable_text(text):
    """Returns `text` as a `str` suitable for print or logging (bytes decoded, errors ignored)."""
    return convert_to_unicode(text)


def check_vocab_fits(vocab_file, vocab_size, config_source=None):
    """A vocabulary with more entries than the model's vocab_size gives token ids that its
    embedding table does not have (another model's vocabulary, or an extended one without
    its checkpoint): an InputError naming vocab_file and the config (`config_source`: where
    vocab_size comes from; default bert_config_file). A missing file is left to the tokenizer
    to report."""
    if "://" in str(vocab_file) or not os.path.isfile(vocab_file):
        return
    with open(vocab_file, "rb") as f:
        size = sum(1 for _ in f)
    if size > vocab_size:
        source = config_source or arg("bert_config_file")
        raise argument_error("vocab_file", f"{vocab_file} has {size} entries but the model's "
                                           f"vocab_size is {vocab_size} ({source}): ids from "
                                           f"{vocab_size} on have no embedding; the vocabulary "
                                           f"of another model, or extended without its "
                                           f"checkpoint (extend_vocab {arg('mode')}=append "
                                           f"writes the model folder to use with it)?")


def load_vocab(vocab_file):
    """Loads a vocabulary file (one token per line) into an OrderedDict token -> id.

    As in the original: lines are split on "\\n" only, each line is `str.strip()`-ed, and a
    token's id is its 0-based line number; a duplicated token keeps the last line's id (with a
    `DuplicateTokenWarning`). Raises `InputError` for a missing, empty or non-UTF-8 file.
    """
    with open_input(vocab_file, "vocabulary file") as f:
        data = f.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the text after the final newline is not a line (readline() semantics)
    vocab = collections.OrderedDict()
    first_line = {}
    duplicates = []
    for index, raw in enumerate(lines):
        token = decode_utf8(raw, vocab_file, index + 1).strip()
        if token in vocab:
            duplicates.append((index, token, vocab[token]))
        else:
            first_line[token] = index
        vocab[token] = index  # an existing key keeps its position (first appearance)
    if not any(vocab):
        raise file_error(vocab_file, "vocabulary file is empty (no tokens)")
    for index, token, previous_id in duplicates:
        warnings.warn(
            f"{vocab_file}:{index + 1}: duplicate vocabulary token {token!r} (first on line "
            f"{first_line[token] + 1}); it takes id {index} as in the original, and id "
            f"{previous_id} maps to no token", DuplicateTokenWarning, stacklevel=2)
    return vocab


def convert_by_vocab(vocab, items):
    """Converts a sequence of [tokens|ids] using the vocab (KeyError for unknown items)."""
    return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
    return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
    """Runs basic whitespace cleaning and splitting on a piece of text (Python's str.split())."""
    return text.split()


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
    """Checks whether the casing flag is consistent with a released checkpoint's name.

    The casing is not stored in bert_config.json, so, like the original, this recognises the
    released model directory names and raises ValueError on a mismatch; other names pass.
    """
    if not init_checkpoint:
        return
    m = re.match("^.*?([A-Za-z0-9_-]+)/bert_model.ckpt", init_checkpoint)
    if m is None:
        return
    model_name = m.group(1)
    lower_models = [
        "uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
        "multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12"
    ]
    cased_models = [
        "cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16", "multi_cased_L-12_H-768_A-12"
    ]
    is_bad_config = False
    if model_name in lower_models and not do_lower_case:
        is_bad_config = True
        actual_flag, case_name, opposite_flag = "False", "lowercased", "True"
    if model_name in cased_models and do_lower_case:
        is_bad_config = True
        actual_flag, case_name, opposite_flag = "True", "cased", "False"
    if is_bad_config:
        raise ValueError(
            "You passed in `--do_lower_case=%s` with `--init_checkpoint=%s`. "
            "However, `%s` seems to be a %s model, so you "
            "should pass in `--do_lower_case=%s` so that the fine-tuning matches "
            "how the model was pre-training. If this error is wrong, please "
            "just comment out this check." % (actual_flag, init_checkpoint,
                                              model_name, case_name, opposite_flag))


# --------------------------------------------------------------------------------------------
# Character classes (the original's predicates, plus cached forms used on the fast path)
# --------------------------------------------------------------------------------------------


def _is_whitespace(char):
    """Space, \\t, \\n, \\r (technically controls, but whitespace in practice) or Unicode Zs."""
    if char == " " or char == "\t" or char == "\n" or char == "\r":
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char):
    """Unicode Cc or Cf, except \\t \\n \\r (counted as whitespace)."""
    if char == "\t" or char == "\n" or char == "\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
    """Unicode P*, plus every non-alphanumeric printable ASCII character ("^", "$", "`" ...).

    The ASCII ones are not all Unicode punctuation; the original treats them as such for
    consistency, so "$5" splits into "$" and "5".
    """
    cp = ord(char)
    if ((33 <= cp <= 47) or (58 <= cp <= 64) or (91 <= cp <= 96) or (123 <= cp <= 126)):
        return True
    return unicodedata.category(char).startswith("P")


def _is_chinese_char(cp):
    """Whether code point `cp` is a CJK ideograph (the original's blocks).

    Hangul, Hiragana and Katakana are not included: they are written with spaces between words,
    so they are handled like every other script.
    """
    return ((0x4E00 <= cp <= 0x9FFF) or (0x3400 <= cp <= 0x4DBF) or
            (0x20000 <= cp <= 0x2A6DF) or (0x2A700 <= cp <= 0x2B73F) or
            (0x2B740 <= cp <= 0x2B81F) or (0x2B820 <= cp <= 0x2CEAF) or
            (0xF900 <= cp <= 0xFAFF) or (0x2F800 <= cp <= 0x2FA1F))


def _clean_char(char):
    """What steps 2-3 turn one character into: None (dropped), " ", " c " or itself."""
    cp = ord(char)
    if cp == 0 or cp == 0xFFFD or _is_control(char):
        return None
    if _is_whitespace(char):
        return " "
    if _is_chinese_char(cp):
        return " " + char + " "
    return char


# str.translate table for steps 2-3: code point -> replacement (None drops it); characters left
# unchanged are absent. Filled lazily; _CLASSIFIED holds every character decided so far.
_CLEAN_TABLE = {}
_CLASSIFIED = set()


def _classify(chars):
    for char in chars:
        replacement = _clean_char(char)
        if replacement != char:
            _CLEAN_TABLE[ord(char)] = replacement
    _CLASSIFIED.update(chars)


_classify([chr(cp) for cp in range(128)])

# Punctuation, cached per character (ASCII precomputed).
_PUNCTUATION = {chr(cp): _is_punctuation(chr(cp)) for cp in range(128)}
_ASCII_PUNCTUATION = "".join(c for c, p in _PUNCTUATION.items() if p)
# A word of ASCII characters is split into single punctuation characters and maximal runs of the
# rest, exactly what _run_split_on_punc does.
_ASCII_PUNC_SPLIT = re.compile("[%s]|[^%s]+" % ((re.escape(_ASCII_PUNCTUATION),) * 2))


def _clean_and_space_cjk(text):
    """Steps 2-3 of the pipeline: exactly the original's `_clean_text` then
    `_tokenize_chinese_chars`. Printable ASCII text (the common case) is returned as is.
    """
    if text.isascii():
        if text.isprintable():  # no control characters, \t, \n or \r: nothing to change
            return text
    else:
        new = set(text).difference(_CLASSIFIED)
        if new:
            _classify(new)
    return text.translate(_CLEAN_TABLE)


def _strip_accents(text):
    """NFD, then drop nonspacing marks (Mn)."""
    text = unicodedata.normalize("NFD", text)
    return "".join(char for char in text if unicodedata.category(char) != "Mn")


def _split_on_punc(text):
    """Splits every punctuation character out as its own piece."""
    if text.isascii():
        return _ASCII_PUNC_SPLIT.findall(text)
    output = []
    start_new_word = True
    for char in text:
        is_punc = _PUNCTUATION.get(char)
        if is_punc is None:
            is_punc = _PUNCTUATION[char] = _is_punctuation(char)
        if is_punc:
            output.append(char)
            start_new_word = True
        else:
            if start_new_word:
                output.append(char)
            else:
                output[-1] += char
            start_new_word = False
    return output


# --------------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------------


class BasicTokenizer:
    """Runs basic tokenization (cleaning, CJK splitting, lower casing, punctuation splitting).

    Args:
      do_lower_case: lower-case and strip accents.
      vocab: the vocabulary (only used with `preserve_unused_tokens`).
      preserve_unused_tokens: the wheel's `--preserve_unused_tokens`: a whitespace word that is an
        `[unusedN]` entry of `vocab` is kept as is (not lower-cased or split).
    """

    def __init__(self, do_lower_case=True, vocab=tuple(), preserve_unused_tokens=False):
        self.do_lower_case = do_lower_case
        self.vocab = vocab
        self.preserve_unused_tokens = preserve_unused_tokens

    def tokenize(self, text):
        """Tokenizes a piece of text into basic tokens (words and punctuation)."""
        output = []
        for word in self.whitespace_words(text):
            output.extend(self.tokenize_word(word))
        return output

    def whitespace_words(self, text):
        """Steps 1-4: the cleaned, CJK-spaced text split on whitespace."""
        return _clean_and_space_cjk(convert_to_unicode(text)).split()

    def tokenize_word(self, word):
        """Step 5 for one whitespace word (a function of the word alone, so results cache)."""
        if self.preserve_unused_tokens and _preserve_token(word, self.vocab):
            return [word]
        if self.do_lower_case:
            word = word.lower()
            if not word.isascii():  # ASCII has no accents; NFD would return it unchanged
                word = _strip_accents(word)
        pieces = _split_on_punc(word)
        if word.isascii():
            return pieces  # no piece can be empty or contain whitespace
        # The original re-splits the joined pieces on whitespace; this drops empty pieces.
        return " ".join(pieces).split()

    # The original's private helpers, kept for code that calls them.
    def _run_strip_accents(self, text):
        return _strip_accents(text)

    def _run_split_on_punc(self, text):
        return _split_on_punc(text)

    def _tokenize_chinese_chars(self, text):
        return "".join(" " + c + " " if _is_chinese_char(ord(c)) else c for c in text)

    def _is_chinese_char(self, cp):
        return _is_chinese_char(cp)

    def _clean_text(self, text):
        return "".join(" " if _is_whitespace(c) else c for c in text
                       if not (ord(c) == 0 or ord(c) == 0xFFFD or _is_control(c)))


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece ("unaffable" -> ["un", "##aff", "##able"]).

    A word longer than `max_input_chars_per_word` characters, or one that cannot be covered by
    vocabulary pieces, becomes a single `unk_token`. `vocab` is any container of strings; it is
    treated as read-only (the longest entry bounds the candidates tried).
    """

    def __init__(self, vocab, unk_token="[UNK]",
                 max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word
        self._longest_entry()

    def _longest_entry(self):
        self._vocab_size = len(self.vocab)
        self._max_piece_chars = max((len(t) for t in self.vocab), default=0)

    def tokenize(self, text):
        """Tokenizes a piece of text (whitespace-separated, already basic-tokenized)."""
        output = []
        for token in whitespace_tokenize(convert_to_unicode(text)):
            output.extend(self.tokenize_word(token))
        return output

    def tokenize_word(self, word):
        """The word pieces of one word (no whitespace inside)."""
        length = len(word)
        if not length:
            return []
        if length > self.max_input_chars_per_word:
            return [self.unk_token]
        if len(self.vocab) != self._vocab_size:
            self._longest_entry()  # the vocabulary grew: re-bound the candidate length
        vocab = self.vocab
        if word in vocab:
            return [word]
        max_piece = self._max_piece_chars
        pieces = []
        start = 0
        while start < length:
            # A candidate longer than the longest vocabulary entry cannot match, so start there.
            end = min(length, start + max_piece)
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in vocab:
                    break
                end -= 1
            else:
                return [self.unk_token]
            pieces.append(piece)
            start = end
        return pieces


def _preserve_token(token, vocab):
    """An `[unusedN]` vocabulary entry, kept whole under `preserve_unused_tokens`."""
    return token in vocab and bool(_UNUSED_TOKEN_RE.search(token))


class FullTokenizer:
    """Runs end-to-end tokenization: BasicTokenizer then WordpieceTokenizer.

    Args:
      vocab_file: one token per line (see `load_vocab`).
      do_lower_case: lower-case and strip accents (uncased models).
      preserve_unused_tokens: keep `[unusedN]` vocabulary entries whole (the wheel's flag).
      cache_size: how many distinct whitespace words to remember (word -> pieces); the cache is
        emptied when full, which bounds memory on corpora with huge vocabularies.
    """

    def __init__(self, vocab_file, do_lower_case=True, preserve_unused_tokens=False,
                 cache_size=1 << 18):
        self.vocab = load_vocab(vocab_file)
        self.inv_vocab = {v: k for k, v in self.vocab.items()}
        self.do_lower_case = do_lower_case
        self.preserve_unused_tokens = preserve_unused_tokens
        self.basic_tokenizer = BasicTokenizer(
            do_lower_case=do_lower_case, vocab=self.vocab,
            preserve_unused_tokens=preserve_unused_tokens)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
        self.cache_size = cache_size
        self._cache = {}

    def tokenize(self, text):
        """The word pieces of `text` (str, or bytes decoded as UTF-8 ignoring errors)."""
        cache = self._cache
        words = self.basic_tokenizer.whitespace_words(text)
        pieces = list(map(cache.get, words))
        if None in pieces:  # some words not seen before (or since the cache was emptied)
            for i, word_pieces in enumerate(pieces):
                if word_pieces is None:
                    word = words[i]
                    word_pieces = pieces[i] = self._tokenize_word(word)
                    if len(cache) >= self.cache_size:
                        cache.clear()
                    cache[word] = word_pieces
        return list(itertools.chain.from_iterable(pieces))

    def _tokenize_word(self, word):
        pieces = []
        for token in self.basic_tokenizer.tokenize_word(word):
            if self.preserve_unused_tokens and _preserve_token(token, self.vocab):
                pieces.append(token)
            else:
                pieces.extend(self.wordpiece_tokenizer.tokenize_word(token))
        return tuple(pieces)

    def convert_tokens_to_ids(self, tokens):
        return convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids):
        return convert_by_vocab(self.inv_vocab, ids)
