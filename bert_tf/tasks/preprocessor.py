"""A task's raw inputs to the model's packed inputs: the `Preprocessor` contract, and the one
`prepare` that drives every fine-tuning task's records (the command lines, `bert_tf.api` and the
notebook's runs).

`prepare` reads and checks every split, checks the model, counts the training steps, writes the
records (atomically; nothing left in output_dir on failure), eval and predict padded to whole
batches with the schema's padding record (`Preprocessor.write`), and returns the `PreparedTask`
over them. `converted` is every task's tokenize-and-pack loop, a chunk of items per call.
"""
import contextlib
import os
import typing

import tensorflow as tf

from bert_tf import io_utils
from bert_tf.data.records import write_examples
from bert_tf.errors import InputError, argument_error
from bert_tf.progress import log as default_log
from bert_tf.tasks.base import MODES, Records, Task
from bert_tf.tasks.steps import epoch_steps

# run_classifier's names of each mode's records.
RECORD_FILES = {"train": "train.tf_record", "eval": "eval.tf_record",
                "predict": "predict.tf_record"}


class PreparedTask(typing.NamedTuple):
    """What `prepare` (and so each task's `prepare_task`) returns: the task over the records it
    wrote, `num_train` (what the training steps are counted from: examples, windows or
    questions; 0 without training) and the (num_train_steps, num_warmup_steps) they make."""
    task: Task
    num_train: int = 0
    num_train_steps: int = 0
    num_warmup_steps: int = 0


@contextlib.contextmanager
def preparing(output_dir):
    """The block `prepare` writes its records in: output_dir made, and what the block created
    removed if it fails (no partial outputs; bert_tf.io_utils.removed_on_failure)."""
    with io_utils.removed_on_failure(output_dir):
        tf.io.gfile.makedirs(output_dir)
        yield


def pad_to_batch(items, batch_size, padding):
    """An iterator over `items` (any iterable) followed by copies of `padding`, the item that
    stands for no example (`is_real_example` 0), until their count is a multiple of
    `batch_size`. Fixed-size batches then see every real item once, and results weigh padding
    out."""
    if batch_size < 1:
        raise InputError(f"the batch size must be positive, got {batch_size}")

    def padded():
        count = 0
        for count, item in enumerate(items, 1):
            yield item
        yield from [padding] * (-count % batch_size)

    return padded()


def write_records(path, records, schema, batch_size=None):
    """Writes `records` ({name: values}, as `schema` types them) to a TFRecord file at `path`,
    atomically, followed with `batch_size` by the schema's padding record until their count is
    a multiple of it (the original's TPU-style padding of eval and predict). Returns how many
    were written."""
    if batch_size:
        records = pad_to_batch(records, batch_size, schema.padding_record())
    return write_examples(path, records, schema)


# Items tokenized and packed per call of a task's converter (`converted`): one tokenizer call
# for a chunk's texts (FastTokenizer's `tokenize_batch`, where its speed comes from) and one
# packing call, few enough that a chunk's tokens and arrays take little memory.
CHUNK = 4096


def converted(items, convert, chunk=None):
    """Yields, in order, what `convert(first, items[first:first + chunk])` returns for each
    chunk of `items` (default CHUNK items): a task's tokenize-and-pack, one chunk per call."""
    items, chunk = list(items), chunk or CHUNK
    for first in range(0, len(items), chunk):
        yield from convert(first, items[first:first + chunk])


# mode: (a processor's name of the split, its reader).
SPLITS = {"train": ("train", "get_train_examples"), "eval": ("dev", "get_dev_examples"),
          "predict": ("test", "get_test_examples")}


def read_splits(processor, data_dir, modes):
    """{mode: examples} of each of `modes` ("train", "eval", "predict": the processor's train,
    dev and test files in data_dir, `get_train_examples(data_dir)`, ...), every one read and
    checked (an empty one is an error naming data_dir) before any record is written."""
    file_names = processor.file_names  # of a processor of the user's files
    splits = {}
    for mode, (split, reader) in SPLITS.items():
        if mode not in modes:
            continue
        splits[mode] = getattr(processor, reader)(data_dir)
        if not splits[mode]:
            raise argument_error("data_dir", f"the {mode} split holds no examples" + (
                f" ({file_names[split]})" if split in file_names else ""))
    return splits


class Preprocessor:
    """A task's preprocessor: its raw inputs packed as the model takes them
    (`bert_tf.text.packing`), in the two places a model meets text:
    - records: `prepare` drives `read` and `write` (subclasses implement `read`, `schema` and
      `records`) with a Python tokenizer (FullTokenizer or FastTokenizer), so that the records
      equal the original's byte for byte;
    - the exported model: `text_inputs` (and a task's own graph calls) with a GraphTokenizer
      (bert_tf.text.graph_tokenization), in the SavedModel's graph
      (`bert_tf.tasks.base.Task.text_preprocessor`, `Task.text_signatures`).
    One class holds both, so that the two pack alike; an instance is built with one tokenizer,
    for one place or the other.

    Args:
      tokenizer: FullTokenizer or FastTokenizer (records), or GraphTokenizer (serving).
      max_seq_length: the packed length (serving: the longest; batches are cut to their
        longest text).
    Attributes:
      counted_as: what the training steps count ("examples", "windows", "questions").
      record_files: {mode: file name in output_dir} of the records.
    """
    counted_as = "examples"
    record_files = RECORD_FILES

    def __init__(self, tokenizer, max_seq_length):
        self.tokenizer, self.max_seq_length = tokenizer, max_seq_length

    # ---- Records (`prepare`).
    def read(self):
        """{mode: items}: every split read and checked (and converted, where the training
        steps count windows), before any record is written."""
        raise NotImplementedError(f"{type(self).__name__} writes no records through prepare")

    def num_train(self, items):
        """What the training steps are counted from, of the training split's items."""
        return len(items)

    def schema(self, mode):
        """The RecordSchema of `mode`'s records."""
        raise NotImplementedError

    def records(self, mode, items):
        """The record ({name: values}) of each of `mode`'s items, in order."""
        raise NotImplementedError

    def write(self, mode, items, path, batch_size=None):
        """Writes `mode`'s records to `path` (`write_records`); returns how many."""
        return write_records(path, self.records(mode, items), self.schema(mode), batch_size)

    def summary(self, mode, num_real, count):
        """How the log describes a split written: `num_real` items, `count` records."""
        return f"{num_real} {self.counted_as} (+{count - num_real} padding)"

    def description(self, task):
        """The log's first line about the data (None: none)."""
        return None

    # ---- The exported model's raw strings (in the graph, with a GraphTokenizer).
    def text_inputs(self, text_a, text_b=None):
        """The packed inputs of [B] strings (and [B] second texts) as the records pack an
        example's texts (the original's convert_single_example: a pair truncated longest
        first), cut to the batch's longest: int32 [B, T] input_ids, input_mask, segment_ids."""
        return self.tokenizer.bert_inputs(text_a, text_b, max_seq_length=self.max_seq_length,
                                          pad_to_longest=True)


def prepare(preprocessor, make_task, output_dir, *, eval_batch_size=None,
            predict_batch_size=None, train_batch_size=32, num_train_epochs=3.0,
            warmup_proportion=0.1, check_model=None, check_task=None, log=None):
    """Writes `preprocessor`'s records into output_dir; returns the PreparedTask.

    Args:
      preprocessor: a Preprocessor.
      make_task: {mode: Records} -> the Task over them (called with {} first: the task's
        config is checked, and `check_model` gets its model, before any record is written).
      eval_batch_size, predict_batch_size: eval's and predict's records are padded to a
        multiple of them (if given).
      train_batch_size, num_train_epochs, warmup_proportion: the training steps, counted (and
        checked) before any record is written.
      check_model: called with a function building the task's model (the command lines check
        --init_checkpoint with it).
      check_task: called with the task (over no records yet) before any record is written
        (the command lines check the run's settings against it: its eval results).
      log: where the data's lines go (default: stderr, bert_tf.progress.log).
    """
    log = log or default_log
    output_dir = os.fspath(output_dir)
    splits = preprocessor.read()
    task = make_task({})
    if check_model:
        check_model(task.build_model)
    if check_task:
        check_task(task)
    description = preprocessor.description(task)
    if description:
        log(description)
    prepared = {}
    if "train" in splits:
        prepared["num_train"] = preprocessor.num_train(splits["train"])
        prepared["num_train_steps"], prepared["num_warmup_steps"] = epoch_steps(
            prepared["num_train"], train_batch_size, num_train_epochs, warmup_proportion,
            preprocessor.counted_as)
    batch_sizes = {"eval": eval_batch_size, "predict": predict_batch_size}
    records = {}
    with preparing(output_dir):
        for mode in MODES:
            if mode not in splits:
                continue
            path = os.path.join(output_dir, preprocessor.record_files[mode])
            count = preprocessor.write(mode, splits[mode], path, batch_sizes.get(mode))
            log(f"  {mode}: {preprocessor.summary(mode, len(splits[mode]), count)} -> {path}")
            records[mode] = Records((path,), None if mode == "train" else count)
    return PreparedTask(make_task(records), **prepared)


def split_options(options):
    """(`prepare`'s keyword arguments among `options`, the others: the task's)."""
    names = ("eval_batch_size", "predict_batch_size", "train_batch_size", "num_train_epochs",
             "warmup_proportion", "check_model", "check_task", "log")
    return ({name: value for name, value in options.items() if name in names},
            {name: value for name, value in options.items() if name not in names})
