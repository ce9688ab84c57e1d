"""Sentence (pair) classification, regression and multi-label classification: the original
run_classifier's model, loss and metrics as a Task, plus per-class scores, a confusion matrix
and long texts in windows combined per example. Formulas, result keys and files:
docs/fine_tuning.md (run_classifier).
"""
import dataclasses
import os
import re
import typing

import numpy as np
import tensorflow as tf

from bert_tf.data.records import feature_spec
from bert_tf.errors import arg, argument_error
from bert_tf.io_utils import atomic_open
from bert_tf.model.models import BertClassifier
from bert_tf.tasks import metrics, registry
from bert_tf.tasks.classification import reader
from bert_tf.tasks.classification.preprocessor import ClassificationPreprocessor, record_schema
from bert_tf.tasks.base import Task, TaskConfig
from bert_tf.tasks.preprocessor import prepare, split_options
from bert_tf.tasks.split_files import task_key
from bert_tf.text.windows import check_doc_stride


def default_task_metric(task_name, labels):
    """The task_metric of the task `task_name` (a `reader.get_processor` name): its processor's
    (the GLUE tasks with unbalanced classes report F1 or MCC), else "correlation" for a
    regression (`labels` None), else None."""
    processor = reader.processor_class(task_name)
    return ((processor and processor.task_metric)
            or ("correlation" if labels is None else None))


def softmax_float32(logits):
    """float32 probabilities as the original's tf.nn.softmax of float32 logits."""
    return tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)


def label_key(label):
    """A label's name in eval_results.txt keys (eval_f1_<key>): whitespace would break the
    `key = value` lines, so each whitespace character becomes "_"."""
    return re.sub(r"\s", "_", str(label))


CONFUSION_MATRIX_FILE = "eval_confusion_matrix.tsv"
WINDOW_POOLINGS = ("mean", "max")


def window_counts(first, num_windows):
    """The number of windows of each example, from the index of each one's first window."""
    return np.diff(np.r_[first, num_windows])


def combine_windows(values, example_ids, pooling="mean"):
    """Per example, the mean or max over its windows of `values` ([W, ...], windows in record
    order, an example's consecutive): returns (the combined values [E, ...] in float32, the
    index of each example's first window). Sums in float64: one window gives its values
    exactly."""
    example_ids = np.asarray(example_ids)
    starts = np.flatnonzero(np.r_[True, example_ids[1:] != example_ids[:-1]])
    if len(np.unique(example_ids[starts])) != len(starts):
        raise ValueError("an example's windows are not consecutive")
    values = np.asarray(values, np.float64)
    if pooling == "max":
        combined = np.maximum.reduceat(values, starts, axis=0)
    else:
        counts = window_counts(starts, len(example_ids))
        combined = (np.add.reduceat(values, starts, axis=0)
                    / counts.reshape((-1,) + (1,) * (values.ndim - 1)))
    return combined.astype(np.float32), starts


@dataclasses.dataclass
class ClassificationConfig(TaskConfig):
    """Attributes (besides TaskConfig's):
      labels: the label names in output order; None or one label: regression (one output).
      task_metric: "f1", "matthews_corrcoef", "correlation" or None (see default_task_metric).
      original_pads_eval: the original's eval batches included padding examples (--use_tpu):
        changes only how "loss" is averaged (see the module docstring).
      dropout_rate: dropout on the pooled output in training (the original: 0.1).
      multi_label: each example has any number of the labels (sigmoid outputs; see the module
        docstring).
      threshold: multi-label: the probability a label must exceed to be predicted, one number
        for all labels or one per label, each in (0, 1) (None: 0.5).
      doc_stride: the records hold windows of long texts, doc_stride pieces apart, with an
        `example_id` each (None: one record per example, the original's truncation).
      window_pooling: with doc_stride, how the windows' logits combine: "mean" (None: the
        default) or "max".
    """
    labels: typing.Optional[list] = None
    task_metric: typing.Optional[str] = None
    original_pads_eval: bool = False
    dropout_rate: float = 0.1
    multi_label: bool = False
    threshold: typing.Any = None
    doc_stride: typing.Optional[int] = None
    window_pooling: typing.Optional[str] = None

    def __post_init__(self):
        super().__post_init__()
        check_doc_stride(self.doc_stride, self.max_seq_length)
        if self.window_pooling is not None and not self.windowed:
            raise argument_error("window_pooling", f"is for texts in windows "
                                                   f"({arg('doc_stride')})")
        if self.window_pooling not in (None,) + WINDOW_POOLINGS:
            raise argument_error("window_pooling", f"must be one of {', '.join(WINDOW_POOLINGS)}"
                                                   f", got {self.window_pooling!r}")
        if self.multi_label and not self.labels:
            raise argument_error("multi_label", f"needs the labels ({arg('label_list')})")
        if self.threshold is not None and not self.multi_label:
            raise argument_error("threshold", f"is for multi-label tasks "
                                              f"({arg('multi_label')})")
        if self.multi_label:
            self.thresholds  # checked now, before any work
        keys = {}
        for label in self.labels or ():
            other = keys.setdefault(label_key(label), label)
            if other != label:
                raise argument_error("label_list", f"labels {other!r} and {label!r} have the same "
                                                   f"name in eval_results.txt ({label_key(label)})")

    @property
    def num_labels(self):
        return len(self.labels) if self.labels else 1

    @property
    def regression(self):
        return self.num_labels == 1 and not self.multi_label

    @property
    def windowed(self):
        return self.doc_stride is not None

    @property
    def thresholds(self):
        """Multi-label: each label's threshold, a tuple of num_labels floats in (0, 1)."""
        given = 0.5 if self.threshold is None else self.threshold
        values = list(given) if isinstance(given, (list, tuple)) else [given]
        thresholds = []
        for value in values:
            try:
                threshold = float(value)
            except (TypeError, ValueError):
                raise argument_error("threshold", f"must be numbers, got {value!r}") from None
            if not 0 < threshold < 1:
                raise argument_error("threshold", f"must be in the open interval (0, 1), got "
                                                  f"{value}")
            thresholds.append(threshold)
        if len(thresholds) == 1:
            thresholds *= self.num_labels
        if len(thresholds) != self.num_labels:
            raise argument_error("threshold", f"gives {len(thresholds)} thresholds for "
                                              f"{self.num_labels} labels {list(self.labels)}: "
                                              f"give one for all, or one per label")
        return tuple(thresholds)


@registry.register
class ClassificationTask(Task):
    """run_classifier's task over records written by `bert_tf.tasks.classification.preprocessor`
    (`prepare_task`), or for a loaded model (its labels)."""

    name = "classifier"
    Config = ClassificationConfig
    Preprocessor = ClassificationPreprocessor
    train_metric_names = ("loss", "accuracy")
    sequence_features = ("input_ids", "input_mask", "segment_ids")

    # ---- Data.
    def feature_spec(self, mode):
        config = self.config
        return feature_spec(record_schema(
            config.max_seq_length, config.regression,
            config.num_labels if config.multi_label else None, config.windowed))

    # ---- Model.
    def build_model(self):
        config = self.config
        return BertClassifier(config.bert_config, config.num_labels, config.dropout_rate)

    # ---- Train.
    def outputs(self, model, batch, training):
        """The head reads [CLS] only: the model skips the last layer's other positions."""
        inputs = {name: batch[name] for name in self.sequence_features}
        return model(inputs, training=training, return_encoder_outputs=False)

    def per_example_loss(self, batch, logits):
        logits = tf.cast(logits, tf.float32)
        if self.config.regression:
            return tf.square(logits[:, 0] - tf.cast(batch["label_ids"], tf.float32))
        if self.config.multi_label:
            return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
                tf.cast(batch["label_ids"], tf.float32), logits), axis=-1)
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        one_hot = tf.one_hot(tf.cast(batch["label_ids"], tf.int32), self.config.num_labels)
        return -tf.reduce_sum(one_hot * log_probs, axis=-1)

    def probabilities(self, logits):
        """float32 class probabilities: the softmax, or each label's sigmoid (multi-label)."""
        if self.config.multi_label:
            return tf.sigmoid(tf.cast(logits, tf.float32))
        return softmax_float32(logits)

    def predictions(self, logits):
        """The predicted class [B] (regression: the score; multi-label: int32 [B, num_labels],
        1 where a label's probability is over its threshold)."""
        if self.config.regression:
            return tf.cast(logits[:, 0], tf.float32)
        if self.config.multi_label:
            over = self.probabilities(logits) > tf.constant(self.config.thresholds, tf.float32)
            return tf.cast(over, tf.int32)
        return tf.argmax(logits, axis=-1, output_type=tf.int32)

    def normalizers(self, batch):
        return {"examples": tf.cast(tf.shape(batch["input_ids"])[0], tf.float32)}

    def train_metrics(self, batch, outputs, normalizers):
        loss = self.per_example_loss(batch, outputs["logits"])
        if self.config.regression:
            correct = tf.zeros_like(loss)
        else:
            correct = tf.cast(tf.equal(self.predictions(outputs["logits"]),
                                       tf.cast(batch["label_ids"], tf.int32)), tf.float32)
            if self.config.multi_label:  # every label right
                correct = tf.reduce_min(correct, axis=-1)
        return {"loss": tf.reduce_sum(loss) / normalizers["examples"],
                "accuracy": tf.reduce_sum(correct) / normalizers["examples"]}

    # ---- Eval and predict.
    def eval_outputs(self, batch, outputs):
        per_example = {"per_example_loss": self.per_example_loss(batch, outputs["logits"]),
                       "prediction": self.predictions(outputs["logits"]),
                       "label": tf.cast(batch["label_ids"],
                                        tf.float32 if self.config.regression else tf.int32),
                       "is_real_example": tf.cast(batch["is_real_example"], tf.float32)}
        if self.config.windowed:  # combined per example on the host (`per_example`)
            per_example.update(logits=tf.cast(outputs["logits"], tf.float32),
                               example_id=batch["example_id"])
        return per_example

    def per_example(self, outputs):
        """Eval or predict outputs of windows -> of examples: the logits combined
        (`combine_windows`), then the loss, prediction and probabilities of the combined
        logits, by the ops of one window's (an example in one window keeps its window's
        probabilities); each example's label and is_real_example from its first window.
        Outputs without windows are returned as they are."""
        if not self.config.windowed:
            return outputs
        logits, first = combine_windows(outputs["logits"], outputs["example_id"],
                                        self.config.window_pooling or "mean")
        combined = {name: value[first] for name, value in outputs.items()
                    if name not in ("logits", "example_id")}
        logits = tf.constant(logits)
        if "label" in combined:
            combined["per_example_loss"] = self.per_example_loss(
                {"label_ids": combined["label"]}, logits).numpy()
            combined["prediction"] = self.predictions(logits).numpy()
        else:
            # A softmax's last bit may depend on the shape of the tensor it runs on and on how
            # its threads split it (measured on an AVX2 CPU: 2 of 90 values), so an example in
            # one window keeps the probabilities its predict step computed: exactly the output
            # without windows.
            single = window_counts(first, len(outputs["example_id"])) == 1
            combined["probabilities"] = np.where(
                single[:, None], combined["probabilities"],
                self._predicted_values(logits).numpy())
        return combined

    def eval_results(self, outputs, global_step, batch_size):
        outputs = self.per_example(outputs)
        weights = outputs["is_real_example"].astype(np.float64)
        losses = outputs["per_example_loss"].astype(np.float64)
        real = weights > 0
        averaged = losses if self.config.original_pads_eval else losses[real]
        batch_losses = [averaged[i:i + batch_size].mean()
                        for i in range(0, len(averaged), batch_size)]
        results = {
            "eval_loss": np.float32(np.sum(losses * weights) / max(weights.sum(), 1.0)),
            "global_step": np.int64(global_step),
            "loss": np.float32(np.mean(batch_losses)) if batch_losses else np.float32(0.0),
        }
        labels, predictions = outputs["label"], outputs["prediction"]
        if self.config.multi_label:
            scores = metrics.multi_label_scores(labels, predictions, weights)
            for name in ("micro_precision", "micro_recall", "micro_f1", "macro_f1",
                         "subset_accuracy"):
                results[f"eval_{name}"] = np.float32(scores[name])
            results.update(self._per_label_results(scores))
            return results
        if not self.config.regression:
            results["eval_accuracy"] = np.float32(metrics.accuracy(labels, predictions, weights))
        if self.config.task_metric == "f1":
            results["eval_f1"] = np.float32(metrics.f1_binary(labels, predictions, weights))
        elif self.config.task_metric == "matthews_corrcoef":
            results["eval_matthews_corrcoef"] = np.float32(
                metrics.matthews_corrcoef(labels, predictions, weights))
        elif self.config.task_metric == "correlation":
            results["eval_pearson"] = np.float32(metrics.pearson(labels, predictions, weights))
            results["eval_spearman"] = np.float32(metrics.spearman(labels, predictions, weights))
        if not self.config.regression:
            results.update(self._per_label_results(metrics.per_class_scores(
                labels, predictions, self.config.num_labels, weights)))
        return results

    def main_metric(self):
        """The GLUE task's metric (MRPC and QQP F1, CoLA Matthews' correlation, STS-B
        Pearson's), else accuracy; multi-label: micro F1; regression of the user's files:
        Pearson's, or the loss without a task metric."""
        config = self.config
        if config.multi_label:
            return "eval_micro_f1"
        metric = {"f1": "eval_f1", "matthews_corrcoef": "eval_matthews_corrcoef",
                  "correlation": "eval_pearson"}.get(config.task_metric)
        return metric or ("eval_loss" if config.regression else "eval_accuracy")

    def eval_metric_names(self):
        """The keys of `eval_results`, from the config (the labels)."""
        config = self.config
        names = {"eval_loss", "global_step", "loss"}
        if config.multi_label:
            names |= {f"eval_{name}" for name in ("micro_precision", "micro_recall", "micro_f1",
                                                  "macro_f1", "subset_accuracy")}
        elif not config.regression:
            names.add("eval_accuracy")
        names |= {"f1": {"eval_f1"}, "matthews_corrcoef": {"eval_matthews_corrcoef"},
                  "correlation": {"eval_pearson", "eval_spearman"}}.get(
            None if config.multi_label else config.task_metric, set())
        if not config.regression:
            names |= set(self._per_label_results({name: [0.0] * config.num_labels for name in
                                                  ("precision", "recall", "f1")}))
        return names

    def _per_label_results(self, scores):
        """eval_precision_<label>, eval_recall_<label>, eval_f1_<label> of each label."""
        return {f"eval_{name}_{label_key(label)}": np.float32(scores[name][index])
                for index, label in enumerate(self.config.labels)
                for name in ("precision", "recall", "f1")}

    def write_eval_outputs(self, outputs, output_dir):
        """eval_confusion_matrix.tsv: a header (`gold\\predicted` and the labels), then a row
        per gold label: its name and how many real examples of it were predicted as each
        label. Multi-label: a row per label with its counts of true and false positives, false
        and true negatives. Regression: none."""
        if self.config.regression:
            return []
        outputs = self.per_example(outputs)
        path = os.path.join(output_dir, CONFUSION_MATRIX_FILE)
        if self.config.multi_label:
            counts = metrics.multi_label_counts(outputs["label"], outputs["prediction"],
                                                outputs["is_real_example"])
            names = ("true_positives", "false_positives", "false_negatives", "true_negatives")
            return [write_table(path, ("label",) + names,
                                [[label] + [counts[name][index] for name in names]
                                 for index, label in enumerate(self.config.labels)])]
        matrix = metrics.confusion_matrix(outputs["label"], outputs["prediction"],
                                          self.config.num_labels, outputs["is_real_example"])
        return [write_table(path, ["gold\\predicted"] + list(self.config.labels),
                            [[label] + row for label, row in zip(self.config.labels,
                                                                 matrix.tolist())])]

    def _predicted_values(self, logits):
        """test_results.tsv's values: the probabilities ([B, 1] scores for regression)."""
        if self.config.regression:
            return self.predictions(logits)[:, None]
        return self.probabilities(logits)

    def predict_outputs(self, batch, outputs):
        per_example = {"is_real_example": tf.cast(batch["is_real_example"], tf.int32)}
        per_example["probabilities"] = self._predicted_values(outputs["logits"])
        if self.config.windowed:  # combined per example on the host (`per_example`)
            per_example.update(logits=tf.cast(outputs["logits"], tf.float32),
                               example_id=batch["example_id"])
        return per_example

    def write_predictions(self, outputs, output_dir):
        """test_results.tsv as the original: a line of tab-separated probabilities per real
        example (the padding examples sit at the end and are left out)."""
        outputs = self.per_example(outputs)
        path = os.path.join(output_dir, "test_results.tsv")
        rows = outputs["probabilities"][outputs["is_real_example"] > 0]
        with atomic_open(path) as writer:
            for probabilities in rows:
                writer.write("\t".join(str(p) for p in probabilities) + "\n")
        return [path]

    # ---- Serving.
    def export_description(self):
        """The label names in output order (none for regression), whether it is a regression
        or a multi-label model, and a multi-label model's thresholds (one per label)."""
        config = self.config
        description = {"regression": config.regression, "multi_label": config.multi_label}
        if config.labels:
            description["labels"] = list(config.labels)
        if config.multi_label:
            description["thresholds"] = list(config.thresholds)
        return description

    def serving_outputs(self, outputs, from_text=False):
        """Probabilities and logits (regression: the score); on raw strings also each row's
        label name. Multi-label: each label's probability; on raw strings `labels`, the names
        of the labels over their threshold in label order, padded with "" to [B, num_labels]
        (a signature returns dense tensors), and `label_count`, how many there are."""
        logits = tf.cast(outputs["logits"], tf.float32)
        if self.config.regression:
            return {"score": logits[:, 0]}
        probabilities = self.probabilities(logits)
        served = {"probabilities": probabilities, "logits": logits}
        if from_text and self.config.multi_label:
            names = tf.broadcast_to(tf.constant(self.config.labels), tf.shape(probabilities))
            over = tf.ragged.boolean_mask(names, tf.cast(self.predictions(logits), tf.bool))
            served["labels"] = over.to_tensor("", shape=[None, self.config.num_labels])
            served["label_count"] = tf.cast(over.row_lengths(), tf.int32)
        elif from_text:
            served["label"] = tf.gather(tf.constant(self.config.labels),
                                        tf.argmax(logits, axis=-1))
        return served


def write_table(path, header, rows):
    """A tab-separated file (atomically): the header, then the rows; tabs and line breaks in a
    cell become spaces."""
    def line(cells):
        return "\t".join(re.sub(r"[\t\r\n]", " ", str(cell)) for cell in cells) + "\n"

    with atomic_open(path) as f:
        f.write(line(header))
        for row in rows:
            f.write(line(row))
    return path


# ---- Data: examples to records.
def prepare_task(bert_config, examples, label_list, tokenizer, max_seq_length, output_dir, *,
                 task_name=None, **options):
    """Writes the records of `examples` (`ClassificationPreprocessor`, by
    `bert_tf.tasks.preprocessor.prepare`) and returns the PreparedTask (a ClassificationTask).

    Args:
      bert_config: the encoder's BertConfig.
      examples: {"train"|"eval"|"predict": InputExamples} (e.g. `read_splits`' ); each given
        split is written to output_dir/<split>.tf_record as the original's
        file_based_convert_examples_to_features.
      label_list: the labels in output order; None for regression (one output).
      tokenizer: FullTokenizer or FastTokenizer (the same records).
      task_name: the processor's name: the GLUE metric (`default_task_metric`) and the log
        line.
      options: `prepare`'s (batch sizes, training steps, check_model, log) and
        ClassificationConfig's other fields (original_pads_eval, bucket_by_length,
        multi_label, threshold, doc_stride, window_pooling, ...).
    """
    prepare_options, task_options = split_options(options)
    name = task_key(task_name)
    task_options.setdefault("task_metric", default_task_metric(name, label_list))
    config = ClassificationConfig(bert_config=bert_config, max_seq_length=max_seq_length,
                                  labels=label_list, **task_options)
    preprocessor = ClassificationPreprocessor(
        tokenizer, max_seq_length, examples, label_list, name, config.multi_label,
        config.doc_stride)
    return prepare(preprocessor,
                   lambda records: ClassificationTask(dataclasses.replace(config,
                                                                          records=records)),
                   output_dir, **prepare_options)
