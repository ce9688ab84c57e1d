"""In-graph WordPiece tokenization: tf.string in, ids out, with the original FullTokenizer's output.

`GraphTokenizer(vocab_file, do_lower_case)` is a `tf.Module` whose `tokenize` maps a [B]
tf.string tensor to a [B, (pieces)] RaggedTensor of int32 ids, and whose `bert_inputs` builds
the model's inputs (`[CLS] a [SEP] (b [SEP])`, segment ids, mask, padded or truncated to
`max_seq_length`, pairs truncated like the original's `_truncate_seq_pair`). Both are plain
TensorFlow graph code: they run eagerly, inside `tf.function`, in `tf.data` pipelines and in a
SavedModel (which stores the tables and the WordPiece model as constants).

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
  4. tokens of more than 200 characters become "[UNK]"; the rest go through tensorflow-text's
     `FastWordpieceTokenizer` (linear-time MaxMatch; same result as the original's greedy
     longest-match-first WordPiece).

Known residual differences from the original (none occurs in ../shared/data; the tests check
both this and the differences themselves):
  * Greek capital sigma is always lower-cased to "σ": the original applies `str.lower()` to a
    whole word, which gives the final form "ς" at the end of a word ("ΟΔΟΣ" -> "οδος");
  * canonical reordering of NFD is not applied: it matters only when a word has two or more
    combining characters that are not Mn (they survive accent stripping) in non-canonical order.

TensorFlow ops needed: core ops (UnicodeDecode, UnicodeEncode, LookupTableFindV2 on a
HashTableV2, StringJoin/ReduceJoin, StringSplitV2, StringLength, RaggedGather, ...) and
tensorflow-text's FastWordpieceTokenizeWithOffsets custom op. A SavedModel using this tokenizer
therefore needs `import tensorflow_text` (which registers the op) before `tf.saved_model.load`.
"""
import functools
import sys
import unicodedata

import tensorflow as tf
import tensorflow_text

from bert_tf import tokenization
from bert_tf.errors import file_error

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
        inv_vocab = {i: t for t, i in vocab.items()}
        # The library's ids are list positions: unused ids get strings no basic token equals.
        tokens = [inv_vocab.get(i) or f"[bert_tf unused id {i}]" for i in range(self.vocab_size)]
        self._wordpiece = tensorflow_text.FastWordpieceTokenizer(
            vocab=tokens, suffix_indicator="##", unknown_token=_UNK,
            max_bytes_per_word=4 * _MAX_CHARS_PER_WORD + 4, token_out_type=tf.int32,
            no_pretokenization=True, support_detokenization=False)
        table = replacement_table(do_lower_case)
        self._replacements = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(table), tf.int32), tf.constant(list(table.values()), tf.string)),
            default_value="\x00")  # never a replacement ("" is one): marks "keep the character"

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
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

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(self, texts):
        """[B] strings -> [B, (pieces)] int32 word piece ids, FullTokenizer's ids."""
        words = self.basic_tokens(texts)
        too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > _MAX_CHARS_PER_WORD
        # An over-long word is one [UNK]: the literal "[UNK]" is its own vocabulary entry (a
        # real basic token never contains "[" next to other characters).
        flat_words = tf.where(too_long, _UNK, words.flat_values)
        pieces = self._wordpiece.tokenize(flat_words)  # [words, (pieces)]
        return words.with_flat_values(pieces).merge_dims(1, 2)

    def bert_inputs(self, text_a, text_b=None, max_seq_length=128):
        """The model's inputs for [B] texts (or text pairs), as in the original's
        convert_single_example: `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, segment ids 0 for
        the first part and 1 for the second, mask 1 on tokens; zero-padded to max_seq_length.
        A pair is truncated like `_truncate_seq_pair` (always shorten the longer text, the
        second on ties), a single text to max_seq_length - 2 pieces.

        Returns a dict of int32 [B, max_seq_length]: input_ids, input_mask, segment_ids.
        """
        ids_a = self.tokenize(text_a)
        batch = ids_a.nrows()
        cls = tf.fill([batch, 1], self.cls_id)
        sep = tf.fill([batch, 1], self.sep_id)
        if text_b is None:
            ids_a = ids_a[:, :max_seq_length - 2]
            ids = tf.concat([cls, ids_a, sep], axis=1)
            segments = tf.zeros_like(ids)
        else:
            ids_b = self.tokenize(text_b)
            budget = max_seq_length - 3
            len_a, len_b = ids_a.row_lengths(), ids_b.row_lengths()
            # _truncate_seq_pair pops from the longer list (the second on ties) until the sum
            # fits: the first keeps max(budget - len_b, ceil(budget / 2)) pieces at most.
            keep_a = tf.minimum(len_a, tf.maximum(budget - len_b, (budget + 1) // 2))
            keep_b = tf.minimum(len_b, budget - keep_a)
            ids_a = tf.ragged.boolean_mask(
                ids_a, tf.ragged.range(len_a) < tf.expand_dims(keep_a, 1))
            ids_b = tf.ragged.boolean_mask(
                ids_b, tf.ragged.range(len_b) < tf.expand_dims(keep_b, 1))
            first = tf.concat([cls, ids_a, sep], axis=1)
            second = tf.concat([ids_b, sep], axis=1)
            ids = tf.concat([first, second], axis=1)
            segments = tf.concat([tf.zeros_like(first), tf.ones_like(second)], axis=1)
        shape = [None, max_seq_length]
        return {
            "input_ids": ids.to_tensor(0, shape=shape),
            "input_mask": tf.ones_like(ids).to_tensor(0, shape=shape),
            "segment_ids": segments.to_tensor(0, shape=shape),
        }
