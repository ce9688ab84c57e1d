"""TFRecord files of tf.train.Examples: written from a `RecordSchema`
(`bert_tf.data.schema`) and read back with the tf.io parsing spec of the same schema.

Files are written under a temporary name and renamed when complete.
"""
import tensorflow as tf

from bert_tf.data.schema import FLOAT32
from bert_tf.io_utils import atomic_output


def feature_spec(schema):
    """{name: tf.io.FixedLenFeature} of `schema`'s features, for tf.io.parse_single_example."""
    return {feature.name: tf.io.FixedLenFeature(
        list(feature.shape), tf.float32 if feature.dtype == FLOAT32 else tf.int64)
        for feature in schema}


def _values(value):
    if isinstance(value, (list, tuple)):
        return value
    if hasattr(value, "tolist"):  # numpy
        value = value.tolist()
        return value if isinstance(value, list) else [value]
    return [value]


def make_example(record, schema=None):
    """A tf.train.Example from {name: a number, or a (flat) list of them}: each feature as
    `schema` types it (float32 a FloatList, int64 an Int64List; a record must hold exactly its
    features), or without a schema a FloatList for float values, Int64List for others, as the
    original's `create_float_feature` / `create_int_feature`."""
    feature = {}
    if schema is not None:
        if set(record) != set(schema.names):
            raise ValueError(f"a record of {sorted(record)} for the features {schema.names}")
        for spec in schema:
            values = _values(record[spec.name])
            if spec.dtype == FLOAT32:
                feature[spec.name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
            else:
                feature[spec.name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    else:
        for name, value in record.items():
            values = _values(value)
            if any(isinstance(v, float) for v in values):
                feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
            else:
                feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def write_examples(path, records, schema=None):
    """Writes tf.train.Examples (`make_example` of each record) to a TFRecord file at `path`.

    Written under a temporary name and renamed when complete, so an interrupted run never
    leaves a partial file that a rerun would take as its cache. Returns the number written.
    """
    count = 0
    with atomic_output(path) as tmp:
        with tf.io.TFRecordWriter(tmp) as writer:
            for record in records:
                writer.write(make_example(record, schema).SerializeToString(deterministic=True))
                count += 1
    return count
