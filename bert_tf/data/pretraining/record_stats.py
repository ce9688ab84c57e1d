"""Real (non-padding) tokens of pretraining record files, for throughput figures.

`count_tokens(paths)` reads any `PretrainingLayout` (packed or not) and returns a `TokenCounts`:
records, sequences, real tokens and the padding fraction, so that a bench can report real
tokens per second rather than padded positions per second.
"""
import dataclasses

import tensorflow as tf

from bert_tf.data.input_pipeline import first_record_lengths
from bert_tf.data.pretraining.record_layout import PretrainingLayout, pretraining_layout_of
from bert_tf.errors import file_error


@dataclasses.dataclass(frozen=True)
class TokenCounts:
    """What record files hold: `records` rows of `max_seq_length` positions, `sequences`
    training sequences (one a record unless packed), `real_tokens` positions with
    input_mask 1 ([CLS]/[SEP] included)."""

    records: int
    sequences: int
    real_tokens: int
    max_seq_length: int
    layout: PretrainingLayout

    @property
    def positions(self):
        """All positions of all records (real and padding)."""
        return self.records * self.max_seq_length

    @property
    def padding_fraction(self):
        return 1.0 - self.real_tokens / self.positions if self.positions else 0.0

    @property
    def real_tokens_per_record(self):
        return self.real_tokens / self.records if self.records else 0.0


def count_tokens(paths, batch_size=1024):
    """TokenCounts of pretraining record files (a path or a list; all of one layout, read
    from the first file that holds records).

    Real tokens are input_mask's ones; sequences are a packed row's largest sequence id.
    """
    paths = [paths] if isinstance(paths, str) else list(paths)
    written = [path for path in paths if tf.io.gfile.stat(path).length > 0]
    if not written:
        return TokenCounts(0, 0, 0, 0, PretrainingLayout())
    lengths = first_record_lengths(written[0])
    layout = pretraining_layout_of(lengths)
    if layout is None:
        raise file_error(written[0], f"not pretraining records (features: {sorted(lengths)})")
    max_seq_length = lengths["input_ids"]
    spec = {"input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64)}
    if layout.packed:
        spec["sequence_ids"] = tf.io.FixedLenFeature([max_seq_length], tf.int64)

    def counts(serialized):
        features = tf.io.parse_example(serialized, spec)
        rows = tf.shape(serialized, out_type=tf.int64)[0]
        real = tf.reduce_sum(features["input_mask"])
        sequences = (tf.reduce_sum(tf.reduce_max(features["sequence_ids"], axis=1))
                     if layout.packed else rows)
        return rows, sequences, real

    dataset = tf.data.TFRecordDataset(paths).batch(batch_size).map(counts)
    records = sequences = real = 0
    for rows, batch_sequences, batch_real in dataset.as_numpy_iterator():
        records += int(rows)
        sequences += int(batch_sequences)
        real += int(batch_real)
    return TokenCounts(records, sequences, real, max_seq_length, layout)
