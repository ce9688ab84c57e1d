"""bert_tf.api: the README's "Python API" examples run as written, on a model folder in the
layout of Google's released models (a tiny model), and the API's results equal the library's."""
import json
import re
import shutil

import numpy as np
import pytest

from conftest import PROJECT_ROOT

TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 128,
        "type_vocab_size": 2, "initializer_range": 0.02}


def readme_examples():
    text = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


@pytest.fixture(scope="module")
def google_layout(tmp_path_factory, uncased_vocab):
    """bert_model.ckpt (TF1, original names), bert_config.json and vocab.txt in one folder."""
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.encoder import BertEncoder
    folder = tmp_path_factory.mktemp("uncased_L-2_H-32")
    (folder / "bert_config.json").write_text(json.dumps(TINY))
    shutil.copy(uncased_vocab, folder / "vocab.txt")
    encoder = BertEncoder(BertConfig.from_dict(TINY))
    write_tf1_checkpoint(encoder, folder / "bert_model.ckpt")
    return folder, encoder


def test_readme_examples_run(google_layout, tmp_path, refbert):
    folder, encoder = google_layout
    rc = refbert.import_reference("run_classifier")
    examples = readme_examples()
    assert len(examples) == 2
    namespace = {"MODEL_DIR": str(folder), "OUTPUT_DIR": str(tmp_path / "out")}
    exec(examples[0], namespace)
    # The API's inputs are the original's convert_single_example's ...
    packed = rc.convert_single_example(
        0, rc.InputExample("0", "The cat sat down.", "It was tired.", "0"), ["0"], 32,
        refbert.import_reference("tokenization").FullTokenizer(str(folder / "vocab.txt"), True))
    assert namespace["inputs"]["input_ids"].tolist() == [packed.input_ids]
    assert namespace["inputs"]["segment_ids"].tolist() == [packed.segment_ids]
    # ... and its encoder is the checkpoint's.
    np.testing.assert_allclose(np.asarray(namespace["vectors"]),
                               np.asarray(encoder(namespace["inputs"])["pooled_output"]),
                               rtol=1e-5, atol=1e-6)
    # The sentence embedding: the last layer's mean over the real tokens of [CLS] text [SEP].
    from bert_tf import api
    single = api.encode(namespace["tokenizer"], ["The cat sat down."], max_seq_length=128)
    hidden = np.asarray(encoder(single)["sequence_output"])[0]
    real = int(single["input_mask"].sum())
    assert real == 7 and namespace["embeddings"].shape == (1, TINY["hidden_size"])
    np.testing.assert_allclose(namespace["embeddings"][0], hidden[:real].mean(axis=0),
                               rtol=1e-5, atol=1e-6)

    exec(examples[1], namespace)
    probabilities = namespace["probabilities"]
    assert probabilities.shape == (2, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)
    assert (tmp_path / "out" / "checkpoint").exists()
    # The classifier predicts with the trained checkpoint's head, not a fresh one.
    trained = api.load_classifier(
        api.ModelFiles(str(tmp_path / "out"), **{k: getattr(namespace["files"], k) for k in
                                                 ("config", "vocab_file", "do_lower_case")}),
        ["neg", "pos"])
    np.testing.assert_allclose(trained.predict(["a funny film", "too long"]), probabilities,
                               rtol=1e-5, atol=1e-6)


def test_bad_calls_are_clear(google_layout, tmp_path):
    from bert_tf import api
    from bert_tf.errors import InputError

    folder, _ = google_layout
    files = api.model_files(folder)
    with pytest.raises(InputError, match="has no output_weights"):
        api.load_model(files, "classifier", num_labels=2)
    assert api.load_model(files, "classifier", num_labels=2, require_all=False) is not None
    with pytest.raises(InputError, match="task must be one of"):
        api.build_model("translation", files.config)
    with pytest.raises(InputError, match="not one string"):
        api.encode(api.load_tokenizer(files), "one text")
    with pytest.raises(InputError, match="neither a checkpoint"):
        api.model_files(tmp_path)
    with pytest.raises(InputError, match=r"max_seq_length: must be in \[3, 128\]"):
        api.fine_tune_classifier(files, [("a", "x")], ["x"], tmp_path / "out", max_seq_length=512)


def test_fine_tune_classifier_refuses_an_export_dir_before_any_work(google_layout, tmp_path):
    """export_dir as run_classifier --export_dir checks it: never the output_dir nor the
    init_checkpoint's folder, nor a folder of the user's; refused before anything is written."""
    from bert_tf import api
    from bert_tf.errors import InputError

    folder, _ = google_layout
    files = api.model_files(folder)
    before = sorted(p.name for p in folder.iterdir())
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    rows = [("a gripping, funny film", "pos"), ("dull and far too long", "neg")]
    for export_dir, message in (
            (tmp_path / "out", r"^export_dir: .*/out would replace output_dir's .*/out"),
            (folder, r"^export_dir: .* would replace init_checkpoint's "),
            (mine, r"^export_dir: .*/mine is not empty and not an export of "
                   r"bert_tf")):
        with pytest.raises(InputError, match=message):
            api.fine_tune_classifier(files, rows, ["neg", "pos"], tmp_path / "out",
                                     max_seq_length=16, export_dir=export_dir)
        assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in folder.iterdir()) == before
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_fine_tune_classifier_exports_the_label_names(google_layout, tmp_path):
    """export_dir through fine_tune_classifier: the SavedModel has run_classifier's string
    signatures, with the labels' names, and serves the Classifier's probabilities."""
    import tensorflow as tf

    from bert_tf import api

    folder, _ = google_layout
    rows = [("a gripping, funny film", "pos"), ("dull and far too long", "neg")] * 4
    classifier = api.fine_tune_classifier(
        api.model_files(folder), train=rows, labels=["neg", "pos"], output_dir=tmp_path / "out",
        num_train_epochs=1.0, train_batch_size=8, max_seq_length=16, seed=0,
        export_dir=str(tmp_path / "exported"))
    served = tf.saved_model.load(str(tmp_path / "exported")).signatures["serve_text"](
        text=tf.constant(["a funny film", "too long"]))
    probabilities = classifier.predict(["a funny film", "too long"])
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, rtol=1e-5,
                               atol=1e-6)
    assert [label.decode() for label in served["label"].numpy()] == \
        classifier.predict_labels(["a funny film", "too long"])


def test_the_api_fine_tunes_on_a_json_lines_file_as_on_its_rows(google_layout, tmp_path):
    from bert_tf import api

    # JSON Lines (the original has no such reader): the same rows as tuples are the oracle.
    rows = [("a gripping, funny film", "the cast shines", "pos"),
            ("dull and far too long", "nothing happens", "neg")] * 4
    (tmp_path / "train.jsonl").write_text("".join(
        json.dumps({"text": a, "text_b": b, "label": label}) + "\n" for a, b, label in rows))
    files = api.model_files(google_layout[0])
    options = dict(labels=["neg", "pos"], num_train_epochs=1.0, train_batch_size=8,
                   max_seq_length=16, seed=0)
    from_rows = api.fine_tune_classifier(files, rows, output_dir=tmp_path / "rows", dev=rows,
                                         **options)
    from_file = api.fine_tune_classifier(files, tmp_path / "train.jsonl",
                                         output_dir=tmp_path / "file",
                                         dev=tmp_path / "train.jsonl",
                                         fields={"text_b_column": "text_b"}, **options)
    for name in ("train.tf_record", "eval.tf_record"):
        assert (tmp_path / "rows" / name).read_bytes() == (tmp_path / "file" / name).read_bytes()
    assert ((tmp_path / "rows" / "eval_results.txt").read_text()
            == (tmp_path / "file" / "eval_results.txt").read_text())
    texts = ["a funny film", "too long"]
    np.testing.assert_array_equal(from_rows.predict(texts, ["it shines", "nothing"]),
                                  from_file.predict(texts, ["it shines", "nothing"]))


def test_fine_tune_a_multi_label_classifier(google_layout, tmp_path):
    """multi_label through the API: rows with lists of labels; the Classifier's labels over the
    threshold are the SavedModel's, and its probabilities are the served ones (sigmoids: rows
    do not sum to 1)."""
    import tensorflow as tf

    from bert_tf import api

    folder, _ = google_layout
    rows = [("a gripping, funny film", ["pos", "funny"]), ("dull and far too long", ["neg"]),
            ("funny but dull", ["funny", "neg"]), ("fine", [])] * 2
    texts = ["a funny film", "too long", "fine"]
    classifier = api.fine_tune_classifier(
        api.model_files(folder), train=rows, labels=["neg", "pos", "funny"],
        output_dir=tmp_path / "out", num_train_epochs=1.0, train_batch_size=8,
        max_seq_length=16, seed=0, multi_label=True, threshold=[0.5, 0.5, 0.45],
        export_dir=str(tmp_path / "exported"))
    served = tf.saved_model.load(str(tmp_path / "exported")).signatures["serve_text"](
        text=tf.constant(texts))
    probabilities = classifier.predict(texts)
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, rtol=1e-5,
                               atol=1e-6)
    assert not np.allclose(probabilities.sum(axis=1), 1.0)
    over = probabilities > np.float32([0.5, 0.5, 0.45])
    expected = [[label for label, chosen in zip(["neg", "pos", "funny"], row) if chosen]
                for row in over]
    assert classifier.predict_labels(texts) == expected
    assert [[name.decode() for name in row if name] for row in served["labels"].numpy()] == (
        expected)
    # The export records that it is multi-label, and each label's threshold.
    marker = json.loads((tmp_path / "exported" / "assets" / "bert_tf_export.json").read_text())
    assert (marker["multi_label"], marker["thresholds"]) == (True, [0.5, 0.5, 0.45])
    # output_dir is a model directory: the classifier loads from it alone, with
    # its labels, length and thresholds.
    reloaded = api.load_classifier(tmp_path / "out")
    assert (reloaded.labels, reloaded.max_seq_length, reloaded.multi_label,
            list(reloaded.threshold)) == (["neg", "pos", "funny"], 16, True, [0.5, 0.5, 0.45])
    np.testing.assert_allclose(reloaded.predict(texts), probabilities, rtol=1e-5, atol=1e-6)
    assert reloaded.predict_labels(texts) == expected


@pytest.fixture(scope="module")
def exported_folders(google_layout, tmp_path_factory):
    """The Google layout's encoder exported as a Hugging Face directory and a keras-hub
    preset (bert_tf.serving.formats)."""
    from bert_tf.model.config import BertConfig
    from bert_tf.serving import formats
    from bert_tf.tasks import registry
    folder, encoder = google_layout
    root = tmp_path_factory.mktemp("exported")
    task = registry.build("encoder", BertConfig.from_dict(TINY), max_seq_length=32)
    for export_format in ("huggingface", "keras_hub"):
        formats.save(export_format, task, encoder, root / export_format,
                     str(folder / "vocab.txt"), True, log=lambda line: None)
    return {"huggingface": root / "huggingface", "keras_hub": root / "keras_hub"}


@pytest.mark.parametrize("kind", ["google", "huggingface", "keras_hub", "pretraining_mlm",
                                  "pretraining_mlm_nsp"])
def test_the_readme_calls_run_on_every_kind_of_model_directory(
        kind, google_layout, exported_folders, pretraining_folders, tmp_path):
    """The README's calls on each kind of folder they accept, and
    `api.load_model(folder, "pretraining")` on pretraining folders of either objective (its
    heads as the folder records them). The oracle of each: the model the folder was written
    from (the Google layout's encoder, exported), or the run's checkpoint restored by
    TensorFlow's own tf.train.Checkpoint."""
    import tensorflow as tf
    from bert_tf import api
    from bert_tf.model.models import BertPretrainer
    objective = kind.split("_", 1)[1] if kind.startswith("pretraining_") else None
    path = (google_layout[0] if kind == "google" else pretraining_folders[objective]
            if objective else exported_folders[kind])
    namespace = {"MODEL_DIR": str(path), "OUTPUT_DIR": str(tmp_path / "out")}
    exec(readme_examples()[0], namespace)
    inputs = namespace["inputs"]
    if objective is None:
        expected = google_layout[1]
    else:
        expected = BertPretrainer(pretraining_folders["config"],
                                  next_sentence=objective == "mlm_nsp")
        tf.train.Checkpoint(model=expected).read(
            tf.train.latest_checkpoint(str(path))).expect_partial()
        pretrainer = api.load_model(path, "pretraining")
        assert ("next_sentence_log_probs" in pretrainer(
            dict(inputs, masked_lm_positions=np.array([[1, 2]], np.int32)))) == (
                objective == "mlm_nsp")
        with_positions = dict(inputs, masked_lm_positions=np.array([[1, 2]], np.int32))
        np.testing.assert_allclose(pretrainer(with_positions)["masked_lm_log_probs"],
                                   expected(with_positions)["masked_lm_log_probs"],
                                   rtol=1e-5, atol=1e-5)
        expected = expected.encoder
    np.testing.assert_allclose(np.asarray(namespace["vectors"]),
                               np.asarray(expected(inputs)["pooled_output"]),
                               rtol=1e-5, atol=1e-6)
    assert namespace["embeddings"].shape == (1, TINY["hidden_size"])
