"""export_savedmodel --format=litert: the .tflite encoder and classifier, run by ai-edge-litert's
interpreter, give the Keras model's outputs on real GLUE dev text (fp32 within 1e-5; dynamic-range
int8 within INT8_TOLERANCE of the probabilities and the same label on every SST-2 dev sentence,
for a tiny classifier trained a little on SST-2 so that its labels mean something); the string
signatures and the other tasks are refused with one error line, nothing written."""
import json
import os
import shutil

import numpy as np
import pytest

from conftest import assert_one_line_error, require_module, run_command_line

pytestmark = pytest.mark.slow

TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "hidden_act": "gelu", "max_position_embeddings": 128,
        "type_vocab_size": 2}
MAX_SEQ_LENGTH = 64
# Dynamic-range int8 against float32, on probabilities: measured 0.0070 (the largest difference
# over the 872 SST-2 dev sentences, docs/export.md), with a margin.
INT8_TOLERANCE = 0.02


def read_tsv(path, columns, limit=None):
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    rows = rows[:limit] if limit else rows
    return [tuple(row[c] for c in columns) for row in rows]


def train_a_little(model, inputs, labels, steps=150, batch_size=32, seed=0):
    """Adam on the cross-entropy of `model`'s logits: a few epochs' worth of a tiny model."""
    import tensorflow as tf
    optimizer = tf.keras.optimizers.Adam(1e-3)
    rng = np.random.RandomState(seed)

    @tf.function
    def step(batch, labels):
        with tf.GradientTape() as tape:
            logits = model(batch, training=True)["logits"]
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    for _ in range(steps):
        index = rng.randint(0, len(labels), batch_size)
        step({k: v[index] for k, v in inputs.items()}, labels[index])


@pytest.fixture(scope="module")
def exported(tmp_path_factory, uncased_vocab, shared_data):
    """A tiny classifier trained a little on SST-2 (original naming), exported by the command
    line as fp32 and int8 classifiers, and its encoder as fp32; its Keras model; SST-2 dev."""
    require_module("ai_edge_litert", "LiteRT's interpreter, the test extra")
    import keras

    from bert_tf import api
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.models import BertClassifier
    from bert_tf.serving import formats
    from bert_tf.tasks import registry

    keras.utils.set_random_seed(0)
    root = tmp_path_factory.mktemp("litert")
    (root / "bert_config.json").write_text(json.dumps(TINY))
    shutil.copy(uncased_vocab, root / "vocab.txt")
    tokenizer = api.load_tokenizer(str(uncased_vocab))
    sst2 = shared_data / "glue_data" / "SST-2"
    train = read_tsv(sst2 / "train.tsv", (0, 1), limit=8000)
    train_inputs = api.encode(tokenizer, [t for t, _ in train], None, MAX_SEQ_LENGTH)
    model = BertClassifier(BertConfig.from_dict(TINY), 2)
    train_a_little(model, train_inputs, np.array([int(label) for _, label in train]))
    checkpoint = write_tf1_checkpoint(model, root / "model.ckpt")
    flags = {"init_checkpoint": checkpoint, "bert_config_file": root / "bert_config.json",
             "vocab_file": root / "vocab.txt", "max_seq_length": MAX_SEQ_LENGTH,
             "format": "litert"}
    logs = {}
    for name, extra in {"classifier": {}, "classifier_int8": {"quantization": "int8"}}.items():
        status, logs[name] = run_command_line("run.export_savedmodel", dict(
            flags, task="classifier", label_list="0,1", export_dir=root / name, **extra))
        assert status == 0, logs[name][-3000:]
    # The encoder through the library (one command line less to start).
    encoder_task = registry.build("encoder", model.config, max_seq_length=MAX_SEQ_LENGTH)
    formats.save("litert", encoder_task, model.encoder, root / "encoder", log=print)
    dev = read_tsv(sst2 / "dev.tsv", (0, 1))
    return {"root": root, "flags": flags, "model": model, "tokenizer": tokenizer, "logs": logs,
            "dev_texts": [t for t, _ in dev], "dev_labels": np.array([int(y) for _, y in dev])}


def tflite_runner(path):
    from ai_edge_litert.interpreter import Interpreter

    from bert_tf.serving import litert
    return litert.Runner(Interpreter(model_path=str(path)))


def run_in_batches(runner, inputs, batch_size):
    outputs = [runner(**{k: v[i:i + batch_size] for k, v in inputs.items()})
               for i in range(0, len(inputs["input_ids"]), batch_size)]
    return {name: np.concatenate([o[name] for o in outputs]) for name in outputs[0]}


def test_fp32_classifier_and_encoder_equal_the_keras_model(exported, shared_data):
    import tensorflow as tf

    from bert_tf import api
    root = exported["root"]
    assert "outputs: logits, probabilities" in exported["logs"]["classifier"]
    description = json.loads((root / "classifier" / "bert_tf_export.json").read_text())
    assert description["labels"] == ["0", "1"] and description["quantization"] == "none"
    assert sorted(os.listdir(root / "classifier")) == [
        "bert_config.json", "bert_tf_export.json", "model.tflite", "vocab.txt"]

    inputs = api.encode(exported["tokenizer"], exported["dev_texts"][:64], None, MAX_SEQ_LENGTH)
    logits = exported["model"](inputs, training=False)["logits"].numpy()
    classifier = tflite_runner(root / "classifier" / "model.tflite")
    for batch_size in (1, 32):  # the interpreter resized to each shape
        served = run_in_batches(classifier, inputs, batch_size)
        np.testing.assert_allclose(served["logits"], logits, rtol=0, atol=1e-5)
        np.testing.assert_allclose(served["probabilities"], tf.nn.softmax(logits).numpy(),
                                   rtol=0, atol=1e-5)

    # The encoder on MRPC dev pairs, packed to a shorter length than the export's.
    pairs = read_tsv(shared_data / "glue_data" / "MRPC" / "dev.tsv", (3, 4), limit=24)
    pair_inputs = api.encode(exported["tokenizer"], [a for a, _ in pairs],
                             [b for _, b in pairs], 48)
    expected = exported["model"].encoder(pair_inputs, training=False)
    served = run_in_batches(tflite_runner(root / "encoder" / "model.tflite"), pair_inputs, 8)
    assert sorted(served) == ["pooled_output", "sequence_output"]
    for name in served:
        np.testing.assert_allclose(served[name], expected[name].numpy(), rtol=0, atol=1e-5)


def test_int8_classifier_keeps_the_labels_on_sst2_dev(exported):
    import tensorflow as tf

    from bert_tf import api
    root = exported["root"]
    fp32_size = os.path.getsize(root / "classifier" / "model.tflite")
    int8_size = os.path.getsize(root / "classifier_int8" / "model.tflite")
    assert int8_size < fp32_size / 3, (int8_size, fp32_size)

    inputs = api.encode(exported["tokenizer"], exported["dev_texts"], None, MAX_SEQ_LENGTH)
    probabilities = tf.nn.softmax(exported["model"](inputs, training=False)["logits"]).numpy()
    served = run_in_batches(tflite_runner(root / "classifier_int8" / "model.tflite"), inputs, 32)
    difference = np.abs(served["probabilities"] - probabilities).max()
    assert difference <= INT8_TOLERANCE, difference
    assert difference > 0  # it is quantized
    labels, int8_labels = probabilities.argmax(axis=1), served["probabilities"].argmax(axis=1)
    accuracy, int8_accuracy = [(y == exported["dev_labels"]).mean() for y in (labels, int8_labels)]
    changed = np.flatnonzero(int8_labels != labels)
    margins = np.abs(probabilities[:, 1] - probabilities[:, 0])
    print(f"int8: max |probability difference| {difference:.5f}; labels changed "
          f"{len(changed)} / {len(labels)} (fp32 margins {margins[changed]}); accuracy "
          f"{int8_accuracy:.4f}, fp32 {accuracy:.4f}")
    # The labels mean something: the model learned SST-2 a little (chance is about 0.5).
    assert accuracy > 0.6
    # Measured: 2 of 872 labels changed, near ties (fp32 margins 0.0017 and 0.0105); the
    # accuracy did not move (0.6927).
    assert len(changed) <= 0.005 * len(labels)
    assert abs(int8_accuracy - accuracy) <= 0.005
    assert (margins[changed] < 2 * difference).all()  # only ties the error can tip over


def test_bad_litert_options_are_refused_before_any_work(tmp_path):
    flags = {"init_checkpoint": tmp_path / "model.ckpt", "task": "classifier",
             "label_list": "0,1", "format": "litert", "export_dir": tmp_path / "out"}
    cases = [
        (dict(litert_signature="serve_text"), "--litert_signature: serve_text takes raw strings"),
        (dict(litert_signature="serve_text_pair"), "--litert_signature: serve_text_pair"),
        (dict(task="squad"), "--task: the LiteRT format exports encoder or classifier, not "
                             "squad"),
        (dict(format="onnx"), "--format"),
        (dict(quantization="int4"), "--quantization"),
        (dict(format="tfhub", task="encoder", quantization="int8"),
         "--quantization: the TF Hub encoder is exported to be fine-tuned: float32 only"),
        (dict(format="tfhub"), "--task: the TF Hub format exports the encoder"),
    ]
    for extra, expected in cases:
        assert_one_line_error("run.export_savedmodel", dict(flags, **extra), expected)
        assert not (tmp_path / "out").exists()


def test_the_converter_cannot_take_the_string_signatures(exported, uncased_vocab, tmp_path):
    """Why --litert_signature=serve_text is refused: TensorFlow's converter, builtin ops only,
    fails on the graph tokenizer (the messages docs/export.md quotes)."""
    import tensorflow as tf

    from bert_tf.tasks import registry
    from bert_tf.text.graph_tokenization import GraphTokenizer
    task = registry.build("classifier", exported["model"].config,
                          max_seq_length=MAX_SEQ_LENGTH, labels=["0", "1"])
    module = tf.Module()
    module.tokenizer = GraphTokenizer(str(uncased_vocab))
    module.model_variables = [v.value for v in exported["model"].variables]
    signature = task.text_signatures(
        exported["model"], task.text_preprocessor(module.tokenizer))["serve_text"]
    tf.saved_model.save(module, str(tmp_path / "text"), signatures={"serve_text": signature})

    converter = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "text"),
                                                         signature_keys=["serve_text"])
    with pytest.raises(Exception, match="tf.TensorListReserve"):
        converter.convert()
    converter._experimental_lower_tensor_list_ops = False  # then the string ops are named
    with pytest.raises(Exception) as failure:
        converter.convert()
    for op in ("UnicodeDecode", "StringSplitV2", "Substr", "LookupTableFindV2"):
        assert f"'tf.{op}' op is neither a custom op nor a flex op" in str(failure.value)


def test_a_users_folder_is_never_replaced_from_python(exported, uncased_vocab, tmp_path):
    """litert.save and tfhub.save, called from Python (no command line checked the folder),
    refuse a folder that holds anything but an earlier export, and leave it as it was."""
    from bert_tf.errors import InputError
    from bert_tf.serving import litert, tfhub
    from bert_tf.serving.export_folders import is_litert_export
    from bert_tf.tasks import registry
    task = registry.build("encoder", exported["model"].config, max_seq_length=MAX_SEQ_LENGTH)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="export_dir"):
        litert.save(task, exported["model"].encoder, mine)
    with pytest.raises(InputError, match="export_dir"):
        tfhub.save(task, exported["model"].encoder, mine, str(uncased_vocab))
    assert os.listdir(mine) == ["notes.txt"] and (mine / "notes.txt").read_text() == "mine"
    # An earlier export is replaced.
    litert.save(task, exported["model"].encoder, tmp_path / "out")
    litert.save(task, exported["model"].encoder, tmp_path / "out")
    assert is_litert_export(str(tmp_path / "out"))
