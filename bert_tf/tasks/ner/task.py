"""Token classification (NER): run_ner's model (`BertTokenClassifier`), loss on each word's first
piece, conlleval's entity scores and the CoNLL prediction files, as a Task. Keys and files:
docs/fine_tuning.md (run_ner).
"""
import dataclasses
import os
import typing

import numpy as np
import tensorflow as tf

from bert_tf.errors import argument_error
from bert_tf.model.models import FEATURE_LAYERS, BertFeatureTagger, BertTokenClassifier
from bert_tf.tasks import metrics, registry
from bert_tf.tasks.ner.preprocessor import (NerPreprocessor, tagging_feature_spec,
                                            words_predictions)
from bert_tf.tasks.ner.reader import write_conll_predictions
from bert_tf.tasks.base import Task, TaskConfig
from bert_tf.tasks.preprocessor import prepare, split_options

SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids", "label_ids", "label_mask")


@dataclasses.dataclass
class NerConfig(TaskConfig):
    """Attributes (besides TaskConfig's):
      labels: the tags, in output order ("O" first).
      scheme: "IOB2" or "IOB1" (how entities are read from the tags).
      dropout_rate: dropout on the sequence output in training (0.1).
      feature_layers: None (fine-tuning: the encoder trains with the head), or the paper's
        feature-based approach: which layers of the frozen encoder feed a two-layer BiLSTM
        (bert_tf.model.models.FEATURE_LAYERS, BertFeatureTagger).
    """
    labels: list = dataclasses.field(default_factory=list)
    scheme: str = "IOB2"
    dropout_rate: float = 0.1
    feature_layers: typing.Optional[str] = None


@registry.register
class NerTask(Task):
    """run_ner's task over records written by `prepare_task`, or for a loaded model (its tags).

    Args:
      config: a NerConfig.
      features: {"eval"|"predict": the TaggingFeatures written (padding included)}, which map
        the per-piece predictions back to words.
      sentences: {"eval"|"predict": the (words, tags) sentences they came from}.
    """

    name = "ner"
    Config = NerConfig
    Preprocessor = NerPreprocessor
    train_metric_names = ("loss", "accuracy")
    sequence_features = SEQUENCE_FEATURES

    def __init__(self, config, features=None, sentences=None):
        super().__init__(config)
        if config.feature_layers is not None and config.feature_layers not in FEATURE_LAYERS:
            raise argument_error("feature_layers", f"{config.feature_layers!r}: one of "
                                                   f"{', '.join(FEATURE_LAYERS)}")
        if (config.feature_layers == "second_to_last" and config.bert_config is not None
                and config.bert_config.num_hidden_layers < 2):
            raise argument_error("feature_layers", "second_to_last needs a model of 2 layers "
                                                   "or more")
        self.features = dict(features or {})
        self.sentences = dict(sentences or {})

    # ---- Data.
    def feature_spec(self, mode):
        return tagging_feature_spec(self.config.max_seq_length)

    # ---- Model.
    @classmethod
    def serving_options(cls, options, vocab_file, record):
        """The base's, and the feature-based model's layers as its run records them."""
        options = super().serving_options(options, vocab_file, record)
        if record.get("feature_layers") and not options.get("feature_layers"):
            options = dict(options, feature_layers=record["feature_layers"])
        return options

    def build_model(self):
        config = self.config
        if config.feature_layers:
            return BertFeatureTagger(config.bert_config, len(config.labels),
                                     config.feature_layers, dropout_rate=config.dropout_rate)
        return BertTokenClassifier(config.bert_config, len(config.labels), config.dropout_rate)

    # ---- Train.
    def _nll(self, batch, logits):
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        one_hot = tf.one_hot(batch["label_ids"], len(self.config.labels))
        return -tf.reduce_sum(one_hot * log_probs, axis=-1)  # [B, T]

    def _predictions(self, logits):
        return tf.argmax(logits, axis=-1, output_type=tf.int32)

    def normalizers(self, batch):
        return {"labels": tf.reduce_sum(tf.cast(batch["label_mask"], tf.float32))}

    def train_metrics(self, batch, outputs, normalizers):
        mask = tf.cast(batch["label_mask"], tf.float32)
        correct = tf.cast(tf.equal(self._predictions(outputs["logits"]), batch["label_ids"]),
                          tf.float32)
        labels = tf.maximum(normalizers["labels"], 1.0)
        return {"loss": tf.reduce_sum(mask * self._nll(batch, outputs["logits"])) / labels,
                "accuracy": tf.reduce_sum(mask * correct) / labels}

    # ---- Eval and predict.
    def _full_length(self, values):
        """Per-piece values padded back to max_seq_length (batches may be cut shorter), so the
        steps' arrays concatenate."""
        return tf.pad(values, [[0, 0], [0, self.config.max_seq_length - tf.shape(values)[1]]])

    def eval_outputs(self, batch, outputs):
        mask = tf.cast(batch["label_mask"], tf.float32)
        return {"prediction": self._full_length(self._predictions(outputs["logits"])),
                "loss_sum": tf.reduce_sum(mask * self._nll(batch, outputs["logits"]), axis=-1),
                "labels": tf.reduce_sum(mask, axis=-1)}

    def predict_outputs(self, batch, outputs):
        return {"prediction": self._full_length(self._predictions(outputs["logits"]))}

    def _word_tags(self, mode, predictions):
        word_ids = words_predictions(self.features[mode], predictions)
        return [[self.config.labels[i] for i in words] for words in word_ids]

    def eval_results(self, outputs, global_step, batch_size):
        predicted = self._word_tags("eval", outputs["prediction"])
        gold = [tags for _, tags in self.sentences["eval"]]
        scores = metrics.conll_entity_scores(gold, predicted, scheme=self.config.scheme)
        words = sum(len(tags) for tags in gold)
        correct = sum(g == p for gold_tags, tags in zip(gold, predicted)
                      for g, p in zip(gold_tags, tags))
        results = {
            "eval_accuracy": np.float32(correct / max(words, 1)),
            "eval_f1": np.float32(scores["f1"]),
            "eval_loss": np.float32(outputs["loss_sum"].sum() / max(outputs["labels"].sum(), 1)),
            "eval_precision": np.float32(scores["precision"]),
            "eval_recall": np.float32(scores["recall"]),
            "global_step": np.int64(global_step),
        }
        for entity_type, type_scores in scores["per_type"].items():
            results[f"eval_f1_{entity_type}"] = np.float32(type_scores["f1"])
        return results

    def main_metric(self):
        """Entity F1 (conlleval's)."""
        return "eval_f1"

    def eval_metric_names(self):
        """The overall keys, and eval_f1_<type> of each entity type of the tags."""
        types = {label.split("-", 1)[1] for label in self.config.labels if "-" in label}
        return ({"eval_accuracy", "eval_f1", "eval_loss", "eval_precision", "eval_recall",
                 "global_step"} | {f"eval_f1_{entity_type}" for entity_type in types})

    def write_eval_outputs(self, outputs, output_dir):
        path = os.path.join(output_dir, "eval_predictions.txt")
        write_conll_predictions(path, self.sentences["eval"],
                                             self._word_tags("eval", outputs["prediction"]))
        return [path]

    def write_predictions(self, outputs, output_dir):
        path = os.path.join(output_dir, "test_predictions.txt")
        write_conll_predictions(path, self.sentences["predict"],
                                             self._word_tags("predict", outputs["prediction"]))
        return [path]

    # ---- Serving.
    def export_description(self):
        """The tags in output order, how entities are read from them, and a feature-based
        model's layers."""
        description = {"labels": list(self.config.labels), "scheme": self.config.scheme}
        if self.config.feature_layers:
            description["feature_layers"] = self.config.feature_layers
        return description

    def serving_outputs(self, outputs, from_text=False):
        logits = tf.cast(outputs["logits"], tf.float32)
        return {"tag_ids": self._predictions(logits), "logits": logits}

    def text_signatures(self, model, preprocessor):
        """`serve_text` returns one tag per whitespace word, the prediction at the word's first
        piece (run_ner's recipe, `NerPreprocessor.word_inputs`): `words`, `tags` and
        `num_words`. Words whose first piece falls beyond max_seq_length - 2 pieces are dropped
        (one window). `serve_text_pair` as the base's."""
        signatures = super().text_signatures(model, preprocessor)
        label_list = self.config.labels

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
        def serve_text(text):
            inputs, words, first_piece, in_window = preprocessor.word_inputs(text)
            outputs = self.outputs(model, inputs, training=False)
            tag_ids = tf.argmax(outputs["logits"], axis=-1, output_type=tf.int32)  # [B, T]
            word_tags = tf.gather(tf.constant(label_list), tf.gather_nd(
                tag_ids, tf.stack([words.value_rowids(), first_piece], axis=1)))
            kept = words.with_flat_values(in_window)
            kept_words = tf.ragged.boolean_mask(words, kept)
            tags = tf.ragged.boolean_mask(words.with_flat_values(word_tags), kept)
            return {"words": kept_words.to_tensor(""), "tags": tags.to_tensor(""),
                    "num_words": tf.cast(kept_words.row_lengths(), tf.int32)}

        signatures["serve_text"] = serve_text
        return signatures


# ---- Data: CoNLL files to records.
def prepare_task(bert_config, tokenizer, max_seq_length, output_dir, *, data_dir,
                 train_file=None, dev_file=None, test_file=None, label_list=None,
                 doc_stride=None, **options):
    """Reads the CoNLL files, writes their records (`NerPreprocessor`, by
    `bert_tf.tasks.preprocessor.prepare`) and returns the PreparedTask (a NerTask; num_train
    counts the training windows).

    Args:
      bert_config: the encoder's BertConfig.
      tokenizer: FullTokenizer or FastTokenizer.
      max_seq_length: the windows' length (longer sentences: overlapping windows, doc_stride
        pieces apart; default half a window).
      output_dir: where train/eval/predict.tf_record go.
      data_dir, train_file, dev_file, test_file: the files of the splits to run (None: not
        run); the test file's tags are optional.
      label_list: the tags in output order (default: the training file's, "O" first; required
        without a train_file).
      options: `prepare`'s (batch sizes, training steps, check_model, log) and NerConfig's
        other fields (scheme, bucket_by_length, ...).
    """
    prepare_options, task_options = split_options(options)
    preprocessor = NerPreprocessor(
        tokenizer, max_seq_length, data_dir,
        {"train": train_file, "eval": dev_file, "predict": test_file}, label_list, doc_stride)

    def make_task(records):
        config = NerConfig(bert_config=bert_config, max_seq_length=max_seq_length,
                           labels=preprocessor.labels, records=records, **task_options)
        return NerTask(config, features={mode: features for mode, features
                                         in preprocessor.features.items() if mode != "train"},
                       sentences=preprocessor.sentences)

    return prepare(preprocessor, make_task, output_dir, **prepare_options)
