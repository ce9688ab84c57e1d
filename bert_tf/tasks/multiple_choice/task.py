"""Multiple choice (the paper's SWAG task): each `[CLS] context [SEP] ending [SEP]` scored by one
vector on the pooled output and the N scores softmaxed; run_classifier's task whose classes are
the endings (loss, metrics, test_results.tsv), with its own records, model and `serve_choices`
signature. docs/fine_tuning.md (run_multiple_choice).
"""
import dataclasses

import tensorflow as tf

from bert_tf.errors import argument_error
from bert_tf.model.models import BertMultipleChoice
from bert_tf.tasks.multiple_choice.preprocessor import (MultipleChoicePreprocessor,
                                                       multiple_choice_feature_spec)
from bert_tf.tasks import registry
from bert_tf.tasks.base import TaskConfig
from bert_tf.tasks.classification.task import ClassificationTask
from bert_tf.tasks.preprocessor import prepare, split_options
from bert_tf.text.packing import INPUT_NAMES


@dataclasses.dataclass
class MultipleChoiceConfig(TaskConfig):
    """Attributes (besides TaskConfig's):
      num_choices: the endings of each question in the records (SWAG: 4). The model scores
        any number: a SavedModel serves questions with other numbers of endings too.
      dropout_rate: dropout on the pooled output in training (0.1, as run_classifier's).
    """
    num_choices: int = 4
    dropout_rate: float = 0.1

    # What ClassificationTask reads of its config: the classes are the endings.
    task_metric = None  # accuracy is SWAG's metric
    original_pads_eval = False  # no original to mirror: eval's "loss" averages real questions
    regression = False
    multi_label = False  # one right ending
    windowed = False  # a question is its N sequences, each truncated as the original's pairs

    def __post_init__(self):
        super().__post_init__()
        if self.bucket_by_length:
            raise argument_error("bucket_by_length", "is not for multiple choice: its batches "
                                                     "are [questions, endings, max_seq_length]")

    @property
    def num_labels(self):
        return self.num_choices


@registry.register
class MultipleChoiceTask(ClassificationTask):
    """The multiple-choice task over records written by `prepare_task`, or for a loaded model
    (export, `bert_tf.api`)."""

    name = "multiple_choice"
    Config = MultipleChoiceConfig
    Preprocessor = MultipleChoicePreprocessor
    # Batches stay padded to max_seq_length: length bucketing cuts [B, T] features.
    sequence_features = None
    token_id_rank = 3

    def feature_spec(self, mode):
        return multiple_choice_feature_spec(self.config.num_choices,
                                                                 self.config.max_seq_length)

    def _per_label_results(self, scores):
        """None: an ending's position is no class (SWAG shuffles the right one's)."""
        return {}

    def write_eval_outputs(self, outputs, output_dir):
        """No eval_confusion_matrix.tsv, for the same reason."""
        return []

    def build_model(self):
        return BertMultipleChoice(self.config.bert_config, self.config.dropout_rate)

    def outputs(self, model, batch, training):
        """The head reads [CLS] only: the model skips the last layer's other positions."""
        return model({name: batch[name] for name in INPUT_NAMES}, training=training,
                     return_encoder_outputs=False)

    def export_description(self):
        """The endings of each question in the records."""
        return {"num_choices": self.config.num_choices}

    def serving_outputs(self, outputs, from_text=False):
        """`probabilities` and `logits` [batch, N], `choice` [batch]: the best ending."""
        logits = tf.cast(outputs["logits"], tf.float32)
        return {"probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits,
                "choice": tf.argmax(logits, axis=-1, output_type=tf.int32)}

    def text_signatures(self, model, preprocessor):
        """`serve_choices`: `context` [batch] and `endings` [batch, N] strings, packed as the
        records (`MultipleChoicePreprocessor.choice_inputs`)."""

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string),
                                      tf.TensorSpec([None, None], tf.string)], autograph=False)
        def serve_choices(context, endings):
            inputs = preprocessor.choice_inputs(*check_choice_inputs(context, endings))
            return self.serving_outputs(self.outputs(model, inputs, training=False),
                                        from_text=True)

        return {"serve_choices": serve_choices}


def check_choice_inputs(context, endings):
    """`context` [batch] and `endings` [batch, N] of `serve_choices`, checked in the graph
    before any other op reads them: one row of endings per context, and one ending or more
    (else the call fails deep inside, on a shape of the packing or the argmax). A failed
    check raises InvalidArgumentError whose message says what is wrong, with the counts."""
    questions, rows, num_choices = (tf.shape(context)[0], tf.shape(endings)[0],
                                    tf.shape(endings)[1])
    checks = [
        tf.debugging.Assert(tf.equal(questions, rows), [tf.strings.format(
            "serve_choices: `context` holds {} questions but `endings` {} rows of endings; "
            "give one row of endings per context ([batch] and [batch, N] strings)",
            (questions, rows))]),
        tf.debugging.Assert(num_choices > 0, [tf.strings.format(
            "serve_choices: `endings` holds {} endings per question; give one or more "
            "([batch, N] strings, N >= 1)", (num_choices,))])]
    with tf.control_dependencies(checks):
        return tf.identity(context), tf.identity(endings)


def prepare_task(bert_config, examples, num_choices, tokenizer, max_seq_length, output_dir,
                 **options):
    """Writes the records of `examples` (`MultipleChoicePreprocessor`, by
    `bert_tf.tasks.preprocessor.prepare`) and returns the PreparedTask (a MultipleChoiceTask).

    Args:
      bert_config: the encoder's BertConfig.
      examples: {"train"|"eval"|"predict": ChoiceExamples} (e.g.
        `bert_tf.tasks.preprocessor.read_splits` of a multiple_choice.reader processor);
        each given split is written to output_dir/<split>.tf_record (run_classifier's names).
      num_choices: the endings of every question (an InputError names a question with
        another number, or with a label outside 0..num_choices-1).
      tokenizer: FullTokenizer or FastTokenizer (the same records).
      options: `prepare`'s (batch sizes, training steps: train_batch_size 16 by default,
        check_model, log) and MultipleChoiceConfig's other fields (dropout_rate, ...).
    """
    prepare_options, task_options = split_options(options)
    prepare_options.setdefault("train_batch_size", 16)
    preprocessor = MultipleChoicePreprocessor(tokenizer, max_seq_length, examples, num_choices)
    return prepare(preprocessor, lambda records: MultipleChoiceTask(MultipleChoiceConfig(
        bert_config=bert_config, max_seq_length=max_seq_length, num_choices=num_choices,
        records=records, **task_options)), output_dir, **prepare_options)
