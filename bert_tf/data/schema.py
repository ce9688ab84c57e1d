"""What a record holds, defined once per layout: each feature's name, shape and dtype.

A task's writer builds its tf.train.Examples from its `RecordSchema` and its reader the
tf.io parsing spec (`bert_tf.data.records`), so the two cannot disagree. No TensorFlow here:
create_pretraining_data reads its layout without it.
"""
import dataclasses
import math

INT64 = "int64"
FLOAT32 = "float32"
# Every task's model inputs, [seq_length] each (int64).
INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")


@dataclasses.dataclass(frozen=True)
class Feature:
    """One fixed-length feature: `shape` () for a scalar, (n,) or (n, m) (written flat);
    `padding`, each of its values in the record that stands for no example."""
    name: str
    shape: tuple = ()
    dtype: str = INT64
    padding: int = 0

    @property
    def size(self):
        """How many values the record holds."""
        return math.prod(self.shape)

    def padded(self):
        """The feature's values in the padding record."""
        value = float(self.padding) if self.dtype == FLOAT32 else self.padding
        return value if not self.shape else [value] * self.size


class RecordSchema:
    """The features of one record layout, in order."""

    def __init__(self, features):
        self.features = tuple(features)
        self.names = tuple(feature.name for feature in self.features)
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"features named twice: {self.names}")

    def __iter__(self):
        return iter(self.features)

    def lengths(self):
        """{name: number of values} (as `bert_tf.data.input_pipeline.first_record_lengths`
        reads them back)."""
        return {feature.name: feature.size for feature in self.features}

    def padding_record(self):
        """The record that stands for no example, which pads eval and predict to whole batches
        as the original's PaddingInputExample (TPU-style): every feature its `padding`, zero
        unless the feature says otherwise (`is_real_example` 0)."""
        return {feature.name: feature.padded() for feature in self}


def input_features(shape):
    """input_ids, input_mask and segment_ids of `shape` (int64): every task's model inputs."""
    return [Feature(name, tuple(shape)) for name in INPUT_NAMES]
