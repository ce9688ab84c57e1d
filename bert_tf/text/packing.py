"""The one packing of BERT's inputs, for records and for serving alike.

`[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`: segment ids 0 on the first part (with its [CLS] and
[SEP]) and 1 on the second (with its [SEP]), input mask 1 on tokens, zero padding to
max_seq_length. Truncation, as the original:
- a single text is cut to max_seq_length - 2 pieces (convert_single_example);
- a pair shares max_seq_length - 3 pieces: `truncate="longest_first"` pops from the longer part
  until the pair fits, the second part on ties (`_truncate_seq_pair`), which keeps more of a
  short text than cutting both by the same proportion would; `truncate="second"` keeps the
  first part (run_squad's question, cut beforehand to max_query_length) and cuts the second;
- a second part with no piece makes a single text (the original's `if tokens_b:`), row by row.

`pack` is TensorFlow graph code on ragged ids, made of core ops: the SavedModels' string
signatures call it in their graphs (through `GraphTokenizer.pack`), and the data preparation
of every fine-tuning task calls it from Python through `pack_lists` on id lists
(classifier records, NER windows, SQuAD windows, multiple-choice questions (`pack_choices`),
extract_features, `bert_tf.api.encode`): the
records a model trains on and the inputs it is served are one function's output.
(create_pretraining_data packs its instances in its own kernels: the original's pretraining
truncation removes pieces from the front or the back at random, another rule.)
"""
import functools
import itertools

import numpy as np
import tensorflow as tf

TRUNCATIONS = ("longest_first", "second")
INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")


def _gather_part(ids, offsets, take):
    """ids.values at each row's start + offsets where `take`, else 0 ([B, L])."""
    values = tf.concat([tf.cast(ids.values, tf.int32), [0]], axis=0)  # [n + 1]: 0 at n
    index = tf.where(take, ids.row_starts()[:, None] + offsets, tf.size(values, tf.int64) - 1)
    return tf.gather(values, index)


def pack(ids_a, ids_b=None, *, max_seq_length, cls_id, sep_id, truncate="longest_first",
         pad_to_longest=False):
    """Packs [B, (pieces)] ids (and a second part) as the module docstring says.

    Args:
      ids_a, ids_b: int RaggedTensors [B, (pieces)] (int64 row splits); ids_b None: single
        texts.
      max_seq_length: the longest packed sequence (at least 3 with a second part, 2 without),
        to which texts are truncated; a Python int gives a static shape.
      cls_id, sep_id: the vocabulary's [CLS] and [SEP] ids.
      truncate: "longest_first" or "second" (see the module docstring).
      pad_to_longest: pad to the batch's longest packed sequence instead of max_seq_length
        (the same tokens and, the model masking padding, the same outputs, for less work:
        serving); the width then varies from batch to batch.
    Returns:
      {"input_ids", "input_mask", "segment_ids"}: int32 [B, max_seq_length] (or [B, the
      longest]).

    Dense ops on each output position (which part it takes, and where from): no ragged
    concatenation, so the graph stays small for batch-1 serving.
    """
    if truncate not in TRUNCATIONS:
        raise ValueError(f"truncate must be one of {TRUNCATIONS}, got {truncate!r}")
    len_a = ids_a.row_lengths()
    length = (max_seq_length if isinstance(max_seq_length, int)
              else tf.cast(max_seq_length, len_a.dtype))
    keep_a = tf.minimum(len_a, length - 2)  # a single text
    keep_b = tf.zeros_like(len_a)
    if ids_b is not None:
        len_b = ids_b.row_lengths()
        budget = length - 3
        if truncate == "longest_first":
            # Popping from the longer part (the second on ties) until the sum fits leaves the
            # first part max(budget - len_b, ceil(budget / 2)) pieces at most.
            keep_pair = tf.minimum(len_a, tf.maximum(budget - len_b, (budget + 1) // 2))
        else:
            keep_pair = tf.minimum(len_a, budget)
        keep_a = tf.where(len_b > 0, keep_pair, keep_a)
        keep_b = tf.maximum(tf.minimum(len_b, budget - keep_a), 0)
    # Tokens per row: [CLS] a [SEP], then b [SEP] when b kept a piece.
    total = keep_a + 2 + keep_b + tf.cast(keep_b > 0, len_a.dtype)
    width = tf.maximum(tf.reduce_max(total), 2) if pad_to_longest else length
    position = tf.range(width, dtype=len_a.dtype)[None, :]  # [1, L]
    end_a, end_b = keep_a[:, None] + 1, keep_a[:, None] + 1 + keep_b[:, None]
    in_a = (position >= 1) & (position <= keep_a[:, None])
    # The second part (pieces, then its [SEP]) exists only when it kept a piece.
    in_b = (position > end_a) & (position <= end_b)
    seps = tf.equal(position, end_a) | (tf.equal(position, end_b + 1) & (keep_b[:, None] > 0))
    ids = tf.where(in_a, _gather_part(ids_a, position - 1, in_a), 0)
    if ids_b is not None:
        ids = tf.where(in_b, _gather_part(ids_b, position - end_a - 1, in_b), ids)
    ids = tf.where(seps, tf.cast(sep_id, tf.int32), ids)
    ids = tf.where(tf.equal(position, 0), tf.cast(cls_id, tf.int32), ids)
    mask = position < total[:, None]
    segments = (position > end_a) & mask
    return {"input_ids": ids, "input_mask": tf.cast(mask, tf.int32),
            "segment_ids": tf.cast(segments, tf.int32)}


def _flat(id_lists):
    """(values, row lengths) of a list of id lists (None: an empty row), as numpy arrays."""
    id_lists = [ids if ids is not None else () for ids in id_lists]
    lengths = np.fromiter((len(ids) for ids in id_lists), np.int64, len(id_lists))
    values = np.fromiter(itertools.chain.from_iterable(id_lists), np.int32, int(lengths.sum()))
    return values, lengths


@functools.lru_cache(maxsize=None)
def _packing_function(with_b, truncate):
    """`pack` traced once for Python callers (as eager ops it would cost more than the work):
    ids, lengths and special ids are inputs, so one trace serves every vocabulary and length;
    the parts come flat (values and row lengths), which costs less to pass than ragged."""
    values, lengths = tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int64)
    scalar = tf.TensorSpec([], tf.int32)

    def ragged(flat_values, row_lengths):
        return tf.RaggedTensor.from_row_lengths(flat_values, row_lengths, validate=False)

    if with_b:
        def packing(values_a, lengths_a, values_b, lengths_b, max_seq_length, cls_id, sep_id):
            return pack(ragged(values_a, lengths_a), ragged(values_b, lengths_b),
                        max_seq_length=max_seq_length, cls_id=cls_id, sep_id=sep_id,
                        truncate=truncate)
        signature = [values, lengths, values, lengths, scalar, scalar, scalar]
    else:
        def packing(values_a, lengths_a, max_seq_length, cls_id, sep_id):
            return pack(ragged(values_a, lengths_a), max_seq_length=max_seq_length,
                        cls_id=cls_id, sep_id=sep_id, truncate=truncate)
        signature = [values, lengths, scalar, scalar, scalar]
    # The concrete function: calling it costs less than the tf.function's argument checks,
    # which per-example callers pay at every call.
    return tf.function(packing, input_signature=signature,
                       autograph=False).get_concrete_function()


def pack_lists(ids_a, ids_b=None, *, max_seq_length, cls_id, sep_id, truncate="longest_first"):
    """`pack` from Python: lists of id lists (ids_b: a list with None or [] for a row without
    a second part, or None for none at all) -> {name: int32 numpy [N, max_seq_length]}."""
    if ids_b is not None and len(ids_b) != len(ids_a):
        raise ValueError(f"{len(ids_a)} first parts but {len(ids_b)} second parts")
    if truncate not in TRUNCATIONS:
        raise ValueError(f"truncate must be one of {TRUNCATIONS}, got {truncate!r}")
    function = _packing_function(ids_b is not None, truncate)
    parts = _flat(ids_a) + (() if ids_b is None else _flat(ids_b))
    scalars = np.int32(max_seq_length), np.int32(cls_id), np.int32(sep_id)
    packed = function(*(tf.constant(value) for value in parts + scalars))
    return {name: value.numpy() for name, value in packed.items()}


def tokenize_all(tokenizer, texts):
    """Each text's pieces: one `tokenize_batch` call when the tokenizer has it (FastTokenizer;
    the same pieces as `tokenize` per text, which FullTokenizer gets)."""
    if hasattr(tokenizer, "tokenize_batch"):
        return tokenizer.tokenize_batch(texts)
    return [tokenizer.tokenize(text) for text in texts]


def special_ids(tokenizer):
    """(the [CLS] id, the [SEP] id) of a Python tokenizer's vocabulary."""
    cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    return cls_id, sep_id


def text_ids(tokenizer, texts_a, texts_b=None):
    """(ids_a, ids_b): each text's piece ids, tokenized by `tokenizer` in one call
    (`tokenize_all`); ids_b None without second texts, else a list with None where a text_b is
    false (None or ""), which `pack_lists` packs as a single text. (texts_b may be longer than
    texts_a: `pack_choices` pairs each context with N endings.)"""
    texts_a = list(texts_a)
    texts = texts_a + (list(texts_b) if texts_b is not None else [])
    present = [i for i, text in enumerate(texts) if text]
    ids = [None] * len(texts)
    for i, pieces in zip(present, tokenize_all(tokenizer, [texts[i] for i in present])):
        ids[i] = tokenizer.convert_tokens_to_ids(pieces)
    ids_a = [i if i is not None else [] for i in ids[:len(texts_a)]]  # "": no pieces
    return ids_a, (ids[len(texts_a):] if texts_b is not None else None)


def pack_texts(tokenizer, texts_a, texts_b=None, *, max_seq_length):
    """The original's convert_single_example inputs of texts (and pairs; a false text_b, as
    None or "", makes a single text): tokenized by `tokenizer` (`text_ids`) and packed by
    `pack`. Returns {name: int32 numpy [len(texts_a), max_seq_length]}."""
    ids_a, ids_b = text_ids(tokenizer, texts_a, texts_b)
    cls_id, sep_id = special_ids(tokenizer)
    return pack_lists(ids_a, ids_b, max_seq_length=max_seq_length, cls_id=cls_id,
                      sep_id=sep_id)


def pack_choices(tokenizer, contexts, endings, *, max_seq_length):
    """Multiple-choice questions: `[CLS] context [SEP] ending [SEP]` for each of a question's
    N endings (a pair each, truncated longest first as the original's pairs; an empty ending
    makes `[CLS] context [SEP]`). `endings`: one list of N texts per context, N the same for
    all. Each context is tokenized once. Returns {name: int32 numpy [len(contexts), N,
    max_seq_length]}."""
    contexts, endings = list(contexts), [list(row) for row in endings]
    if len(endings) != len(contexts):
        raise ValueError(f"{len(contexts)} contexts but {len(endings)} lists of endings")
    num_choices = len(endings[0]) if endings else 0
    if any(len(row) != num_choices for row in endings):
        raise ValueError(f"every question needs the same number of endings ({num_choices})")
    # One tokenizer call; each context once, the endings as second texts (None where empty).
    context_ids, ids_b = text_ids(tokenizer, contexts, [text for row in endings for text in row])
    ids_a = [context_ids[q] for q in range(len(contexts)) for _ in range(num_choices)]
    cls_id, sep_id = special_ids(tokenizer)
    packed = pack_lists(ids_a, ids_b, max_seq_length=max_seq_length, cls_id=cls_id,
                        sep_id=sep_id)
    return {name: value.reshape(len(contexts), num_choices, max_seq_length)
            for name, value in packed.items()}


def packed_tokens(tokenizer, input_ids, input_mask):
    """The tokens of one packed row ([CLS] ... [SEP], without padding), as the original's
    feature.tokens: the ids back through the vocabulary (every id came from a token)."""
    return tokenizer.convert_ids_to_tokens(
        [int(i) for i in input_ids[:int(np.count_nonzero(input_mask))]])
