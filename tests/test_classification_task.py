"""ClassificationTask's results and files from gathered per-example outputs, in process.

Oracle: scikit-learn's metrics (precision_recall_fscore_support, confusion_matrix) on the very
predictions handed to the task, padding examples (is_real_example 0) left out.
"""
import numpy as np
import pytest

from bert_tf.errors import InputError
from bert_tf.tasks.classification import ClassificationConfig, ClassificationTask, label_key

from conftest import require_module

LABELS = ["not ok", "fine", "so\tso"]  # whitespace inside names: keys with "_"


def gathered_outputs(num_examples, num_padding, num_labels, seed):
    """What the eval loop hands eval_results: per-example losses, predictions (right about
    60% of the time), labels, and padding rows at the end holding label 0."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_labels, num_examples)
    predictions = np.where(rng.random(num_examples) < 0.6, labels,
                           rng.integers(0, num_labels, num_examples))
    pad = np.zeros(num_padding, np.int64)
    return {"per_example_loss": np.concatenate([rng.random(num_examples),
                                                np.full(num_padding, 9.0)]).astype(np.float32),
            "prediction": np.concatenate([predictions, pad]).astype(np.int32),
            "label": np.concatenate([labels, pad]).astype(np.int32),
            "is_real_example": np.r_[np.ones(num_examples), np.zeros(num_padding)].astype(
                np.float32)}


def test_per_class_scores_and_confusion_matrix_equal_sklearn(tmp_path):
    sklearn_metrics = require_module("sklearn.metrics", "oracle of the per-class metrics")
    task = ClassificationTask(ClassificationConfig(labels=LABELS))
    outputs = gathered_outputs(101, 11, len(LABELS), seed=5)
    results = task.eval_results(outputs, 7, 8)
    real = outputs["is_real_example"] > 0
    gold, predicted = outputs["label"][real], outputs["prediction"][real]
    expected = sklearn_metrics.precision_recall_fscore_support(
        gold, predicted, labels=[0, 1, 2], zero_division=0)
    assert [label_key(label) for label in LABELS] == ["not_ok", "fine", "so_so"]
    for name, values in zip(("precision", "recall", "f1"), expected):
        for index, label in enumerate(LABELS):
            key = f"eval_{name}_{label_key(label)}"
            assert results[key] == np.float32(values[index]), key
            assert results[key].dtype == np.float32
    assert results["eval_accuracy"] == np.float32(sklearn_metrics.accuracy_score(gold, predicted))
    assert 0 < min(expected[2]) < 1  # every class both right and wrong somewhere

    (path,) = task.write_eval_outputs(outputs, str(tmp_path))
    assert path == str(tmp_path / "eval_confusion_matrix.tsv")
    rows = [line.split("\t") for line in (tmp_path / "eval_confusion_matrix.tsv").read_text(
        encoding="utf-8").splitlines()]
    assert rows[0] == ["gold\\predicted", "not ok", "fine", "so so"]  # a tab in a name: a space
    assert [row[0] for row in rows[1:]] == ["not ok", "fine", "so so"]
    np.testing.assert_array_equal(
        np.array([row[1:] for row in rows[1:]], dtype=np.int64),
        sklearn_metrics.confusion_matrix(gold, predicted, labels=[0, 1, 2]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval_confusion_matrix.tsv"]


def test_regression_has_no_per_class_results(tmp_path):
    task = ClassificationTask(ClassificationConfig(labels=None, task_metric="correlation"))
    outputs = gathered_outputs(20, 4, 3, seed=1)
    outputs["label"] = outputs["label"].astype(np.float32)
    outputs["prediction"] = outputs["prediction"].astype(np.float32) + 0.5
    assert sorted(task.eval_results(outputs, 3, 8)) == [
        "eval_loss", "eval_pearson", "eval_spearman", "global_step", "loss"]
    assert task.write_eval_outputs(outputs, str(tmp_path)) == []


def test_labels_whose_keys_collide_are_refused():
    with pytest.raises(InputError, match="^label_list: labels 'a b' and 'a_b' have the same "
                                         "name in eval_results.txt"):
        ClassificationConfig(labels=["a b", "a_b"])
