"""Model inputs from tokens, and the TFRecord features every task reads and writes.

One place for what every task shares with the original release:
- packing: `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, segment ids 0 then 1, input mask 1 on
  tokens, zero padding to max_seq_length; a pair is shortened by the original's
  `_truncate_seq_pair` (pop from the longer list, the second on ties), a single text cut to
  max_seq_length - 2 tokens (`pack_tokens`, `convert_text_pair`);
- the feature specs of each task's records (`pretraining_feature_spec`,
  `classifier_feature_spec`, `tagging_feature_spec`, `squad_feature_spec`), in the original's
  names: run_classifier's `input_ids`, `input_mask`, `segment_ids`, `label_ids`,
  `is_real_example`; run_squad's `unique_ids`, `start_positions`, `end_positions`,
  `is_impossible`;
- writing records (`write_examples`): tf.train.Example files written under a temporary name and
  renamed when complete.

The pretraining data writer serializes its records by hand for speed (bert_tf.data.pretraining_data);
its spec lives here with the others.
"""
import dataclasses

CLS, SEP = "[CLS]", "[SEP]"


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """The original's `_truncate_seq_pair`: pops from the longer list until the pair fits.

    Shortening the longer one token at a time keeps more of a short text than cutting both by
    the same proportion would. Modifies the lists in place.
    """
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def pack_tokens(tokens_a, tokens_b, max_seq_length):
    """(tokens, segment_ids) of `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, truncated to fit.

    `tokens_b` None (or empty, as the original's `if tokens_b`) means a single text. The input
    lists are not modified.
    """
    tokens_a = list(tokens_a)
    tokens_b = list(tokens_b) if tokens_b else None
    if tokens_b:
        truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    elif len(tokens_a) > max_seq_length - 2:
        tokens_a = tokens_a[:max_seq_length - 2]
    tokens = [CLS] + tokens_a + [SEP]
    segment_ids = [0] * len(tokens)
    if tokens_b:
        tokens += tokens_b + [SEP]
        segment_ids += [1] * (len(tokens_b) + 1)
    return tokens, segment_ids


@dataclasses.dataclass
class PackedInputs:
    """One example's model inputs, zero-padded to max_seq_length, and its tokens (unpadded)."""
    tokens: list
    input_ids: list
    input_mask: list
    segment_ids: list


def pad_inputs(tokens, input_ids, segment_ids, max_seq_length):
    """Zero-pads ids and segments to max_seq_length and builds the mask (1 on real tokens)."""
    padding = [0] * (max_seq_length - len(input_ids))
    return PackedInputs(tokens, list(input_ids) + padding, [1] * len(input_ids) + padding,
                        list(segment_ids) + padding)


def convert_text_pair(tokenizer, text_a, text_b, max_seq_length):
    """The original's convert_single_example without the label: tokenize, pack, ids, pad."""
    tokens_a = tokenizer.tokenize(text_a)
    tokens_b = tokenizer.tokenize(text_b) if text_b else None
    tokens, segment_ids = pack_tokens(tokens_a, tokens_b, max_seq_length)
    return pad_inputs(tokens, tokenizer.convert_tokens_to_ids(tokens), segment_ids,
                      max_seq_length)


# ---------------------------------------------------------------------------------------------
# Feature specs (for tf.io.parse_single_example)
# ---------------------------------------------------------------------------------------------


def _fixed(length, dtype):
    import tensorflow as tf
    return tf.io.FixedLenFeature([length], dtype)


def _input_spec(max_seq_length):
    import tensorflow as tf
    return {name: _fixed(max_seq_length, tf.int64)
            for name in ("input_ids", "input_mask", "segment_ids")}


def pretraining_feature_spec(max_seq_length, max_predictions_per_seq):
    """create_pretraining_data's 7 fixed-length features (run_pretraining's input_fn_builder)."""
    import tensorflow as tf
    return dict(_input_spec(max_seq_length),
                masked_lm_positions=_fixed(max_predictions_per_seq, tf.int64),
                masked_lm_ids=_fixed(max_predictions_per_seq, tf.int64),
                masked_lm_weights=_fixed(max_predictions_per_seq, tf.float32),
                next_sentence_labels=_fixed(1, tf.int64))


def classifier_feature_spec(max_seq_length, regression=False):
    """run_classifier's records: inputs, `label_ids` [] and `is_real_example` [].

    Regression (STS-B, which the original does not have) stores a float label under the same
    name.
    """
    import tensorflow as tf
    return dict(_input_spec(max_seq_length),
                label_ids=tf.io.FixedLenFeature([], tf.float32 if regression else tf.int64),
                is_real_example=tf.io.FixedLenFeature([], tf.int64))


def tagging_feature_spec(max_seq_length):
    """Token classification records: inputs, `label_ids` [T], `label_mask` [T] (1 where a word's
    first piece carries its label), `is_real_example` []."""
    import tensorflow as tf
    return dict(_input_spec(max_seq_length),
                label_ids=_fixed(max_seq_length, tf.int64),
                label_mask=_fixed(max_seq_length, tf.int64),
                is_real_example=tf.io.FixedLenFeature([], tf.int64))


def squad_feature_spec(max_seq_length, is_training):
    """run_squad's records: `unique_ids` [], inputs, and for training `start_positions` [],
    `end_positions` [], `is_impossible` [] (the original's FeatureWriter and input_fn_builder;
    the original's reader leaves `is_impossible` out, its records have it)."""
    import tensorflow as tf
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
    import tensorflow as tf

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
    import tensorflow as tf

    from bert_tf.io_utils import atomic_output

    count = 0
    with atomic_output(path) as tmp:
        with tf.io.TFRecordWriter(tmp) as writer:
            for features in feature_dicts:
                writer.write(make_example(features).SerializeToString(deterministic=True))
                count += 1
    return count
