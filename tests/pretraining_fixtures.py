"""Tiny pretraining fixtures shared by tests/tasks/pretraining/test_pretraining*.py, tests/data/pretraining/ and tests/data/test_input_pipeline.py.

Records are written directly as tf.train.Example with the original's 7 features (random ids, a
few masked positions with weight 1 and zero padding after them, as create_pretraining_data
writes them), and the model is a 2-layer, hidden-32 BERT, so that every test stays small.
"""
import json
import os

import numpy as np

SEQ_LENGTH = 32
MAX_PREDICTIONS = 5
VOCAB_SIZE = 120

TINY_CONFIG = {
    "vocab_size": VOCAB_SIZE, "hidden_size": 32, "num_hidden_layers": 2,
    "num_attention_heads": 2, "intermediate_size": 64, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
    "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02,
}


def write_config(directory, **changes):
    path = os.path.join(directory, "bert_config.json")
    with open(path, "w") as f:
        json.dump(dict(TINY_CONFIG, **changes), f)
    return path


def make_examples(n, seed, seq_length=SEQ_LENGTH, max_predictions=MAX_PREDICTIONS):
    """n feature dicts (numpy) shaped like create_pretraining_data's records.

    The masked-LM targets depend on the visible tokens (id of the next token mod a small range),
    so a model can learn them and the loss goes down.
    """
    rng = np.random.RandomState(seed)
    examples = []
    for _ in range(n):
        length = rng.randint(12, seq_length + 1)
        ids = np.zeros(seq_length, np.int64)
        ids[:length] = rng.randint(5, VOCAB_SIZE, length)
        ids[0], ids[length - 1] = 2, 3
        mask = (np.arange(seq_length) < length).astype(np.int64)
        segments = ((np.arange(seq_length) >= length // 2) & (mask == 1)).astype(np.int64)
        num_predictions = rng.randint(1, max_predictions + 1)
        positions = np.zeros(max_predictions, np.int64)
        positions[:num_predictions] = np.sort(
            rng.choice(np.arange(1, length - 1), num_predictions, replace=False))
        labels = np.zeros(max_predictions, np.int64)
        labels[:num_predictions] = 5 + ids[positions[:num_predictions] + 1] % 10
        weights = np.zeros(max_predictions, np.float32)
        weights[:num_predictions] = 1.0
        examples.append({
            "input_ids": ids, "input_mask": mask, "segment_ids": segments,
            "masked_lm_positions": positions, "masked_lm_ids": labels,
            "masked_lm_weights": weights,
            "next_sentence_labels": np.array([rng.randint(0, 2)], np.int64),
        })
    return examples


def to_example(features):
    import tensorflow as tf
    feature = {}
    for name, value in features.items():
        if value.dtype == np.float32:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=value))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=value))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def write_records(path, examples):
    import tensorflow as tf
    with tf.io.TFRecordWriter(str(path)) as writer:
        for features in examples:
            writer.write(to_example(features).SerializeToString())
    return str(path)


def write_record_files(directory, num_files, per_file, seed=0):
    """num_files files of per_file records each; returns (paths, examples in file order)."""
    paths, everything = [], []
    for i in range(num_files):
        examples = make_examples(per_file, seed * 1000 + i)
        paths.append(write_records(os.path.join(directory, f"records-{i:02d}.tfrecord"), examples))
        everything.extend(examples)
    return paths, everything


# ---------------------------------------------------------------------------------------------
# The original run_pretraining, driven without Estimator (TF 2.21 has none): its own input_fn,
# model_fn (BertModel + heads + create_optimizer / metric_fn) and a v1 Saver, which is what
# TPUEstimator does around them.
# ---------------------------------------------------------------------------------------------


class _CapturedSpec:
    last = None

    def __init__(self, **kwargs):
        _CapturedSpec.last = kwargs


def reference_run_pretraining(refbert, monkeypatch):
    """The reference's run_pretraining module, with a stand-in for tf.estimator's two names."""
    import types
    module = refbert.import_reference("run_pretraining")
    fake = types.SimpleNamespace(ModeKeys=types.SimpleNamespace(TRAIN="train", EVAL="eval"),
                                 tpu=types.SimpleNamespace(TPUEstimatorSpec=_CapturedSpec))
    monkeypatch.setattr(module.tf, "estimator", fake, raising=False)
    return module


def reference_model_fn(rp, refbert, mode, features, init_checkpoint=None, learning_rate=1e-3,
                       num_train_steps=10, num_warmup_steps=2):
    config = refbert.modeling.BertConfig.from_dict(TINY_CONFIG)
    model_fn = rp.model_fn_builder(config, init_checkpoint, learning_rate, num_train_steps,
                                   num_warmup_steps, use_tpu=False, use_one_hot_embeddings=False)
    model_fn(features, None, mode, {})
    return _CapturedSpec.last


def reference_train(rp, refbert, input_files, output_dir, steps, batch_size=8, shuffle=False,
                    save_initial=False, **optimizer_args):
    """Trains the reference for `steps` steps and saves model.ckpt-<steps> (Adam slots and
    global_step included) in output_dir, as the original's run_pretraining. With save_initial,
    also saves the untrained weights as model.ckpt-0 first. Returns the checkpoint path."""
    v1 = refbert.v1
    with v1.Graph().as_default():
        v1.set_random_seed(1)
        input_fn = rp.input_fn_builder(input_files, SEQ_LENGTH, MAX_PREDICTIONS, is_training=shuffle)
        features = v1.data.make_one_shot_iterator(input_fn({"batch_size": batch_size})).get_next()
        spec = reference_model_fn(rp, refbert, "train", features, **optimizer_args)
        saver = v1.train.Saver(max_to_keep=None)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            if save_initial:
                saver.save(sess, os.path.join(output_dir, "model.ckpt"), global_step=0)
            for _ in range(steps):
                sess.run(spec["train_op"])
            return saver.save(sess, os.path.join(output_dir, "model.ckpt"), global_step=steps)


def reference_eval(rp, refbert, input_files, checkpoint, eval_batch_size, max_eval_steps,
                   with_batches=False):
    """The original's eval_results for `checkpoint`: metric_fn + the loss mean, global_step.

    With with_batches, also returns per batch the features and the metric_fn inputs."""
    v1 = refbert.v1
    with v1.Graph().as_default():
        input_fn = rp.input_fn_builder(input_files, SEQ_LENGTH, MAX_PREDICTIONS, is_training=False)
        features = v1.data.make_one_shot_iterator(input_fn({"batch_size": eval_batch_size})).get_next()
        spec = reference_model_fn(rp, refbert, "eval", features, init_checkpoint=checkpoint)
        metric_fn, tensors = spec["eval_metrics"]
        metrics = metric_fn(*tensors)
        metrics["loss"] = v1.metrics.mean(spec["loss"])
        update = [op for _, op in metrics.values()]
        batches = []
        with v1.Session() as sess:
            sess.run([v1.global_variables_initializer(), v1.local_variables_initializer()])
            for _ in range(max_eval_steps):
                if with_batches:
                    _, feats, values = sess.run([update, features, tensors])
                    batches.append((feats, values))
                else:
                    sess.run(update)
            results = {name: sess.run(value) for name, (value, _) in metrics.items()}
    results["global_step"] = 0
    if checkpoint:
        reader = v1.train.load_checkpoint(checkpoint)
        if reader.has_tensor("global_step"):
            results["global_step"] = reader.get_tensor("global_step")
    return (results, batches) if with_batches else results


def loss_curve(model_dir):
    """The per-summary losses (in step order) from the TensorBoard event files of a run."""
    import tensorflow as tf
    curve = {}
    for path in tf.io.gfile.glob(os.path.join(str(model_dir), "train", "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == "loss":
                    curve[event.step] = float(tf.make_ndarray(value.tensor))
    return [curve[step] for step in sorted(curve)]
