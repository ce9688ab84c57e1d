"""The original's BasicTokenizer on one raw word at a time, with the origin of every character.

A text's word pieces are a concatenation over its raw words (what the original's cleaning and
`str.split()` keep apart: `raw_words`), so a raw word can be tokenized once and cached.
`normalize_word` is an exact, offset-tracking port of the original's rules on one word:
cleaning, CJK spacing, `str.lower()` on the whole word (for its final sigma), NFD with
canonical reordering, Mn removal and punctuation splitting; each basic token comes with the index
in the word of the character each of its characters came from. The character classes are
`bert_tf.tokenization`'s; the patterns here say which texts the faster paths may take.
"""
import re
import sys
import unicodedata

from bert_tf import tokenization

UNK = "[UNK]"
MAX_CHARS_PER_WORD = tokenization.MAX_INPUT_CHARS_PER_WORD


def _build_whitespace_classes():
    """(whitespace the original splits on, other `str.isspace()` characters) as regex classes.

    The original maps space, \\t, \\n, \\r and Zs to " ", deletes controls, then splits with
    `str.split()`, which also splits on the remaining U+2028/U+2029. Every Zs character is
    `str.isspace()`, which is what `\\s` matches in a str pattern.
    """
    split_on, deleted = [], []
    # In blocks of code points: the string of all 1.1M at once is built from as many str
    # objects, a large peak of memory at the import of this module.
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
SURROGATE = re.compile("[\ud800-\udfff]")
# A run of more than 200 non-space characters (a possible over-long word).
LONG_RUN = re.compile(r"\S{201}")
# ASCII characters the original deletes (\\t \\n \\r are whitespace, never inside a raw word).
ASCII_DELETED = re.compile("[%s]" % "".join(
    re.escape(chr(cp)) for cp in range(128) if tokenization._clean_char(chr(cp)) is None))


def raw_words(text):
    """The raw words of `text` (what the original's cleaning + str.split() keeps apart)."""
    if _HAS_DELETED_SPACE.search(text) is None:
        return text.split()
    return _RAW_WORD.findall(text)


def raw_words_with_starts(text):
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


def stripped(char):
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
        kept = stripped(char)
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


def normalize_word(word, do_lower_case):
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
