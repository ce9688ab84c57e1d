"""run_ner --feature_layers, the paper's feature-based approach (section 5.3): the encoder's
weights after training equal the pretrained ones exactly, the BiLSTM head learns, the run's
folder records the layers (predicting from it alone gives the run's own predictions), and an
unknown choice is refused before anything is written."""
import numpy as np
import pytest

from conftest import assert_refused, run_command_line


@pytest.fixture(scope="module")
def conll(tmp_path_factory, shared_data):
    """The first 60 training sentences of CoNLL-2003, 60 of valid.txt, 30 of test.txt."""
    root = tmp_path_factory.mktemp("conll")
    for name, count in (("train.txt", 60), ("valid.txt", 60), ("test.txt", 30)):
        text = (shared_data / "conll2003" / name).read_text(encoding="utf-8")
        blocks = [b for b in text.split("\n\n") if b.strip() and "-DOCSTART-" not in b]
        (root / name).write_text("\n\n".join(blocks[:count]) + "\n", encoding="utf-8")
    return root


def test_frozen_encoder_is_unchanged_and_the_folder_records_its_layers(
        pretraining_folders, conll, tmp_path):
    from bert_tf import api
    pretrained = pretraining_folders["mlm"]
    out = tmp_path / "tagger"
    status, log = run_command_line("run.run_ner", dict(
        data_dir=conll, init_checkpoint=pretrained, output_dir=out, do_train=True,
        do_eval=True, do_predict=True, feature_layers="concat_last_four", max_seq_length=64,
        num_train_epochs=2, train_batch_size=8, learning_rate=1e-3, seed=0))
    assert status == 0, log[-3000:]
    before = {v.path.split("/", 1)[1]: v.numpy() for v in api.load_model(pretrained).weights}
    after = {v.path.split("/", 1)[1]: v.numpy() for v in api.load_model(out).weights}
    assert before.keys() == after.keys() and len(before) > 10
    assert all(np.array_equal(before[name], after[name]) for name in before)
    # The head trained, and its checkpoint holds it: the LSTM's weights read back are no longer
    # their initial values.
    from bert_tf.model.models import BertFeatureTagger
    from bert_tf.model.checkpoints import load_checkpoint
    files = api.model_files(out)
    trained = BertFeatureTagger(files.config, len(files.record["labels"]), "concat_last_four")
    load_checkpoint(trained, files.checkpoint)
    fresh = BertFeatureTagger(files.config, len(files.record["labels"]), "concat_last_four")
    assert files.record["feature_layers"] == "concat_last_four"
    assert not np.allclose(trained.lstm[0].weights[0].numpy(), fresh.lstm[0].weights[0].numpy())
    # Predicting from the folder alone: its layers come from its record.
    status, log = run_command_line("run.run_ner", dict(
        data_dir=conll, init_checkpoint=out, output_dir=tmp_path / "again", do_predict=True,
        max_seq_length=64))
    assert status == 0, log[-3000:]
    assert "--feature_layers=concat_last_four" in log
    assert ((tmp_path / "again" / "test_predictions.txt").read_text()
            == (out / "test_predictions.txt").read_text())


def test_an_unknown_choice_is_refused(pretraining_folders, conll, tmp_path):
    assert_refused("run.run_ner", dict(
        data_dir=conll, init_checkpoint=pretraining_folders["mlm"], output_dir=tmp_path / "o",
        do_train=True, feature_layers="middle"), "--feature_layers", tmp_path)
