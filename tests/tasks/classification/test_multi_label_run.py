"""run_classifier --multi_label end to end, on a synthetic multi-label set made from GLUE data.

The set (no real multi-label data set is in ../shared/data; GoEmotions and the like are out
of reach): SST-2 dev sentences, each tagged with any of three labels computed from the row,
   positive  SST-2's own label is 1,
   negation  the sentence has one of the words in NEGATIONS,
   long      the sentence has at least 20 words,
so rows have none, one, two or three labels. A tiny BERT trains a few steps (it need not
learn), evaluates and predicts the same rows and exports a SavedModel. Oracle: scikit-learn's
metrics on the very predictions the run wrote (test_results.tsv probabilities over the
per-label --threshold) against the rows' labels must equal eval_results.txt and
eval_confusion_matrix.tsv; the SavedModel's serve_text returns the names over the thresholds.
"""
import json

import numpy as np
import pytest

from conftest import read_eval_numbers, require_module, run_command_line

pytestmark = pytest.mark.slow

TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 64, "max_position_embeddings": 64, "type_vocab_size": 2}
NEGATIONS = {"not", "no", "never", "nothing", "nobody", "none", "neither", "nor", "without",
             "n't"}
LABELS = ["long", "negation", "positive"]  # as inferred: sorted
THRESHOLDS = [0.45, 0.5, 0.55]
NUM_TRAIN, NUM_DEV = 96, 40


def tags(sentence, sst_label):
    words = sentence.split()
    return [name for name, present in (("positive", sst_label == "1"),
                                       ("negation", bool(NEGATIONS & set(words))),
                                       ("long", len(words) >= 20)) if present]


@pytest.fixture(scope="module")
def run(tmp_path_factory, shared_data, uncased_vocab):
    root = tmp_path_factory.mktemp("multi_label")
    with open(shared_data / "glue_data" / "SST-2" / "dev.tsv", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:NUM_TRAIN + NUM_DEV + 1]
    tagged = [(sentence.strip(), tags(sentence, label)) for sentence, label in rows]
    data = root / "data"
    data.mkdir()
    for name, part in (("train.tsv", tagged[:NUM_TRAIN]), ("dev.tsv", tagged[NUM_TRAIN:]),
                       ("test.tsv", tagged[NUM_TRAIN:])):
        (data / name).write_text("sentence\tlabels\n" + "".join(
            f"{sentence}\t{','.join(labels)}\n" for sentence, labels in part), encoding="utf-8")
    (root / "bert_config.json").write_text(json.dumps(TINY))
    output_dir = root / "out"
    flags = {"task_name": "tsv", "data_dir": data, "text_a_column": "sentence",
             "label_column": "labels", "skip_header": True, "multi_label": True,
             "threshold": ",".join(map(str, THRESHOLDS)), "vocab_file": uncased_vocab,
             "bert_config_file": root / "bert_config.json", "output_dir": output_dir,
             "max_seq_length": 48, "do_train": True, "do_eval": True, "do_predict": True,
             "train_batch_size": 16, "num_train_epochs": 2, "learning_rate": 1e-3, "seed": 3,
             "export_dir": root / "exported"}
    status, output = run_command_line("run.run_classifier", flags)
    assert status == 0, output[-4000:]
    gold = np.array([[int(name in labels) for name in LABELS]
                     for _, labels in tagged[NUM_TRAIN:]])
    return output_dir, root / "exported", [s for s, _ in tagged[NUM_TRAIN:]], gold, output


def test_eval_results_are_sklearns_on_the_written_predictions(run):
    sklearn_metrics = require_module("sklearn.metrics", "oracle of the multi-label metrics")
    output_dir, _, _, gold, log = run
    assert (f"3 labels {LABELS}, multi-label (thresholds {THRESHOLDS})") in log
    assert "train: 96 examples" in log and "***** Running training *****  batch size 16, " \
                                              "12 steps" in log
    assert 0 < gold.mean() < 1 and all(0 < gold[:, i].sum() < len(gold) for i in range(3))
    with open(output_dir / "test_results.tsv") as f:
        probabilities = np.array([[np.float32(v) for v in line.rstrip("\n").split("\t")]
                                  for line in f])
    assert probabilities.shape == (NUM_DEV, 3)
    predicted = (probabilities > np.float32(THRESHOLDS)).astype(int)
    assert 0 < predicted.mean() < 1  # not all one value: the comparisons below can fail
    results = read_eval_numbers(output_dir / "eval_results.txt")
    expected = {
        "eval_micro_f1": sklearn_metrics.f1_score(gold, predicted, average="micro",
                                                  zero_division=0),
        "eval_macro_f1": sklearn_metrics.f1_score(gold, predicted, average="macro",
                                                  zero_division=0),
        "eval_micro_precision": sklearn_metrics.precision_score(gold, predicted,
                                                                average="micro",
                                                                zero_division=0),
        "eval_micro_recall": sklearn_metrics.recall_score(gold, predicted, average="micro",
                                                          zero_division=0),
        "eval_subset_accuracy": sklearn_metrics.accuracy_score(gold, predicted),
        "global_step": 12}
    for name, values in zip(("precision", "recall", "f1"),
                            sklearn_metrics.precision_recall_fscore_support(
                                gold, predicted, zero_division=0)):
        for index, label in enumerate(LABELS):
            expected[f"eval_{name}_{label}"] = values[index]
    assert sorted(results) == sorted(list(expected) + ["eval_loss", "loss"])
    for key, value in expected.items():
        np.testing.assert_allclose(results[key], value, rtol=1e-6, atol=1e-7, err_msg=key)
    with open(output_dir / "eval_confusion_matrix.tsv") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    matrices = sklearn_metrics.multilabel_confusion_matrix(gold, predicted)
    assert rows[1:] == [[label, str(m[1, 1]), str(m[0, 1]), str(m[1, 0]), str(m[0, 0])]
                        for label, m in zip(LABELS, matrices)]


def test_the_export_returns_the_labels_over_the_thresholds(run):
    import tensorflow as tf

    output_dir, exported, sentences, _, _ = run
    with open(output_dir / "test_results.tsv") as f:
        probabilities = np.array([[np.float32(v) for v in line.rstrip("\n").split("\t")]
                                  for line in f])
    served = tf.saved_model.load(str(exported)).signatures["serve_text"](
        text=tf.constant(sentences))
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-6)
    over = probabilities > np.float32(THRESHOLDS)
    assert [[name.decode() for name in row if name] for row in served["labels"].numpy()] == [
        [label for label, chosen in zip(LABELS, row) if chosen] for row in over]
    assert served["label_count"].numpy().tolist() == over.sum(axis=1).tolist()
