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


def pretraining_feature_spec(max_seq_length, max_predictions_per_seq):
    """create_pretraining_data's 7 fixed-length features (run_pretraining's input_fn_builder)."""
    return dict(_input_spec(max_seq_length),
                masked_lm_positions=_fixed(max_predictions_per_seq, tf.int64),
                masked_lm_ids=_fixed(max_predictions_per_seq, tf.int64),
                masked_lm_weights=_fixed(max_predictions_per_seq, tf.float32),
                next_sentence_labels=_fixed(1, tf.int64))


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
