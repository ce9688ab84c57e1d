"""tf.data input pipelines over TFRecord files of tf.train.Example, for every tf.distribute strategy.

One core, `tfrecord_dataset`, serves every task (pretraining, classifier, SQuAD): it takes the
files and a feature spec for `tf.io.parse_single_example` and returns per-replica batches of int32 /
float32 features (int64 cast to int32 as the original does). Pass it to
`strategy.distribute_datasets_from_function` through `dataset_fn(...)`; the InputContext it gets
there decides the per-replica batch size and the shard.

Two orders:
  - shuffled (training, as the original's input_fn): files shuffled and repeated, read in
    parallel (interleave over `cycle_length` files), records shuffled in a buffer, batched with
    drop_remainder (static shapes for TPU/XLA), prefetched. With several input pipelines
    (multi-worker), each reads its own subset of the files, or - with fewer files than pipelines -
    every pipeline reads all files and keeps its 1/N of the records.
  - file order (eval, and reproducible training): records in the order of the files as given,
    repeated (the original's eval input repeats so that max_eval_steps batches always exist), cut
    into global batches; each replica gets its slice of every global batch. So under any strategy
    the global batches are the same as on one device: eval reads exactly the first
    `max_eval_steps * eval_batch_size` records, as the original.
"""
import re

import tensorflow as tf

from bert_tf.errors import file_error


def decode_record(record, feature_spec):
    """Parses one serialized tf.train.Example; int64 -> int32 (the original's `_decode_record`)."""
    return cast_int64(tf.io.parse_single_example(record, feature_spec))


def cast_int64(features):
    """int64 -> int32 for every feature (tf.Example stores int64; the original casts on read)."""
    return {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t
            for name, t in features.items()}


def _first_example(path):
    try:
        record = next(iter(tf.data.TFRecordDataset([str(path)]).take(1)), None)
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError):
        raise file_error(path, "not a TFRecord file (corrupted record at offset 0)") from None
    if record is None:
        raise file_error(path, "holds no record")
    example = tf.train.Example()
    try:
        example.ParseFromString(record.numpy())
    except Exception:  # protobuf's DecodeError
        raise file_error(path, "record 1 is not a tf.train.Example") from None
    return example


def first_record_lengths(path):
    """{feature name: number of values} of the first record of `path` (what
    bert_tf.data.pretraining.record_layout.pretraining_layout_of reads); InputError naming the
    file when it has no readable tf.train.Example."""
    lengths = {}
    for name, feature in _first_example(path).features.feature.items():
        kind = feature.WhichOneof("kind")
        lengths[name] = len(getattr(feature, kind).value) if kind else 0
    return lengths


def check_first_record(path, feature_spec, hint=""):
    """Raises InputError naming `path` if its first record does not fit `feature_spec`.

    Catches the usual mistakes (records made with another --max_seq_length, not a TFRecord file)
    before they surface as an op error deep inside the training loop. `hint` is appended to a
    feature mismatch message (e.g. which flags set the expected lengths).
    """
    features = _first_example(path).features.feature
    for name, spec in feature_spec.items():
        if name not in features:
            raise file_error(path, f"record 1 has no feature {name!r}{hint}")
        feature = features[name]
        values = getattr(feature, feature.WhichOneof("kind")).value if feature.WhichOneof("kind") else []
        expected = int(tf.TensorShape(spec.shape).num_elements())
        if len(values) != expected:
            raise file_error(path, f"record 1: feature {name!r} has {len(values)} values, "
                                   f"expected {expected}{hint}")


def find_bad_record(paths):
    """For the error path only (a DataLossError while reading `paths`): reads each file record by
    record and returns an InputError naming the first damaged file and the byte offset TF reports
    ("corrupted record at N", "truncated record at N"), or None if every file reads cleanly."""
    for path in paths:
        try:
            for _ in tf.data.TFRecordDataset([str(path)]).batch(4096):
                pass
        except tf.errors.DataLossError as e:
            found = re.search(r"(corrupted|truncated) record at (\d+)", e.message or "")
            where = (f"{found.group(1)} record at byte offset {found.group(2)}" if found
                     else (e.message or "data loss").splitlines()[0])
            return file_error(path, f"damaged TFRecord file: {where} (the file is truncated or "
                                    f"its bytes changed after it was written; recreate it)")
    return None


def check_id_ranges(paths, limits, hint="", num_records=64, max_files=16):
    """Raises InputError naming the file and record when a value of an int64 feature is not in
    [0, limit) for `limits` = {feature name: (limit, what limits it)}, `hint` appended (token
    ids against the config's vocab_size:
    records made with another vocabulary), looking at the first `num_records` records of the
    first `max_files` files: a cheap check before training, not a proof."""
    for path in list(paths)[:max_files]:
        try:
            records = [r.numpy() for r in tf.data.TFRecordDataset([str(path)]).take(num_records)]
        except tf.errors.DataLossError:
            raise find_bad_record([path]) or file_error(path, "damaged TFRecord file") from None
        for number, record in enumerate(records, start=1):
            example = tf.train.Example()
            try:
                example.ParseFromString(record)
            except Exception:  # protobuf's DecodeError
                raise file_error(path, f"record {number} is not a tf.train.Example") from None
            for name, (limit, what) in limits.items():
                feature = example.features.feature.get(name)
                values = feature.int64_list.value if feature is not None else ()
                if values and not 0 <= min(values) <= max(values) < limit:
                    bad = max(values) if max(values) >= limit else min(values)
                    raise file_error(path, f"record {number}: {name} holds {bad}, not in "
                                           f"[0, {limit}) ({what}){hint}")


# For the functions tf.data traces: they have no data-dependent Python control flow, and
# AutoGraph's source rewrite costs time at every pipeline built (one per eval / predict pass).
_plain_graph = tf.autograph.experimental.do_not_convert


def _sharding(input_context):
    if input_context is None:
        return 1, 0, 1
    return (input_context.num_input_pipelines, input_context.input_pipeline_id,
            input_context.num_replicas_in_sync)


# Training batches are cut to a multiple of this many tokens, and bucketed by it: the training
# kernels of bert_tf.model.cpu_kernels (XLA) compile once per shape. Eval and predict run none
# and cut to the exact longest example (a faster pass than rounding up to 8).
TRAINING_LENGTH_STEP = 8


def trim_to_longest(batch, sequence_features, multiple):
    """Cuts the [B, T] `sequence_features` of a batch to its longest example (input_mask), rounded
    up to a multiple of `multiple`. Padding positions are masked out of attention, so the real
    positions' outputs are the same up to float rounding."""
    full = tf.shape(batch["input_ids"])[1]
    longest = tf.reduce_max(tf.reduce_sum(tf.cast(batch["input_mask"], tf.int32), axis=1))
    length = tf.minimum((longest + multiple - 1) // multiple * multiple, full)
    return {name: t[:, :length] if name in sequence_features else t for name, t in batch.items()}


EXAMPLE_INDEX = "example_index"
SORT_WINDOW_EXAMPLES = 2048


def sort_windows_by_length(examples, global_batch_size, window_examples=SORT_WINDOW_EXAMPLES):
    """Eval/predict in file order, batched by length: each window of ~`window_examples` records
    (a multiple of the batch) is sorted by length (stable), so a batch cut to its longest
    example (`trim_to_longest`) carries little padding. Each example gets its record number as
    `EXAMPLE_INDEX`; `bert_tf.training.gathering.gather_outputs` puts the outputs back in file order.
    Memory stays bounded by the window (the file is never read whole)."""
    window = max(1, window_examples // global_batch_size) * global_batch_size

    @_plain_graph
    def sort(batch):
        order = tf.argsort(tf.reduce_sum(tf.cast(batch["input_mask"], tf.int32), axis=1),
                           stable=True)
        return {name: tf.gather(t, order) for name, t in batch.items()}

    examples = examples.enumerate().map(_plain_graph(
        lambda index, example: dict(example, **{EXAMPLE_INDEX: index})))
    return examples.batch(window).map(sort).unbatch()


def length_bucket_boundaries(max_seq_length, width=TRAINING_LENGTH_STEP):
    """Bucket edges every `width` tokens: the rounding of training batches, so no new shapes.
    Narrow buckets train faster than 32-token ones (`python -m bench.finetuning.glue_throughput
    --ours_bucket_width=32` for the comparison; figures in docs/fine_tuning.md, length
    bucketing)."""
    return list(range(width, max_seq_length, width))


def tfrecord_dataset(input_files, feature_spec, global_batch_size, *, shuffle, input_context=None,
                     seed=None, shuffle_buffer_size=100, cycle_length=4, repeat=True,
                     sequence_features=None, transform=None):
    """Per-replica batches of decoded examples from `input_files` (a list of paths).

    Args:
      feature_spec: dict for tf.io.parse_single_example.
      global_batch_size: examples per step over all replicas (train_batch_size / eval_batch_size).
      shuffle: True for the original's training order, False for file order (see module doc).
      input_context: the tf.distribute.InputContext (None: one replica).
      seed: makes the shuffled order reproducible (None: different every run, as the original).
      shuffle_buffer_size: records in the shuffle buffer (the original: 100).
      cycle_length: files read in parallel (the original: min(4, number of files)).
      repeat: file order only: False reads the records once (eval / predict of a task that pads
        its records to a multiple of the batch size), True repeats them (pretraining's eval).
      sequence_features: names of the [T] features; given, batches are not padded to the full
        length: training batches group examples of similar length (buckets of 8 tokens), eval
        and predict batches are read in length-sorted windows (`sort_windows_by_length`), and
        every batch is cut to its longest example (`trim_to_longest`). Not for TPUs, which
        want one static shape.
      transform: optional f(index, example, pipeline_id) -> example, applied to each decoded
        example before batching, `index` its place in this pipeline's stream (0, 1, ...:
        what a resumed run replays) (dynamic masking: bert_tf.tasks.pretraining.dynamic_masking).
    """
    num_pipelines, pipeline_id, num_replicas = _sharding(input_context)
    if global_batch_size % num_replicas:
        raise ValueError(f"batch size {global_batch_size} is not divisible by the "
                         f"{num_replicas} replicas")
    per_replica = global_batch_size // num_replicas
    files = [str(f) for f in input_files]
    options = tf.data.Options()
    # We shard ourselves (below); tf.distribute must not shard again.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    if not shuffle:
        # Eval and predict make an iterator per pass: deleting one waits for tf.data's autotuning
        # thread, which on CPU can take longer than the pass. AUTOTUNE then means fixed defaults.
        options.autotune.enabled = False

    @_plain_graph
    def decode(record):
        return decode_record(record, feature_spec)

    if shuffle:
        shard_files = num_pipelines > 1 and len(files) >= num_pipelines
        d = tf.data.Dataset.from_tensor_slices(tf.constant(files))
        if shard_files:
            d = d.shard(num_pipelines, pipeline_id)
        num_files = len(files[pipeline_id::num_pipelines]) if shard_files else len(files)
        d = d.shuffle(num_files, seed=seed, reshuffle_each_iteration=True).repeat()
        d = d.interleave(tf.data.TFRecordDataset, cycle_length=min(cycle_length, num_files),
                         num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed is not None)
        if num_pipelines > 1 and not shard_files:
            d = d.shard(num_pipelines, pipeline_id)
        d = d.shuffle(shuffle_buffer_size, seed=seed)
        d = d.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=seed is not None)
        if transform is not None:
            d = _transformed(d, transform, pipeline_id)
        if sequence_features:
            max_length = int(tf.TensorShape(feature_spec["input_ids"].shape)[0])
            boundaries = length_bucket_boundaries(max_length)
            d = d.bucket_by_sequence_length(
                _plain_graph(lambda example: tf.reduce_sum(example["input_mask"])), boundaries,
                [per_replica] * (len(boundaries) + 1), drop_remainder=True)
        else:
            d = d.batch(per_replica, drop_remainder=True)
    else:
        d = tf.data.TFRecordDataset(files)
        if repeat:
            d = d.repeat()
        d = d.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
        if transform is not None:  # every pipeline reads the same stream here
            d = _transformed(d, transform, 0)
        if sequence_features and not repeat:
            d = sort_windows_by_length(d, global_batch_size)
        d = d.batch(global_batch_size, drop_remainder=True)
    if sequence_features:
        multiple = TRAINING_LENGTH_STEP if shuffle else 1
        d = d.map(_plain_graph(lambda batch: trim_to_longest(batch, sequence_features, multiple)))
    if not shuffle and num_replicas > 1:
        replicas_per_pipeline = num_replicas // num_pipelines
        first = pipeline_id * replicas_per_pipeline

        @_plain_graph
        def replica_slices(batch):
            split = {k: tf.reshape(v, tf.concat([[num_replicas, per_replica], tf.shape(v)[1:]], 0))
                     for k, v in batch.items()}
            mine = {k: v[first:first + replicas_per_pipeline] for k, v in split.items()}
            return tf.data.Dataset.from_tensor_slices(mine)

        # Consecutive elements go to consecutive local replicas (cut first: every replica of
        # a step gets the same length).
        d = d.flat_map(replica_slices)
    return d.with_options(options).prefetch(tf.data.AUTOTUNE)


def _transformed(examples, transform, pipeline_id):
    return examples.enumerate().map(
        _plain_graph(lambda index, example: transform(index, example, pipeline_id)),
        num_parallel_calls=tf.data.AUTOTUNE)


def dataset_fn(input_files, feature_spec, global_batch_size, **kwargs):
    """A function of the InputContext, for strategy.distribute_datasets_from_function."""

    def make(input_context=None):
        return tfrecord_dataset(input_files, feature_spec, global_batch_size,
                                input_context=input_context, **kwargs)

    return make
