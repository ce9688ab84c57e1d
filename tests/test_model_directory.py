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

from conftest import assert_one_line_error, run_command_line, strategy_line

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
                      "regression": False, "multi_label": False}
    files = api.model_files(out)
    assert (files.config, files.do_lower_case, files.record) == (BertConfig.from_dict(TINY),
                                                                 True, record)


def read_results(path):
    with open(path, encoding="utf-8") as f:
        return np.array([[float(x) for x in row] for row in csv.reader(f, delimiter="\t")])


def test_predict_and_export_from_the_folder_alone(trained, tmp_path):
    """Issue 31.6: predict with --init_checkpoint=out and the data flags only (no training
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
    # Issue 31.8: the settings line names the optimizer of a training run only.
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
    """Issue 31.6: --init_checkpoint=out trains on with the data flags alone: the labels are
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
    """Issue 31.6: a given flag that contradicts the folder (another vocabulary, other labels,
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
