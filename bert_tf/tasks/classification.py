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
import os

import numpy as np
import tensorflow as tf

from bert_tf.tasks import metrics
from bert_tf.data.features import classifier_feature_spec
from bert_tf.tasks.base import PreparedTask, Task, preparing

# The GLUE metric of each task (beyond accuracy): tasks with unbalanced classes report F1 or MCC.
TASK_METRICS = {"mrpc": "f1", "qqp": "f1", "cola": "matthews_corrcoef", "sts-b": "correlation"}


def softmax_float32(logits):
    """float32 probabilities as the original's tf.nn.softmax of float32 logits."""
    return tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)


class ClassificationTask(Task):
    """run_classifier's task over records written by `bert_tf.tasks.classifier_data`.

    Args:
      bert_config: the encoder's BertConfig.
      num_labels: number of classes (1: regression).
      record_files: {"train"|"eval"|"predict": path of its TFRecord file}.
      max_seq_length: the records' length.
      num_records: {"eval"|"predict": records in the file (padding included)}.
      task_metric: "f1", "matthews_corrcoef", "correlation" or None (see TASK_METRICS).
      original_pads_eval: the original's eval batches included padding examples (--use_tpu):
        changes only how "loss" is averaged (see the module docstring).
      bucket_by_length: batches not padded to max_seq_length (bert_tf.data.input_pipeline).
      dropout_rate: dropout on the pooled output in training (the original: 0.1).
      label_names: the labels in output order, for the raw-string serving signatures' "label".
    """

    name = "classifier"
    train_metric_names = ("loss", "accuracy")

    def __init__(self, bert_config, num_labels, record_files, max_seq_length, num_records=None,
                 task_metric=None, original_pads_eval=False, bucket_by_length=False,
                 dropout_rate=0.1, shuffle_buffer_size=100, label_names=None):
        self.bert_config = bert_config
        self.num_labels = num_labels
        self.label_names = list(label_names) if label_names else None
        self.regression = num_labels == 1
        self.record_files = dict(record_files)
        self.max_seq_length = max_seq_length
        self.num_records = dict(num_records or {})
        self.task_metric = task_metric
        self.original_pads_eval = original_pads_eval
        self.bucket_by_length = bucket_by_length
        self.dropout_rate = dropout_rate
        self.shuffle_buffer_size = shuffle_buffer_size

    @classmethod
    def for_model(cls, bert_config, labels, max_seq_length=128, **unused_options):
        """`labels` in output order (one label: regression)."""
        return cls(bert_config, len(labels), {}, max_seq_length, label_names=labels)

    # ---- Data.
    def feature_spec(self):
        return classifier_feature_spec(self.max_seq_length, self.regression)

    def num_examples(self, mode):
        return self.num_records[mode]

    def dataset_fn(self, mode, global_batch_size, seed=None):
        from bert_tf.data import input_pipeline
        sequence_features = (("input_ids", "input_mask", "segment_ids")
                             if self.bucket_by_length else None)
        return input_pipeline.dataset_fn(
            [self.record_files[mode]], self.feature_spec(), global_batch_size,
            shuffle=mode == "train", repeat=False, seed=seed,
            shuffle_buffer_size=self.shuffle_buffer_size, sequence_features=sequence_features)

    # ---- Model.
    def build_model(self):
        from bert_tf.model.models import BertClassifier
        return BertClassifier(self.bert_config, self.num_labels, self.dropout_rate)

    # ---- Train.
    def outputs(self, model, batch, training):
        """The head reads [CLS] only: the model skips the last layer's other positions."""
        return model(self.model_inputs(batch), training=training, return_encoder_outputs=False)

    def per_example_loss(self, batch, logits):
        logits = tf.cast(logits, tf.float32)
        if self.regression:
            return tf.square(logits[:, 0] - tf.cast(batch["label_ids"], tf.float32))
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        one_hot = tf.one_hot(tf.cast(batch["label_ids"], tf.int32), self.num_labels)
        return -tf.reduce_sum(one_hot * log_probs, axis=-1)

    def predictions(self, logits):
        if self.regression:
            return tf.cast(logits[:, 0], tf.float32)
        return tf.argmax(logits, axis=-1, output_type=tf.int32)

    def normalizers(self, batch):
        return {"examples": tf.cast(tf.shape(batch["input_ids"])[0], tf.float32)}

    def train_metrics(self, batch, outputs, normalizers):
        loss = self.per_example_loss(batch, outputs["logits"])
        if self.regression:
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
                "label": tf.cast(batch["label_ids"], tf.float32 if self.regression else tf.int32),
                "is_real_example": tf.cast(batch["is_real_example"], tf.float32)}

    def eval_results(self, outputs, global_step, batch_size):
        weights = outputs["is_real_example"].astype(np.float64)
        losses = outputs["per_example_loss"].astype(np.float64)
        real = weights > 0
        averaged = losses if self.original_pads_eval else losses[real]
        batch_losses = [averaged[i:i + batch_size].mean()
                        for i in range(0, len(averaged), batch_size)]
        results = {
            "eval_loss": np.float32(np.sum(losses * weights) / max(weights.sum(), 1.0)),
            "global_step": np.int64(global_step),
            "loss": np.float32(np.mean(batch_losses)) if batch_losses else np.float32(0.0),
        }
        labels, predictions = outputs["label"], outputs["prediction"]
        if not self.regression:
            results["eval_accuracy"] = np.float32(metrics.accuracy(labels, predictions, weights))
        if self.task_metric == "f1":
            results["eval_f1"] = np.float32(metrics.f1_binary(labels, predictions, weights))
        elif self.task_metric == "matthews_corrcoef":
            results["eval_matthews_corrcoef"] = np.float32(
                metrics.matthews_corrcoef(labels, predictions, weights))
        elif self.task_metric == "correlation":
            results["eval_pearson"] = np.float32(metrics.pearson(labels, predictions, weights))
            results["eval_spearman"] = np.float32(metrics.spearman(labels, predictions, weights))
        return results

    def predict_outputs(self, batch, outputs):
        values = (self.predictions(outputs["logits"])[:, None] if self.regression
                  else softmax_float32(outputs["logits"]))
        return {"probabilities": values,
                "is_real_example": tf.cast(batch["is_real_example"], tf.int32)}

    def write_predictions(self, outputs, output_dir):
        """test_results.tsv as the original: a line of tab-separated probabilities per real
        example (the padding examples sit at the end and are left out)."""
        from bert_tf.io_utils import atomic_open
        path = os.path.join(output_dir, "test_results.tsv")
        rows = outputs["probabilities"][outputs["is_real_example"] > 0]
        with atomic_open(path) as writer:
            for probabilities in rows:
                writer.write("\t".join(str(p) for p in probabilities) + "\n")
        return [path]

    # ---- Export.
    def serving_outputs(self, outputs):
        logits = tf.cast(outputs["logits"], tf.float32)
        if self.regression:
            return {"score": logits[:, 0]}
        return {"probabilities": softmax_float32(logits), "logits": logits}

    def text_serving_outputs(self, outputs):
        """The token-id outputs plus, when the labels are known, each row's label name."""
        served = self.serving_outputs(outputs)
        if self.label_names and not self.regression:
            served["label"] = tf.gather(tf.constant(self.label_names),
                                        tf.argmax(served["logits"], axis=-1))
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
    from bert_tf.errors import argument_error

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
      task_options: ClassificationTask's other arguments (original_pads_eval,
        bucket_by_length, ...).
    Records are written atomically; on failure what was created in output_dir is removed.
    """
    from bert_tf.tasks import classifier_data
    from bert_tf.training import runner

    log = log or runner.log
    output_dir = os.fspath(output_dir)
    regression = label_list is None
    num_labels = 1 if regression else len(label_list)
    name = (task_name or "").strip().lower()
    task_options.setdefault("task_metric",
                            TASK_METRICS.get(name, "correlation" if regression else None))
    task_options.setdefault("label_names", label_list)
    if check_model:
        check_model(ClassificationTask(bert_config, num_labels, {}, max_seq_length).build_model)
    log((f"*** task {name}: " if name else "*** ")
        + ("regression" if regression else f"{len(label_list)} labels {label_list}"))
    prepared = {}
    if "train" in examples:
        prepared["num_train"] = len(examples["train"])
        prepared["num_train_steps"], prepared["num_warmup_steps"] = runner.epoch_steps(
            len(examples["train"]), train_batch_size, num_train_epochs, warmup_proportion)
    batch_sizes = {"eval": eval_batch_size, "predict": predict_batch_size}
    record_files, num_records = {}, {}
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
            record_files[mode] = path
            if mode != "train":
                num_records[mode] = count
    task = ClassificationTask(bert_config, num_labels, record_files, max_seq_length,
                              num_records, **task_options)
    return PreparedTask(task, **prepared)
