"""bert_tf.data.input_pipeline: record order against the original's input_fn, shuffling, sharding."""
import collections

import numpy as np
import pytest
import tensorflow as tf

import pretraining_fixtures as fx
from bert_tf.data import input_pipeline
from bert_tf.tasks.pretraining.task import pretraining_feature_spec

SPEC = pretraining_feature_spec(fx.SEQ_LENGTH, fx.MAX_PREDICTIONS)


def key(ids):
    return tuple(int(i) for i in ids)


def take(dataset, n):
    return [{k: v.numpy() for k, v in batch.items()} for batch in dataset.take(n)]


def test_eval_order_matches_the_original_input_fn(refbert, monkeypatch, tmp_path):
    """File order, repeated, batch by batch: the reference's eval input_fn gives the same."""
    rp = fx.reference_run_pretraining(refbert, monkeypatch)
    paths, _ = fx.write_record_files(tmp_path, 2, 5)
    v1 = refbert.v1
    with v1.Graph().as_default():
        input_fn = rp.input_fn_builder(paths, fx.SEQ_LENGTH, fx.MAX_PREDICTIONS, is_training=False)
        next_batch = v1.data.make_one_shot_iterator(input_fn({"batch_size": 4})).get_next()
        with v1.Session() as sess:
            expected = [sess.run(next_batch) for _ in range(6)]  # 24 records > 10: wraps around
    ours = take(input_pipeline.tfrecord_dataset(paths, SPEC, 4, shuffle=False), 6)
    for want, got in zip(expected, ours):
        assert sorted(got) == sorted(want)
        for name in want:
            assert got[name].dtype == want[name].dtype  # int32 (cast) and float32
            np.testing.assert_array_equal(got[name], want[name])
    # Two replicas: each gets its half of every global batch, in order.
    context = [tf.distribute.InputContext(1, 0, 2)]
    halves = take(input_pipeline.tfrecord_dataset(paths, SPEC, 4, shuffle=False,
                                                  input_context=context[0]), 12)
    for step, want in enumerate(expected):
        joined = np.concatenate([halves[2 * step]["input_ids"], halves[2 * step + 1]["input_ids"]])
        np.testing.assert_array_equal(joined, want["input_ids"])


def test_training_order_is_shuffled_complete_and_static(tmp_path):
    paths, examples = fx.write_record_files(tmp_path, 3, 8)
    everything = collections.Counter(key(e["input_ids"]) for e in examples)
    dataset = input_pipeline.tfrecord_dataset(paths, SPEC, 4, shuffle=True, seed=7)
    for name, spec in dataset.element_spec.items():
        assert spec.shape[0] == 4  # drop_remainder: static batch dimension
        assert spec.dtype in (tf.int32, tf.float32)
    batches = take(dataset, 24)  # 96 records = 4 epochs
    seen = collections.Counter(key(ids) for b in batches for ids in b["input_ids"])
    assert set(seen) == set(everything)
    assert sum(seen.values()) == 96
    file_order = [key(e["input_ids"]) for e in examples]
    assert [key(ids) for b in batches[:6] for ids in b["input_ids"]] != file_order
    again = take(input_pipeline.tfrecord_dataset(paths, SPEC, 4, shuffle=True, seed=7), 24)
    for a, b in zip(batches, again):
        np.testing.assert_array_equal(a["input_ids"], b["input_ids"])


@pytest.mark.parametrize("num_files", [4, 1])
def test_training_shards_by_file_or_by_data(tmp_path, num_files):
    """Two input pipelines (workers) read disjoint halves: by file, or by record with one file."""
    paths, examples = fx.write_record_files(tmp_path, num_files, 24 // num_files)
    everything = {key(e["input_ids"]) for e in examples}
    seen = []
    for pipeline_id in range(2):
        context = tf.distribute.InputContext(2, pipeline_id, 2)
        d = input_pipeline.tfrecord_dataset(paths, SPEC, 4, shuffle=True, seed=1,
                                            input_context=context)
        assert d.element_spec["input_ids"].shape[0] == 2  # per-replica batch
        seen.append({key(ids) for b in take(d, 30) for ids in b["input_ids"]})
    assert not seen[0] & seen[1]
    assert seen[0] | seen[1] == everything
    assert len(seen[0]) == len(seen[1]) == 12


def test_first_record_check_names_the_file(tmp_path):
    from bert_tf.errors import InputError
    paths, _ = fx.write_record_files(tmp_path, 1, 2)
    input_pipeline.check_first_record(paths[0], SPEC)  # fits
    with pytest.raises(InputError, match=r"records-00\.tfrecord: record 1: feature 'input_ids' "
                                         r"has 32 values, expected 48 \(hint\)"):
        input_pipeline.check_first_record(paths[0], pretraining_feature_spec(48, 5), " (hint)")
    text = tmp_path / "notes.txt"
    text.write_text("not records\n")
    with pytest.raises(InputError, match=r"notes\.txt: not a TFRecord file"):
        input_pipeline.check_first_record(text, SPEC)


def test_predict_batches_sorted_by_length_in_windows_and_restored(tmp_path):
    """Eval/predict with sequence_features: each window of records is sorted by length, every
    record is read exactly once, batches are cut to their longest example, and gather_outputs
    returns the outputs in file order."""
    from bert_tf.data.records import write_examples
    from bert_tf.training import gathering
    from bert_tf.tasks.classification.preprocessor import classifier_feature_spec

    rng = np.random.RandomState(0)
    lengths = rng.randint(2, 33, size=40)
    records = []
    for i, length in enumerate(lengths):
        ids = list(range(1, length + 1)) + [0] * (32 - length)
        records.append({"input_ids": ids, "input_mask": [1] * length + [0] * (32 - length),
                        "segment_ids": [0] * 32, "label_ids": i, "is_real_example": 1})
    path = str(tmp_path / "eval.tf_record")
    write_examples(path, records)
    make = input_pipeline.dataset_fn(
        [path], classifier_feature_spec(32), 4, shuffle=False, repeat=False,
        sequence_features=("input_ids", "input_mask", "segment_ids"))
    batches = list(input_pipeline.sort_windows_by_length(
        tf.data.TFRecordDataset([path]).map(
            lambda r: input_pipeline.decode_record(r, classifier_feature_spec(32))),
        4, window_examples=16).batch(4))
    seen = np.concatenate([b[input_pipeline.EXAMPLE_INDEX].numpy() for b in batches])
    assert sorted(seen) == list(range(40))
    for start in range(0, 40, 16):  # windows of 16 records, sorted within
        window = seen[start:start + 16]
        assert sorted(window) == list(range(start, min(start + 16, 40)))
        assert list(lengths[window]) == sorted(lengths[window])
    # The library's default window covers these 40 records: batches are globally sorted and cut
    # to their exact longest example.
    widths = [b["input_ids"].shape[1] for b in make()]
    ordered = sorted(lengths)
    assert widths == [max(ordered[i:i + 4]) for i in range(0, 40, 4)]
    # Training batches (XLA kernels: one compile per shape) are cut to a multiple of 8 instead.
    train = input_pipeline.tfrecord_dataset(
        [path], classifier_feature_spec(32), 4, shuffle=True, seed=1,
        sequence_features=("input_ids", "input_mask", "segment_ids"))
    for batch in train.take(20):
        width, longest = batch["input_ids"].shape[1], int(tf.reduce_max(
            tf.reduce_sum(batch["input_mask"], axis=1)))
        assert width % 8 == 0 and longest <= width < longest + 8

    class Echo:  # a task whose per-example output is its label, to check the order
        def outputs(self, model, batch, training):
            return {}

        def predict_outputs(self, batch, outputs):
            return {"label": batch["label_ids"]}

    strategy = tf.distribute.get_strategy()
    gathered = gathering.gather_outputs(strategy, None, Echo(), make, 10, "predict")
    assert list(gathered) == ["label"]
    assert list(gathered["label"]) == list(range(40))


def test_the_shuffle_buffer_bounds_how_far_a_record_moves(tmp_path):
    """A task's training order through its config's shuffle_buffer_size (tf.data's buffer):
    1 keeps file order; the original's 100 cannot bring a record forward by 100 places or
    more; one as large as the records draws from all of them."""
    from bert_tf.data.records import write_examples
    from bert_tf.tasks.base import Records
    from bert_tf.tasks.classification.task import ClassificationConfig, ClassificationTask

    count = 400
    path = str(tmp_path / "train.tf_record")
    write_examples(path, [{"input_ids": [1] * 8, "input_mask": [1] * 8, "segment_ids": [0] * 8,
                           "label_ids": i, "is_real_example": 1} for i in range(count)])

    def first_epoch(buffer_size):
        task = ClassificationTask(ClassificationConfig(
            max_seq_length=8, labels=[str(i) for i in range(count)],
            records={"train": Records((path,), count)}, shuffle_buffer_size=buffer_size))
        batches = task.dataset_fn("train", 8, seed=1)().take(count // 8)
        return [int(label) for batch in batches for label in batch["label_ids"]]

    assert first_epoch(1) == list(range(count))
    order = first_epoch(100)
    # The record read k-th can be drawn once the buffer holds it: by the (k - 99)-th draw.
    assert all(label <= place + 99 for place, label in enumerate(order))
    assert order != list(range(count))
    whole = first_epoch(count)
    assert sorted(whole[:count // 2]) != sorted(order[:count // 2])
    assert max(whole[:10]) >= 200  # from the whole set: 10 draws all below 200 is ~1e-3
