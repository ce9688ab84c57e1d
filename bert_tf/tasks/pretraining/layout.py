"""Pretraining records' layouts (`PretrainingLayout`: the original's, dynamic masks,
masked-LM only, packed rows) and each one's `record_schema`, which the data generator writes
and run_pretraining reads. No TensorFlow: create_pretraining_data imports it.
"""
import dataclasses

from bert_tf.data.schema import FLOAT32, Feature, RecordSchema, input_features


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

    def describe(self):
        objective = "masked-LM + next-sentence" if self.next_sentence else "masked-LM only"
        packed = ""
        if self.packed:
            packed = (f", packed (at most {self.max_sequences_per_row} sequences a row)"
                      if self.max_sequences_per_row else ", packed")
        return f"{self.masking} masks, {objective}{packed}"


ORIGINAL_LAYOUT = PretrainingLayout()


def record_schema(max_seq_length, max_predictions_per_seq, layout=ORIGINAL_LAYOUT):
    """The features of pretraining records of `layout`; the original's layout is
    create_pretraining_data's 7 fixed-length features (run_pretraining's input_fn_builder)."""
    features = input_features([max_seq_length])
    if layout.masking == "static":
        features += [Feature("masked_lm_positions", (max_predictions_per_seq,)),
                     Feature("masked_lm_ids", (max_predictions_per_seq,)),
                     Feature("masked_lm_weights", (max_predictions_per_seq,), FLOAT32)]
    else:
        features.append(Feature("masked_lm_candidates", (max_seq_length,)))
    if layout.packed:
        features += [Feature("position_ids", (max_seq_length,)),
                     Feature("sequence_ids", (max_seq_length,))]
    if layout.next_sentence:
        if layout.packed:
            rows = layout.max_sequences_per_row
            features += [Feature("next_sentence_labels", (rows,)),
                         Feature("next_sentence_positions", (rows,)),
                         Feature("next_sentence_weights", (rows,), FLOAT32)]
        else:
            features.append(Feature("next_sentence_labels", (1,)))
    return RecordSchema(features)


def pretraining_layout_of(feature_lengths):
    """The PretrainingLayout of a record, from {feature name: number of values} (its first
    record's); None when the names fit no layout."""
    names = set(feature_lengths)
    masking = ("static" if "masked_lm_positions" in names
               else "dynamic" if "masked_lm_candidates" in names else None)
    if masking is None or not {"input_ids", "input_mask", "segment_ids"} <= names:
        return None
    packed = "sequence_ids" in names
    next_sentence = "next_sentence_labels" in names
    rows = feature_lengths["next_sentence_labels"] if packed and next_sentence else 0
    return PretrainingLayout(masking, next_sentence, packed, rows)


