"""ClassificationTask's results and files from gathered per-example outputs, in process.

Oracle: scikit-learn's metrics (precision_recall_fscore_support, confusion_matrix) on the very
predictions handed to the task, padding examples (is_real_example 0) left out.
"""
import numpy as np
import pytest

from bert_tf.errors import InputError
from bert_tf.tasks.classification.task import ClassificationConfig, ClassificationTask, label_key

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


# ---------------------------------------------------------------------------------------------
# Multi-label
# ---------------------------------------------------------------------------------------------

TAGS = ["positive", "has negation", "long"]
THRESHOLDS = [0.3, 0.5, 0.7]


def multi_label_task(**options):
    return ClassificationTask(ClassificationConfig(labels=TAGS, multi_label=True,
                                                   threshold=THRESHOLDS, **options))


def test_multi_label_outputs_and_results_equal_sklearn(tmp_path):
    """The task's own eval step on logits (per-label thresholds in the graph), then its
    results against scikit-learn on the predictions it made; the loss is the mean over labels
    of the sigmoid cross-entropy (computed here in numpy)."""
    import tensorflow as tf

    sklearn_metrics = require_module("sklearn.metrics", "oracle of the multi-label metrics")
    task = multi_label_task()
    rng = np.random.default_rng(3)
    num_real, num_padding = 90, 6
    logits = rng.normal(0, 1.5, (num_real + num_padding, 3)).astype(np.float32)
    labels = (rng.random((num_real + num_padding, 3)) < [0.5, 0.3, 0.2]).astype(np.int64)
    labels[num_real:] = 0
    is_real = np.r_[np.ones(num_real), np.zeros(num_padding)].astype(np.int64)
    outputs = {name: value.numpy() for name, value in task.eval_outputs(
        {"label_ids": tf.constant(labels), "is_real_example": tf.constant(is_real)},
        {"logits": tf.constant(logits)}).items()}
    probabilities = 1 / (1 + np.exp(-logits.astype(np.float64)))
    np.testing.assert_array_equal(outputs["prediction"], probabilities > THRESHOLDS)
    expected_losses = np.mean(np.logaddexp(0, logits) - labels * logits, axis=1)
    np.testing.assert_allclose(outputs["per_example_loss"], expected_losses, rtol=1e-6)

    results = task.eval_results(outputs, 12, 8)
    gold, predicted = labels[:num_real], outputs["prediction"][:num_real]
    expected = {
        "eval_micro_f1": sklearn_metrics.f1_score(gold, predicted, average="micro"),
        "eval_macro_f1": sklearn_metrics.f1_score(gold, predicted, average="macro"),
        "eval_micro_precision": sklearn_metrics.precision_score(gold, predicted,
                                                                average="micro"),
        "eval_micro_recall": sklearn_metrics.recall_score(gold, predicted, average="micro"),
        "eval_subset_accuracy": sklearn_metrics.accuracy_score(gold, predicted),
        "eval_loss": expected_losses[:num_real].mean(),
        "global_step": 12}
    for name, values in zip(("precision", "recall", "f1"),
                            sklearn_metrics.precision_recall_fscore_support(gold, predicted)):
        for index, tag in enumerate(TAGS):
            expected[f"eval_{name}_{label_key(tag)}"] = values[index]
    assert sorted(results) == sorted(list(expected) + ["loss"])
    for key, value in expected.items():
        np.testing.assert_allclose(results[key], value, rtol=1e-6, err_msg=key)
    assert 0 < results["eval_subset_accuracy"] < results["eval_micro_f1"] < 1

    (path,) = task.write_eval_outputs(outputs, str(tmp_path))
    rows = [line.split("\t") for line in open(path, encoding="utf-8").read().splitlines()]
    assert rows[0] == ["label", "true_positives", "false_positives", "false_negatives",
                       "true_negatives"]
    matrices = sklearn_metrics.multilabel_confusion_matrix(gold, predicted)
    assert rows[1:] == [[tag, str(m[1, 1]), str(m[0, 1]), str(m[1, 0]), str(m[0, 0])]
                        for tag, m in zip(TAGS, matrices)]


def test_multi_label_training_share_and_serving():
    """The train metrics of two halves, each divided by the whole batch's examples, add up to
    the whole batch's (the contract's global-batch share); serving on strings returns the names
    over the thresholds, in label order."""
    import tensorflow as tf

    task = multi_label_task()
    logits = tf.constant([[2.0, -3.0, 0.5], [-1.0, 0.1, 1.0], [0.0, 0.0, 0.0],
                          [-2.0, 3.0, 2.0]])
    labels = tf.constant([[1, 0, 1], [0, 1, 1], [0, 0, 0], [0, 1, 1]])
    batch = {"label_ids": labels, "input_ids": tf.zeros([4, 3], tf.int32)}
    whole = task.train_metrics(batch, {"logits": logits}, task.normalizers(batch))
    halves = [task.train_metrics({k: v[i:i + 2] for k, v in batch.items()},
                                 {"logits": logits[i:i + 2]}, task.normalizers(batch))
              for i in (0, 2)]
    for name in ("loss", "accuracy"):
        np.testing.assert_allclose(sum(h[name] for h in halves), whole[name], rtol=1e-6)
    # Probabilities 0.88 0.05 0.62 | 0.27 0.52 0.73 | 0.5 0.5 0.5 | 0.12 0.95 0.88 against
    # thresholds 0.3 0.5 0.7: every label right in rows 2 and 4 only.
    assert float(whole["accuracy"]) == 0.5
    served = task.serving_outputs({"logits": logits}, from_text=True)
    assert served["labels"].numpy().astype(str).tolist() == [
        ["positive", "", ""], ["has negation", "long", ""], ["positive", "", ""],
        ["has negation", "long", ""]]
    assert served["label_count"].numpy().tolist() == [1, 2, 1, 2]
    np.testing.assert_allclose(served["probabilities"], tf.sigmoid(logits))
    assert sorted(task.serving_outputs({"logits": logits})) == ["logits", "probabilities"]


@pytest.mark.parametrize("options, message", [
    (dict(threshold=1.5), "threshold: must be in the open interval (0, 1), got 1.5"),
    (dict(threshold=["0.5", "0"]), "threshold: must be in the open interval (0, 1), got 0"),
    (dict(threshold=["0.5", "high"]), "threshold: must be numbers, got 'high'"),
    (dict(threshold=[0.2, 0.3]), "threshold: gives 2 thresholds for 3 labels "
                                 "['positive', 'has negation', 'long']: give one for all, or "
                                 "one per label"),
    (dict(multi_label=False, threshold=0.4), "threshold: is for multi-label tasks (multi_label)"),
    (dict(labels=None), "multi_label: needs the labels (label_list)"),
    (dict(window_pooling="max"), "window_pooling: is for texts in windows (doc_stride)"),
    (dict(doc_stride=4, window_pooling="min"), "window_pooling: must be one of mean, max, got "
                                               "'min'"),
    (dict(doc_stride=126), "doc_stride: must be at least 1 and less than the window, "
                           "max_seq_length - 2 = 126 pieces, got 126"),
])
def test_bad_multi_label_and_window_options(options, message):
    config = dict(labels=TAGS, multi_label=True)
    config.update(options)
    with pytest.raises(InputError) as raised:
        ClassificationConfig(**config)
    assert str(raised.value) == message
    assert ClassificationConfig(labels=TAGS, multi_label=True, threshold="0.25").thresholds == (
        0.25, 0.25, 0.25)
