"""Multiple-choice records: one per question, its N `[CLS] context [SEP] ending [SEP]` packed
as the original's pairs (longest part truncated first) and flattened, with `label_ids` and
`is_real_example` as run_classifier's.
"""
import tensorflow as tf

from bert_tf.data.records import feature_spec
from bert_tf.data.schema import Feature, RecordSchema, input_features
from bert_tf.errors import InputError
from bert_tf.tasks.preprocessor import MODES, Preprocessor, converted
from bert_tf.text import packing


def check_examples(examples, num_choices):
    """InputError naming the first question whose endings are not `num_choices` or whose label
    is not one of their indexes (for examples made in Python; files are checked as read)."""
    for example in examples:
        if len(example.endings) != num_choices:
            raise InputError(f"question {example.guid!r} has {len(example.endings)} endings; "
                             f"every question needs {num_choices}")
        if not (isinstance(example.label, int) and 0 <= example.label < num_choices):
            raise InputError(f"question {example.guid!r}: label {example.label!r} is not the "
                             f"index of an ending: 0 to {num_choices - 1}")


def iter_records(examples, max_seq_length, tokenizer):
    """The record of each question, in order, a chunk of questions packed per call
    (`packing.pack_choices`)."""
    def convert(first, chunk):
        packed = packing.pack_choices(tokenizer, [e.context for e in chunk],
                                      [e.endings for e in chunk], max_seq_length=max_seq_length)
        for row, example in enumerate(chunk):
            record = {name: packed[name][row].reshape(-1).tolist()
                      for name in packing.INPUT_NAMES}
            record.update(label_ids=example.label, is_real_example=1)
            yield record

    return converted(examples, convert)


def record_schema(num_choices, max_seq_length):
    """One record per question: its `num_choices` packed sequences (`input_ids`, `input_mask`,
    `segment_ids` [num_choices, max_seq_length], written flat), `label_ids` [] (the right
    ending's index) and `is_real_example` [], as run_classifier's."""
    return RecordSchema(input_features([num_choices, max_seq_length])
                        + [Feature("label_ids"), Feature("is_real_example")])


def multiple_choice_feature_spec(num_choices, max_seq_length):
    """The tf.io parsing spec of `record_schema`'s records."""
    return feature_spec(record_schema(num_choices, max_seq_length))


class MultipleChoicePreprocessor(Preprocessor):
    """The records of {mode: ChoiceExamples}, one per question (the training steps count
    questions); every question is checked (`check_examples`) before any is written. Served
    questions are packed as the records' (`choice_inputs`)."""
    counted_as = "questions"

    def __init__(self, tokenizer, max_seq_length, examples=None, num_choices=None):
        super().__init__(tokenizer, max_seq_length)
        self.examples, self.num_choices = examples or {}, num_choices

    def read(self):
        for split in self.examples.values():
            check_examples(split, self.num_choices)
        return {mode: self.examples[mode] for mode in MODES if mode in self.examples}

    def schema(self, mode):
        return record_schema(self.num_choices, self.max_seq_length)

    def records(self, mode, items):
        return iter_records(items, self.max_seq_length, self.tokenizer)

    def description(self, task):
        return f"*** multiple choice: {self.num_choices} endings per question"

    def choice_inputs(self, context, endings):
        """The packed inputs of [B] contexts and their [B, N] endings in the graph, each
        (context, ending) as the records' (`[CLS] context [SEP] ending [SEP]`, the longest
        part truncated first), cut to the batch's longest pair: int32 [B, N, T]."""
        tokenizer = self.tokenizer
        num_choices = tf.shape(endings)[1]
        question = tf.repeat(tf.range(tf.shape(context)[0]), num_choices)
        packed = tokenizer.pack(tf.gather(tokenizer.tokenize(context), question),
                                tokenizer.tokenize(tf.reshape(endings, [-1])),
                                self.max_seq_length, pad_to_longest=True)
        return {name: tf.reshape(value, [-1, num_choices, tf.shape(value)[1]])
                for name, value in packed.items()}
