"""In-graph WordPiece tokenization: tf.string in, ids out, with the original FullTokenizer's output.

`GraphTokenizer(vocab_file, do_lower_case)` is a `tf.Module` whose `tokenize` maps a [B]
tf.string tensor to a [B, (pieces)] RaggedTensor of int32 ids (`word_pieces`: per whitespace
word, [B, (words), (pieces)]; `token_pieces`: per basic token, [B, (tokens), (pieces)];
`id_to_token`: ids back to strings), and whose `bert_inputs` builds
the model's inputs (`[CLS] a [SEP] (b [SEP])`, segment ids, mask, padded or truncated to
`max_seq_length`, pairs truncated like the original's `_truncate_seq_pair`). Both are plain
TensorFlow graph code made of core TensorFlow ops only, with no Python control flow on tensors
(traced without AutoGraph): they run eagerly, inside `tf.function`, in `tf.data` pipelines and
in a SavedModel that stock TensorFlow (and TensorFlow Serving, and `saved_model_cli run`) loads
without tensorflow-text or any other custom op library.

How the original's pipeline is expressed with graph ops. Its normalization acts on single
characters (cleaning, CJK spacing, lower-casing, NFD + dropping Mn, punctuation splitting), so
it is a table built in Python from CPython's `unicodedata` (the reference's Unicode database,
through `bert_tf.tokenization`'s definitions) at construction:
  1. `tf.strings.unicode_decode` the text into code points (invalid UTF-8 bytes are dropped, as
     the original's `decode("utf-8", "ignore")` does);
  2. every code point whose replacement is not itself is looked up in a `tf.lookup` hash table
     of replacement strings: "" for deleted characters (controls, U+0000, U+FFFD), " " for
     whitespace, the lower-cased accent-stripped form with every punctuation character
     surrounded by spaces; CJK ideographs (range tests) get spaces around them;
  3. `tf.strings.reduce_join` the replacements and `tf.strings.split` on spaces: the basic tokens;
  4. WordPiece, vectorized over the batch's words (a flat [W] tf.string tensor), as the
     original's greedy longest-match-first: a word of more than 200 characters is [UNK]; a word
     that is a vocabulary entry is its own piece (one hash lookup for all words); the others
     enter a `tf.while_loop` that takes one piece of every unfinished word per iteration:
     every candidate `word[start:start + k]` ("##" + it after the first piece) for
     k = 1 .. min(remaining characters, longest entry it could match: 18 / 10 characters for
     the uncased vocabulary's first / "##" pieces) is cut with `tf.strings.substr(unit=
     "UTF8_CHAR")` (a ragged batch of candidates, so short words make few) and looked up; the
     longest match wins (one segment max over length * 2**32 + id); a word with no match is
     one [UNK] as a whole, dropping the pieces it already had. The loop runs until every word
     is done (as many iterations as the most-split word has pieces, up to 200), and the pieces
     are scattered into word order at the end.

The vocabulary is a `tf.lookup.StaticHashTable` piece -> id. When every line of the file is its
token as is (not empty, no surrounding whitespace, no duplicate: any real BERT vocabulary), the
table reads the file itself (`TextFileInitializer`): a SavedModel then holds the file in its
`assets/` directory and loads without the original path. Otherwise (lines that
`load_vocab` strips, empty or duplicated lines, which TensorFlow's file initializer reads
differently or rejects) the pairs are stored as constants in the SavedModel.

Known residual differences from the original (none occurs in ../shared/data; the tests check
both this and the differences themselves):
  * Greek capital sigma is always lower-cased to "σ": the original applies `str.lower()` to a
    whole word, which gives the final form "ς" at the end of a word ("ΟΔΟΣ" -> "οδος");
  * canonical reordering of NFD is not applied: it matters only when a word has two or more
    combining characters that are not Mn (they survive accent stripping) in non-canonical order.

TensorFlow ops needed (all core, the tests check every op of a saved graph against the
registry of a process where tensorflow_text cannot be imported): UnicodeDecode, UnicodeEncode,
HashTableV2/LookupTableFindV2/InitializeTableFromTextFileV2 (or LookupTableImportV2),
StringJoin, ReduceJoin, StringSplitV2, StringLength, Substr, While, TensorList*,
UnsortedSegmentMax/Sum, ScatterNd, RaggedRange, RaggedGather, ...

Speed: close to the same tokenizer with tensorflow-text's FastWordpieceTokenizer custom op in
the WordPiece step, with identical ids, since normalization and basic tokenization take most of
the time (docs/tokenization.md; `python -m bench.data.tokenization` times GraphTokenizer).
"""
import functools
import sys
import unicodedata

import tensorflow as tf

from bert_tf import tokenization
from bert_tf.errors import file_error
from bert_tf.text import packing

_UNK, _CLS, _SEP = "[UNK]", "[CLS]", "[SEP]"
_MAX_CHARS_PER_WORD = 200  # the original's max_input_chars_per_word
# The original's CJK blocks (tokenization._is_chinese_char), as inclusive code point ranges.
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _normalize_char(char, do_lower_case):
    """What the original's BasicTokenizer turns one character into, as text to be split on
    spaces: "" (deleted), " " (whitespace), " c " (CJK), or the normalized character(s) with
    every punctuation character surrounded by spaces."""
    cleaned = tokenization._clean_char(char)
    if cleaned is None or cleaned == " " or char.isspace():
        return "" if cleaned is None else " "
    if do_lower_case:  # lower() then NFD without Mn (per character; see the module docstring)
        decomposed = unicodedata.normalize("NFD", char.lower())
        char = "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
    if len(cleaned) == 3:  # a CJK ideograph
        return " " + char + " "
    return "".join(" " + c + " " if tokenization._is_punctuation(c) else c for c in char)


@functools.lru_cache(maxsize=2)
def replacement_table(do_lower_case):
    """{code point: replacement} for every character that `_normalize_char` changes, except the
    CJK ideographs that only get spaces around them (range tests do that in the graph). Computed
    once per process and case (a pass over every code point); do not modify it."""
    table = {}
    for cp in range(sys.maxunicode + 1):
        char = chr(cp)
        if unicodedata.category(char) in ("Cn", "Co", "Cs"):
            continue  # unassigned, private use, surrogates: never changed
        replacement = _normalize_char(char, do_lower_case)
        if replacement != char and not (_is_cjk(cp) and replacement == " " + char + " "):
            table[cp] = replacement
    return table


class _VocabFileInitializer(tf.lookup.TextFileInitializer):
    """A TextFileInitializer whose table is named like a constant-initialized one ("hash_table_"
    + a uuid) instead of after the file's absolute path, which would end up in a SavedModel's
    graph. (An anonymous table would avoid the name too, but TF1 session loaders such as
    `saved_model_cli run` do not initialize those.)"""

    @property
    def _shared_name(self):
        return None


def _vocab_table(vocab_file, vocab):
    """A StaticHashTable piece -> int64 id (-1: not in the vocabulary). When every line of the
    file is its token as is (stripped, not empty, no duplicate: any real BERT vocabulary),
    TensorFlow reads the file itself (TextFileInitializer) and a SavedModel holds it as an
    asset; otherwise (load_vocab's stripping or duplicates matter) the pairs are constants."""
    with tf.io.gfile.GFile(vocab_file, "rb") as f:
        lines = f.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) == len(vocab) and all(
            line and line.decode("utf-8") == line.decode("utf-8").strip() for line in lines):
        initializer = _VocabFileInitializer(
            str(vocab_file), tf.string, tf.lookup.TextFileIndex.WHOLE_LINE,
            tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER)
    else:
        initializer = tf.lookup.KeyValueTensorInitializer(
            tf.constant(list(vocab), tf.string), tf.constant(list(vocab.values()), tf.int64))
    return tf.lookup.StaticHashTable(initializer, default_value=-1)


def _is_cjk(cp):
    return any(low <= cp <= high for low, high in _CJK_RANGES)


class GraphTokenizer(tf.Module):
    """The original FullTokenizer as TensorFlow graph ops (see the module docstring).

    Args:
      vocab_file: one token per line, read by `bert_tf.tokenization.load_vocab` (same ids).
      do_lower_case: lower-case and strip accents (uncased models).
    """

    def __init__(self, vocab_file, do_lower_case=True, name="graph_tokenizer"):
        super().__init__(name=name)
        vocab = tokenization.load_vocab(vocab_file)
        for token in (_UNK, _CLS, _SEP):
            if token not in vocab:
                raise file_error(vocab_file, f"the vocabulary has no {token} token")
        self.do_lower_case = do_lower_case
        self.vocab_size = max(vocab.values()) + 1
        self.cls_id, self.sep_id, self.unk_id = vocab[_CLS], vocab[_SEP], vocab[_UNK]
        self._vocab = _vocab_table(vocab_file, vocab)
        tokens = [""] * self.vocab_size
        for token, index in vocab.items():
            tokens[index] = tokens[index] or token
        self._tokens = tf.constant(tokens)
        # Longest candidate worth looking up, in characters: a word's first piece can be any
        # entry, a later piece only a "##" entry (without its "##").
        self._max_first_chars = max(len(t) for t in vocab)
        self._max_suffix_chars = max((len(t) - 2 for t in vocab if t.startswith("##")), default=0)
        table = replacement_table(do_lower_case)
        self._replacements = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(table), tf.int32), tf.constant(list(table.values()), tf.string)),
            default_value="\x00")  # never a replacement ("" is one): marks "keep the character"

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def basic_tokens(self, texts):
        """[B] strings -> [B, (tokens)] the original's BasicTokenizer tokens (UTF-8)."""
        code_points = tf.strings.unicode_decode(texts, "UTF-8", errors="ignore")
        flat = code_points.flat_values
        own = tf.strings.unicode_encode(tf.expand_dims(flat, -1), "UTF-8")
        cjk = tf.zeros_like(flat, tf.bool)
        for low, high in _CJK_RANGES:
            cjk = cjk | ((flat >= low) & (flat <= high))
        own = tf.where(cjk, tf.strings.join([" ", own, " "]), own)
        replaced = self._replacements.lookup(flat)
        chars = tf.where(tf.equal(replaced, "\x00"), own, replaced)
        normalized = tf.strings.reduce_join(code_points.with_flat_values(chars), axis=-1)
        return tf.strings.split(normalized)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize(self, texts):
        """[B] strings -> [B, (pieces)] int32 word piece ids, FullTokenizer's ids."""
        return self.token_pieces(texts).merge_dims(1, 2)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def token_pieces(self, texts):
        """[B] strings -> [B, (tokens), (pieces)] int32: each BasicTokenizer token's word piece
        ids (`tokenize` before the merge; the shape of TF Hub preprocessors' `tokenize`, whose
        "words" are the basic tokens too: punctuation is a token of its own)."""
        words = self.basic_tokens(texts)
        return words.with_flat_values(self._wordpiece(words.flat_values))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def word_pieces(self, texts):
        """[B] strings -> (words, pieces): the whitespace-separated words [B, (words)] (UTF-8,
        as `tf.strings.split`) and each word's piece ids [B, (words), (pieces)] int32, each word
        tokenized on its own as FullTokenizer.tokenize(word) (run_ner's recipe; a word of only
        deleted characters has no piece). The pieces concatenated are `tokenize(texts)` when the
        texts are separated by ASCII whitespace only."""
        words = tf.strings.split(texts)
        return words, words.with_flat_values(self.tokenize(words.flat_values))

    def id_to_token(self, ids):
        """int ids (any shape) -> their vocabulary strings ("" for an id no line has)."""
        return tf.gather(self._tokens, ids)

    def _wordpiece(self, words):
        """[W] words (basic tokens) -> [W, (pieces)] int32 ids: the original's greedy
        longest-match-first WordPiece, vectorized over words (see the module docstring)."""
        num_words = tf.size(words)
        lengths = tf.strings.length(words, unit="UTF8_CHAR")
        whole = self._vocab.lookup(words)
        too_long = lengths > _MAX_CHARS_PER_WORD
        # A word that is a vocabulary entry is its own single piece (the first candidate the
        # original tries); an over-long word is [UNK]; the others go through the loop.
        done = (whole >= 0) | too_long
        ta = functools.partial(tf.TensorArray, size=0, dynamic_size=True, infer_shape=False,
                               element_shape=[None])
        first = tf.where(done & ~too_long)[:, 0]
        piece_word = ta(tf.int64).write(0, first)
        piece_id = ta(tf.int64).write(0, tf.gather(whole, first))
        piece_index = ta(tf.int32).write(0, tf.zeros_like(first, tf.int32))
        unknown = ta(tf.int64).write(0, tf.where(too_long)[:, 0])
        active = tf.where(~done)[:, 0]  # words still being split, and where each stands
        starts = tf.zeros_like(active, tf.int32)

        def step(i, active, starts, piece_word, piece_id, piece_index, unknown):
            word = tf.gather(words, active)
            continued = starts > 0
            # Every candidate piece word[start:start + k] (with "##" after the first piece) for
            # k = 1 .. min(remaining characters, longest entry it could match).
            max_k = tf.minimum(tf.gather(lengths, active) - starts,
                               tf.where(continued, self._max_suffix_chars, self._max_first_chars))
            k = tf.ragged.range(max_k)
            row = k.value_rowids()
            size = k.flat_values + 1
            text = tf.strings.substr(tf.gather(word, row), tf.gather(starts, row), size,
                                     unit="UTF8_CHAR")
            prefix = tf.gather(tf.where(continued, "##", ""), row)
            ids = self._vocab.lookup(tf.strings.join([prefix, text]))
            # The longest match of each word: max over (length, id) packed in an int64.
            key = tf.where(ids >= 0, tf.cast(size, tf.int64) * (1 << 32) + ids, -1)
            best = tf.math.unsorted_segment_max(key, row, tf.size(active))
            matched = best >= 0
            best_size = tf.cast(best // (1 << 32), tf.int32)
            j = i + 1
            piece_word = piece_word.write(j, tf.boolean_mask(active, matched))
            piece_id = piece_id.write(j, tf.boolean_mask(best % (1 << 32), matched))
            count = tf.reduce_sum(tf.cast(matched, tf.int32))
            piece_index = piece_index.write(j, tf.fill([count], i))
            unknown = unknown.write(j, tf.boolean_mask(active, ~matched))  # the whole word
            starts = starts + best_size
            going = matched & (starts < tf.gather(lengths, active))
            return (j, tf.boolean_mask(active, going), tf.boolean_mask(starts, going),
                    piece_word, piece_id, piece_index, unknown)

        _, _, _, piece_word, piece_id, piece_index, unknown = tf.while_loop(
            lambda i, active, *_: tf.size(active) > 0, step,
            (0, active, starts, piece_word, piece_id, piece_index, unknown),
            shape_invariants=(tf.TensorShape([]), tf.TensorShape([None]), tf.TensorShape([None]),
                              None, None, None, None))
        # Assemble in word order: a word that ended [UNK] drops its pieces for one [UNK].
        piece_word, piece_id, unknown = piece_word.concat(), piece_id.concat(), unknown.concat()
        piece_index = piece_index.concat()
        is_unknown = tf.scatter_nd(tf.expand_dims(unknown, 1), tf.ones_like(unknown, tf.bool),
                                   tf.cast([num_words], tf.int64))
        keep = ~tf.gather(is_unknown, piece_word)
        piece_word = tf.concat([tf.boolean_mask(piece_word, keep), unknown], 0)
        piece_id = tf.concat([tf.boolean_mask(piece_id, keep),
                              tf.fill(tf.shape(unknown), tf.constant(self.unk_id, tf.int64))], 0)
        piece_index = tf.concat([tf.boolean_mask(piece_index, keep),
                                 tf.zeros_like(unknown, tf.int32)], 0)
        counts = tf.math.unsorted_segment_sum(tf.ones_like(piece_word), piece_word, num_words)
        splits = tf.concat([[0], tf.cumsum(counts)], 0)
        position = tf.gather(splits, piece_word) + tf.cast(piece_index, tf.int64)
        values = tf.scatter_nd(tf.expand_dims(position, 1), tf.cast(piece_id, tf.int32),
                               splits[-1:])
        return tf.RaggedTensor.from_row_splits(values, splits, validate=False)

    def bert_inputs(self, text_a, text_b=None, max_seq_length=128, pad_to_longest=False):
        """The model's inputs for [B] texts (or text pairs), as in the original's
        convert_single_example: `pack` of their pieces, a pair truncated longest first.

        Returns a dict of int32 [B, max_seq_length] (`pad_to_longest`: [B, the batch's
        longest]): input_ids, input_mask, segment_ids.
        """
        return self.pack(self.tokenize(text_a),
                         None if text_b is None else self.tokenize(text_b), max_seq_length,
                         pad_to_longest=pad_to_longest)

    def pack(self, ids_a, ids_b=None, max_seq_length=128, truncate="longest_first",
             pad_to_longest=False):
        """`bert_tf.text.packing.pack` with this vocabulary's [CLS] and [SEP]: [B, (pieces)]
        ids (and a second part) -> `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, truncated as
        the original (`truncate="longest_first"`: `_truncate_seq_pair`; `"second"`: the second
        part only, run_squad's windows). Returns a dict of int32 [B, max_seq_length] (or [B,
        the batch's longest] with `pad_to_longest`): input_ids, input_mask, segment_ids."""
        return packing.pack(ids_a, ids_b, max_seq_length=max_seq_length, cls_id=self.cls_id,
                            sep_id=self.sep_id, truncate=truncate, pad_to_longest=pad_to_longest)
