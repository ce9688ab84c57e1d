"""The library route of `FastTokenizer`: tensorflow-text's compiled WordPiece end to end.

For "plain" texts the original's output is the library's own pre-tokenization and WordPiece:
  * "ascii": ASCII text without control characters: `str.lower()`, a split on whitespace and on
    every non-alphanumeric character, and WordPiece with words over 200 characters as `[UNK]`
    (the library's byte limit is a character limit in ASCII). Offsets are the library's.
  * "unicode": text whose other characters the original normalizes each to exactly one
    character whatever its context, and which the library's pre-tokenization puts in the
    original's class (whitespace, punctuation, word character): `lower()` + that one-to-one map
    + the library end to end. UTF-8 byte offsets are converted to characters.
Each new character is decided once, by the original's definitions and one probe through the
library (`LibraryRoute._check_plain_chars`). The library's tokenizers are built on first use and
shared by every tokenizer of the process with the same vocabulary; tensorflow-text is imported
only then, and its absence is said once (`library_importable`).
"""
import functools
import re
import unicodedata
import warnings

import numpy

from bert_tf import tokenization
from bert_tf.text.encoding import encodings
from bert_tf.text.word_normalization import (ASCII_DELETED, LONG_RUN, MAX_CHARS_PER_WORD, UNK,
                                             stripped)


class LibraryRoute:
    """The "ascii" and "unicode" routes of a `FastTokenizer` over `vocab` (token -> id);
    `tokens`: the token of each id, None for unused ids."""

    def __init__(self, vocab, tokens, do_lower_case):
        self.vocab = vocab
        self.do_lower_case = do_lower_case
        self._unk_id = vocab[UNK]
        self._token_array = numpy.array(tokens, dtype=object)
        # The library's vocabulary: its ids are list positions, so unused ids get strings no
        # word can contain (they have spaces, and "[" is punctuation).
        self._library_vocab = tuple(t if t else f"[bert_tf unused id {i}]"
                                    for i, t in enumerate(tokens))
        self._libraries = {}  # built on first use by `library`
        # Characters a text may consist of to go to the library end to end (ASCII ones, plus
        # others once checked by `_check_plain_chars`), and characters found not to.
        ascii_chars = [chr(cp) for cp in range(128)]
        self._plain_chars = {c for c in ascii_chars if tokenization._clean_char(c) in (c, " ")}
        self._other_chars = set()
        self._plain_table = {}  # lower-cased plain character -> its NFD without Mn (one char)
        self._plain_mapped, self._plain_mapped_size = None, 0  # regex matching its keys

    # tensorflow-text FastWordpieceTokenizers over this vocabulary, ids = our ids: name ->
    # (max_bytes_per_word, no_pretokenization).
    #   "ascii": with the library's pre-tokenization; its word limit is in bytes, which in ASCII
    #     are characters.
    #   "unicode": the same with a limit no word of at most 200 characters reaches (texts with
    #     longer runs go the word route).
    #   "token": on single basic tokens (no pre-tokenization), which the word route checks
    #     against the limit.
    _LIBRARY_SETTINGS = {"ascii": (MAX_CHARS_PER_WORD, False),
                         "unicode": (4 * MAX_CHARS_PER_WORD + 4, False),
                         "token": (4 * MAX_CHARS_PER_WORD + 4, True)}

    def library(self, name):
        """The library tokenizer `name` of `_LIBRARY_SETTINGS`, built on first use (ASCII-only
        input never needs the other two) and shared by every FastTokenizer of the process with
        the same vocabulary."""
        library = self._libraries.get(name)
        if library is None:
            library = _build_library(self._library_vocab, *self._LIBRARY_SETTINGS[name])
            self._libraries[name] = library
        return library

    def route(self, texts):
        """Indices of texts for each route: "ascii" and "unicode" (the library end to end) or
        "words" (the rest: `bert_tf.text.word_route`)."""
        routes = {"ascii": [], "unicode": [], "words": []}
        plain = self._plain_chars
        other = []  # non-ASCII texts
        for i, text in enumerate(texts):
            if text.isascii():
                # (printable ASCII has nothing to delete; isprintable() is the cheaper test)
                plain_ascii = text.isprintable() or ASCII_DELETED.search(text) is None
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
            route = ("unicode" if plain.issuperset(text) and LONG_RUN.search(text) is None
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
                    normalized = stripped(lowered)
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
        actual = self.library("unicode").tokenize(probes).to_list()
        as_one_word = self.library("token").tokenize(probes).to_list()
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

    def tokenize(self, texts, route, with_offsets):
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
        tokenizer = self.library(route)
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
        return encodings(tokens, ids, offsets, bounds.tolist())


@functools.lru_cache(maxsize=1)
def library_importable():
    """Whether tensorflow-text imports. Without it (the tpu extra leaves it out: it requires the
    tensorflow wheel) FastTokenizers stay in Python alone: the same tokens, slower on large
    inputs (fast_tokenization.LIBRARY_AFTER_CHARS); said once per process."""
    # Imported here, not at the top: constructing a FastTokenizer needs no TensorFlow
    # (fast_tokenization's docstring, Cost), and tensorflow-text takes seconds and memory to
    # import (docs/tokenization.md, Cost).
    try:
        import tensorflow_text  # noqa: F401
    except ImportError as e:
        import tensorflow as tf
        warnings.warn(
            f"FastTokenizer: tensorflow-text is not installed ({e}), so WordPiece runs in "
            f"Python (the same tokens, slower on large inputs: docs/tokenization.md). To "
            f"install it: pip install "
            f"'tensorflow-text=={tf.__version__.rsplit('.', 1)[0]}.*' (beside tensorflow-tpu: "
            f"with --no-deps)")
        return False
    return True


@functools.lru_cache(maxsize=8)
def _build_library(tokens, max_bytes_per_word, no_pretokenization):
    """A tensorflow-text FastWordpieceTokenizer whose ids are positions in `tokens` (a tuple)."""
    import tensorflow as tf
    import tensorflow_text

    return tensorflow_text.FastWordpieceTokenizer(
        vocab=list(tokens), suffix_indicator="##", unknown_token=UNK,
        max_bytes_per_word=max_bytes_per_word, token_out_type=tf.int64,
        no_pretokenization=no_pretokenization, support_detokenization=False)


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
