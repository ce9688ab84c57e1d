"""The TFRecord features every task reads and writes.

One place for what every task shares with the original release (the packing of its inputs is
`bert_tf.text.packing`'s):
- the feature specs of each task's records (`pretraining_feature_spec`,
  `classifier_feature_spec`, `tagging_feature_spec`, `squad_feature_spec`,
  `multiple_choice_feature_spec`), in the original's
  names: run_classifier's `input_ids`, `input_mask`, `segment_ids`, `label_ids`,
  `is_real_example`; run_squad's `unique_ids`, `start_positions`, `end_positions`,
  `is_impossible`;
- writing records (`write_examples`): tf.train.Example files written under a temporary name and
  renamed when complete.

The pretraining data writer serializes its records by hand for speed (bert_tf.data.pretraining_data);
its spec lives here with the others.
"""
import dataclasses

import tensorflow as tf

from bert_tf.io_utils import atomic_output

# ---------------------------------------------------------------------------------------------
# Feature specs (for tf.io.parse_single_example)
# ---------------------------------------------------------------------------------------------


def _fixed(length, dtype):
    return tf.io.FixedLenFeature([length], dtype)


def _input_spec(max_seq_length):
    return {name: _fixed(max_seq_length, tf.int64)
            for name in ("input_ids", "input_mask", "segment_ids")}


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


def pretraining_feature_spec(max_seq_length, max_predictions_per_seq, layout=ORIGINAL_LAYOUT):
    """The features of pretraining records (`PretrainingLayout`); the original's layout is
    create_pretraining_data's 7 fixed-length features (run_pretraining's input_fn_builder)."""
    spec = _input_spec(max_seq_length)
    if layout.masking == "static":
        spec.update(masked_lm_positions=_fixed(max_predictions_per_seq, tf.int64),
                    masked_lm_ids=_fixed(max_predictions_per_seq, tf.int64),
                    masked_lm_weights=_fixed(max_predictions_per_seq, tf.float32))
    else:
        spec.update(masked_lm_candidates=_fixed(max_seq_length, tf.int64))
    if layout.packed:
        spec.update(position_ids=_fixed(max_seq_length, tf.int64),
                    sequence_ids=_fixed(max_seq_length, tf.int64))
    if layout.next_sentence:
        if layout.packed:
            rows = layout.max_sequences_per_row
            spec.update(next_sentence_labels=_fixed(rows, tf.int64),
                        next_sentence_positions=_fixed(rows, tf.int64),
                        next_sentence_weights=_fixed(rows, tf.float32))
        else:
            spec.update(next_sentence_labels=_fixed(1, tf.int64))
    return spec


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


def classifier_feature_spec(max_seq_length, regression=False, multi_label_size=None):
    """run_classifier's records: inputs, `label_ids` [] and `is_real_example` [].

    Regression (STS-B, which the original does not have) stores a float label under the same
    name; a multi-label task (`multi_label_size`: its number of labels) a multi-hot
    `label_ids` [multi_label_size].
    """
    if multi_label_size is not None:
        label_ids = _fixed(multi_label_size, tf.int64)
    else:
        label_ids = tf.io.FixedLenFeature([], tf.float32 if regression else tf.int64)
    return dict(_input_spec(max_seq_length), label_ids=label_ids,
                is_real_example=tf.io.FixedLenFeature([], tf.int64))


def tagging_feature_spec(max_seq_length):
    """Token classification records: inputs, `label_ids` [T], `label_mask` [T] (1 where a word's
    first piece carries its label), `is_real_example` []."""
    return dict(_input_spec(max_seq_length),
                label_ids=_fixed(max_seq_length, tf.int64),
                label_mask=_fixed(max_seq_length, tf.int64),
                is_real_example=tf.io.FixedLenFeature([], tf.int64))


def multiple_choice_feature_spec(num_choices, max_seq_length):
    """Multiple-choice records (no original: SWAG's task of the paper): one record per question,
    its `num_choices` packed sequences flattened (`input_ids`, `input_mask`, `segment_ids`
    [num_choices * max_seq_length], parsed as [num_choices, max_seq_length]), `label_ids` []
    (the right ending's index) and `is_real_example` [], as run_classifier's."""
    shape = [num_choices, max_seq_length]
    return dict({name: tf.io.FixedLenFeature(shape, tf.int64)
                 for name in ("input_ids", "input_mask", "segment_ids")},
                label_ids=tf.io.FixedLenFeature([], tf.int64),
                is_real_example=tf.io.FixedLenFeature([], tf.int64))


def squad_feature_spec(max_seq_length, is_training):
    """run_squad's records: `unique_ids` [], inputs, and for training `start_positions` [],
    `end_positions` [], `is_impossible` [] (the original's FeatureWriter and input_fn_builder;
    the original's reader leaves `is_impossible` out, its records have it)."""
    spec = dict(unique_ids=tf.io.FixedLenFeature([], tf.int64), **_input_spec(max_seq_length))
    if is_training:
        for name in ("start_positions", "end_positions", "is_impossible"):
            spec[name] = tf.io.FixedLenFeature([], tf.int64)
    return spec


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------


def make_example(features):
    """A tf.train.Example from {name: int, float, or a list of them} (floats as FloatList).

    The type follows the spec: a float value (or a list holding one) is a FloatList, others
    Int64List, as the original's `create_int_feature` / `create_float_feature`.
    """
    feature = {}
    for name, value in features.items():
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if any(isinstance(v, float) for v in values):
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def write_examples(path, feature_dicts):
    """Writes tf.train.Examples (from `make_example` dicts) to a TFRecord file at `path`.

    Written under a temporary name and renamed when complete, so an interrupted run never
    leaves a partial file that a rerun would take as its cache. Returns the number written.
    """
    count = 0
    with atomic_output(path) as tmp:
        with tf.io.TFRecordWriter(tmp) as writer:
            for features in feature_dicts:
                writer.write(make_example(features).SerializeToString(deterministic=True))
                count += 1
    return count
