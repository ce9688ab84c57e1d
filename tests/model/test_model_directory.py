"""A training run's output_dir is a model directory: its config, a copy of its vocabulary and a
record of its casing, task, labels and options beside the checkpoint (bert_tf.model.directory),
so that predict, export and further fine-tuning need only `--init_checkpoint=FOLDER`.

Oracles: the same command line given every flag explicitly (its predictions, byte for byte);
the SavedModel exported from the folder alone (its served probabilities); the files the run
started from (config, vocabulary). Real text: slices of GLUE SST-2. A tiny model in the layout
of Google's released models (bert_model.ckpt with bert_config.json and vocab.txt beside it).
"""
import csv
import json
import shutil

import numpy as np
import pytest

from conftest import PRETRAINING_CONFIG, assert_one_line_error, run_command_line, strategy_line

pytestmark = pytest.mark.slow

TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "hidden_act": "gelu", "max_position_embeddings": 64,
        "type_vocab_size": 2}
MAX_SEQ_LENGTH = 48
DATA_FLAGS = {"task_name": "tsv", "skip_header": True, "text_a_column": "sentence",
              "label_column": "label"}


def sst2_rows(shared_data, split, count):
    with open(shared_data / "glue_data" / "SST-2" / f"{split}.tsv", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f][:count + 1]  # the header and `count` rows


@pytest.fixture(scope="module")
def trained(tmp_path_factory, uncased_vocab, shared_data):
    """Google's layout (a tiny encoder), SST-2 slices, and a run_classifier run trained from
    the layout's checkpoint alone into `out` (labels given in a non-sorted order)."""
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.encoder import BertEncoder
    root = tmp_path_factory.mktemp("model_directory")
    google = root / "uncased_L-2_H-32_A-2"
    google.mkdir()
    (google / "bert_config.json").write_text(json.dumps(TINY))
    shutil.copy(uncased_vocab, google / "vocab.txt")
    write_tf1_checkpoint(BertEncoder(BertConfig.from_dict(TINY)), google / "bert_model.ckpt")
    data = root / "sst2"
    data.mkdir()
    (data / "train.tsv").write_text("\n".join(sst2_rows(shared_data, "train", 48)) + "\n")
    (data / "test.tsv").write_text("\n".join(sst2_rows(shared_data, "test", 20)) + "\n")
    out = root / "out"
    status, log = run_command_line("run.run_classifier", dict(
        DATA_FLAGS, data_dir=data, label_list="1,0", init_checkpoint=google / "bert_model.ckpt",
        output_dir=out, do_train=True, max_seq_length=MAX_SEQ_LENGTH, train_batch_size=8,
        num_train_epochs=2.0, learning_rate=1e-3, seed=1))
    assert status == 0, log[-3000:]
    return {"root": root, "google": google, "data": data, "out": out, "log": log}


def test_a_trained_folder_holds_the_model_files(trained, uncased_vocab):
    from bert_tf import api
    from bert_tf.model.config import BertConfig
    out = trained["out"]
    assert BertConfig.from_json_file(out / "bert_config.json") == BertConfig.from_dict(TINY)
    assert (out / "vocab.txt").read_bytes() == uncased_vocab.read_bytes()
    record = json.loads((out / "bert_tf_model.json").read_text())
    assert record == {"task": "classifier", "do_lower_case": True,
                      "max_seq_length": MAX_SEQ_LENGTH, "labels": ["1", "0"],
                      "regression": False, "multi_label": False,
                      "architecture": architecture(TINY),
                      "vocabulary_sha256": tokens_sha256(uncased_vocab)}
    files = api.model_files(out)
    assert (files.config, files.do_lower_case, files.record) == (BertConfig.from_dict(TINY),
                                                                 True, record)


def architecture(config):
    """The config's fields that say which weights it describes: all but dropout and
    initialisation, with the original's defaults."""
    defaults = {"hidden_act": "gelu", "max_position_embeddings": 512, "type_vocab_size": 16}
    return {key: config.get(key, defaults.get(key)) for key in (
        "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
        "intermediate_size", "hidden_act", "max_position_embeddings", "type_vocab_size")}


def tokens_sha256(vocab_file):
    """SHA-256 of a vocabulary's tokens, one a line, stripped (as the tokenizer reads them)."""
    import hashlib
    lines = vocab_file.read_bytes().split(b"\n")
    return hashlib.sha256(b"\n".join(line.strip() for line in lines[:-1])).hexdigest()


def read_results(path):
    with open(path, encoding="utf-8") as f:
        return np.array([[float(x) for x in row] for row in csv.reader(f, delimiter="\t")])


def test_predict_and_export_from_the_folder_alone(trained, tmp_path):
    """Predict with --init_checkpoint=out and the data flags only (no training
    file, no --label_list, config, vocabulary or length) equals the run given every flag; the
    export of the folder alone serves the same probabilities with the recorded labels."""
    import tensorflow as tf

    from bert_tf import api
    out, data = trained["out"], trained["data"]
    test_only = tmp_path / "test_only"
    test_only.mkdir()
    shutil.copy(data / "test.tsv", test_only / "test.tsv")
    alone = tmp_path / "alone"
    status, log = run_command_line("run.run_classifier", dict(
        DATA_FLAGS, data_dir=test_only, init_checkpoint=out, output_dir=alone, do_predict=True))
    assert status == 0, log[-3000:]
    # The settings line names the optimizer of a training run only.
    assert strategy_line(trained["log"]).endswith("optimizer=adamw")
    assert "optimizer" not in strategy_line(log)
    explicit = tmp_path / "explicit"
    status, log = run_command_line("run.run_classifier", dict(
        DATA_FLAGS, data_dir=test_only, init_checkpoint=out, output_dir=explicit,
        do_predict=True, label_list="1,0", max_seq_length=MAX_SEQ_LENGTH,
        vocab_file=trained["google"] / "vocab.txt",
        bert_config_file=trained["google"] / "bert_config.json", do_lower_case=True))
    assert status == 0, log[-3000:]
    assert (alone / "test_results.tsv").read_bytes() == (
        explicit / "test_results.tsv").read_bytes()
    probabilities = read_results(alone / "test_results.tsv")
    assert probabilities.shape == (20, 2)
    # Not constants: the label order and the text change the numbers.
    assert (probabilities[:, 0] != probabilities[:, 1]).all()
    assert len({tuple(row) for row in probabilities}) > 10

    sentences = [line.split("\t")[1] for line in (data / "test.tsv").read_text().splitlines()[1:]]
    classifier = api.load_classifier(out)  # the labels and length of the folder
    assert (classifier.labels, classifier.max_seq_length) == (["1", "0"], MAX_SEQ_LENGTH)
    np.testing.assert_allclose(classifier.predict(sentences), probabilities, rtol=1e-5,
                               atol=1e-6)

    exported = tmp_path / "exported"
    status, log = run_command_line("run.export_savedmodel", dict(init_checkpoint=out,
                                                                 export_dir=exported))
    assert status == 0, log[-3000:]
    marker = json.loads((exported / "assets" / "bert_tf_export.json").read_text())
    assert (marker["task"], marker["labels"], marker["max_seq_length"]) == (
        "classifier", ["1", "0"], MAX_SEQ_LENGTH)
    served = tf.saved_model.load(str(exported)).signatures["serve_text"](
        text=tf.constant(sentences))
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, rtol=1e-5,
                               atol=1e-6)
    assert [label.decode() for label in served["label"].numpy()] == [
        ["1", "0"][i] for i in probabilities.argmax(axis=1)]


def test_further_fine_tuning_from_the_folder(trained, tmp_path):
    """--init_checkpoint=out trains on with the data flags alone: the labels are
    the folder's (its head is loaded, none of the model is new), and the new folder is a model
    directory too."""
    again = tmp_path / "again"
    status, log = run_command_line("run.run_classifier", dict(
        DATA_FLAGS, data_dir=trained["data"], init_checkpoint=trained["out"], output_dir=again,
        do_train=True, train_batch_size=8, num_train_epochs=1.0, seed=2))
    assert status == 0, log[-3000:]
    assert " 0 new, " in log and "new (initialised" not in log, log[-3000:]
    record = json.loads((again / "bert_tf_model.json").read_text())
    assert (record["labels"], record["max_seq_length"]) == (["1", "0"], MAX_SEQ_LENGTH)


def other_vocab(path, uncased_vocab):
    """The vocabulary with two tokens swapped: same size, other ids."""
    lines = uncased_vocab.read_text(encoding="utf-8").splitlines()
    lines[2000], lines[2001] = lines[2001], lines[2000]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("flag", ["vocab_file", "label_list", "do_lower_case",
                                  "bert_config_file"])
def test_flags_against_the_folder_are_refused(trained, tmp_path, uncased_vocab, flag):
    """A given flag that contradicts the folder (another vocabulary, other labels,
    the other casing, another model's config) would predict silently wrong: one error line
    naming the flag, exit 2, nothing written."""
    values = {"vocab_file": other_vocab(tmp_path / "vocab.txt", uncased_vocab),
              "label_list": "0,1", "do_lower_case": "false",
              "bert_config_file": tmp_path / "config.json"}
    (tmp_path / "config.json").write_text(json.dumps(dict(TINY, hidden_size=16)))
    test_only = tmp_path / "test_only"
    test_only.mkdir()
    shutil.copy(trained["data"] / "test.tsv", test_only / "test.tsv")
    before = sorted(p.name for p in trained["out"].iterdir())
    assert_one_line_error("run.run_classifier", {
        **DATA_FLAGS, "data_dir": test_only, "init_checkpoint": trained["out"],
        "output_dir": tmp_path / "predicted", "do_predict": True, flag: values[flag]},
        f"error: --{flag}: ")
    assert not (tmp_path / "predicted").exists()
    assert sorted(p.name for p in trained["out"].iterdir()) == before


def test_an_export_flag_against_the_folder_is_refused(trained, tmp_path):
    assert_one_line_error("run.export_savedmodel", dict(
        init_checkpoint=trained["out"], export_dir=tmp_path / "exported", label_list="a,b"),
        "error: --label_list: a,b is not what the model in ")
    assert not (tmp_path / "exported").exists()


def test_an_output_dir_with_a_users_other_files_is_refused(trained, tmp_path):
    """A folder holding the user's own bert_config.json (another model) or vocab.txt is not
    made a model directory over them: refused before any work, nothing replaced or added."""
    for name, content in (("bert_config.json", json.dumps(dict(TINY, num_hidden_layers=4))),
                          ("vocab.txt", "[PAD]\n[UNK]\nmine\n")):
        folder = tmp_path / name.split(".")[0]
        folder.mkdir()
        (folder / name).write_text(content)
        (folder / "notes.txt").write_text("mine")
        assert_one_line_error("run.run_classifier", dict(
            DATA_FLAGS, data_dir=trained["data"], label_list="1,0", output_dir=folder,
            init_checkpoint=trained["google"], do_train=True, max_seq_length=MAX_SEQ_LENGTH),
            f"error: --output_dir: {folder / name} is not ")
        assert sorted(p.name for p in folder.iterdir()) == sorted([name, "notes.txt"])
        assert (folder / name).read_text() == content


def test_the_same_files_in_output_dir_are_fine(trained, tmp_path):
    """The user's own copy of the model's config and vocabulary (other formatting, same
    content) in output_dir: accepted, and left as they are."""
    from bert_tf.model import directory
    from bert_tf.model.config import BertConfig
    shutil.copy(trained["google"] / "vocab.txt", tmp_path / "vocab.txt")
    (tmp_path / "bert_config.json").write_text(json.dumps(dict(TINY, hidden_dropout_prob=0.2)))
    config = BertConfig.from_dict(TINY)
    directory.check_output_dir(str(tmp_path), config, str(trained["google"] / "vocab.txt"))
    directory.write(str(tmp_path), config, str(trained["google"] / "vocab.txt"),
                    {"do_lower_case": True})
    assert json.loads((tmp_path / "bert_config.json").read_text())["hidden_dropout_prob"] == 0.2


@pytest.fixture(scope="module")
def edited_minilm(tmp_path_factory):
    """A copy of the real MiniLM directory whose config.json says 4 layers (the file holds 6):
    every shape agrees, so only the unused layers tell."""
    from conftest import minilm_directory
    edited = tmp_path_factory.mktemp("edited") / "minilm"
    shutil.copytree(minilm_directory(), edited)
    config = json.loads((edited / "config.json").read_text())
    config["num_hidden_layers"] = 4
    (edited / "config.json").write_text(json.dumps(config))
    return edited


@pytest.mark.parametrize("command", ["export_savedmodel", "run_classifier", "extract_features",
                                     "run_classifier_train", "run_pretraining_train"])
def test_every_command_refuses_a_directory_whose_config_does_not_describe_its_weights(
        edited_minilm, trained, pretraining_folders, tmp_path, command):
    """A model directory whose config.json says 4 layers where its weights hold 6
    would predict silently wrong (every shape agrees): one error line naming the directory,
    its config.json and both layer counts; exit 2; nothing written, in a command that trains
    too."""
    (tmp_path / "input.txt").write_text("a sentence\n")
    test_only = tmp_path / "test_only"
    test_only.mkdir()
    shutil.copy(trained["data"] / "test.tsv", test_only / "test.tsv")
    flags = {
        "export_savedmodel": dict(init_checkpoint=edited_minilm, export_dir=tmp_path / "out"),
        "run_classifier": dict(DATA_FLAGS, data_dir=test_only, label_list="0,1",
                               init_checkpoint=edited_minilm, output_dir=tmp_path / "out",
                               do_predict=True, max_seq_length=32),
        "extract_features": dict(input_file=tmp_path / "input.txt", init_checkpoint=edited_minilm,
                                 output_file=tmp_path / "out", max_seq_length=16),
        "run_classifier_train": dict(DATA_FLAGS, data_dir=trained["data"], label_list="0,1",
                                     init_checkpoint=edited_minilm, output_dir=tmp_path / "out",
                                     do_train=True, max_seq_length=32),
        "run_pretraining_train": dict(input_file=pretraining_folders["records"],
                                      init_checkpoint=edited_minilm, output_dir=tmp_path / "out",
                                      do_train=True, max_seq_length=32,
                                      max_predictions_per_seq=5),
    }[command]
    before = sorted(p.name for p in tmp_path.iterdir())
    assert_one_line_error(f"run.{command.replace('_train', '')}", flags,
                          f"{edited_minilm}: holds 6 encoder layers but the model's config "
                          f"({edited_minilm}/config.json) describes 4 (num_hidden_layers)")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_run_pretraining_refuses_a_config_against_the_init_checkpoints(trained, tmp_path):
    """The config rule of every command that reads a model holds in run_pretraining too: a
    --bert_config_file that contradicts --init_checkpoint's directory names both files and the
    field."""
    (tmp_path / "config.json").write_text(json.dumps(dict(TINY, num_attention_heads=4)))
    assert_one_line_error("run.run_pretraining", dict(
        init_checkpoint=trained["google"], bert_config_file=tmp_path / "config.json",
        input_file=trained["data"] / "train.tsv", output_dir=tmp_path / "out", do_train=True),
        f"error: --bert_config_file: {tmp_path / 'config.json'} is not the config of the model "
        f"in --init_checkpoint={trained['google']} (num_attention_heads 4 vs 2, "
        f"{trained['google'] / 'bert_config.json'})")
    assert not (tmp_path / "out").exists()


def test_a_pretraining_folder_is_a_model_directory(pretraining_folders, uncased_vocab, tmp_path):
    """run_pretraining's output_dir holds its config, a copy of the vocabulary and
    a record of casing and objective, so export needs only --init_checkpoint; a vocabulary
    that is not the model's (2,000 other entries for a 30,522-entry model: smaller, so its
    size says nothing) is refused by its tokens."""
    from bert_tf.model.config import BertConfig
    pretrained = pretraining_folders
    for objective in ("mlm", "mlm_nsp"):
        out = pretrained[objective]
        assert BertConfig.from_json_file(out / "bert_config.json") == pretrained["config"]
        assert (out / "vocab.txt").read_bytes() == uncased_vocab.read_bytes()
        record = json.loads((out / "bert_tf_model.json").read_text())
        # The casing is the records' (their manifest's; the "mlm" run also gave it).
        assert record == {"task": "pretraining", "max_seq_length": 32,
                          "architecture": architecture(PRETRAINING_CONFIG),
                          "vocabulary_sha256": tokens_sha256(uncased_vocab),
                          "do_lower_case": True,
                          **({"objective": "mlm"} if objective == "mlm" else {})}
    status, log = run_command_line("run.export_savedmodel", dict(
        init_checkpoint=pretrained["mlm"], task="pretraining",
        export_dir=tmp_path / "exported"))
    assert status == 0, log[-3000:]
    small = tmp_path / "small_vocab.txt"
    lines = uncased_vocab.read_text(encoding="utf-8").splitlines()
    small.write_text("\n".join(lines[:5] + lines[5000:6995]) + "\n", encoding="utf-8")
    assert_one_line_error("run.export_savedmodel", dict(
        init_checkpoint=pretrained["mlm"], task="pretraining", format="huggingface",
        vocab_file=small, export_dir=tmp_path / "hf"),
        f"error: --vocab_file: {small} is not the vocabulary of the model in "
        f"--init_checkpoint={pretrained['mlm']}")
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize("edit", ["heads", "activation", "vocabulary"])
def test_a_folder_edited_after_its_run_is_refused(trained, tmp_path, uncased_vocab, edit):
    """The family of 43.1 and 43.2 that no shape shows: the attention heads or the activation
    edited in bert_config.json, or vocab.txt replaced by a vocabulary of the same size with two
    ids swapped, after the run. The run's bert_tf_model.json records what its weights were
    trained with: one error line naming the changed file, exit 2, nothing written."""
    folder = tmp_path / "folder"
    shutil.copytree(trained["out"], folder)
    if edit == "vocabulary":
        other_vocab(folder / "vocab.txt", uncased_vocab)
        expected = (f"error: {folder / 'vocab.txt'}: is not the vocabulary the model in "
                    f"{folder} was trained with")
    else:
        field, value = (("num_attention_heads", 1) if edit == "heads"
                        else ("hidden_act", "relu"))
        (folder / "bert_config.json").write_text(json.dumps(dict(TINY, **{field: value})))
        expected = (f"error: {folder / 'bert_config.json'}: {field} {value} is not what the "
                    f"model in {folder} was trained with ({field} {TINY[field]}, "
                    f"{folder / 'bert_tf_model.json'})")
    test_only = tmp_path / "test_only"
    test_only.mkdir()
    shutil.copy(trained["data"] / "test.tsv", test_only / "test.tsv")
    assert_one_line_error("run.run_classifier", {
        **DATA_FLAGS, "data_dir": test_only, "init_checkpoint": folder,
        "output_dir": tmp_path / "predicted", "do_predict": True}, expected)
    assert_one_line_error("run.export_savedmodel", dict(init_checkpoint=folder,
                                                        export_dir=tmp_path / "exported"),
                          expected)
    assert not (tmp_path / "predicted").exists() and not (tmp_path / "exported").exists()


def test_further_pretraining_takes_the_records_vocabulary(trained, pretraining_folders, tmp_path,
                                                          uncased_vocab, shared_data):
    """Pretraining further from Google's layout on records of an extended vocabulary
    (`extend_vocab --mode=unused`: the same size, other tokens; here two ids swapped): the
    run's vocabulary is the records' (their manifest's copy), not refused for differing from
    the layout's, and the output_dir holds it (the oracle: its bytes) and its checksum; records
    without a manifest and no --vocab_file: the layout's vocabulary is not taken for the
    records'."""
    extended = other_vocab(tmp_path / "extended_vocab.txt", uncased_vocab)
    records = tmp_path / "records" / "extended.tfrecord"
    status, log = run_command_line("data_tools.create_pretraining_data", dict(
        input_file=shared_data / "sample_text.txt", output_file=records, vocab_file=extended,
        max_seq_length=32, max_predictions_per_seq=5, dupe_factor=1))
    assert status == 0, log[-3000:]
    flags = dict(init_checkpoint=trained["google"] / "bert_model.ckpt", do_train=True,
                 num_train_steps=1, num_warmup_steps=0, train_batch_size=4, objective="mlm",
                 seed=1)
    status, log = run_command_line("run.run_pretraining", dict(
        flags, input_file=records, output_dir=tmp_path / "extended"))
    assert status == 0, log[-3000:]
    assert (tmp_path / "extended" / "vocab.txt").read_bytes() == extended.read_bytes()
    record = json.loads((tmp_path / "extended" / "bert_tf_model.json").read_text())
    assert record["vocabulary_sha256"] == tokens_sha256(extended) != tokens_sha256(uncased_vocab)
    without_manifest = tmp_path / "bare" / "records.tfrecord"
    without_manifest.parent.mkdir()
    without_manifest.write_bytes(records.read_bytes())
    status, log = run_command_line("run.run_pretraining", dict(
        flags, input_file=without_manifest, output_dir=tmp_path / "no_vocab", max_seq_length=32,
        max_predictions_per_seq=5))
    assert status == 0, log[-3000:]
    assert "note: no --vocab_file: --output_dir will hold no vocab.txt" in log
    assert not (tmp_path / "no_vocab" / "vocab.txt").exists()
    assert "vocabulary_sha256" not in json.loads(
        (tmp_path / "no_vocab" / "bert_tf_model.json").read_text())
