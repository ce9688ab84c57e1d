"""Pretraining records' layouts (`PretrainingLayout`: the original's, dynamic masks, masked-LM
only, packed rows) and their features, in one table (`PRETRAINING_FEATURES`: name, number of
values, dtype, the layouts that have it). The record writer serializes from it and the
pretraining task parses with its `record_schema`. No TensorFlow: create_pretraining_data
imports it.
"""
import dataclasses

from bert_tf.data.schema import FLOAT32, INPUT_NAMES, INT64, Feature, RecordSchema


@dataclasses.dataclass(frozen=True)
class PretrainingLayout:
    """What a pretraining record holds besides input_ids, input_mask and segment_ids [T].

      masking="static" (the original's): masks drawn when written, `masked_lm_positions`,
        `masked_lm_ids` [P] and `masked_lm_weights` [P] float.
      masking="dynamic": no masks; `masked_lm_candidates` [T]: 0 never masked ([CLS], [SEP],
        padding), 1 a token that starts a masking unit, 2 a token that joins the unit just
        before it (under whole-word masking, a "##" piece right after another candidate; one
        right after [CLS]/[SEP] starts a unit), so a unit is a 1 and the 2s that follow it.
        Masks are drawn when read.
      next_sentence (the original's): `next_sentence_labels` [1] (0: B follows A, 1: random B),
        [S] packed.
      packed: several sequences per row, each with its own [CLS] ... [SEP]:
        `position_ids` [T] (from 0 in each sequence), `sequence_ids` [T] (1, 2, ... per
        sequence, 0 in padding: attention stays within a sequence); with next_sentence also
        `next_sentence_positions` [S] (each sequence's [CLS]) and `next_sentence_weights` [S]
        float (1 for a real sequence, 0 in the row's unused slots), S = max_sequences_per_row.
    The original's records are PretrainingLayout() (static, next_sentence, not packed).
    """
    masking: str = "static"
    next_sentence: bool = True
    packed: bool = False
    max_sequences_per_row: int = 0

    @classmethod
    def of(cls, masking, next_sentence, packed, sequences_per_row):
        """The layout of records with these settings: only packed sentence-pair rows have a
        size per sequence (their next-sentence features)."""
        return cls(masking, next_sentence, packed,
                   sequences_per_row if packed and next_sentence else 0)

    def describe(self):
        objective = "masked-LM + next-sentence" if self.next_sentence else "masked-LM only"
        packed = ""
        if self.packed:
            packed = (f", packed (at most {self.max_sequences_per_row} sequences a row)"
                      if self.max_sequences_per_row else ", packed")
        return f"{self.masking} masks, {objective}{packed}"


ORIGINAL_LAYOUT = PretrainingLayout()


@dataclasses.dataclass(frozen=True)
class PretrainingFeature:
    """One feature of pretraining records.

    values: how many a record holds, "T" max_seq_length, "P" max_predictions_per_seq or "S"
    one per sequence of a row (max_sequences_per_row packed, else 1); present_when: the
    `PretrainingLayout` fields and values of the layouts that have it (none: every layout).
    """
    name: str
    values: str
    dtype: str = INT64
    present_when: tuple = ()

    def present(self, layout):
        return all(getattr(layout, field) == value for field, value in self.present_when)

    def size(self, max_seq_length, max_predictions_per_seq, layout):
        if self.values == "T":
            return max_seq_length
        if self.values == "P":
            return max_predictions_per_seq
        return layout.max_sequences_per_row if layout.packed else 1


def _feature(name, values, dtype=INT64, **present_when):
    return PretrainingFeature(name, values, dtype, tuple(present_when.items()))


# Every feature of every layout, in the order of a layout's `record_schema` (the wire order is
# sorted by name).
PRETRAINING_FEATURES = (
    *(_feature(name, "T") for name in INPUT_NAMES),
    _feature("masked_lm_positions", "P", masking="static"),
    _feature("masked_lm_ids", "P", masking="static"),
    _feature("masked_lm_weights", "P", FLOAT32, masking="static"),
    _feature("masked_lm_candidates", "T", masking="dynamic"),
    _feature("position_ids", "T", packed=True),
    _feature("sequence_ids", "T", packed=True),
    _feature("next_sentence_labels", "S", next_sentence=True),
    _feature("next_sentence_positions", "S", next_sentence=True, packed=True),
    _feature("next_sentence_weights", "S", FLOAT32, next_sentence=True, packed=True),
)


def record_schema(max_seq_length, max_predictions_per_seq, layout=ORIGINAL_LAYOUT):
    """The features of pretraining records of `layout`; the original's layout is
    create_pretraining_data's 7 fixed-length features (run_pretraining's input_fn_builder)."""
    return RecordSchema(
        Feature(feature.name, (feature.size(max_seq_length, max_predictions_per_seq, layout),),
                feature.dtype)
        for feature in PRETRAINING_FEATURES if feature.present(layout))


def pretraining_layout_of(feature_lengths):
    """The PretrainingLayout of a record, from {feature name: number of values} (its first
    record's); None when the names fit no layout."""
    names = set(feature_lengths)
    masking = ("static" if "masked_lm_positions" in names
               else "dynamic" if "masked_lm_candidates" in names else None)
    if masking is None or not set(INPUT_NAMES) <= names:
        return None
    next_sentence = "next_sentence_labels" in names
    return PretrainingLayout.of(masking, next_sentence, "sequence_ids" in names,
                                feature_lengths.get("next_sentence_labels", 0))
