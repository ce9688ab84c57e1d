"""A fast batch tokenizer with exactly `FullTokenizer`'s output, plus character offsets.

`FastTokenizer(vocab_file, do_lower_case)` returns, for every input, the same word pieces as the
original release's `FullTokenizer` (tests compare every distinct text of ../shared/data and
generated adversarial text with the reference), and for each piece its `(start, end)` character
span in the input text (for SQuAD answers and token classification labels).

Built on tensorflow-text's `FastWordpieceTokenizer` (C++, linear-time MaxMatch: the same result
as the original's greedy longest-match-first WordPiece). Each text takes one of three routes:
  * "ascii": ASCII text without control characters. For it the original is `str.lower()`, a
    split on whitespace and on every non-alphanumeric character, and WordPiece with words over
    200 characters as `[UNK]`: exactly the library end to end (its own pre-tokenization; its
    byte limit is a character limit in ASCII). Offsets are the library's.
  * "unicode": text whose other characters are all "plain": the original normalizes each of
    them to exactly one character whatever its context (e.g. "é" -> "e", "Ä" -> "a", "–" and
    NBSP unchanged), and the library's pre-tokenization puts it in the original's class
    (whitespace, punctuation, word character). Then `lower()` + that one-to-one map + the
    library end to end is exact, and character positions do not move (UTF-8 byte offsets are
    converted to characters). Each new character is decided once, by the original's
    definitions and one probe through the library (`_check_plain_chars`).
  * "words": anything else (controls, CJK, combining marks, "İ", "Σ", private use, characters
    the library classifies differently, words over 200 characters). The original's output is a
    concatenation over whitespace words (cleaning and CJK spacing act on single characters, the
    rest on one whitespace word at a time), so each distinct raw word of the input is
    normalized once by an exact, offset-tracking port of the original's rules (`str.lower()` on
    the whole word for its final sigma, NFD with canonical reordering, Mn removal, CJK and
    punctuation splitting; character classes from `bert_tf.tokenization`), its new basic tokens
    go through the library in one call per batch, and the word's pieces, ids and relative
    offsets are cached. The split uses exactly the original's whitespace (Unicode Zs, \\t \\n \\r,
    U+2028/U+2029; the other `str.isspace()` characters are controls it deletes).

Why not a library's normalizer: both compiled candidates differ from the original. Measured on
every code point (see tests/test_fast_tokenization.py): Hugging Face `tokenizers`'
BertNormalizer + BertPreTokenizer deletes private-use (Co) and unassigned (Cn) characters, which
the original keeps (they make their word `[UNK]`), treats ~800 other characters differently
(Unicode version: new punctuation, Cf, Mn, CJK Extension ranges), lower-cases without the final
sigma rule ("ΟΔΟΣ" -> "οδοσ" instead of "οδος"), and `BertWordPieceTokenizer` matches literal
"[MASK]"/"[CLS]" text as special tokens; tensorflow-text's FastBertTokenizer counts the word
limit in bytes, and its BertTokenizer lower-cases by ICU case folding ("Straße" -> "strasse").
Normalizing with CPython's own Unicode database (the reference's) avoids all of them.

Offsets are character indices into the text as given (after decoding bytes as UTF-8 with errors
ignored, like `convert_to_unicode`), end exclusive. A piece covers the input characters it came
from: accents removed by lower-casing stay inside the span of their letter, characters deleted
by cleaning (controls, U+FFFD) are in no span, and an `[UNK]` covers its whole basic token.
Pieces made from one input character that normalizes to several (a Hangul syllable's jamo under
NFD) share that character's span. `encode_batch` returns them, and the ids, as int32 numpy
arrays (see `Encoding`), sliced from one array per batch.

Cost: TensorFlow is imported, and the library's WordPiece models built, on the first call that
needs them (ASCII-only input builds one of the three); the models are shared by all
FastTokenizers of the process with the same vocabulary. Until a tokenizer has been given
`library_after_chars` characters, every text takes the "words" route, its new basic tokens
through the original's own WordPiece (`bert_tf.tokenization.WordpieceTokenizer`) instead of the
library: importing tensorflow-text and building its models costs ~150 MB of memory and ~0.6 s,
more than they save on the few MB of text fine-tuning data usually is. Without tensorflow-text
it stays so (the same tokens; a warning says so once).
"""
import contextlib
import functools
import gc
import itertools
import operator
import re
import sys
import unicodedata
import warnings

import numpy

from bert_tf import tokenization
from bert_tf.errors import file_error

_chain = itertools.chain.from_iterable
_UNK = "[UNK]"
_MAX_CHARS_PER_WORD = 200  # the original's max_input_chars_per_word
# Characters of input a FastTokenizer takes word by word in Python before it uses the library.
# Measured (uncased, 2 cores): the library costs ~150 MB of RSS (tensorflow-text's import and its
# models) and ~0.6 s in a process that has TensorFlow already, then tokenizes fresh text ~1.5x
# faster than Python alone (bench/data/tokenization.py); it pays off after ~20 MB of text.
# Python alone: MRPC test (3,450 texts) in 0.05 s, SST-2 train (67,349) in 0.38 s.
LIBRARY_AFTER_CHARS = 20_000_000


@contextlib.contextmanager
def _gc_paused():
    """Pauses the cyclic garbage collector: a batch allocates millions of small acyclic objects
    (strings, lists, tuples), each allocation burst would trigger a full-heap scan that finds
    nothing, tripling the run time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Encoding:
    """One text's word pieces and where they are.

    tokens:  list of str, the word pieces (FullTokenizer.tokenize's output).
    ids:     int32 numpy array [len(tokens)], their vocabulary ids.
    offsets: int32 numpy array [len(tokens), 2], each piece's (start, end) character offsets
             into the text, end exclusive: `start, end = encoding.offsets[i]`.
    `.tolist()` turns either into Python ints; `tokens, ids, offsets = encoding` unpacks it.

    ids and offsets are views into one array per batch: a Python int per id and a tuple per
    offset would cost more than the tokenization itself.
    """
    __slots__ = ("tokens", "ids", "offsets")

    def __init__(self, tokens, ids, offsets):
        self.tokens = tokens
        self.ids = ids
        self.offsets = offsets

    def __iter__(self):
        return iter((self.tokens, self.ids, self.offsets))

    def __eq__(self, other):
        if not isinstance(other, Encoding):
            return NotImplemented
        return (self.tokens == other.tokens and numpy.array_equal(self.ids, other.ids)
                and numpy.array_equal(self.offsets, other.offsets))

    __hash__ = None

    def __repr__(self):
        return (f"Encoding(tokens={self.tokens!r}, ids={self.ids.tolist()!r}, "
                f"offsets={self.offsets.tolist()!r})")


def _build_whitespace_classes():
    """(whitespace the original splits on, other `str.isspace()` characters) as regex classes.

    The original maps space, \\t, \\n, \\r and Zs to " ", deletes controls, then splits with
    `str.split()`, which also splits on the remaining U+2028/U+2029. Every Zs character is
    `str.isspace()`, which is what `\\s` matches in a str pattern.
    """
    split_on, deleted = [], []
    # In blocks of code points: the string of all 1.1M at once is built from as many str
    # objects, ~100 MB at the import of this module.
    block = 1 << 16
    for start in range(0, sys.maxunicode + 1, block):
        code_points = range(start, min(start + block, sys.maxunicode + 1))
        for char in re.findall(r"\s", "".join(map(chr, code_points))):
            (deleted if tokenization._clean_char(char) is None else split_on).append(char)
    return "".join(map(re.escape, split_on)), "".join(map(re.escape, deleted))


_SPLIT_CHARS, _DELETED_SPACES = _build_whitespace_classes()
# A raw word: a maximal run of characters that are not whitespace for the original.
_RAW_WORD = re.compile("[^%s]+" % _SPLIT_CHARS)
# Texts with one of these cannot be split with str.split() (it would split where the original
# deletes the character and joins its neighbours).
_HAS_DELETED_SPACE = re.compile("[%s]" % _DELETED_SPACES)
_SURROGATE = re.compile("[\ud800-\udfff]")
# A run of more than 200 non-space characters (a possible over-long word).
_LONG_RUN = re.compile(r"\S{201}")
# ASCII characters the original deletes (\\t \\n \\r are whitespace, never inside a raw word).
_ASCII_DELETED = re.compile("[%s]" % "".join(
    re.escape(chr(cp)) for cp in range(128) if tokenization._clean_char(chr(cp)) is None))


def _raw_words(text):
    """The raw words of `text` (what the original's cleaning + str.split() keeps apart)."""
    if _HAS_DELETED_SPACE.search(text) is None:
        return text.split()
    return _RAW_WORD.findall(text)


def _raw_words_with_starts(text):
    """(raw words, start index of each word in `text`)."""
    if _HAS_DELETED_SPACE.search(text) is None:
        words = text.split()
        starts = []
        find = text.find
        position = 0
        for word in words:
            position = find(word, position)
            starts.append(position)
            position += len(word)
        return words, starts
    matches = list(_RAW_WORD.finditer(text))
    return [m.group() for m in matches], [m.start() for m in matches]


def _canonical_order(decomposed):
    """Canonical reordering (the last step of NFD) of [(char, origin)]: each run of characters
    with a non-zero combining class is sorted, stably, by combining class."""
    combining = unicodedata.combining
    i, n = 0, len(decomposed)
    while i < n:
        if not combining(decomposed[i][0]):
            i += 1
            continue
        j = i
        while j < n and combining(decomposed[j][0]):
            j += 1
        if j - i > 1:
            decomposed[i:j] = sorted(decomposed[i:j], key=lambda item: combining(item[0]))
        i = j
    return decomposed


# Lower-cased character -> its NFD without Mn characters, or None when its NFD has a combining
# character that is not Mn (it survives accent stripping, so canonical order matters).
_STRIPPED = {}


def _stripped(char):
    kept = _STRIPPED.get(char, False)
    if kept is False:
        decomposed = unicodedata.normalize("NFD", char)
        if any(unicodedata.combining(d) and unicodedata.category(d) != "Mn" for d in decomposed):
            kept = None
        else:
            kept = "".join(d for d in decomposed if unicodedata.category(d) != "Mn")
        _STRIPPED[char] = kept
    return kept


def _lower_strip_accents(text, origins):
    """The original's `_run_strip_accents(text.lower())`, with the origin of every character.

    `str.lower()` runs on the whole text for its context-dependent final sigma; every
    character's lower-case form has the same length in and out of context, so origins follow
    per character. NFD is per character plus canonical reordering, which only permutes runs of
    combining characters: when all of those are Mn (removed), per-character NFD is exact.
    """
    lowered = text.lower()
    if len(lowered) != len(text):  # a character with a longer lower-case form (U+0130 -> i̇)
        origins = [o for char, o in zip(text, origins) for _ in range(len(char.lower()))]
    chars, kept_origins = [], []
    for char, origin in zip(lowered, origins):
        kept = _stripped(char)
        if kept is None:
            break
        chars.append(kept)
        kept_origins.extend([origin] * len(kept))
    else:
        return "".join(chars), kept_origins
    decomposed = [(d, o) for char, o in zip(lowered, origins)
                  for d in unicodedata.normalize("NFD", char)]
    kept = [item for item in _canonical_order(decomposed) if unicodedata.category(item[0]) != "Mn"]
    return "".join(d for d, _ in kept), [o for _, o in kept]


def _normalize_word(word, do_lower_case):
    """The basic tokens of one raw word, each as (text, [origin index of each character]).

    The original's BasicTokenizer on a text without whitespace: delete controls, U+0000 and
    U+FFFD; a CJK ideograph is its own token; per remaining run, lower-case + NFD + drop Mn when
    `do_lower_case`; split every punctuation character out.
    """
    if tokenization._clean_and_space_cjk(word) == word:  # nothing deleted, no CJK
        segments = [(word, range(len(word)))]
    else:
        segments, text, origins = [], [], []
        for index, char in enumerate(word):
            cleaned = tokenization._clean_char(char)
            if cleaned is None:
                continue
            if cleaned != char:  # a CJK ideograph (" c "); whitespace never occurs in a word
                segments.append(("".join(text), origins))
                segments.append((char, [index]))
                text, origins = [], []
            else:
                text.append(char)
                origins.append(index)
        segments.append(("".join(text), origins))
    tokens = []
    is_punctuation = tokenization._is_punctuation
    for text, origins in segments:
        if do_lower_case and text:
            text, origins = _lower_strip_accents(text, origins)
        start = 0
        for i, char in enumerate(text):
            if is_punctuation(char):
                if start < i:
                    tokens.append((text[start:i], origins[start:i]))
                tokens.append((char, origins[i:i + 1]))
                start = i + 1
        if start < len(text):
            tokens.append((text[start:], origins[start:]))
    return tokens


class FastTokenizer:
    """Batch WordPiece tokenizer with `FullTokenizer`'s exact output and character offsets.

    Args:
      vocab_file: one token per line, read by `bert_tf.tokenization.load_vocab` (same ids).
      do_lower_case: lower-case and strip accents (uncased models).
      cache_size: how many distinct raw words (and basic tokens) to remember; the caches are
        emptied when full, which bounds memory on corpora with huge vocabularies.
      library_after_chars: characters of input tokenized in Python alone (the "words" route)
        before the library is used (module docstring, Cost); 0: from the first call. The
        output is the same either way.
    """

    def __init__(self, vocab_file, do_lower_case=True, cache_size=1 << 20,
                 library_after_chars=LIBRARY_AFTER_CHARS):
        self.vocab = tokenization.load_vocab(vocab_file)
        self.inv_vocab = {v: k for k, v in self.vocab.items()}
        if _UNK not in self.vocab:
            raise file_error(vocab_file, f"the vocabulary has no {_UNK} token")
        self.do_lower_case = do_lower_case
        self.cache_size = cache_size
        self._unk_id = self.vocab[_UNK]
        size = max(self.inv_vocab) + 1
        tokens = [self.inv_vocab.get(i) for i in range(size)]
        self._token_array = numpy.array(tokens, dtype=object)
        # The library's vocabulary: its ids are list positions, so unused ids get strings no
        # word can contain (they have spaces, and "[" is punctuation).
        self._library_vocab = tuple(t if t else f"[bert_tf unused id {i}]"
                                    for i, t in enumerate(tokens))
        self._libraries = {}  # built on first use by `_library`
        self._chars_before_library = library_after_chars  # counts down in `_run`
        self._wordpiece = tokenization.WordpieceTokenizer(self.vocab, unk_token=_UNK)
        # Characters a text may consist of to go to the library end to end (ASCII ones, plus
        # others once checked by `_check_plain_chars`), and characters found not to.
        ascii_chars = [chr(cp) for cp in range(128)]
        self._plain_chars = {c for c in ascii_chars if tokenization._clean_char(c) in (c, " ")}
        self._other_chars = set()
        self._plain_table = {}  # lower-cased plain character -> its NFD without Mn (one char)
        self._plain_mapped, self._plain_mapped_size = None, 0  # regex matching its keys
        # Word caches. Raw word -> its pieces; -> (ids, begins, ends) relative to the word
        # (filled by encode_batch). Basic token -> its pieces, their ids, their (begin, end).
        self._tokens, self._ids_offsets = {}, {}
        self._piece_tokens, self._piece_ids, self._piece_offsets = {}, {}, {}

    # ---- public API -----------------------------------------------------------------------

    def tokenize(self, text):
        """The word pieces of `text` (str, or UTF-8 bytes), identical to FullTokenizer.tokenize."""
        return self.tokenize_batch([text])[0]

    def tokenize_batch(self, texts):
        """`tokenize` for each text of a list."""
        return self._run(texts, with_offsets=False)

    def encode(self, text):
        """The `Encoding` (tokens, ids, offsets) of one text."""
        return self.encode_batch([text])[0]

    def encode_batch(self, texts):
        """For each text, an `Encoding`: tokens, ids (int32 array) and (start, end) character
        offsets (int32 array [pieces, 2])."""
        return self._run(texts, with_offsets=True)

    def convert_tokens_to_ids(self, tokens):
        return tokenization.convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids):
        return tokenization.convert_by_vocab(self.inv_vocab, ids)

    # ---- routing ----------------------------------------------------------------------------

    def _run(self, texts, with_offsets):
        texts = [tokenization.convert_to_unicode(t) for t in texts]
        with _gc_paused():
            routes = self._route(texts)
            results = [None] * len(texts)
            for route, indices in routes.items():
                if indices:
                    chunk = [texts[i] for i in indices]
                    if route == "words":
                        outputs = self._words_route(chunk, with_offsets)
                    else:
                        outputs = self._plain_route(chunk, route, with_offsets)
                    for i, output in zip(indices, outputs):
                        results[i] = output
        # Counted once the call is done, so that all of it went one way (`_python_alone`).
        if self._chars_before_library > 0:
            self._chars_before_library -= sum(map(len, texts))
        return results

    def _python_alone(self):
        """Whether this call goes word by word through the original's WordPiece in Python, with
        no library (module docstring, Cost): until the tokenizer has had `library_after_chars`
        characters, and for good without tensorflow-text."""
        return self._chars_before_library > 0 or not _library_importable()

    def _route(self, texts):
        """Indices of texts for each route: "ascii" and "unicode" (the library end to end) or
        "words" (the word cache); all to "words" in Python alone (`_python_alone`)."""
        routes = {"ascii": [], "unicode": [], "words": []}
        if self._python_alone():
            routes["words"] = list(range(len(texts)))
            return routes
        plain = self._plain_chars
        other = []  # non-ASCII texts
        for i, text in enumerate(texts):
            if text.isascii():
                # (printable ASCII has nothing to delete; isprintable() is the cheaper test)
                plain_ascii = text.isprintable() or _ASCII_DELETED.search(text) is None
                routes["ascii" if plain_ascii else "words"].append(i)
            else:
                other.append(i)
        # New characters of the whole batch are checked together (one probe call).
        unknown = [texts[i] for i in other if not plain.issuperset(texts[i])]
        if unknown:
            new = set().union(*unknown).difference(plain, self._other_chars)
            if new:
                self._check_plain_chars(new)
        for i in other:
            text = texts[i]
            route = ("unicode" if plain.issuperset(text) and _LONG_RUN.search(text) is None
                     else "words")
            routes[route].append(i)
        return routes

    def _check_plain_chars(self, chars):
        """Decides for new characters whether texts with them can go to the library end to end.

        A character qualifies if the original normalizes it to exactly one character in any
        context (not deleted, not CJK; with `do_lower_case`, lower() then NFD without Mn give
        one character, which `_plain_table` maps it to; not the context-dependent "Σ"), and the
        library's pre-tokenization puts that character in the original's class: whitespace,
        punctuation (split out) or word character. The library classifies each character on its
        own, so one probe "a<char>b" per character decides it.
        """
        candidates = []
        other_chars, plain_table = self._other_chars, self._plain_table
        do_lower_case = self.do_lower_case
        category, decomposition = unicodedata.category, unicodedata.decomposition
        combining, clean_char = unicodedata.combining, tokenization._clean_char
        for char in chars:
            cp = ord(char)
            kind = category(char)
            if kind == "Cs" or clean_char(char) not in (char, " "):
                other_chars.add(char)  # deleted, a CJK ideograph (" c "), or a lone surrogate
                continue
            normalized = char
            if do_lower_case:
                lowered = char.lower()
                if len(lowered) != 1 or char == "\u03a3":  # "Σ": depends on the context
                    other_chars.add(char)
                    continue
                if (lowered != char or kind == "Mn" or combining(char) or decomposition(char)
                        or 0xAC00 <= cp <= 0xD7A3):  # (Hangul: no listed decomposition)
                    normalized = _stripped(lowered)
                    if normalized is None or len(normalized) != 1:
                        other_chars.add(char)
                        continue
                    if normalized != lowered:
                        plain_table[ord(lowered)] = normalized
                # else NFD(char) is char, not a combining character: unchanged
            is_space = kind == "Zs" or char.isspace()  # (\t \n \r too)
            candidates.append((char, normalized, is_space))
        if len(self._plain_table) != self._plain_mapped_size:
            self._plain_mapped = re.compile(
                "[%s]" % "".join(re.escape(chr(cp)) for cp in self._plain_table))
            self._plain_mapped_size = len(self._plain_table)
        if not candidates:
            return
        probes = ["a%sb" % normalized for _, normalized, _ in candidates]
        actual = self._library("unicode").tokenize(probes).to_list()
        as_one_word = self._library("token").tokenize(probes).to_list()
        vocab, unk_id = self.vocab, self._unk_id
        a, b = vocab.get("a", unk_id), vocab.get("b", unk_id)
        for (char, normalized, is_space), ids, word_ids in zip(candidates, actual, as_one_word):
            if is_space:
                expected = [a, b]
            elif tokenization._is_punctuation(normalized):
                expected = [a, vocab.get(normalized, unk_id), b]
            else:
                expected = word_ids
            (self._plain_chars if ids == expected else self._other_chars).add(char)

    def _plain_replacement(self, match):
        return self._plain_table[ord(match.group())]

    # ---- the library end to end ---------------------------------------------------------------

    # tensorflow-text FastWordpieceTokenizers over this vocabulary, ids = our ids: name ->
    # (max_bytes_per_word, no_pretokenization).
    #   "ascii": with the library's pre-tokenization; its word limit is in bytes, which in ASCII
    #     are characters.
    #   "unicode": the same with a limit no word of at most 200 characters reaches (texts with
    #     longer runs go the word route).
    #   "token": on single basic tokens (no pre-tokenization), which the word route checks
    #     against the limit.
    _LIBRARY_SETTINGS = {"ascii": (_MAX_CHARS_PER_WORD, False),
                         "unicode": (4 * _MAX_CHARS_PER_WORD + 4, False),
                         "token": (4 * _MAX_CHARS_PER_WORD + 4, True)}

    def _library(self, name):
        """The library tokenizer `name` of `_LIBRARY_SETTINGS`, built on first use (ASCII-only
        input never needs the other two) and shared by every FastTokenizer of the process with
        the same vocabulary."""
        library = self._libraries.get(name)
        if library is None:
            library = _build_library(self._library_vocab, *self._LIBRARY_SETTINGS[name])
            self._libraries[name] = library
        return library

    def _plain_route(self, texts, route, with_offsets):
        """Texts of plain characters: for them the original is lower() and a one-to-one
        character map (accent stripping), then what the library does end to end: split on
        whitespace and punctuation, WordPiece with the 200-character limit. Character positions
        are unchanged, so the library's offsets are offsets into the text."""
        if self.do_lower_case:
            texts = [t.lower() for t in texts]
            if route == "unicode" and self._plain_table:
                # (re.sub visits only the few mapped characters; str.translate visits all)
                mapped, replace = self._plain_mapped, self._plain_replacement
                texts = [mapped.sub(replace, t) for t in texts]
        tokenizer = self._library(route)
        if not with_offsets:
            ragged = tokenizer.tokenize(texts)
            tokens = self._token_array[ragged.flat_values.numpy()].tolist()
            bounds = ragged.row_splits.numpy().tolist()
            return [tokens[begin:end] for begin, end in zip(bounds, bounds[1:])]
        ragged, begins, ends = tokenizer.tokenize_with_offsets(texts)
        ids = ragged.flat_values.numpy()
        tokens = self._token_array[ids].tolist()
        ids = ids.astype(numpy.int32)
        bounds = ragged.row_splits.numpy()
        offsets = numpy.empty([len(tokens), 2], numpy.int32)
        offsets[:, 0] = begins.flat_values.numpy()
        offsets[:, 1] = ends.flat_values.numpy()
        if route == "unicode":  # UTF-8 byte offsets -> character offsets
            _bytes_to_chars(texts, bounds, offsets)
        return _encodings(tokens, ids, offsets, bounds.tolist())

    # ---- the word route -------------------------------------------------------------------------

    def _words_route(self, texts, with_offsets):
        """Any text: split into raw words, each tokenized once (exactly) and cached."""
        if not with_offsets:
            word_lists = [_raw_words(t) for t in texts]
            self._add_words(word_lists, with_offsets=False)
            get = self._tokens.__getitem__
            return [list(_chain(map(get, words))) for words in word_lists]
        split = [_raw_words_with_starts(t) for t in texts]
        self._add_words([words for words, _ in split], with_offsets=True)
        # The batch's raw words, flat; each word's cached (ids, begins, ends) relative to it.
        words = list(_chain(words for words, _ in split))
        entries = list(map(self._ids_offsets.__getitem__, words))
        first, second, third = (operator.itemgetter(k) for k in range(3))
        tokens = list(_chain(map(self._tokens.__getitem__, words)))
        ids = numpy.fromiter(_chain(map(first, entries)), numpy.int32, len(tokens))
        pieces_per_word = numpy.fromiter(map(len, map(first, entries)), numpy.int64, len(words))
        # Absolute offsets: each word's start, repeated once per piece, plus the piece's offsets
        # relative to the word.
        word_starts = numpy.repeat(
            numpy.fromiter(_chain(starts for _, starts in split), numpy.int64, len(words)),
            pieces_per_word)
        offsets = numpy.empty([len(ids), 2], numpy.int32)
        offsets[:, 0] = numpy.fromiter(_chain(map(second, entries)), numpy.int64, len(ids))
        offsets[:, 1] = numpy.fromiter(_chain(map(third, entries)), numpy.int64, len(ids))
        offsets += word_starts[:, None].astype(numpy.int32)
        words_per_text = [len(w) for w, _ in split]
        word_bounds = numpy.concatenate([[0], numpy.cumsum(words_per_text)]).astype(numpy.int64)
        piece_bounds = numpy.concatenate([[0], numpy.cumsum(pieces_per_word)])[word_bounds]
        return _encodings(tokens, ids, offsets, piece_bounds.tolist())

    def _add_words(self, word_lists, with_offsets):
        """Tokenizes and caches every raw word of `word_lists` not cached yet: its pieces, and
        with `with_offsets` also their ids and offsets relative to the word."""
        cache = self._ids_offsets if with_offsets else self._tokens
        missing = set().union(*word_lists).difference(cache)
        if not missing:
            return
        if len(self._tokens) + len(missing) > self.cache_size:
            for table in (self._tokens, self._ids_offsets, self._piece_tokens,
                          self._piece_ids, self._piece_offsets):
                table.clear()
            missing = set().union(*word_lists)
        if with_offsets:
            basic = [(word, self._basic_tokens_with_origins(word)) for word in missing]
            self._add_pieces({text for _, tokens in basic for text, _ in tokens})
            piece_ids, piece_offsets = self._piece_ids, self._piece_offsets
            get_tokens = self._piece_tokens.__getitem__
            for word, tokens in basic:
                ids, begins, ends = [], [], []
                for text, origin in tokens:
                    ids.extend(piece_ids[text])
                    for begin, end in piece_offsets[text]:
                        begins.append(origin(begin))
                        ends.append(origin(end - 1) + 1)
                self._tokens[word] = tuple(_chain(map(get_tokens, [text for text, _ in tokens])))
                self._ids_offsets[word] = (tuple(ids), tuple(begins), tuple(ends))
        else:
            basic = [(word, self._basic_tokens(word)) for word in missing]
            self._add_pieces({text for _, texts in basic for text in texts})
            get = self._piece_tokens.__getitem__
            tokens = self._tokens
            for word, texts in basic:
                tokens[word] = get(texts[0]) if len(texts) == 1 else tuple(_chain(map(get, texts)))

    def _basic_tokens(self, word):
        """The original's basic tokens of one raw word (strings)."""
        if word.isascii():
            text = word.lower() if self.do_lower_case else word
            if text.isalnum():  # letters and digits only: one basic token
                return [text]
            if _ASCII_DELETED.search(word) is None:  # lower() kept every position
                return tokenization._ASCII_PUNC_SPLIT.findall(text)
        return [text for text, _ in _normalize_word(word, self.do_lower_case)]

    def _basic_tokens_with_origins(self, word):
        """The basic tokens of one raw word as (text, origin): `origin(i)` is the index in the
        word of the character that character i of `text` came from."""
        if word.isascii() and _ASCII_DELETED.search(word) is None:
            text = word.lower() if self.do_lower_case else word
            return [(m.group(), m.start().__add__)
                    for m in tokenization._ASCII_PUNC_SPLIT.finditer(text)]
        return [(text, origins.__getitem__)
                for text, origins in _normalize_word(word, self.do_lower_case)]

    def _add_pieces(self, texts):
        """Caches the word pieces, ids and offsets (within the token) of new basic tokens."""
        texts = [text for text in texts if text not in self._piece_tokens]
        if not texts:
            return
        vocab, unk_id = self.vocab, self._unk_id
        piece_ids = {}
        library = []
        for text in texts:
            if len(text) > _MAX_CHARS_PER_WORD:
                piece_ids[text] = (unk_id,)
            elif text in vocab:  # a whole-token match needs no search
                piece_ids[text] = (vocab[text],)
            elif _SURROGATE.search(text):  # not UTF-8, so in no vocabulary entry either
                piece_ids[text] = (unk_id,)
            else:
                library.append(text)
        if library and self._python_alone():
            tokenize_word = self._wordpiece.tokenize_word  # the original's WordPiece itself
            for text in library:
                piece_ids[text] = tuple(vocab[token] for token in tokenize_word(text))
        elif library:
            ragged = self._library("token").tokenize(library)
            flat = ragged.flat_values.numpy().tolist()
            bounds = ragged.row_splits.numpy().tolist()
            for text, begin, end in zip(library, bounds, bounds[1:]):
                piece_ids[text] = tuple(flat[begin:end])
        inv_vocab = self.inv_vocab
        for text, ids in piece_ids.items():
            if len(ids) == 1:
                tokens, offsets = (inv_vocab[ids[0]],), ((0, len(text)),)  # also [UNK]
            else:  # consecutive substrings of `text`; "##" adds 2 characters after the first
                tokens = tuple([inv_vocab[i] for i in ids])
                offsets, position = [], 0
                for k, token in enumerate(tokens):
                    width = len(token) - (2 if k else 0)
                    offsets.append((position, position + width))
                    position += width
                offsets = tuple(offsets)
            self._piece_tokens[text] = tokens
            self._piece_ids[text] = ids
            self._piece_offsets[text] = offsets


@functools.lru_cache(maxsize=1)
def _library_importable():
    """Whether tensorflow-text imports. Without it (the tpu extra leaves it out: it requires the
    tensorflow wheel) FastTokenizers stay in Python alone: the same tokens, slower on large
    inputs (LIBRARY_AFTER_CHARS); said once per process."""
    # Imported here, not at the top: constructing a FastTokenizer needs no TensorFlow (module
    # docstring, Cost), and tensorflow-text takes seconds and ~100 MB to import.
    try:
        import tensorflow_text  # noqa: F401
    except ImportError as e:
        import tensorflow as tf
        warnings.warn(
            f"FastTokenizer: tensorflow-text is not installed ({e}), so WordPiece runs in "
            f"Python (the same tokens, ~1.5x slower on large inputs). To install it: pip "
            f"install 'tensorflow-text=={tf.__version__.rsplit('.', 1)[0]}.*' (beside "
            f"tensorflow-tpu: with --no-deps)")
        return False
    return True


@functools.lru_cache(maxsize=8)
def _build_library(tokens, max_bytes_per_word, no_pretokenization):
    """A tensorflow-text FastWordpieceTokenizer whose ids are positions in `tokens` (a tuple)."""
    import tensorflow as tf
    import tensorflow_text

    return tensorflow_text.FastWordpieceTokenizer(
        vocab=list(tokens), suffix_indicator="##", unknown_token=_UNK,
        max_bytes_per_word=max_bytes_per_word, token_out_type=tf.int64,
        no_pretokenization=no_pretokenization, support_detokenization=False)


def _encodings(tokens, ids, offsets, bounds):
    """One Encoding per row of flat tokens, ids and offsets; row i is bounds[i]:bounds[i + 1]."""
    return [Encoding(tokens[begin:end], ids[begin:end], offsets[begin:end])
            for begin, end in zip(bounds, bounds[1:])]


def _bytes_to_chars(texts, bounds, offsets):
    """Converts, in place, the UTF-8 byte offsets [N, 2] of the pieces of `texts` (text i has
    rows bounds[i]:bounds[i + 1]) into character offsets, for the whole batch at once."""
    if not len(offsets):
        return
    lengths = numpy.fromiter(map(len, texts), numpy.int64, len(texts))
    codes = numpy.frombuffer("".join(texts).encode("utf-32-le"), dtype=numpy.uint32)
    widths = 1 + (codes >= 0x80) + (codes >= 0x800) + (codes >= 0x10000)
    # char_at[b] = (batch-wide) index of the character containing byte b of the joined texts.
    char_at = numpy.repeat(numpy.arange(len(codes), dtype=numpy.int64), widths)
    char_start = numpy.concatenate([[0], numpy.cumsum(lengths)[:-1]])
    byte_start = numpy.concatenate([[0], numpy.cumsum(widths)])[char_start]
    row = numpy.repeat(numpy.arange(len(texts)), numpy.diff(bounds))
    byte_base, char_base = byte_start[row], char_start[row]
    offsets[:, 0] = char_at[offsets[:, 0] + byte_base] - char_base
    offsets[:, 1] = char_at[offsets[:, 1] - 1 + byte_base] + 1 - char_base
