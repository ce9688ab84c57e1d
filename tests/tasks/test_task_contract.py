"""The task contract apart from any real task: `bert_tf.training.runner.run` driven in-process by
a small fake task (its records in memory, a tiny BERT that learns which of two tokens a sentence
starts with). Checks that the runner calls the contract as documented in bert_tf.tasks.base:
training lowers the task's loss and writes checkpoints; eval hands `eval_results` every eval
example once, in order; predict hands `write_predictions` every predict example once, in order;
export saves the task's signatures, which give the model's outputs; the registry builds every
registered task by name."""
import dataclasses
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
    from bert_tf.tasks.base import Records, Task, TaskConfig

    class FakeTask(Task):
        """The smallest task: first-token classification over in-memory examples."""

        name = "fake"

        def __init__(self):
            self.data = {"train": make_examples(64, 0), "eval": make_examples(24, 1),
                         "predict": make_examples(16, 2)}
            super().__init__(TaskConfig(
                bert_config=BertConfig.from_dict(TINY), max_seq_length=SEQ,
                records={mode: Records((), len(data["input_ids"]))
                         for mode, data in self.data.items()}))
            self.seen = {}

        def dataset_fn(self, mode, global_batch_size, seed=None):
            def make(context):
                batch = context.get_per_replica_batch_size(global_batch_size)
                dataset = tf.data.Dataset.from_tensor_slices(self.data[mode])
                if mode == "train":
                    dataset = dataset.shuffle(64, seed=seed).repeat()
                return dataset.batch(batch, drop_remainder=True)
            return make

        def build_model(self):
            return BertClassifier(self.config.bert_config, 2)

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

        def serving_outputs(self, outputs, from_text=False):
            return {"logits": tf.cast(outputs["logits"], tf.float32)}

    return FakeTask


def test_the_runner_drives_a_fake_task_through_train_eval_predict_export(tmp_path):
    import tensorflow as tf

    from bert_tf.serving.export import trained_model_exporter
    from bert_tf.training import runner
    from bert_tf.training.settings import RunSettings

    task = fake_task_class()()
    out, exported = tmp_path / "out", tmp_path / "exported"
    settings = RunSettings(
        output_dir=str(out), do_train=True, do_eval=True, do_predict=True,
        train_batch_size=16, eval_batch_size=8, predict_batch_size=8, learning_rate=1e-2,
        num_train_steps=40, num_warmup_steps=0, iterations_per_loop=10,
        save_checkpoints_steps=20, log_steps=10, seed=1)
    import keras
    from absl import logging

    from bert_tf.model.cpu_kernels import cpu_kernels_mode
    # The process-wide state the run sets (float32, the CPU kernels switch, absl's verbosity)
    # is given back as the caller had it.
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    before = (cpu_kernels_mode(), logging.get_verbosity())
    try:
        results = runner.run(task, dataclasses.replace(settings, cpu_kernels="off"),
                             log=lambda message: None,
                             export=trained_model_exporter(str(exported), None, True,
                                                           settings.output_dir))
        assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
        assert (cpu_kernels_mode(), logging.get_verbosity()) == before
    finally:
        keras.mixed_precision.set_global_policy("float32")

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
    options = {"classifier": {"labels": ["a", "b", "c"]}, "ner": {"labels": ["O", "B-X"]},
               "pretraining": {"mask_id": 4}, "squad": {"max_query_length": 3}}
    # Every task package's task module registers its name (none listed elsewhere).
    assert registry.names() == ("classifier", "encoder", "multiple_choice", "ner",
                                "pretraining", "squad")
    for name in registry.names():
        task = registry.build(name, config, max_seq_length=SEQ, **options.get(name, {}))
        assert task.name == name and task.config.max_seq_length == SEQ
        assert task.config.bert_config is config and task.config.records == {}
        task.build_model()
    with pytest.raises(InputError, match="unknown task 'tagging': one of classifier, encoder, "):
        registry.task_class("tagging")
    # An option the task's config lacks is an error, not ignored.
    with pytest.raises(InputError, match="task encoder has no option labels: its options are "):
        registry.build("encoder", config, labels=["a"])


RUN_COMMAND_LINES = ["run.run_pretraining", "run.run_classifier", "run.run_ner", "run.run_squad",
                     "run.run_multiple_choice"]
# Shared flags that no RunSettings field reads: the command lines use them themselves.
USED_BY_THE_COMMAND_LINES = {"bert_config_file", "vocab_file", "do_lower_case",
                             "num_train_epochs", "warmup_proportion", "bucket_by_length",
                             "shuffle_buffer_size", "export_dir", "train_file", "dev_file",
                             "test_file", "delimiter"}


@pytest.mark.parametrize("module", RUN_COMMAND_LINES)
def test_every_settings_field_comes_from_its_flag_and_every_flag_is_read(module):
    """run/common_flags.run_settings maps each RunSettings field to its flag (a field without
    one fails loudly), and each shared flag is read by a field or by the command lines; a
    fine-tuning command line gives its task (prepare_task) the shared task options."""
    import subprocess
    import sys

    from conftest import PROJECT_ROOT
    script = (
        "import dataclasses, importlib, sys; from absl import flags\n"
        "importlib.import_module(sys.argv[1]); from run import common_flags\n"
        "flags.FLAGS(['x', '--output_dir=/tmp/x', '--train_batch_size=7',\n"
        "             '--shuffle_buffer_size=9'])\n"
        "s = common_flags.run_settings(5, 1)\n"
        "assert (s.train_batch_size, s.num_train_steps, s.output_dir) == (7, 5, '/tmp/x'), s\n"
        "if 'num_train_epochs' in flags.FLAGS:  # fine-tuning: prepare_task's options\n"
        "    from bert_tf.tasks.preprocessor import split_options\n"
        "    task_options = split_options(common_flags.preparation_options())[1]\n"
        "    assert task_options == {'shuffle_buffer_size': 9}, task_options\n"
        "fields = {f.name for f in dataclasses.fields(s)}\n"
        "shared = set(flags.FLAGS.get_key_flags_for_module(common_flags))\n"
        "print(' '.join(sorted(f.name for f in shared if f.name not in fields)))\n")
    result = subprocess.run([sys.executable, "-c", script, module], capture_output=True,
                            text=True, timeout=120, cwd=PROJECT_ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert set(result.stdout.split()) <= USED_BY_THE_COMMAND_LINES, result.stdout


def test_a_settings_field_without_its_flag_fails_loudly():
    """A RunSettings field whose flag is gone (renamed) is an error, not a silent default."""
    import subprocess
    import sys

    from conftest import PROJECT_ROOT
    script = (
        "import dataclasses; from absl import flags; import run.run_classifier\n"
        "from run import common_flags; from bert_tf.training import settings\n"
        "flags.FLAGS(['x', '--output_dir=/tmp/x'])\n"
        "@dataclasses.dataclass\n"
        "class Renamed(settings.RunSettings):\n"
        "    train_batch_size_renamed: int = 3\n"
        "settings.RunSettings = Renamed\n"
        "common_flags.run_settings()\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, cwd=PROJECT_ROOT)
    assert result.returncode != 0
    assert "KeyError: 'RunSettings.train_batch_size_renamed has no --train_batch_size_renamed " \
           "flag" in result.stderr, result.stderr[-2000:]


def test_build_strategy_names_the_strategy_it_built(tmp_path):
    from bert_tf.training import runner
    from bert_tf.training.settings import RunSettings
    name, strategy = runner.build_strategy(
        RunSettings(output_dir=str(tmp_path), do_train=True, do_eval=True, do_predict=True),
        log=lambda message: None)
    assert name == "one_device" and strategy.num_replicas_in_sync == 1
