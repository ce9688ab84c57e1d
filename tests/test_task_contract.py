"""The task contract apart from any real task: `bert_tf.training.runner.run` driven in-process by
a small fake task (its records in memory, a tiny BERT that learns which of two tokens a sentence
starts with). Checks that the runner calls the contract as documented in bert_tf.tasks.base:
training lowers the task's loss and writes checkpoints; eval hands `eval_results` every eval
example once, in order; predict hands `write_predictions` every predict example once, in order;
export saves the task's signatures, which give the model's outputs; the registry builds every
registered task by name."""
import os

import numpy as np
import pytest

pytestmark = pytest.mark.slow

TINY = {"vocab_size": 12, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 32, "max_position_embeddings": 16, "type_vocab_size": 2,
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
SEQ = 8


def make_examples(count, seed):
    """input ids [count, SEQ] starting with [CLS]=2 then token 5 or 6; the label says which."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, count)
    ids = rng.integers(7, 12, (count, SEQ))
    ids[:, 0], ids[:, 1] = 2, 5 + labels
    return {"input_ids": ids.astype(np.int32), "input_mask": np.ones_like(ids, np.int32),
            "segment_ids": np.zeros_like(ids, np.int32), "label_ids": labels.astype(np.int32),
            "example_index": np.arange(count, dtype=np.int32)}


def fake_task_class():
    import tensorflow as tf

    from bert_tf.model.config import BertConfig
    from bert_tf.model.models import BertClassifier
    from bert_tf.tasks.base import Task

    class FakeTask(Task):
        """The smallest task: first-token classification over in-memory examples."""

        name = "fake"
        train_metric_names = ("loss",)
        max_seq_length = SEQ

        def __init__(self):
            self.data = {"train": make_examples(64, 0), "eval": make_examples(24, 1),
                         "predict": make_examples(16, 2)}
            self.seen = {}

        def num_examples(self, mode):
            return len(self.data[mode]["input_ids"])

        def dataset_fn(self, mode, global_batch_size, seed=None):
            def make(context):
                batch = context.get_per_replica_batch_size(global_batch_size)
                dataset = tf.data.Dataset.from_tensor_slices(self.data[mode])
                if mode == "train":
                    dataset = dataset.shuffle(64, seed=seed).repeat()
                return dataset.batch(batch, drop_remainder=True)
            return make

        def build_model(self):
            return BertClassifier(BertConfig.from_dict(TINY), 2)

        def normalizers(self, batch):
            return {"examples": tf.cast(tf.shape(batch["input_ids"])[0], tf.float32)}

        def _loss(self, batch, outputs):
            return tf.nn.sparse_softmax_cross_entropy_with_logits(
                batch["label_ids"], tf.cast(outputs["logits"], tf.float32))

        def train_metrics(self, batch, outputs, normalizers):
            return {"loss": tf.reduce_sum(self._loss(batch, outputs)) / normalizers["examples"]}

        def eval_outputs(self, batch, outputs):
            return {"index": batch["example_index"], "loss": self._loss(batch, outputs)}

        def eval_results(self, outputs, global_step, batch_size):
            self.seen["eval"] = outputs["index"].tolist()
            return {"eval_loss": np.float32(outputs["loss"].mean()),
                    "global_step": np.int64(global_step)}

        def predict_outputs(self, batch, outputs):
            return {"index": batch["example_index"],
                    "label": tf.argmax(outputs["logits"], axis=-1, output_type=tf.int32)}

        def write_predictions(self, outputs, output_dir):
            self.seen["predict"] = outputs["index"].tolist()
            path = os.path.join(output_dir, "fake_predictions.txt")
            with open(path, "w") as f:
                f.writelines(f"{label}\n" for label in outputs["label"])
            return [path]

        def serving_outputs(self, outputs):
            return {"logits": tf.cast(outputs["logits"], tf.float32)}

    return FakeTask


def test_the_runner_drives_a_fake_task_through_train_eval_predict_export(tmp_path):
    import tensorflow as tf

    from bert_tf.training import runner

    task = fake_task_class()()
    out, exported = tmp_path / "out", tmp_path / "exported"
    settings = runner.RunSettings(
        output_dir=str(out), do_train=True, do_eval=True, do_predict=True,
        train_batch_size=16, eval_batch_size=8, predict_batch_size=8, learning_rate=1e-2,
        num_train_steps=40, num_warmup_steps=0, iterations_per_loop=10,
        save_checkpoints_steps=20, log_steps=10, seed=1, export_dir=str(exported))
    results = runner.run(task, settings, log=lambda message: None)

    assert tf.train.latest_checkpoint(str(out)).endswith("model.ckpt-40")
    assert results["global_step"] == 40 and results["eval_loss"] < 0.3, results
    assert (out / "eval_results.txt").read_text().startswith("eval_loss = ")
    assert task.seen["eval"] == list(range(24))
    assert task.seen["predict"] == list(range(16))
    predicted = [int(line) for line in (out / "fake_predictions.txt").read_text().split()]
    assert np.mean(np.equal(predicted, task.data["predict"]["label_ids"])) > 0.9

    served = tf.saved_model.load(str(exported)).signatures["serving_default"]
    data = task.data["predict"]
    logits = served(**{name: tf.constant(data[name])
                       for name in ("input_ids", "input_mask", "segment_ids")})["logits"]
    model = task.build_model()
    tf.train.Checkpoint(model=model).restore(
        tf.train.latest_checkpoint(str(out))).expect_partial()
    expected = model({name: data[name] for name in ("input_ids", "input_mask", "segment_ids")},
                     training=False)["logits"]
    np.testing.assert_allclose(logits.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)


def test_the_registry_builds_every_task_for_a_loaded_model():
    from bert_tf.model.config import BertConfig
    from bert_tf.tasks import registry
    from bert_tf.errors import InputError

    config = BertConfig.from_dict(TINY)
    options = {"labels": ["a", "b", "c"], "max_seq_length": SEQ, "mask_id": 4}
    for name in registry.NAMES:
        task = registry.build(name, config, **options)
        assert task.name == name
        assert task.max_seq_length in (SEQ, 128) or name == "encoder"
        task.build_model()
    with pytest.raises(InputError, match="unknown task 'tagging': one of encoder, "):
        registry.task_class("tagging")
