"""Real (non-padding) tokens of pretraining record files, for throughput figures.

`count_tokens(paths)` reads any `PretrainingLayout` (packed or not) and returns a `TokenCounts`:
records, sequences, real tokens and the padding fraction, so that a bench can report real
tokens per second rather than padded positions per second.
"""
import dataclasses

import tensorflow as tf

from bert_tf.data.features import PretrainingLayout, pretraining_layout_of
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


def record_feature_lengths(path, compression_type=None):
    """{feature name: number of values} of the first record of `path` (None if it is empty)."""
    for record in tf.data.TFRecordDataset(path, compression_type=compression_type).take(1):
        example = tf.train.Example.FromString(record.numpy())
        return {name: len(getattr(feature, feature.WhichOneof("kind")).value)
                for name, feature in example.features.feature.items()}
    return None


def count_tokens(paths, compression_type=None, batch_size=1024):
    """TokenCounts of pretraining record files (a path or a list; all of one layout).

    Real tokens are input_mask's ones; sequences are a packed row's largest sequence id.
    """
    paths = [paths] if isinstance(paths, str) else list(paths)
    lengths = None
    for path in paths:
        lengths = record_feature_lengths(path, compression_type)
        if lengths is not None:
            break
    if lengths is None:
        return TokenCounts(0, 0, 0, 0, PretrainingLayout())
    layout = pretraining_layout_of(lengths)
    if layout is None:
        raise file_error(paths[0], f"not pretraining records (features: {sorted(lengths)})")
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

    dataset = (tf.data.TFRecordDataset(paths, compression_type=compression_type)
               .batch(batch_size).map(counts))
    records = sequences = real = 0
    for rows, batch_sequences, batch_real in dataset.as_numpy_iterator():
        records += int(rows)
        sequences += int(batch_sequences)
        real += int(batch_real)
    return TokenCounts(records, sequences, real, max_seq_length, layout)
