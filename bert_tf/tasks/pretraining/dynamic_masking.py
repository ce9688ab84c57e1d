"""Masks drawn when records are read (records with masking="dynamic", bert_tf.data.records):
`mask_example`, by the rules of the original create_pretraining_data's
`create_masked_lm_predictions`, as a pure function of (seed, the example's place in its stream).
"""
import tensorflow as tf


def num_to_predict(lengths, masked_lm_prob, max_predictions_per_seq):
    """The original's count of masked tokens for sequences of `lengths` tokens (int tensor)."""
    wanted = tf.cast(tf.round(tf.cast(lengths, tf.float64) * masked_lm_prob), tf.int32)
    return tf.minimum(max_predictions_per_seq, tf.maximum(1, wanted))


def mask_example(example, index, seed, *, vocab_size, mask_id, masked_lm_prob,
                 max_predictions_per_seq):
    """`example` (a decoded record: int32 [T] features with `masked_lm_candidates`) with masked
    `input_ids` and `masked_lm_positions`, `masked_lm_ids` (int32 [P]), `masked_lm_weights`
    (float32 [P]) instead of `masked_lm_candidates`.

    The original's rules:
    - num_to_predict = min(max_predictions_per_seq, max(1, round(len * masked_lm_prob))), len
      the sequence's tokens, [CLS] and [SEP] included (Python 3's round: half to even);
    - masking units (a token marked 1 and the tokens marked 2 after it: a whole word) taken in
      a uniformly random order, a unit skipped when it would pass num_to_predict;
    - each masked token: 80% [MASK], 10% kept, 10% an id uniform over [0, vocab_size);
    - positions in ascending order, padded to max_predictions_per_seq with weight 0.
    Packed rows: each sequence (`sequence_ids`) has its own num_to_predict; the units of the
    whole row are taken in one random order, and a unit is skipped also when the row would pass
    max_predictions_per_seq, so the row's cap falls on random units of any sequence and never
    splits a word.

    The draws are stateless, seeded by (seed, index): the same example at another place in the
    stream (the next epoch) gets other masks, and a resumed run that replays its input the
    same ones.

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
    units_so_far = tf.cumsum(tf.cast(starts, tf.int32))
    in_unit = tf.greater(candidates, 0) & tf.greater(units_so_far, 0)  # (a 2 first: none)
    unit_of = tf.where(in_unit, units_so_far - 1, length)
    sizes = tf.math.unsorted_segment_sum(tf.cast(in_unit, tf.int32), unit_of, length + 1)
    # A unit start's size (0 elsewhere), its sequence; units in a random order (others last).
    start_sizes = tf.where(starts, tf.gather(sizes, unit_of), 0)
    keys = tf.random.stateless_uniform([length], order_seed, dtype=tf.float32)
    order = tf.argsort(tf.where(starts, keys, 2.0), stable=True)

    taken_in_order = _greedy_units(tf.gather(start_sizes, order), tf.gather(sequences, order),
                                   budgets, max_predictions_per_seq)
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


def _greedy_units(sizes, sequences, budgets, cap):
    """The original's loop over units in their random order (`sizes` [T], 0: no unit there;
    their `sequences`): a unit is taken when its sequence's count stays within its budget and
    the row's within `cap`, else skipped. Returns taken [T] bool.

    Vectorized by rounds: a round takes, from a frontier on, every unit that fits given the
    units before it (cumulative sums per sequence and over the row), up to the first unit
    that does not; that one is skipped and the next round starts after it. A round that
    stops early has taken something first, so there are at most cap + 1 rounds (usually 1-2).
    """
    length = tf.shape(sizes)[0]
    slots = tf.size(budgets)
    index = tf.range(length)
    by_sequence = tf.argsort(sequences * length + index)  # units of a sequence together
    back = tf.argsort(by_sequence)

    def round_(frontier, taken, remaining, remaining_total):
        room = tf.gather(remaining, sequences)
        eligible = (sizes > 0) & (index >= frontier) & (sizes <= room) & (
            sizes <= remaining_total)
        amounts = tf.where(eligible, sizes, 0)
        # Running sums within each sequence: over the units sorted by sequence, minus the sum
        # before the sequence's first unit.
        sorted_amounts = tf.gather(amounts, by_sequence)
        running = tf.cumsum(sorted_amounts)
        before = tf.math.unsorted_segment_min(running - sorted_amounts,
                                              tf.gather(sequences, by_sequence), slots)
        in_sequence = tf.gather(running - tf.gather(before, tf.gather(sequences, by_sequence)),
                                back)
        fits = eligible & (in_sequence <= room) & (tf.cumsum(amounts) <= remaining_total)
        failed = eligible & ~fits
        first_failed = tf.reduce_min(tf.where(failed, index, length))
        now = fits & (index < first_failed)
        added = tf.where(now, sizes, 0)
        return (first_failed + 1, taken | now,
                remaining - tf.math.unsorted_segment_sum(added, sequences, slots),
                remaining_total - tf.reduce_sum(added))

    _, taken, _, _ = tf.while_loop(
        lambda frontier, *_: frontier < length, round_,
        (tf.constant(0), tf.zeros([length], tf.bool), budgets, tf.constant(cap, tf.int32)))
    return taken


def stream_seed(seed, stream_id=0):
    """The [2] seed of a stream (`mask_example`'s `seed`): the run's seed and the stream's id
    (an input pipeline; eval)."""
    return tf.constant([seed, stream_id], tf.int64)
