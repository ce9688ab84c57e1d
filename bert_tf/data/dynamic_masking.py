"""Masks drawn when records are read (records with masking="dynamic", bert_tf.data.features).

`mask_example` turns one decoded record's `masked_lm_candidates` into the original's three
masked-LM features and masks its `input_ids`, by the rules of the original's
create_pretraining_data.py `create_masked_lm_predictions`:
- num_to_predict = min(max_predictions_per_seq, max(1, round(len * masked_lm_prob))), len the
  sequence's tokens, [CLS] and [SEP] included (Python 3's round: half to even);
- masking units (a token marked 1 and the tokens marked 2 after it: a whole word) taken in a
  uniformly random order, a unit skipped when it would pass num_to_predict;
- each masked token: 80% [MASK], 10% kept, 10% an id uniform over the vocabulary;
- positions in ascending order, padded to max_predictions_per_seq with weight 0.
Packed rows: each sequence (`sequence_ids`) has its own num_to_predict; the units of the whole
row are taken in one random order, and a unit is skipped also when the row would pass
max_predictions_per_seq, so the row's cap falls on random units of any sequence and never
splits a word.

The draws are a pure function of (seed, index): stateless random ops seeded by both, so the
same example at another place in the stream (the next epoch) gets other masks, and a resumed
run that replays its input gets the same ones.
"""
import tensorflow as tf

DYNAMIC_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


def num_to_predict(lengths, masked_lm_prob, max_predictions_per_seq):
    """The original's count of masked tokens for sequences of `lengths` tokens (int tensor)."""
    wanted = tf.cast(tf.round(tf.cast(lengths, tf.float64) * masked_lm_prob), tf.int32)
    return tf.minimum(max_predictions_per_seq, tf.maximum(1, wanted))


def mask_example(example, index, seed, *, vocab_size, mask_id, masked_lm_prob,
                 max_predictions_per_seq):
    """`example` (a decoded record: int32 [T] features with `masked_lm_candidates`) with masked
    `input_ids` and `masked_lm_positions`, `masked_lm_ids` (int32 [P]), `masked_lm_weights`
    (float32 [P]) instead of `masked_lm_candidates`.

    Args:
      index: the example's index in its stream (int, scalar tensor).
      seed: an int, or a [2] int tensor (the run's seed, folded with the stream's id).
      vocab_size: random replacements are uniform over [0, vocab_size) (the vocabulary file's).
      mask_id: the vocabulary's [MASK] id.
    """
    example = dict(example)
    candidates = tf.cast(example.pop("masked_lm_candidates"), tf.int32)
    input_ids = tf.cast(example["input_ids"], tf.int32)
    length = candidates.shape[0] or tf.shape(candidates)[0]
    seed = tf.cast(seed, tf.int64)
    if seed.shape.rank == 0:
        seed = tf.stack([seed, tf.zeros_like(seed)])
    seed = tf.random.experimental.stateless_fold_in(seed, tf.cast(index, tf.int64))
    order_seed, choice_seed, word_seed = tf.unstack(
        tf.random.experimental.stateless_split(seed, 3))

    if "sequence_ids" in example:
        sequences = tf.cast(example["sequence_ids"], tf.int32)
    else:
        sequences = tf.cast(tf.not_equal(example["input_mask"], 0), tf.int32)
    # Each sequence's budget, indexed by sequence id (0: padding, never used).
    lengths = tf.math.bincount(sequences, minlength=length + 1, maxlength=length + 1)
    budgets = num_to_predict(lengths, masked_lm_prob, max_predictions_per_seq)

    starts = tf.equal(candidates, 1)
    in_unit = tf.greater(candidates, 0)
    unit_of = tf.where(in_unit, tf.cumsum(tf.cast(starts, tf.int32)) - 1, length)
    sizes = tf.math.unsorted_segment_sum(tf.cast(in_unit, tf.int32), unit_of, length + 1)
    # A unit start's size (0 elsewhere), its sequence; units in a random order (others last).
    start_sizes = tf.where(starts, tf.gather(sizes, unit_of), 0)
    keys = tf.random.stateless_uniform([length], order_seed, dtype=tf.float32)
    order = tf.argsort(tf.where(starts, keys, 2.0), stable=True)

    def take(carry, position):
        counts, total = carry
        size = start_sizes[position]
        sequence = sequences[position]
        fits = ((size > 0) & (counts[sequence] + size <= budgets[sequence])
                & (total + size <= max_predictions_per_seq))
        added = tf.where(fits, size, 0)
        counts = tf.tensor_scatter_nd_add(counts, [[sequence]], [added])
        return (counts, total + added), fits

    initial = (tf.zeros([length + 1], tf.int32), tf.constant(0, tf.int32))
    taken_in_order = tf.scan(lambda carry, p: take(carry[0], p), order,
                             initializer=(initial, tf.constant(False)))[1]
    taken_units = tf.scatter_nd(order[:, None], tf.cast(taken_in_order, tf.int32), [length])
    # Unit (by its index) taken -> every token of it masked.
    unit_taken = tf.math.unsorted_segment_max(taken_units, unit_of, length + 1)
    masked = tf.greater(tf.gather(unit_taken, unit_of), 0) & in_unit

    # 80% [MASK], 10% kept, 10% a random id: the original's two draws per token.
    choice = tf.random.stateless_uniform([2, length], choice_seed, dtype=tf.float32)
    random_ids = tf.random.stateless_uniform([length], word_seed, minval=0, maxval=vocab_size,
                                             dtype=tf.int32)
    replacement = tf.where(choice[0] < 0.8, mask_id,
                           tf.where(choice[1] < 0.5, input_ids, random_ids))
    example["input_ids"] = tf.cast(tf.where(masked, replacement, input_ids),
                                   example["input_ids"].dtype)

    # The masked positions in ascending order, then padding (position 0, weight 0).
    positions = tf.range(length, dtype=tf.int32)
    by_position = tf.argsort(tf.where(masked, positions, positions + length), stable=True)
    if max_predictions_per_seq > length:
        by_position = tf.pad(by_position, [[0, max_predictions_per_seq - length]])
    chosen = by_position[:max_predictions_per_seq]
    weights = tf.cast(tf.gather(tf.pad(masked, [[0, 1]]),
                                tf.where(tf.range(max_predictions_per_seq) < length, chosen,
                                         length)), tf.float32)
    real = weights > 0
    example["masked_lm_positions"] = tf.where(real, chosen, 0)
    example["masked_lm_ids"] = tf.where(real, tf.gather(input_ids, chosen), 0)
    example["masked_lm_weights"] = weights
    return example


def stream_seed(seed, stream_id=0):
    """The [2] seed of a stream (`mask_example`'s `seed`): the run's seed and the stream's id
    (an input pipeline; eval)."""
    return tf.constant([seed, stream_id], tf.int64)
