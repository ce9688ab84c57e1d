"""Sentence (pair) classification and regression: the original run_classifier's model half.

Model, loss and metrics as the original's `create_model` / `model_fn_builder` / `metric_fn`:
    logits = pooled_output (dropout 0.1 in training) @ output_weights^T + output_bias
    per_example_loss = -sum(one_hot(label) * log_softmax(logits));  loss = batch mean
    eval_accuracy = accuracy weighted by is_real_example; eval_loss = mean per_example_loss
    weighted by is_real_example; loss = mean over eval batches of the batch loss; global_step
plus the task's GLUE metric, which the original does not compute: eval_f1 (MRPC, QQP),
eval_matthews_corrcoef (CoLA), eval_pearson and eval_spearman (STS-B). Regression (STS-B,
num_labels 1; not in the original) uses the squared error as per-example loss and the logit as
the prediction.

"loss" is the mean of the batch losses over the batches the original would have run: without
--use_tpu it does not pad eval sets, so its last batch is short and holds real examples only; with
it, it pads, and padding examples count in their batch's mean. We always pad (fixed-size batches,
every example once); the batch losses are recomputed from the per-example losses to give the
original's number for the flags given.

Data: `read_splits` reads a processor's files (bert_tf.tasks.classifier_data), `prepare_task`
writes the records of InputExamples (read so, or the API's) and returns the task over them.

Predictions (`test_results.tsv`): one line per real example, the class probabilities as
`str(numpy.float32)` joined by tabs, no header, as the original (regression: the score).
"""
import dataclasses
import os
import typing

import numpy as np
import tensorflow as tf

from bert_tf.data.features import classifier_feature_spec
from bert_tf.errors import argument_error
from bert_tf.io_utils import atomic_open
from bert_tf.model.models import BertClassifier
from bert_tf.tasks import classifier_data, metrics
from bert_tf.tasks.base import PreparedTask, Records, Task, TaskConfig, preparing
from bert_tf.training import runner

# The GLUE metric of each task (beyond accuracy): tasks with unbalanced classes report F1 or MCC.
TASK_METRICS = {"mrpc": "f1", "qqp": "f1", "cola": "matthews_corrcoef", "sts-b": "correlation"}


def softmax_float32(logits):
    """float32 probabilities as the original's tf.nn.softmax of float32 logits."""
    return tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)


@dataclasses.dataclass
class ClassificationConfig(TaskConfig):
    """Attributes (besides TaskConfig's):
      labels: the label names in output order; None or one label: regression (one output).
      task_metric: "f1", "matthews_corrcoef", "correlation" or None (see TASK_METRICS).
      original_pads_eval: the original's eval batches included padding examples (--use_tpu):
        changes only how "loss" is averaged (see the module docstring).
      dropout_rate: dropout on the pooled output in training (the original: 0.1).
    """
    labels: typing.Optional[list] = None
    task_metric: typing.Optional[str] = None
    original_pads_eval: bool = False
    dropout_rate: float = 0.1

    @property
    def num_labels(self):
        return len(self.labels) if self.labels else 1

    @property
    def regression(self):
        return self.num_labels == 1


class ClassificationTask(Task):
    """run_classifier's task over records written by `bert_tf.tasks.classifier_data`
    (`prepare_task`), or for a loaded model (its labels)."""

    name = "classifier"
    Config = ClassificationConfig
    train_metric_names = ("loss", "accuracy")
    sequence_features = ("input_ids", "input_mask", "segment_ids")

    # ---- Data.
    def feature_spec(self, mode):
        return classifier_feature_spec(self.config.max_seq_length, self.config.regression)

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
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        one_hot = tf.one_hot(tf.cast(batch["label_ids"], tf.int32), self.config.num_labels)
        return -tf.reduce_sum(one_hot * log_probs, axis=-1)

    def predictions(self, logits):
        if self.config.regression:
            return tf.cast(logits[:, 0], tf.float32)
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
        return {"loss": tf.reduce_sum(loss) / normalizers["examples"],
                "accuracy": tf.reduce_sum(correct) / normalizers["examples"]}

    # ---- Eval and predict.
    def eval_outputs(self, batch, outputs):
        return {"per_example_loss": self.per_example_loss(batch, outputs["logits"]),
                "prediction": self.predictions(outputs["logits"]),
                "label": tf.cast(batch["label_ids"],
                                 tf.float32 if self.config.regression else tf.int32),
                "is_real_example": tf.cast(batch["is_real_example"], tf.float32)}

    def eval_results(self, outputs, global_step, batch_size):
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
        return results

    def predict_outputs(self, batch, outputs):
        values = (self.predictions(outputs["logits"])[:, None] if self.config.regression
                  else softmax_float32(outputs["logits"]))
        return {"probabilities": values,
                "is_real_example": tf.cast(batch["is_real_example"], tf.int32)}

    def write_predictions(self, outputs, output_dir):
        """test_results.tsv as the original: a line of tab-separated probabilities per real
        example (the padding examples sit at the end and are left out)."""
        path = os.path.join(output_dir, "test_results.tsv")
        rows = outputs["probabilities"][outputs["is_real_example"] > 0]
        with atomic_open(path) as writer:
            for probabilities in rows:
                writer.write("\t".join(str(p) for p in probabilities) + "\n")
        return [path]

    # ---- Serving.
    def serving_outputs(self, outputs, from_text=False):
        """Probabilities and logits (regression: the score); on raw strings also each row's
        label name."""
        logits = tf.cast(outputs["logits"], tf.float32)
        if self.config.regression:
            return {"score": logits[:, 0]}
        served = {"probabilities": softmax_float32(logits), "logits": logits}
        if from_text:
            served["label"] = tf.gather(tf.constant(self.config.labels),
                                        tf.argmax(logits, axis=-1))
        return served


# ---- Data: raw examples to records.
# mode: (the processor's name of the split, its reader).
SPLITS = {"train": ("train", "get_train_examples"), "eval": ("dev", "get_dev_examples"),
          "predict": ("test", "get_test_examples")}
RECORD_FILES = {"train": "train.tf_record", "eval": "eval.tf_record",
                "predict": "predict.tf_record"}


def read_splits(processor, data_dir, modes):
    """{mode: InputExamples} of each of `modes` ("train", "eval", "predict": the processor's
    train, dev and test files in data_dir), every one read and checked (an empty one is an
    error naming data_dir) before any record is written."""
    file_names = processor.file_names  # TsvProcessor: the user's file names
    splits = {}
    for mode, (split, reader) in SPLITS.items():
        if mode not in modes:
            continue
        splits[mode] = getattr(processor, reader)(data_dir)
        if not splits[mode]:
            raise argument_error("data_dir", f"the {mode} split holds no examples" + (
                f" ({file_names[split]})" if split in file_names else ""))
    return splits


def prepare_task(bert_config, examples, label_list, tokenizer, max_seq_length, output_dir, *,
                 task_name=None, eval_batch_size=None, predict_batch_size=None,
                 train_batch_size=32, num_train_epochs=3.0, warmup_proportion=0.1,
                 check_model=None, log=None, **task_options):
    """Writes the records of `examples` and returns the PreparedTask (a ClassificationTask).

    Args:
      bert_config: the encoder's BertConfig.
      examples: {"train"|"eval"|"predict": InputExamples} (e.g. `read_splits`' ); each given
        split is written to output_dir/<split>.tf_record as the original's
        file_based_convert_examples_to_features, eval and predict padded with the original's
        padding examples to a multiple of eval_batch_size / predict_batch_size (if given).
      label_list: the labels in output order; None for regression (one output).
      tokenizer: FullTokenizer or FastTokenizer (the same records).
      task_name: the processor's name: the GLUE metric (TASK_METRICS) and the log line.
      train_batch_size, num_train_epochs, warmup_proportion: the training steps, counted (and
        checked) before any record is written.
      check_model: called with a function building the task's model before any record is
        written (the command lines check --init_checkpoint with it).
      log: where the data's lines go (default: bert_tf.training.runner.log).
      task_options: ClassificationConfig's other fields (original_pads_eval,
        bucket_by_length, ...).
    Records are written atomically; on failure what was created in output_dir is removed.
    """
    log = log or runner.log
    output_dir = os.fspath(output_dir)
    regression = label_list is None
    name = (task_name or "").strip().lower()
    task_options.setdefault("task_metric",
                            TASK_METRICS.get(name, "correlation" if regression else None))
    config = ClassificationConfig(bert_config=bert_config, max_seq_length=max_seq_length,
                                  labels=label_list, **task_options)
    if check_model:
        check_model(ClassificationTask(config).build_model)
    log((f"*** task {name}: " if name else "*** ")
        + ("regression" if regression else f"{len(label_list)} labels {label_list}"))
    prepared = {}
    if "train" in examples:
        prepared["num_train"] = len(examples["train"])
        prepared["num_train_steps"], prepared["num_warmup_steps"] = runner.epoch_steps(
            len(examples["train"]), train_batch_size, num_train_epochs, warmup_proportion)
    batch_sizes = {"eval": eval_batch_size, "predict": predict_batch_size}
    with preparing(output_dir):
        for mode in RECORD_FILES:
            if mode not in examples:
                continue
            split, num_real = examples[mode], len(examples[mode])
            if batch_sizes.get(mode):
                split, num_real = classifier_data.pad_examples(split, batch_sizes[mode])
            path = os.path.join(output_dir, RECORD_FILES[mode])
            count = classifier_data.write_classifier_records(split, label_list, max_seq_length,
                                                             tokenizer, path, regression)
            log(f"  {mode}: {num_real} examples (+{count - num_real} padding) -> {path}")
            config.records[mode] = Records((path,), None if mode == "train" else count)
    return PreparedTask(ClassificationTask(config), **prepared)
